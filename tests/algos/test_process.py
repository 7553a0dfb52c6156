"""Per-turn process variants and diagnostics against slow reference loops."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from rolloutlab.algos import (
    center_mean,
    center_mean_std,
    estimator_disagreement,
    per_turn_norm,
    process_advantages,
    std_sum,
    zero_advantage_fraction,
)

NAN = math.nan
EPS = 1e-6


def _norm(vals: list[float], x: float, std: bool) -> float:
    if len(vals) == 1 or len(set(vals)) == 1:
        return 0.0
    m = statistics.fmean(vals)
    return (x - m) / (statistics.stdev(vals) + EPS) if std else x - m


def ref_pooled(rows: list[dict[str, Any]], key: Any, std: bool) -> list[float]:
    pools: dict[Any, list[float]] = defaultdict(list)
    for row in rows:
        if row["ok"]:
            pools[key(row)].append(row["r"])
    return [_norm(pools[key(row)], row["r"], std) if row["ok"] else NAN for row in rows]


def ref_std_sum(rows: list[dict[str, Any]]) -> list[float]:
    ret: dict[Any, float] = defaultdict(float)
    group_of: dict[Any, Any] = {}
    for row in rows:
        ret[row["traj"]] += row["r"] if row["ok"] else NAN
        group_of[row["traj"]] = row["group"]
    pools: dict[Any, list[float]] = defaultdict(list)
    for traj, r in ret.items():
        if not math.isnan(r):
            pools[group_of[traj]].append(r)
    out = []
    for row in rows:
        r = ret[row["traj"]]
        out.append(NAN if math.isnan(r) else _norm(pools[row["group"]], r, True))
    return out


@st.composite
def turn_batches(draw: st.DrawFn) -> list[dict[str, Any]]:
    rows = []
    for g in range(draw(st.integers(1, 3))):
        for t in range(draw(st.integers(1, 4))):
            for turn in range(draw(st.integers(1, 4))):
                r = draw(
                    st.one_of(
                        st.sampled_from([0.0, 1.0, 0.5, NAN]),
                        st.floats(-5, 5, allow_subnormal=False),
                    )
                )
                rows.append(
                    {
                        "group": 3 - g * 5,
                        "traj": g * 100 + t,
                        "turn": turn,
                        "r": r,
                        "ok": draw(st.booleans()) and not math.isnan(r),
                    }
                )
    return draw(st.permutations(rows))


def cols(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return {k: [row[k] for row in rows] for k in rows[0]}


@given(turn_batches())
@settings(max_examples=300, deadline=None)
def test_variants_match_reference(rows: list[dict[str, Any]]) -> None:
    c = cols(rows)
    r, g, tr, ti, mask = c["r"], c["group"], c["traj"], c["turn"], c["ok"]
    kw: dict[str, Any] = {"rtol": 1e-9, "atol": 1e-9}
    np.testing.assert_allclose(
        per_turn_norm(r, g, ti, mask=mask),
        ref_pooled(rows, lambda x: (x["group"], x["turn"]), True),
        **kw,
    )
    np.testing.assert_allclose(
        center_mean_std(r, g, mask=mask), ref_pooled(rows, lambda x: x["group"], True), **kw
    )
    np.testing.assert_allclose(
        center_mean(r, g, mask=mask), ref_pooled(rows, lambda x: x["group"], False), **kw
    )
    np.testing.assert_allclose(std_sum(r, g, tr, mask=mask), ref_std_sum(rows), **kw)
    for name, f in [
        ("per_turn_norm", per_turn_norm(r, g, ti, mask=mask)),
        ("std_sum", std_sum(r, g, tr, mask=mask)),
    ]:
        np.testing.assert_allclose(process_advantages(name, r, g, tr, ti, mask=mask), f)  # type: ignore[arg-type]


def test_hand_example() -> None:
    # group 0: traj a turns [0, 1] rewards [0, 1]; traj b turns [0, 1, 2] rewards [0, 0, 1]
    r = [0.0, 1.0, 0.0, 0.0, 1.0]
    g = [0] * 5
    tr = ["a", "a", "b", "b", "b"]
    ti = [0, 1, 0, 1, 2]
    # per (group, turn): turn 0 {0, 0} constant -> 0; turn 1 {1, 0} -> +-0.5/0.7071; turn 2 alone
    s = 0.5 / (math.sqrt(0.5) + EPS)
    np.testing.assert_allclose(per_turn_norm(r, g, ti), [0, s, 0, -s, 0])
    # pooled: mean 0.4, std sqrt(0.3)
    sd = math.sqrt(0.3) + EPS
    np.testing.assert_allclose(
        center_mean_std(r, g), [-0.4 / sd, 0.6 / sd, -0.4 / sd, -0.4 / sd, 0.6 / sd]
    )
    np.testing.assert_allclose(center_mean(r, g), [-0.4, 0.6, -0.4, -0.4, 0.6])
    # returns a = 1, b = 1 -> constant -> 0; change b's last reward to 3 -> returns [1, 3]
    np.testing.assert_allclose(std_sum(r, g, tr), [0.0] * 5)
    q = 1.0 / (math.sqrt(2.0) + EPS)
    np.testing.assert_allclose(std_sum([0, 1, 0, 0, 3], g, tr), [-q, -q, q, q, q])


def test_std_sum_rejects_trajectory_in_two_groups() -> None:
    with pytest.raises(ValueError):
        std_sum([0.0, 1.0], [0, 1], [5, 5])


def test_unknown_variant() -> None:
    with pytest.raises(ValueError):
        process_advantages("nope", [0.0], [0], [0], [0])  # type: ignore[arg-type]


# ------------------------------------------------------------------ diagnostics


def test_zero_advantage_fraction() -> None:
    assert zero_advantage_fraction([0.0, 1.0, NAN, 1e-12, -2.0]) == 0.5
    assert zero_advantage_fraction([0.0, 1e-3], tol=1e-2) == 1.0
    assert math.isnan(zero_advantage_fraction([NAN]))
    assert math.isnan(zero_advantage_fraction([]))


def test_estimator_disagreement_hand() -> None:
    d = estimator_disagreement([1.0, -1.0, 0.0, 2.0, NAN], [0.5, 1.0, 0.0, 3.0, 1.0])
    assert d["n"] == 4
    assert d["sign_disagreement"] == 0.25 and d["opposite_sign"] == 0.25
    assert d["mean_abs_diff"] == pytest.approx((0.5 + 2.0 + 0.0 + 1.0) / 4)
    assert d["max_abs_diff"] == 2.0
    d0 = estimator_disagreement([0.0, 1.0], [0.3, 1.0])
    assert d0["sign_disagreement"] == 0.5 and d0["opposite_sign"] == 0.0
    e = estimator_disagreement([NAN], [1.0])
    assert e["n"] == 0 and math.isnan(e["pearson"])
    assert math.isnan(estimator_disagreement([1.0, 1.0], [0.0, 2.0])["pearson"])
    with pytest.raises(ValueError):
        estimator_disagreement([1.0], [1.0, 2.0])


@given(
    st.lists(
        st.tuples(
            st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0]), st.floats(-3, 3, allow_subnormal=False)
        ),
        min_size=3,
        max_size=30,
    )
)
@settings(max_examples=200, deadline=None)
def test_correlations_match_scipy(pairs: list[tuple[float, float]]) -> None:
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return
    d = estimator_disagreement(a, b)
    assert d["pearson"] == pytest.approx(stats.pearsonr(a, b).statistic, abs=1e-9)
    assert d["spearman"] == pytest.approx(stats.spearmanr(a, b).statistic, abs=1e-9)
