"""Arm comparisons: per-step metrics, pairing by task, windows, overtaking, transfer."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from rolloutlab.analysis import _compare, paired_diff_ci
from rolloutlab.analysis._compare import compare_runs, overtake_step, transfer_table, window_table
from rolloutlab.analysis._data import RunFrame, frame_from_records


def records(
    rewards: dict[int, list[list[float | None]]],
    *,
    task_prefix: str = "t",
    source: Any = None,
    tag: str = "",
) -> list[dict[str, Any]]:
    """``rewards[step][task] = [reward per sample]``; one group per (step, task)."""
    out = []
    for step, tasks in rewards.items():
        for k, rs in enumerate(tasks):
            for i, r in enumerate(rs):
                out.append(
                    {
                        "traj_id": f"{tag}{step}-{k}-{i}",
                        "step": step,
                        "group_id": f"{step}-{k}",
                        "task_id": f"{task_prefix}{k}",
                        "sample_idx": i,
                        "reward": r,
                        "data_source": source(k) if callable(source) else source,
                    }
                )
    return out


def binary_arm(
    rng: np.random.Generator,
    p: np.ndarray,
    *,
    n_tasks: int = 8,
    n: int = 4,
    ungraded: float = 0.0,
    task_prefix: str = "t",
    tag: str = "",
    source: Any = None,
) -> list[dict[str, Any]]:
    """Binary rewards with success probability ``p[step]`` (or ``p[step, task]``)."""
    pp = np.broadcast_to(p.reshape(len(p), -1), (len(p), n_tasks))
    return records(
        {
            s: [
                [
                    None if rng.random() < ungraded else float(rng.random() < pp[s, k])
                    for _ in range(n)
                ]
                for k in range(n_tasks)
            ]
            for s in range(len(p))
        },
        task_prefix=task_prefix,
        tag=tag,
        source=source,
    )


# ------------------------------------------------------------------ compare_runs


def test_per_step_metrics_keep_ungraded_apart_from_zero() -> None:
    a = frame_from_records(
        records({0: [[1.0, 0.0], [None, 1.0]], 1: [[0.0, 0.0], [1.0, 1.0]]}), run_id="a"
    )
    b = frame_from_records(
        records({0: [[1.0, 1.0], [1.0, 0.0]], 1: [[1.0, None], [None, None]], 2: [[1.0]]}),
        run_id="b",
    )
    c = compare_runs([a, b], n_boot=50)
    assert c.names == ("a", "b") and c.steps == (0, 1)  # step 2 is only in b
    row = c.per_step.set_index(["step", "arm"]).loc[(0, "a")]
    assert (row["n"], row["n_graded"], row["ungraded_rate"]) == (4, 3, 0.25)
    assert row["reward"] == pytest.approx(2 / 3) and row["reward_all"] == 0.5
    assert row["success"] == pytest.approx(2 / 3)  # success over graded only
    row = c.per_step.set_index(["step", "arm"]).loc[(1, "b")]
    assert (row["reward"], row["reward_all"], row["ungraded_rate"]) == (1.0, 0.25, 0.75)


def test_matching_tasks_are_paired_and_the_estimate_is_the_mean_task_difference() -> None:
    a = frame_from_records(records({0: [[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]}), run_id="a")
    b = frame_from_records(
        records({0: [[1.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, 0.0]]}), run_id="b"
    )  # +t3
    c = compare_runs([a, b], n_boot=300, seed=4)
    d = c.diffs.set_index("metric").loc["reward"]
    assert bool(d["paired"]) and d["n_common_tasks"] == 3 and d["n_arm"] == d["n_base"] == 3
    assert d["estimate"] == pytest.approx(np.mean([0.5, 0.5, 0.0]))  # t3 (b only) is left out
    ref = paired_diff_ci(
        [1.0, 0.5, 1.0], [0.5, 0.0, 1.0], n_boot=300, seed=_compare._seed(4, 0), expand=True
    )
    assert (d["low"], d["high"]) == (ref.low, ref.high)


def test_disjoint_tasks_fall_back_to_a_group_bootstrap() -> None:
    rng = np.random.default_rng(0)
    a = frame_from_records(binary_arm(rng, np.full(3, 0.3), task_prefix="x"), run_id="a")
    b = frame_from_records(binary_arm(rng, np.full(3, 0.6), task_prefix="y"), run_id="b")
    c = compare_runs([a, b], n_boot=200)
    for _, d in c.diffs.iterrows():
        assert (
            not d["paired"] and d["n_common_tasks"] == 0 and d["n_arm"] == d["n_base"] == 8
        )  # 8 groups
        sa = a.traj[a.traj.step == d["step"]]["reward"].mean()
        sb = b.traj[b.traj.step == d["step"]]["reward"].mean()
        assert d["estimate"] == pytest.approx(sb - sa) and d["low"] <= d["estimate"] <= d["high"]


def test_group_bootstrap_matches_a_plain_loop() -> None:
    rng = np.random.default_rng(1)
    s, c = rng.integers(0, 5, 17).astype(float), rng.integers(1, 6, 17).astype(float)
    fast = _compare._cluster_reps(s, c, 40, np.random.default_rng(7))
    idx = np.random.default_rng(7).integers(0, 17, size=(40, 17))
    slow = [sum(s[i] for i in row) / sum(c[i] for i in row) for row in idx]
    np.testing.assert_allclose(fast, slow, rtol=1e-12)


def test_pairing_sees_an_improvement_that_task_spread_hides() -> None:
    rng = np.random.default_rng(3)
    difficulty = rng.uniform(0.05, 0.95, 40)  # per task, shared by both arms
    base = binary_arm(rng, np.tile(difficulty, (1, 1)), n_tasks=40, n=8)
    better = binary_arm(rng, np.tile(np.clip(difficulty + 0.1, 0, 1), (1, 1)), n_tasks=40, n=8)
    paired = compare_runs(
        [frame_from_records(base, run_id="a"), frame_from_records(better, run_id="b")]
    )
    renamed = [dict(r, task_id="other" + str(r["task_id"])) for r in better]
    unpaired = compare_runs(
        [frame_from_records(base, run_id="a"), frame_from_records(renamed, run_id="b")]
    )
    p = paired.diffs.set_index("metric").loc["reward"]
    u = unpaired.diffs.set_index("metric").loc["reward"]
    assert bool(p["paired"]) and not bool(u["paired"])
    assert p["estimate"] == pytest.approx(u["estimate"])  # equal group sizes: same mean difference
    assert p["high"] - p["low"] < 0.8 * (u["high"] - u["low"])


def test_whole_run_and_last_steps_are_pooled() -> None:
    rng = np.random.default_rng(5)
    t = np.arange(30)
    a = frame_from_records(binary_arm(rng, 0.3 + 0.0 * t), run_id="a")
    b = frame_from_records(binary_arm(rng, 0.3 + 0.015 * t), run_id="b")  # better late only
    c = compare_runs([a, b], names=["base", "new"], last_n=10, n_boot=500)
    o = c.overall.set_index(["window", "metric"])
    assert set(c.overall["window"]) == {"all", "last_10"}
    last = o.loc[("last_10", "reward")]
    assert (last["first_step"], last["last_step"], last["n_steps"]) == (20, 29, 10)
    assert bool(last["paired"]) and last["n_common_tasks"] == 80  # (step, task) cells
    assert last["low"] > 0
    assert o.loc[("all", "reward"), "estimate"] < last["estimate"]


def test_three_arms_are_each_compared_to_the_first() -> None:
    rng = np.random.default_rng(6)
    frames = [
        frame_from_records(binary_arm(rng, np.full(2, p)), run_id=f"r{i}")
        for i, p in enumerate((0.2, 0.5, 0.8))
    ]
    c = compare_runs(frames, n_boot=100)
    assert (
        set(c.diffs["arm"]) == {"r1", "r2"} and len(c.diffs) == 2 * 2 * 3
    )  # steps × arms × metrics
    json.dumps(c.to_dict(), allow_nan=False)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda a, b: compare_runs([a]), "at least 2"),
        (lambda a, b: compare_runs([a, a]), "unique"),
        (lambda a, b: compare_runs([a, b], names=["x"]), "names"),
        (
            lambda a, b: compare_runs([a, frame_from_records(records({7: [[1.0]]}))]),
            "no step is present",
        ),
        (lambda a, b: compare_runs([a, b], level=95), "level"),
        (lambda a, b: window_table([a, b]), "exactly one"),
        (lambda a, b: window_table([a], windows=[(5, 1)]), "first > last"),
        (lambda a, b: overtake_step(a, b, metric="loss"), "metric must be one of"),  # type: ignore[arg-type]
        (lambda a, b: transfer_table(a, by="nope"), "no column 'nope'"),
    ],
)
def test_bad_arguments_say_what_to_do(build: Any, match: str) -> None:
    a = frame_from_records(records({0: [[1.0]], 1: [[0.0]]}), run_id="a")
    b = frame_from_records(records({0: [[0.0]], 1: [[1.0]]}), run_id="b")
    with pytest.raises(ValueError, match=match):
        build(a, b)


# ------------------------------------------------------------------ window_table


def test_window_table_shows_that_ungraded_rollouts_inflate_graded_only_reward() -> None:
    rng = np.random.default_rng(8)
    base = frame_from_records(binary_arm(rng, np.full(40, 0.5)), run_id="base")
    flaky = binary_arm(rng, np.full(20, 0.5), ungraded=0.3) + [
        dict(r, step=r["step"] + 20, traj_id="late" + r["traj_id"])
        for r in binary_arm(rng, np.full(20, 0.5))
    ]
    w = window_table([base, frame_from_records(flaky, run_id="s85")], first_n=20).table.set_index(
        ["arm", "window"]
    )
    early = w.loc[("s85", "first_20")]
    assert (early["first_step"], early["last_step"], early["n_steps"], early["n"]) == (
        0,
        19,
        20,
        640,
    )
    assert 0.25 < early["ungraded_rate"] < 0.35
    assert early["reward_all"] == pytest.approx(early["reward"] * (1 - early["ungraded_rate"]))
    assert early["reward_gap"] > 0.1 and w.loc[("s85", "rest"), "reward_gap"] == 0.0
    assert w.loc[("base", "first_20"), "reward_gap"] == 0.0


def test_explicit_windows_are_inclusive_and_the_same_for_every_arm() -> None:
    a = frame_from_records(records({1: [[1.0]], 2: [[0.0]], 5: [[None]]}), run_id="a")
    t = window_table([a], windows=[(1, 2), (2, 5), (8, 9)])
    rows = t.table.set_index("window")
    assert list(rows["n"]) == [2, 2, 0] and list(rows["n_steps"]) == [2, 2, 0]
    assert rows.loc["2-5", "ungraded_rate"] == 0.5 and rows.loc["2-5", "reward"] == 0.0
    d = t.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["table"][2]["first_step"] is None and d["table"][2]["reward"] is None


# ----------------------------------------------------------------- overtake_step

T, N_ROLL, CROSS, TOL = 100, 64, 50, 12
KW: dict[str, Any] = dict(
    metric="reward", smooth=15, min_run=10, alpha=0.01, n_perm=999, level=0.95, n_boot=50
)


def test_identical_curves_rarely_give_a_crossover() -> None:
    t = np.arange(T)
    p = 0.3 + 0.002 * t
    found = []
    for seed in range(100):
        rng = np.random.default_rng(seed)
        ya, yb = rng.binomial(N_ROLL, p) / N_ROLL, rng.binomial(N_ROLL, p) / N_ROLL
        found.append(_compare._overtake(t, ya, yb, seed=seed, **KW).step is not None)
    assert np.mean(found) <= 0.05  # measured 0/100 here; 0.6% over 500 seeds


def test_a_planted_crossover_is_recovered() -> None:
    t = np.arange(T)
    pa, pb = 0.5 + 0.002 * (t - CROSS), 0.5 + 0.006 * (t - CROSS)  # b starts lower, climbs faster
    err = []
    for seed in range(100):
        rng = np.random.default_rng(10_000 + seed)
        o = _compare._overtake(
            t, rng.binomial(N_ROLL, pa) / N_ROLL, rng.binomial(N_ROLL, pb) / N_ROLL, seed=seed, **KW
        )
        err.append(np.inf if o.step is None else abs(o.step - CROSS))
    assert (
        np.mean(np.array(err) <= TOL) >= 0.9
    )  # measured 0.96 here; 0.974 over 500 seeds (median error +2)


def test_a_uniformly_better_arm_does_not_overtake() -> None:
    t = np.arange(T)
    p = 0.3 + 0.002 * t
    found = []
    for seed in range(30):
        rng = np.random.default_rng(500 + seed)
        ya, yb = rng.binomial(N_ROLL, p) / N_ROLL, rng.binomial(N_ROLL, p + 0.03) / N_ROLL
        found.append(_compare._overtake(t, ya, yb, seed=seed, **KW).step is not None)
    assert np.mean(found) <= 0.1  # measured 0/30 here; 0.5% over 200 seeds


def ref_candidate(d: np.ndarray, w: int, m: int) -> int:
    """Plain loop over the rule: centred mean with a shrinking window, first up-crossing
    (>= 2 points before) followed by m positive smoothed points."""
    n = len(d)
    sm = [np.mean(d[max(0, i - (w - 1) // 2) : min(n, i + w // 2 + 1)]) for i in range(n)]
    for i in range(2, n - m + 1):
        if sm[i - 1] <= 0 and all(v > 0 for v in sm[i : i + m]):
            return i
    return -1


@pytest.mark.parametrize(("w", "m"), [(1, 2), (4, 3), (9, 10)])
def test_candidate_rule_matches_a_plain_loop(w: int, m: int) -> None:
    rng = np.random.default_rng(w * 10 + m)
    d = np.cumsum(rng.normal(0, 1, (40, 60)), axis=1) * 0.1 + rng.normal(0, 1, (40, 60))
    first, _ = _compare._detect(d, w, m)
    assert list(first) == [ref_candidate(row, w, m) for row in d]
    assert (first >= 0).sum() > 5  # the comparison saw crossings


def test_overtake_step_on_run_frames() -> None:
    rng = np.random.default_rng(2)
    t = np.arange(60)
    a = frame_from_records(binary_arm(rng, 0.5 + 0.0 * t, n_tasks=4, n=16), run_id="a")
    b = frame_from_records(binary_arm(rng, 0.5 + 0.01 * (t - 30), n_tasks=4, n=16), run_id="b")
    o = overtake_step(a, b, n_boot=100)
    assert (
        o.step is not None
        and abs(o.step - 30) <= 8
        and o.candidate == o.step
        and o.p_value is not None
    )
    assert o.before is not None and o.before.high < 0 < o.after.low  # type: ignore[union-attr]
    assert (
        list(o.curves.columns) == ["step", "a", "b", "a_smooth", "b_smooth"] and len(o.curves) == 60
    )
    d = o.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["step"] == o.step and d["before"]["n"] == o.step  # steps 0..59, one point each
    back = overtake_step(b, a, n_boot=100)  # a never overtakes b
    assert back.step is None and back.reason


def test_too_short_a_run_has_no_crossover_and_says_why() -> None:
    a = frame_from_records(records({s: [[0.0]] for s in range(5)}), run_id="a")
    b = frame_from_records(records({s: [[1.0]] for s in range(5)}), run_id="b")
    o = overtake_step(a, b)
    assert o.step is None and o.candidate is None and "min_run + 2" in o.reason


# ---------------------------------------------------------------- transfer_table


def test_transfer_sees_a_gain_on_the_trained_pool_only() -> None:
    rng = np.random.default_rng(9)
    t = np.arange(20)
    src = lambda k: "pool_a" if k < 8 else "pool_b"  # noqa: E731
    p = np.stack([np.r_[np.full(8, 0.2 + 0.03 * s), np.full(8, 0.3)] for s in t])  # (step, task)
    frame = frame_from_records(binary_arm(rng, p, n_tasks=16, n=8, source=src), run_id="arm_a")
    tr = transfer_table(frame, n_boot=500)
    ch = tr.change.set_index(["data_source", "metric"])
    a, b = ch.loc[("pool_a", "reward")], ch.loc[("pool_b", "reward")]
    assert bool(a["paired"]) and a["n_common_tasks"] == 8  # same tasks early and late
    assert (a["early_first"], a["early_last"], a["late_first"], a["late_last"]) == (0, 1, 18, 19)
    assert a["low"] > 0.25 and b["low"] < 0 < b["high"]  # 8 tasks: a wide (expanded) interval
    assert a["estimate"] == pytest.approx(a["late"] - a["early"])  # all tasks in both windows
    assert set(tr.per_step["data_source"]) == {"pool_a", "pool_b"} and len(tr.per_step) == 40
    json.dumps(tr.to_dict(), allow_nan=False)


def test_transfer_over_several_arms_and_a_missing_source() -> None:
    rng = np.random.default_rng(10)
    arms = [
        frame_from_records(binary_arm(rng, np.full(4, 0.5), tag=n), run_id=n) for n in ("x", "y")
    ]
    tr = transfer_table(arms, names=["x", "y"], edge_steps=2, n_boot=50)
    assert set(tr.change["arm"]) == {"x", "y"} and set(tr.change["data_source"]) == {"(none)"}
    with pytest.raises(ValueError, match="edge_steps"):
        transfer_table(arms, edge_steps=3)


def test_tables_and_terminal_table() -> None:
    rng = np.random.default_rng(11)
    a = frame_from_records(binary_arm(rng, np.full(3, 0.2)), run_id="base")
    b = frame_from_records(binary_arm(rng, np.full(3, 0.9)), run_id="new")
    c = compare_runs([a, b], n_boot=200)
    assert list(c.tables()) == ["per_step", "diffs", "overall"]
    con = Console(width=160, record=True, color_system=None)
    con.print(c.rich_table())
    text = con.export_text()
    assert "Each arm − base" in text and "by task" in text and "0–2 (3)" in text
    assert f"{c.overall.iloc[0]['estimate']:+.4f}" in text


def test_result_frames_are_plain_pandas() -> None:
    a = frame_from_records(records({0: [[1.0, None]]}), run_id="a")
    assert isinstance(a, RunFrame)
    c = compare_runs([a, a], names=["a", "b"], n_boot=10)
    assert isinstance(c.diffs, pd.DataFrame)
    d = c.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["per_step"][0]["ungraded_rate"] == 0.5 and d["diffs"][0]["estimate"] == 0.0
