"""Separate-lines fit: statsmodels OLS per segment, planted slopes, the published pair."""

from __future__ import annotations

import math

import numpy as np
import pytest
import statsmodels.api as sm

from rolloutlab.analysis import per_segment, saturation_verdict, segments_fit, two_segment_fit


def _sm(x: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None) -> object:
    design = sm.add_constant(x)
    if groups is None:
        return sm.OLS(y, design).fit()
    return sm.OLS(y, design).fit(cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)


def _close(a: float, b: float) -> None:
    assert a == pytest.approx(b, rel=1e-8, abs=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_each_segment_is_statsmodels_ols(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(12, 90))
    offset = [0.0, 1e4, -50.0][seed % 3]
    x = offset + rng.permutation(n).astype(float) * [1.0, 5.0][seed % 2]
    tau = float(np.sort(x)[n // 2])
    y = 0.3 + 0.01 * x + np.where(x > tau, 2.0 - 0.02 * x, 0.0) + rng.normal(0, [0.5, 0.05][seed % 2], n)
    fit = segments_fit(x, y, breakpoint=tau)
    assert fit.status == "ok" and fit.model == "segments" and fit.se_kind == "ols"
    for seg, side in ((fit.early, x <= tau), (fit.late, x > tau)):
        ref = _sm(x[side], y[side])
        assert seg.n == side.sum()
        _close(seg.intercept, ref.params[0])  # type: ignore[attr-defined]
        _close(seg.slope, ref.params[1])  # type: ignore[attr-defined]
        _close(seg.slope_se, ref.bse[1])  # type: ignore[attr-defined]
        _close(seg.t, ref.tvalues[1])  # type: ignore[attr-defined]
        _close(seg.p, ref.pvalues[1])  # type: ignore[attr-defined]
        _close(seg.residual_std, math.sqrt(ref.scale))  # type: ignore[attr-defined]
        _close(seg.r2, ref.rsquared)  # type: ignore[attr-defined]
    assert fit.early_t == fit.early.t and fit.late_p == fit.late.p


@pytest.mark.parametrize("seed", range(4))
def test_cluster_robust_se_is_statsmodels_cr1(seed: int) -> None:
    # trial-level rows: each step samples 2 of 24 tasks, 8 rollouts each (a GRPO group),
    # and a task effect is shared by its rows, so rows of a task share x and an error
    rng = np.random.default_rng(100 + seed)
    tasks = 24
    x = np.repeat(np.arange(60.0), 16)
    g = np.repeat(rng.integers(0, tasks, 120), 8)
    y = 0.2 + 0.01 * np.minimum(x, 30) + rng.normal(0, 0.3, tasks)[g] + rng.normal(0, 0.2, x.shape)
    fit = segments_fit(x, y, breakpoint=30, clusters=g)
    assert fit.se_kind == "cluster"
    for seg, side in ((fit.early, x <= 30), (fit.late, x > 30)):
        ref = _sm(x[side], y[side], g[side])
        ols = _sm(x[side], y[side])
        assert seg.n_clusters == len(np.unique(g[side]))
        _close(seg.slope, ref.params[1])  # type: ignore[attr-defined]
        _close(seg.cluster_se, ref.bse[1])  # type: ignore[attr-defined]
        _close(seg.cluster_t, ref.tvalues[1])  # type: ignore[attr-defined]
        _close(seg.cluster_p, ref.pvalues[1])  # type: ignore[attr-defined]
        _close(seg.slope_se, ols.bse[1])  # type: ignore[attr-defined]
    assert fit.late_slope_se == fit.late.cluster_se and fit.early_t == fit.early.cluster_t
    # a shared task effect makes the honest SE larger than the naive one
    assert fit.early.cluster_se > fit.early.slope_se


def test_string_task_ids_cluster_like_integer_ones() -> None:
    rng = np.random.default_rng(3)
    x = np.repeat(np.arange(20.0), 5)
    g = np.tile(np.arange(5), 20)
    y = 0.02 * x + rng.normal(0, 0.1, 5)[g] + rng.normal(0, 0.1, x.shape)
    a = segments_fit(x, y, breakpoint=9, clusters=g)
    b = segments_fit(x[::-1], y[::-1], breakpoint=9, clusters=np.array([f"task-{i}" for i in g])[::-1])
    assert a.early.cluster_se == pytest.approx(b.early.cluster_se, rel=1e-12)
    assert a.late.cluster_t == pytest.approx(b.late.cluster_t, rel=1e-12)


def _ref_search(x: np.ndarray, y: np.ndarray, min_segment: int = 3) -> float:
    ux = np.unique(x)
    best, best_tau = math.inf, math.nan
    for tau in ux[min_segment - 1 : len(ux) - min_segment]:
        rss = 0.0
        for side in (x <= tau, x > tau):
            coef = np.polyfit(x[side], y[side], 1)
            rss += float(np.sum((y[side] - np.polyval(coef, x[side])) ** 2))
        if math.isinf(best) or rss < best - 1e-10 * max(1.0, best):
            best, best_tau = rss, float(tau)
    return best_tau


@pytest.mark.parametrize("seed", range(5))
def test_search_is_least_total_rss(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = np.repeat(rng.permutation(40).astype(float), 1 + seed % 2)
    y = np.where(x <= 17, 0.05 * x, 1.5 + 0.001 * x) + rng.normal(0, 0.1, x.shape)
    fit = segments_fit(x, y)
    assert not fit.breakpoint_fixed
    assert fit.breakpoint == _ref_search(x, y)


def test_planted_slopes_and_noise_levels_are_recovered() -> None:
    # early: slope 0.01, sd 0.05; late: a jump and slope 0.001, sd 0.01 (a quiet plateau)
    x = np.arange(120.0)
    b_early, b_late = [], []
    cover = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        y = np.where(x <= 46, 0.1 + 0.01 * x, 0.7 + 0.001 * x)
        y = y + np.where(x <= 46, rng.normal(0, 0.05, x.shape), rng.normal(0, 0.01, x.shape))
        fit = segments_fit(x, y, breakpoint=46)
        b_early.append(fit.early_slope)
        b_late.append(fit.late_slope)
        cover += abs(fit.late_slope - 0.001) <= 1.99 * fit.late_slope_se  # t(71) 97.5% ≈ 1.994
    assert np.mean(b_early) == pytest.approx(0.01, abs=2e-4)
    assert np.mean(b_late) == pytest.approx(0.001, abs=2e-5)
    assert 0.91 <= cover / 200 <= 0.99
    last = segments_fit(x, y, breakpoint=46)
    assert last.early.residual_std == pytest.approx(0.05, rel=0.3)
    assert last.late.residual_std == pytest.approx(0.01, rel=0.3)
    # the search finds the planted break on one such series
    assert segments_fit(x, y).breakpoint == 46


def _with_residuals(x: np.ndarray, a: float, b: float, t: float, rng: np.random.Generator) -> np.ndarray:
    """y on x with OLS slope exactly b and t-statistic exactly t (residuals orthogonal to [1, x])."""
    e = rng.normal(size=x.shape)
    design = np.column_stack([np.ones_like(x), x])
    e -= design @ np.linalg.lstsq(design, e, rcond=None)[0]
    sxx = float(((x - x.mean()) ** 2).sum())
    s = b / t * math.sqrt(sxx)  # SE = s / sqrt(sxx)
    e *= s * math.sqrt(len(x) - 2) / math.sqrt(float(e @ e))
    return a + b * x + e


@pytest.mark.parametrize("n_steps", [92, 150])
def test_published_pair_is_what_separate_lines_give(n_steps: int) -> None:
    # the published table: split at step 46, early +0.00129 (t = 5.38), late +0.00009 (t = 0.68)
    rng = np.random.default_rng(0)
    x = np.arange(1.0, n_steps + 1)
    early, late = x[x <= 46], x[x > 46]
    y = np.concatenate([_with_residuals(early, 0.30, 0.00129, 5.38, rng),
                        _with_residuals(late, 0.36, 0.00009, 0.68, rng)])  # fmt: skip
    fit = segments_fit(x, y, breakpoint=46)
    assert (fit.early.n, fit.late.n) == (46, n_steps - 46)
    assert fit.early_slope == pytest.approx(0.00129, rel=1e-9)
    assert fit.early_t == pytest.approx(5.38, rel=1e-9)
    assert fit.late_slope == pytest.approx(0.00009, rel=1e-9)
    assert fit.late_t == pytest.approx(0.68, rel=1e-9)
    # the hinge shares one residual variance: SE(late)/SE(early) depends on the steps only,
    # whatever y is, and is 1 for a split in the middle of 92 steps
    h1 = two_segment_fit(x, y, breakpoint=46)
    h2 = two_segment_fit(x, rng.normal(size=x.shape), breakpoint=46)
    ratio = h1.late_slope_se / h1.early_slope_se
    assert ratio == pytest.approx(h2.late_slope_se / h2.early_slope_se, rel=1e-9)
    published = (0.00009 / 0.68) / (0.00129 / 5.38)  # 0.55
    if n_steps == 92:
        assert ratio == pytest.approx(1.0, abs=0.06)
        assert abs(ratio - published) > 0.4


def test_per_segment_rows_for_both_fits_and_the_verdict() -> None:
    x = np.arange(80.0)
    rng = np.random.default_rng(1)
    y = 0.2 + 0.01 * np.minimum(x, 40) + rng.normal(0, 0.02, x.shape)
    seg, hinge = segments_fit(x, y), two_segment_fit(x, y)
    rows = per_segment(seg)
    assert [r["segment"] for r in rows] == ["early", "late"]
    assert rows[0]["model"] == "segments" and per_segment(hinge)[0]["model"] == "hinge"
    assert rows[0]["n"] + rows[1]["n"] == 80
    assert rows[1]["t"] == seg.late.t and rows[1]["p"] == seg.late.p
    assert per_segment(hinge)[1]["p"] == pytest.approx(2 * __import__("scipy").stats.t.sf(abs(hinge.late_t), 77))
    v = saturation_verdict(seg, y_max=1.0)
    assert v.plateau, v.reason
    assert v.headroom == pytest.approx(1.0 - seg.predict([79.0])[0])


def test_edges_and_bad_input() -> None:
    assert segments_fit(np.arange(5.0), np.arange(5.0)).status == "too_few_steps"
    const = segments_fit(np.arange(10.0), np.full(10, 0.5), breakpoint=4)
    assert const.status == "constant" and const.early_slope == 0.0 and const.intercept == 0.5
    assert saturation_verdict(const).plateau
    exact = segments_fit(np.arange(10.0), np.where(np.arange(10.0) <= 4, 1.0, 2.0 * np.arange(10.0)), breakpoint=4)
    assert exact.early_t == 0.0 and exact.late_t == math.inf
    with pytest.raises(ValueError, match="min_segment"):
        segments_fit(np.arange(10.0), np.arange(10.0), min_segment=2)
    with pytest.raises(ValueError, match="one label per point"):
        segments_fit(np.arange(10.0), np.arange(10.0), clusters=[1, 2])
    with pytest.raises(ValueError, match=r"choose a value in \[2, 7\)"):
        segments_fit(np.arange(10.0), np.arange(10.0) ** 2, breakpoint=8)
    with pytest.raises(ValueError, match="inf"):
        segments_fit([0, 1, 2, 3, 4, 5, np.inf], np.arange(7.0))
