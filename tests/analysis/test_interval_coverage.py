"""Per-step comparison intervals with ~16 tasks cover close to nominal (91–93 % before).

Each replicate is one step of two arms with 16 tasks × 8 binary rollouts, the arm 0.1
better, through the two interval builders behind every per-step difference of
:func:`compare_runs`: ``paired_diff_ci(..., expand=True)`` over tasks when the tasks
match, ``_compare.cluster_diff_ci`` over GRPO groups when they do not (that
``compare_runs`` calls exactly these is checked below).  2000 replicates give a coverage
standard error of 0.5 percentage points.
"""

from __future__ import annotations

import numpy as np
import pytest

from rolloutlab.analysis import _compare, compare_runs, frame_from_records, paired_diff_ci
from rolloutlab.analysis._bootstrap import tail_probability

TASKS, ROLLOUTS, REPS, TRUTH = 16, 8, 2000, 0.1


def _paired_hits(expand: bool) -> float:
    hits = 0
    for rep in range(REPS):
        rng = np.random.default_rng(rep)
        p = rng.uniform(0.1, 0.8, TASKS)
        a = rng.binomial(ROLLOUTS, p + TRUTH) / ROLLOUTS  # task means
        b = rng.binomial(ROLLOUTS, p) / ROLLOUTS
        ci = paired_diff_ci(a, b, n_boot=1000, seed=rep, expand=expand)
        hits += ci.low <= TRUTH <= ci.high
    return hits / REPS


@pytest.mark.slow
def test_paired_per_step_intervals_cover_94_to_96_percent() -> None:
    assert 0.94 <= _paired_hits(expand=True) <= 0.96  # measured 0.947


@pytest.mark.slow
def test_plain_percentile_under_covers_at_16_tasks() -> None:
    assert _paired_hits(expand=False) < 0.935  # measured 0.926: why the intervals are widened


@pytest.mark.slow
def test_unpaired_per_step_intervals_cover_94_to_96_percent() -> None:
    # disjoint tasks in the two arms; the truth is the gap between the task populations
    hits = 0
    counts = np.full(TASKS, float(ROLLOUTS))
    for rep in range(REPS):
        rng = np.random.default_rng(rep)
        sx = rng.binomial(ROLLOUTS, rng.uniform(0.2, 0.9, TASKS)).astype(float)
        sb = rng.binomial(ROLLOUTS, rng.uniform(0.1, 0.8, TASKS)).astype(float)
        _, low, high = _compare.cluster_diff_ci(sx, counts, sb, counts, level=0.95, n_boot=1000, seed=rep)
        hits += low <= TRUTH <= high
    assert 0.94 <= hits / REPS <= 0.96  # measured 0.950 (plain percentile 0.933)


def test_compare_runs_uses_these_intervals_per_step() -> None:
    rng = np.random.default_rng(0)

    def arm(p: np.ndarray, tasks: range, run: str) -> object:
        recs = [{"step": 1, "group_id": f"g{t}", "task_id": f"t{t}", "sample_idx": i,
                 "reward": float(rng.random() < p[k])}
                for k, t in enumerate(tasks) for i in range(ROLLOUTS)]  # fmt: skip
        return frame_from_records(recs, run_id=run)

    p = rng.uniform(0.1, 0.8, TASKS)
    base, same, other = arm(p, range(16), "a"), arm(p + 0.1, range(16), "b"), arm(p, range(16, 32), "c")
    for b, paired in ((same, True), (other, False)):
        c = compare_runs([base, b], n_boot=400, seed=3)  # type: ignore[list-item]
        d = c.diffs.set_index("metric").loc["reward"]
        assert bool(d["paired"]) is paired
        tb, ta = (f.traj.groupby("task_id")["reward"] for f in (b, base))  # type: ignore[attr-defined]
        if paired:
            ref = paired_diff_ci(tb.mean().to_numpy(), ta.mean().to_numpy(), n_boot=400,
                                 seed=_compare._seed(3, 0), expand=True)  # fmt: skip
            assert (d["low"], d["high"]) == (ref.low, ref.high)
        else:
            ref3 = _compare.cluster_diff_ci(tb.sum().to_numpy(float), tb.count().to_numpy(float),
                                            ta.sum().to_numpy(float), ta.count().to_numpy(float),
                                            level=0.95, n_boot=400, seed=_compare._seed(3, 0))  # fmt: skip
            assert (d["estimate"], d["low"], d["high"]) == pytest.approx(ref3, rel=1e-12)


def test_expansion_widens_small_samples_only() -> None:
    assert tail_probability(0.95) == pytest.approx(0.025)
    assert tail_probability(0.95, 16) == pytest.approx(0.01387, abs=5e-5)  # z = 1.0328 · 2.1314
    assert tail_probability(0.95, 10_000) == pytest.approx(0.025, abs=1e-4)
    assert tail_probability(0.95, 1) == pytest.approx(0.025)  # nothing to expand with one unit
    v = np.random.default_rng(0).normal(size=16)
    plain, wide = paired_diff_ci(v, 0 * v, seed=1), paired_diff_ci(v, 0 * v, seed=1, expand=True)
    assert wide.method == "expanded percentile" and plain.method == "percentile"
    assert wide.low < plain.low and wide.high > plain.high and wide.estimate == plain.estimate
