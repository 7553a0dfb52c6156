"""Entropy trend, collapse detection and the R = −a·exp(H) + b law."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rolloutlab.analysis import detect_collapse, entropy_trend, fit_entropy_law

STEPS = np.arange(100.0)


# -------------------------------------------------------------------- trend


def test_trend_matches_linregress_and_edge_means() -> None:
    rng = np.random.default_rng(0)
    h = 2.0 - 0.01 * STEPS + rng.normal(0, 0.05, STEPS.shape)
    perm = rng.permutation(STEPS.size)
    trend = entropy_trend(STEPS[perm], h[perm])
    ref = stats.linregress(STEPS, h)
    assert trend.slope == pytest.approx(ref.slope, rel=1e-10)
    assert trend.slope_se == pytest.approx(ref.stderr, rel=1e-8)
    assert trend.first == pytest.approx(h[:10].mean()) and trend.last == pytest.approx(
        h[-10:].mean()
    )
    assert trend.relative_drop == pytest.approx((h[:10].mean() - h[-10:].mean()) / h[:10].mean())


def test_trend_of_a_short_series_has_no_se() -> None:
    trend = entropy_trend([0, 1], [1.0, 0.5])
    assert math.isnan(trend.slope_se) and trend.relative_drop == 0.5  # one step at each edge


# ----------------------------------------------------------------- collapse


def ref_collapse(h: np.ndarray, frac: float, patience: int) -> int | None:
    """Plain loop: first index that starts `patience` points below frac × mean(first 10%)."""
    threshold = frac * h[: max(1, math.ceil(0.1 * len(h)))].mean()
    for i in range(len(h) - patience + 1):
        if all(v < threshold for v in h[i : i + patience]):
            return i
    return None


def test_decay_to_two_percent_is_detected_at_the_crossing() -> None:
    h = 1.5 * np.exp(-math.log(50) / 99 * STEPS)  # ends at 2% of its start
    c = detect_collapse(STEPS, h)
    assert c.collapsed
    # crossing of 10% × mean(first 10 steps), solved in closed form
    crossing = math.ceil(math.log(1.5 / c.threshold) / (math.log(50) / 99))
    assert c.step == crossing == ref_collapse(h, 0.1, 3)
    assert h[int(c.step)] < c.threshold <= h[int(c.step) - 1]


@pytest.mark.parametrize("seed", range(5))
def test_noisy_decay_matches_the_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    h = 1.5 * np.exp(-0.04 * STEPS) * np.exp(rng.normal(0, 0.3, STEPS.shape))
    c = detect_collapse(STEPS + 1000, h, frac=0.1, patience=4)
    ref = ref_collapse(h, 0.1, 4)
    assert c.step == (None if ref is None else 1000 + ref)


def test_flat_series_and_single_dip_do_not_collapse() -> None:
    rng = np.random.default_rng(1)
    flat = 1.2 + rng.normal(0, 0.05, STEPS.shape)
    assert detect_collapse(STEPS, flat).step is None
    dip = flat.copy()
    dip[40] = 0.0  # one bad logging step is not a collapse
    assert detect_collapse(STEPS, dip).step is None
    assert detect_collapse(STEPS, dip, patience=1).step == 40.0


def test_collapse_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="frac"):
        detect_collapse(STEPS, STEPS, frac=1.5)
    with pytest.raises(ValueError, match="patience"):
        detect_collapse(STEPS, STEPS, patience=0)


# ---------------------------------------------------------------------- law


def test_entropy_law_recovers_planted_parameters() -> None:
    rng = np.random.default_rng(0)
    a, b = 0.4, 1.1
    h = rng.uniform(0.05, 1.5, 200)
    r = -a * np.exp(h) + b + rng.normal(0, 0.02, h.shape)
    fit = fit_entropy_law(h, r)
    assert fit.status == "ok" and fit.n == 200
    assert abs(fit.a - a) <= 4 * fit.a_se and fit.a == pytest.approx(a, abs=0.01)
    assert abs(fit.b - b) <= 4 * fit.b_se and fit.b == pytest.approx(b, abs=0.02)
    assert fit.ceiling == pytest.approx(fit.b - fit.a)
    assert abs(fit.ceiling - (b - a)) <= 4 * fit.ceiling_se
    ref = stats.linregress(np.exp(h), r)
    assert fit.a_se == pytest.approx(ref.stderr, rel=1e-8)
    assert fit.b_se == pytest.approx(ref.intercept_stderr, rel=1e-8)
    assert fit.r2 == pytest.approx(ref.rvalue**2, rel=1e-10)


def test_entropy_law_ceiling_se_matches_the_design_covariance() -> None:
    rng = np.random.default_rng(2)
    h = rng.uniform(0.1, 1.0, 60)
    r = -0.3 * np.exp(h) + 0.9 + rng.normal(0, 0.05, h.shape)
    fit = fit_entropy_law(h, r)
    design = np.column_stack([np.ones_like(h), np.exp(h)])
    beta, *_ = np.linalg.lstsq(design, r, rcond=None)
    s2 = np.sum((r - design @ beta) ** 2) / (len(h) - 2)
    g = np.array([1.0, 1.0])  # R* = intercept + slope·exp(0)
    se = math.sqrt(g @ (s2 * np.linalg.inv(design.T @ design)) @ g)
    assert fit.ceiling == pytest.approx(beta[0] + beta[1], rel=1e-10)
    assert fit.ceiling_se == pytest.approx(se, rel=1e-8)


def test_entropy_law_edge_cases_say_why() -> None:
    const = fit_entropy_law(np.full(10, 0.7), np.linspace(0, 1, 10))
    assert const.status == "constant_entropy" and "not identified" in const.note
    assert math.isnan(const.a) and math.isnan(const.ceiling)
    few = fit_entropy_law([0.5, np.nan, 0.2], [0.1, 0.2, 0.3])
    assert few.status == "too_few_points" and few.n == 2
    with pytest.raises(ValueError, match="per-token"):
        fit_entropy_law([1.0, 800.0, 2.0], [0.1, 0.2, 0.3])
