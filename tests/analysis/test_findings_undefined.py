"""No finding is built on a statistic that is undefined for the data (issue 7, item 12).

Groups of one sample have no group-relative advantage, so estimators are compared on
groups of two or more only; a run with no graded rollout has no graded-only reward.  In
both cases ``Analysis.skipped`` says what could not be computed and why.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rolloutlab.analysis import analyze, frame_from_records
from rolloutlab.analysis._data import RunFrame
from rolloutlab.analysis._findings import _multi_sample_disagreement, _replay_findings
from rolloutlab.analysis._replay import replay_advantages
from tests.analysis.test_replay import _with_turns


def _gigpo_run(lone: bool = False) -> RunFrame:
    """Two steps, one group of three per step.  At step 1 every episode scores 1 (GRPO: all
    zero) but the turns at anchor 11 earn different rewards, so GiGPO's step level pushes
    them: a disagreement in sign (zero vs non-zero) on a real group.  ``lone``: add a
    group of one sample at each step."""
    episodes = {"1a": 1.0, "1b": 1.0, "1c": 1.0, "2a": 1.0, "2b": 0.0, "2c": 1.0}
    plan = {"1a": [(11, 1.0), (22, 0.0)], "1b": [(11, 0.0), (22, 1.0)], "1c": [(11, 0.0), (22, 1.0)],
            "2a": [(11, 0.0), (22, 1.0)], "2b": [(11, 0.0), (22, 0.0)], "2c": [(11, 0.0), (22, 1.0)]}
    if lone:
        episodes.update({"1z": 1.0, "2z": 0.0})
        plan.update({"1z": [(33, 1.0)], "2z": [(33, 0.0)]})
    frame = frame_from_records({"step": int(t[0]), "group_id": "task" if t[1] != "z" else f"lone{t[0]}", "traj_id": t,
                                "reward": r} for t, r in episodes.items())
    return _with_turns(frame, [{"traj_id": t, "step": int(t[0]), "turn_idx": i, "reward": r, "action_valid": True,
                                "anchor_hash": h} for t, seq in plan.items() for i, (h, r) in enumerate(seq)])


def test_groups_of_one_give_no_estimator_finding_and_say_why() -> None:
    # every Inspect / NeMo Gym sample run: one sample per task
    frame = frame_from_records({"step": 0, "group_id": f"t{i}", "reward": float(i % 2)} for i in range(12))
    a = analyze(frame)
    assert not [f for f in a.findings if f.kind == "estimators_disagree"]
    assert "one sample" in a.skipped["estimator_disagreement"]


def test_singletons_do_not_inflate_disagreement_on_real_groups() -> None:
    # RLOO of a lone sample is its raw reward while GRPO's is 0: counted, the singletons
    # alone made "rloo 21%" here; on the groups of four the estimators agree in sign.
    recs = [{"step": s, "group_id": f"{s}-{i}", "reward": float(i % 2)} for s in (1, 2, 3) for i in range(6)]
    recs += [{"step": s, "group_id": f"{s}-m{g}", "reward": float((i + g) % 3 == 0)}
             for s in (1, 2, 3) for g in range(2) for i in range(4)]
    a = analyze(frame_from_records(recs))
    assert a.replay.disagreement.query("estimator == 'rloo'")["sign_disagreement"].min() > 0.2  # the raw table
    assert not [f for f in a.findings if f.kind == "estimators_disagree"]
    assert "estimator_disagreement" not in a.skipped


def test_multi_sample_disagreement_equals_the_replay_without_singletons() -> None:
    """With no group of one the restricted comparison is the replay's own per-step table."""
    rep = replay_advantages(_gigpo_run(), estimators=["grpo", "gigpo"], gamma=0.8, omega=0.7)
    got = _multi_sample_disagreement(rep)
    assert got is not None
    d, singletons = got
    assert singletons == 0
    want = rep.disagreement.set_index(["step", "estimator"])["sign_disagreement"]
    np.testing.assert_allclose(d.set_index(["step", "estimator"])["sign_disagreement"].loc[want.index], want, rtol=0)
    assert want.max() > 0  # GiGPO splits the tie GRPO leaves: a real disagreement
    found = _replay_findings(rep, {})
    assert len(found) == 1 and "gigpo" in found[0].text and "left out" not in found[0].text


def test_adding_singletons_leaves_the_multi_sample_comparison_unchanged() -> None:
    with_lone = replay_advantages(_gigpo_run(lone=True), estimators=["grpo", "gigpo"], gamma=0.8, omega=0.7)
    without = replay_advantages(_gigpo_run(), estimators=["grpo", "gigpo"], gamma=0.8, omega=0.7)
    a, b = _multi_sample_disagreement(with_lone), _multi_sample_disagreement(without)
    assert a is not None and b is not None
    assert a[1] == 2
    pd.testing.assert_frame_equal(a[0].reset_index(drop=True), b[0].reset_index(drop=True))
    found = _replay_findings(with_lone, {})
    assert found and "2 group(s) of one sample left out" in found[0].text


def test_no_graded_rollout_gives_no_nan_and_says_why() -> None:
    frame = frame_from_records({"step": s, "group_id": f"{s}-{i // 2}", "reward": None} for s in (1, 2) for i in range(4))
    a = analyze(frame)
    texts = " ".join(f.text for f in a.findings)
    assert "nan" not in texts.lower()
    assert "no rollout was graded" in texts
    assert "graded_reward" in a.skipped


def test_graded_gap_is_over_the_steps_that_have_a_graded_rollout() -> None:
    recs = [{"step": 1, "group_id": "a", "reward": None}, {"step": 1, "group_id": "a", "reward": None},
            {"step": 2, "group_id": "b", "reward": 1.0}, {"step": 2, "group_id": "b", "reward": None}]
    a = analyze(frame_from_records(recs))
    f = next(f for f in a.findings if f.kind == "ungraded")
    # step 2: graded-only mean 1.0, all-rollouts mean 0.5
    assert "+0.500 above" in f.text and "over the 1 steps with a graded rollout" in f.text
    assert f.evidence["graded_minus_all"] == 0.5


def test_a_finding_that_would_print_nan_is_replaced_by_its_reason() -> None:
    from rolloutlab.analysis._findings import _UNDEFINED_NUMBER

    assert _UNDEFINED_NUMBER.search("reward is +nan above") and _UNDEFINED_NUMBER.search("t = inf")
    assert not _UNDEFINED_NUMBER.search("information about nano models; financial")
