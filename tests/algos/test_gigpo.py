"""GiGPO: a hand-worked example plus a slow reference on random trajectory batches."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rolloutlab.algos import _gigpo as gigpo_mod
from rolloutlab.algos import discounted_returns, gigpo_advantages

NAN = math.nan
EPS = 1e-6


def test_hand_worked_two_trajectories_share_turn0_anchor() -> None:
    # One episode group, two trajectories, gamma = 0.5, omega = 1, mean_std_norm.
    #   A: anchors s0 -> s1,       turn rewards [0, 1],    episode reward 1
    #   B: anchors s0 -> s2 -> s3, turn rewards [0, 0, 0], episode reward 0
    # Discounted returns: A = [0 + 0.5 * 1, 1] = [0.5, 1];  B = [0, 0, 0].
    # Episode level over R = [1, 0]: mean 0.5, std(ddof=1) = sqrt(0.5) = 0.70711
    #   A_E(A) = 0.5 / 0.70711 = +0.70711,  A_E(B) = -0.70711.
    # Step groups: s0 = {A0: 0.5, B0: 0.0}: mean 0.25, std = sqrt(0.03125*2) = 0.35355
    #   A_S(A0) = 0.25 / 0.35355 = +0.70711, A_S(B0) = -0.70711;
    #   s1, s2, s3 are singletons -> A_S = 0.
    # Combined: A0 = 1.41421, A1 = 0.70711, B0 = -1.41421, B1 = B2 = -0.70711.
    # Rows are deliberately interleaved / out of turn order.
    traj = ["B", "A", "B", "A", "B"]
    turn = [2, 1, 0, 0, 1]
    anchor = [3, 1, 0, 0, 2]
    rew = [0.0, 1.0, 0.0, 0.0, 0.0]
    ep = [0.0, 1.0, 0.0, 1.0, 0.0]
    res = gigpo_advantages([9] * 5, traj, turn, anchor, rew, ep, gamma=0.5)
    s2 = math.sqrt(0.5)
    np.testing.assert_allclose(res.step_returns, [0.0, 1.0, 0.0, 0.5, 0.0])
    np.testing.assert_allclose(res.episode_advantages, [-s2, s2, -s2, s2, -s2], atol=1e-5)
    np.testing.assert_allclose(res.step_advantages, [0, 0, -s2, s2, 0], atol=1e-5)
    np.testing.assert_allclose(res.advantages, [-s2, s2, -2 * s2, 2 * s2, -s2], atol=1e-5)
    np.testing.assert_array_equal(res.step_group_sizes, [1, 1, 2, 2, 1])
    # exact eps placement: 0.5 / (std + eps)
    assert res.episode_advantages[1] == pytest.approx(0.5 / (s2 + EPS), rel=1e-12)

    # mean_norm: A_E = +-0.5, A_S(s0) = +-0.25; omega scales the step part only
    res = gigpo_advantages(
        [9] * 5, traj, turn, anchor, rew, ep, gamma=0.5, omega=2.0, mode="mean_norm"
    )
    np.testing.assert_allclose(res.episode_advantages, [-0.5, 0.5, -0.5, 0.5, -0.5])
    np.testing.assert_allclose(res.step_advantages, [0, 0, -0.25, 0.25, 0])
    np.testing.assert_allclose(res.advantages, [-0.5, 0.5, -1.0, 1.0, -0.5])

    # episode_stats="turn" (verl-agent default): R per turn = [1, 1, 0, 0, 0]
    # mean 0.4, std = sqrt(0.3) -> A = 0.6/0.5477 = 1.0954 (A), -0.4/0.5477 = -0.7303 (B)
    res = gigpo_advantages([9] * 5, traj, turn, anchor, rew, ep, gamma=0.5, episode_stats="turn")
    a, b = 0.6 / (math.sqrt(0.3) + EPS), -0.4 / (math.sqrt(0.3) + EPS)
    np.testing.assert_allclose(res.episode_advantages, [b, a, b, a, b], rtol=1e-12)


def test_default_episode_reward_is_sum_of_turn_rewards() -> None:
    args = ([0, 0, 0, 0], [0, 0, 1, 1], [0, 1, 0, 1], [5, 6, 5, 7], [0.2, 0.8, 0.0, 0.3])
    np.testing.assert_allclose(
        gigpo_advantages(*args).advantages,
        gigpo_advantages(*args, episode_rewards=[1.0, 1.0, 0.3, 0.3]).advantages,
    )


def test_singleton_episode_group_follows_verl_agent() -> None:
    res = gigpo_advantages([0, 0], [0, 0], [0, 1], [1, 2], [0.0, 2.0], gamma=1.0)
    np.testing.assert_allclose(res.episode_advantages, [2.0 / (1 + EPS)] * 2)
    np.testing.assert_allclose(res.step_advantages, [0.0, 0.0])


def test_revisited_anchor_across_turn_positions_is_one_step_group() -> None:
    # the same anchor at turn 0 of A and turn 1 of B shares a step group
    res = gigpo_advantages(
        [0, 0, 0],
        ["A", "B", "B"],
        [0, 0, 1],
        [7, 8, 7],
        [1.0, 0.0, 0.0],
        gamma=1.0,
        mode="mean_norm",
    )
    np.testing.assert_allclose(res.step_advantages, [0.5, 0.0, -0.5])


def test_anchor_in_different_episode_groups_is_not_shared() -> None:
    res = gigpo_advantages([0, 1], ["A", "B"], [0, 0], [7, 7], [1.0, 0.0])
    np.testing.assert_array_equal(res.step_group_sizes, [1, 1])
    np.testing.assert_allclose(res.step_advantages, [0.0, 0.0])


def test_nan_turn_reward_propagates_to_earlier_turns() -> None:
    g = discounted_returns([1.0, NAN, 2.0, 5.0], [0, 0, 0, 1], [0, 1, 2, 0], gamma=0.9)
    assert math.isnan(g[0]) and math.isnan(g[1])
    np.testing.assert_allclose(g[2:], [2.0, 5.0])
    # gamma = 0: returns are the rewards themselves, a later NaN does not leak
    np.testing.assert_allclose(
        discounted_returns([1.0, NAN], [0, 0], [0, 1], gamma=0.0), [1.0, NAN]
    )


def test_ungraded_trajectory_is_nan_and_excluded() -> None:
    res = gigpo_advantages(
        [0] * 3,
        [0, 1, 2],
        [0] * 3,
        [1, 1, 1],
        [1.0, 0.0, 0.0],
        [1.0, 0.0, NAN],
        mode="mean_norm",
        gamma=1.0,
    )
    assert math.isnan(res.episode_advantages[2]) and math.isnan(res.advantages[2])
    np.testing.assert_allclose(res.episode_advantages[:2], [0.5, -0.5])


def test_validation_errors() -> None:
    with pytest.raises(ValueError, match="one group"):
        gigpo_advantages([0, 1], [0, 0], [0, 1], [0, 0], [0.0, 0.0])
    with pytest.raises(ValueError, match="constant"):
        gigpo_advantages([0, 0], [0, 0], [0, 1], [0, 0], [0.0, 0.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="unique"):
        gigpo_advantages([0, 0], [0, 0], [1, 1], [0, 0], [0.0, 0.0])
    with pytest.raises(ValueError):
        gigpo_advantages([0], [0], [0], [0], [0.0], mode="bogus")  # type: ignore[arg-type]


# ------------------------------------------------------------- slow reference


def _norm(vals: list[float], x: float, *, std: bool, singleton_keep: bool) -> float:
    if len(vals) == 1:
        if not singleton_keep:
            return 0.0
        return x / (1 + EPS) if std else x
    if len(set(vals)) == 1:
        return 0.0
    m = statistics.fmean(vals)
    return (x - m) / (statistics.stdev(vals) + EPS) if std else x - m


def ref_gigpo(rows: list[dict[str, Any]], gamma: float, omega: float, std: bool) -> list[float]:
    by_traj: dict[Any, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        by_traj[row["traj"]].append(i)
    ret = [0.0] * len(rows)
    for idxs in by_traj.values():
        running = 0.0
        for i in sorted(idxs, key=lambda i: rows[i]["turn"], reverse=True):
            running = rows[i]["r"] + gamma * running
            ret[i] = running
    ep_pool: dict[Any, list[float]] = defaultdict(list)
    for idxs in by_traj.values():
        row = rows[idxs[0]]
        ep_pool[row["group"]].append(row["ep"])
    step_pool: dict[Any, list[float]] = defaultdict(list)
    for i, row in enumerate(rows):
        step_pool[(row["group"], row["anchor"])].append(ret[i])
    out = []
    for i, row in enumerate(rows):
        a_e = _norm(ep_pool[row["group"]], row["ep"], std=std, singleton_keep=True)
        a_s = _norm(step_pool[(row["group"], row["anchor"])], ret[i], std=std, singleton_keep=False)
        out.append(a_e + omega * a_s)
    return out


@st.composite
def trajectory_batches(draw: st.DrawFn) -> list[dict[str, Any]]:
    rows = []
    for g in range(draw(st.integers(1, 3))):
        for t in range(draw(st.integers(1, 4))):
            ep = draw(st.sampled_from([0.0, 1.0, 0.5]))
            turns = draw(st.permutations(range(draw(st.integers(1, 4)))))
            for turn in turns:
                rows.append(
                    {
                        "group": g * 10 - 7,
                        "traj": f"{g}-{t}",
                        "turn": turn * 3,
                        "anchor": draw(st.integers(0, 3)),
                        "ep": ep,
                        "r": draw(st.sampled_from([0.0, 1.0, 0.25])),
                    }
                )
    return draw(st.permutations(rows))


@given(
    trajectory_batches(),
    st.sampled_from([0.0, 0.5, 0.95, 1.0]),
    st.sampled_from([0.5, 1.0]),
    st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_matches_reference(
    rows: list[dict[str, Any]], gamma: float, omega: float, std: bool
) -> None:
    cols = {k: [row[k] for row in rows] for k in rows[0]}
    res = gigpo_advantages(
        cols["group"],
        cols["traj"],
        cols["turn"],
        cols["anchor"],
        cols["r"],
        cols["ep"],
        gamma=gamma,
        omega=omega,
        mode="mean_std_norm" if std else "mean_norm",
    )
    np.testing.assert_allclose(
        res.advantages, ref_gigpo(rows, gamma, omega, std), rtol=1e-9, atol=1e-9
    )


def test_verl_agent_trainer_defaults_pool_every_turn() -> None:
    # verl-agent's trainer: episode statistics across steps (one entry per turn), config
    # default mode "mean_norm", config default gamma 1.0.  Group: trajectory 0 has three
    # turns and reward 1, trajectory 1 one turn and reward 0; every anchor distinct.
    traj, turn, anchor = [0, 0, 0, 1], [0, 1, 2, 0], [10, 11, 12, 13]
    rew, ep = [0.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0]
    res = gigpo_advantages([5] * 4, traj, turn, anchor, rew, ep,
                           gamma=1.0, mode="mean_norm", episode_stats="turn")  # fmt: skip
    # pooled over turns the group mean is 3/4, not 1/2; step groups are singletons -> 0
    np.testing.assert_allclose(res.advantages, [0.25, 0.25, 0.25, -0.75])
    doc = (gigpo_mod.__doc__ or "").replace("\n", " ")
    assert "across steps, always" in doc
    assert "``algorithm.gigpo.mode`` is ``\"mean_norm\"``" in doc
    assert "``algorithm.gamma`` is 1.0" in doc and "0.95 comes from the example" in doc
