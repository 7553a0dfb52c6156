"""Two-segment fits: planted truth, false positives, and a slow lstsq reference."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rolloutlab.analysis import breakpoint_ci, saturation_verdict, two_segment_fit

X = np.arange(100.0)
TAU = 46.0


def hinge_series(seed: int, *, sigma: float = 0.03) -> np.ndarray:
    """Rise 0.01/step until step 46, then flat, plus N(0, sigma²) noise."""
    rng = np.random.default_rng(seed)
    return 0.2 + 0.01 * np.minimum(X, TAU) + rng.normal(0.0, sigma, X.shape)


# --------------------------------------------------------------- slow reference


def ref_search(x: np.ndarray, y: np.ndarray, min_segment: int = 3) -> dict[str, float]:
    """Exhaustive search with one np.linalg.lstsq per candidate on the explicit design."""
    ux = np.unique(x)
    best: dict[str, float] = {}
    for tau in ux[min_segment - 1 : len(ux) - min_segment]:
        design = np.column_stack([np.ones_like(x), x, np.maximum(0.0, x - tau)])
        beta, *_ = np.linalg.lstsq(design, y, rcond=None)
        rss = float(np.sum((y - design @ beta) ** 2))
        if not best or rss < best["rss"] - 1e-12 * max(1.0, best["rss"]):
            s2 = rss / (len(x) - 3)
            cov = s2 * np.linalg.inv(design.T @ design)
            best = dict(
                tau=float(tau), rss=rss, a=beta[0], b=beta[1], late=beta[1] + beta[2],
                se_b=math.sqrt(cov[1, 1]),
                se_late=math.sqrt(cov[1, 1] + cov[2, 2] + 2 * cov[1, 2]),
            )  # fmt: skip
    return best


# ------------------------------------------------------------ against lstsq


@pytest.mark.parametrize("seed", range(6))
def test_search_matches_lstsq_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(8, 80))
    offset = [0.0, 1e5, -300.0][seed % 3]  # far-from-zero steps stress the conditioning
    x = offset + rng.permutation(n).astype(float) * [1.0, 10.0][seed % 2]
    tau0 = np.quantile(x, rng.uniform(0.2, 0.8))
    y = rng.normal() + 0.02 * x + rng.normal() * np.maximum(0.0, x - tau0) + rng.normal(0, 0.5, n)
    fit = two_segment_fit(x, y)
    ref = ref_search(x, y)
    assert fit.status == "ok"
    assert fit.breakpoint == ref["tau"]
    assert fit.intercept == pytest.approx(ref["a"], rel=1e-6, abs=1e-6)
    assert fit.early_slope == pytest.approx(ref["b"], rel=1e-8, abs=1e-10)
    assert fit.late_slope == pytest.approx(ref["late"], rel=1e-8, abs=1e-10)
    assert fit.early_slope_se == pytest.approx(ref["se_b"], rel=1e-6)
    assert fit.late_slope_se == pytest.approx(ref["se_late"], rel=1e-6)
    assert fit.residual_std == pytest.approx(math.sqrt(ref["rss"] / (n - 3)), rel=1e-8)
    slope, intercept = np.polyfit(x, y, 1)
    assert fit.line_slope == pytest.approx(slope, rel=1e-8)
    assert fit.line_intercept == pytest.approx(intercept, rel=1e-6, abs=1e-6)


def test_repeated_steps_match_lstsq_loop() -> None:
    rng = np.random.default_rng(7)
    x = np.repeat(np.arange(30.0), 3)  # three values per step
    y = 0.05 * np.minimum(x, 12) + rng.normal(0, 0.1, x.shape)
    fit, ref = two_segment_fit(x, y), ref_search(x, y)
    assert fit.n == 90 and fit.n_steps == 30
    assert fit.breakpoint == ref["tau"]
    assert fit.late_slope_se == pytest.approx(ref["se_late"], rel=1e-6)


def test_fixed_breakpoint_equals_search_restricted_to_it() -> None:
    y = hinge_series(3)
    searched = two_segment_fit(X, y)
    fixed = two_segment_fit(X, y, breakpoint=searched.breakpoint)
    assert fixed.breakpoint_fixed and not searched.breakpoint_fixed
    for name in ("intercept", "early_slope", "late_slope", "early_slope_se", "late_slope_se"):
        assert getattr(fixed, name) == pytest.approx(getattr(searched, name), rel=1e-12)
    assert fixed.residual_std == pytest.approx(searched.residual_std, rel=1e-12)
    # BIC charges the searched fit for τ: exactly one more ln(n)
    assert searched.bic_two - fixed.bic_two == pytest.approx(math.log(X.size))


def test_fixed_breakpoint_between_steps_matches_lstsq() -> None:
    y = hinge_series(4)
    fit = two_segment_fit(X, y, breakpoint=46.5)
    design = np.column_stack([np.ones_like(X), X, np.maximum(0.0, X - 46.5)])
    beta, *_ = np.linalg.lstsq(design, y, rcond=None)
    assert fit.breakpoint == 46.5 and fit.n_early == 47 and fit.n_late == 53
    assert fit.early_slope == pytest.approx(beta[1], rel=1e-9)
    assert fit.late_slope == pytest.approx(beta[1] + beta[2], abs=1e-10)


def test_fixed_breakpoint_out_of_range_says_where_it_may_go() -> None:
    with pytest.raises(ValueError, match=r"breakpoint=98 .* \[2, 97\)"):
        two_segment_fit(X, hinge_series(0), breakpoint=98)


# ------------------------------------------------------------ planted truth


def test_planted_hinge_is_found() -> None:
    seeds = range(50)
    fits = [two_segment_fit(X, hinge_series(s)) for s in seeds]
    near = np.mean([abs(f.breakpoint - TAU) <= 5 for f in fits])
    early_ok = np.mean([abs(f.early_slope - 0.01) <= 3 * f.early_slope_se for f in fits])
    late_ok = np.mean([abs(f.late_slope) <= 3 * f.late_slope_se for f in fits])
    # measured over these 50 seeds: 100% within ±5 steps, both slopes within 3 SE in 100%
    assert near >= 0.9
    assert early_ok >= 0.9 and late_ok >= 0.9
    assert all(f.delta_bic > 0 for f in fits)


def test_planted_hinge_is_a_plateau() -> None:
    verdicts = [saturation_verdict(two_segment_fit(X, hinge_series(s))) for s in range(50)]
    rate = np.mean([v.plateau for v in verdicts])
    assert rate >= 0.8  # measured 0.90 here (misses: late |t| ≥ 2 by chance)


@pytest.mark.parametrize(("slope", "sigma"), [(0.005, 0.05), (0.002, 0.3)])
def test_rising_line_is_rarely_a_plateau(slope: float, sigma: float) -> None:
    rates = []
    for seed in range(200):
        rng = np.random.default_rng(seed)
        y = 0.2 + slope * X + rng.normal(0.0, sigma, X.shape)
        rates.append(saturation_verdict(two_segment_fit(X, y)).plateau)
    # measured: 0.0% for (0.005, 0.05) and 1.0% for (0.002, 0.3); BIC alone admits 2.5%
    assert np.mean(rates) <= 0.05


def test_breakpoint_ci_covers_the_truth() -> None:
    cis = [breakpoint_ci(X, hinge_series(s), n_boot=300, seed=s) for s in range(30)]
    assert all(ci.low <= ci.estimate <= ci.high for ci in cis)
    coverage = np.mean([ci.low <= TAU <= ci.high for ci in cis])
    assert coverage >= 0.85  # measured 29/30 here
    assert breakpoint_ci(X, hinge_series(0), seed=1) == breakpoint_ci(X, hinge_series(0), seed=1)


# ------------------------------------------------------------------ verdict


def test_verdict_headroom_from_late_end() -> None:
    fit = two_segment_fit(X, hinge_series(1))
    v = saturation_verdict(fit, y_max=1.0)
    assert v.late_end_value == pytest.approx(float(fit.predict(X[-1])))
    assert v.headroom == pytest.approx(1.0 - v.late_end_value)
    assert v.late_end_value == pytest.approx(0.66, abs=0.03)
    assert saturation_verdict(fit).headroom is None


def test_decline_after_rise_is_not_a_plateau() -> None:
    rng = np.random.default_rng(0)
    y = np.where(X < 50, 0.01 * X, 0.5 - 0.005 * (X - 50)) + rng.normal(0, 0.02, X.shape)
    v = saturation_verdict(two_segment_fit(X, y))
    assert not v.plateau and not v.late_flat
    assert "declining" in v.reason


# --------------------------------------------------------------- edge cases


def test_too_few_steps() -> None:
    fit = two_segment_fit([1, 2, 3, 4, 5], [0.1, 0.2, 0.3, 0.3, 0.3])
    assert fit.status == "too_few_steps" and "too few steps" in fit.note
    assert math.isnan(fit.early_slope) and math.isnan(fit.late_slope)
    v = saturation_verdict(fit, y_max=1.0)
    assert not v.plateau and "too few steps" in v.reason and v.headroom is None
    assert breakpoint_ci([1, 2, 3], [1, 2, 3]).status == "too_few_steps"


def test_constant_series() -> None:
    fit = two_segment_fit(X, np.full(X.shape, 0.25))
    assert fit.status == "constant"
    assert fit.early_slope == 0.0 and fit.late_slope == 0.0 and math.isnan(fit.breakpoint)
    v = saturation_verdict(fit, y_max=1.0)
    assert v.plateau and v.headroom == 0.75


def test_nan_pairs_are_skipped_and_order_does_not_matter() -> None:
    y = hinge_series(5)
    x_nan, y_nan = X.copy(), y.copy()
    y_nan[[3, 50, 77]] = np.nan
    x_nan[10] = np.nan
    keep = ~(np.isnan(x_nan) | np.isnan(y_nan))
    perm = np.random.default_rng(0).permutation(X.size)
    a = two_segment_fit(x_nan[perm], y_nan[perm])
    b = two_segment_fit(X[keep], y[keep])
    assert a.n == 96
    assert a.breakpoint == b.breakpoint
    assert a.late_slope == pytest.approx(b.late_slope, rel=1e-12)


def test_min_segment_bounds_the_search() -> None:
    y = np.minimum(np.arange(10.0), 8.0)  # true break at step 8, one step from the end
    fit = two_segment_fit(np.arange(10.0), y, min_segment=3)
    assert fit.breakpoint == 6.0 and fit.n_late == 3


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="min_segment"):
        two_segment_fit(X, X, min_segment=1)
    with pytest.raises(ValueError, match="inf"):
        two_segment_fit(X, np.where(X == 3, np.inf, X))
    with pytest.raises(ValueError, match="equal length"):
        two_segment_fit(X, X[:-1])
