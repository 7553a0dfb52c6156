"""pass@k / pass^k / mean@k against exact math.comb closed forms."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rolloutlab.algos import (
    PassAtKCI,
    mean_at_k,
    pass_at_k,
    pass_at_k_ci,
    pass_at_k_curve,
    pass_hat_k,
)


def exact_pass_at_k(n: int, c: int, k: int) -> float:
    if k > n:
        return math.nan
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def exact_pass_hat_k(n: int, c: int, k: int) -> float:
    if k > n:
        return math.nan
    return float(Fraction(math.comb(c, k), math.comb(n, k)))


nck = st.integers(0, 60).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n + 3))
)


# ------------------------------------------------------------------ hand values


def test_pass_at_k_hand_value() -> None:
    # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7, abs=1e-12)


def test_pass_hat_k_hand_value() -> None:
    # C(3,2)/C(5,2) = 3/10
    assert pass_hat_k(5, 3, 2) == pytest.approx(0.3, abs=1e-12)


def test_scalar_inputs_return_python_float() -> None:
    assert isinstance(pass_at_k(5, 2, 2), float)
    assert isinstance(pass_hat_k(5, 2, 2), float)
    assert isinstance(mean_at_k(5, 2, 2), float)
    assert isinstance(pass_at_k(np.int64(5), 2, 2), float)


def test_edge_cases() -> None:
    assert math.isnan(pass_at_k(3, 1, 4))  # k > n
    assert math.isnan(pass_at_k(0, 0, 1))
    assert pass_at_k(5, 5, 3) == 1.0  # c == n
    assert pass_at_k(5, 3, 3) == 1.0  # n - c < k
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(7, 3, 1) == pytest.approx(3 / 7)  # pass@1 = c/n
    assert pass_hat_k(5, 1, 2) == 0.0  # c < k
    assert pass_hat_k(5, 5, 5) == 1.0
    assert math.isnan(pass_hat_k(2, 2, 3))
    assert math.isnan(mean_at_k(2, 1, 3))
    assert math.isnan(mean_at_k(0, 0, 1))
    assert mean_at_k(8, 2, 5) == 0.25


def test_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        pass_at_k(5, 6, 1)
    with pytest.raises(ValueError):
        pass_at_k(5, -1, 1)
    with pytest.raises(ValueError):
        pass_at_k(5, 2, 0)
    with pytest.raises(ValueError):
        pass_at_k(5.5, 2, 1)
    assert pass_at_k(5.0, 2.0, 2) == pytest.approx(0.7)  # integral floats are fine


# ------------------------------------------------------------- against math.comb


@given(nck)
@settings(max_examples=400, deadline=None)
def test_pass_at_k_matches_comb(t: tuple[int, int, int]) -> None:
    n, c, k = t
    got, want = pass_at_k(n, c, k), exact_pass_at_k(n, c, k)
    if math.isnan(want):
        assert math.isnan(got)
    else:
        assert got == pytest.approx(want, rel=1e-12, abs=1e-15)


@given(nck)
@settings(max_examples=400, deadline=None)
def test_pass_hat_k_matches_comb(t: tuple[int, int, int]) -> None:
    n, c, k = t
    got, want = pass_hat_k(n, c, k), exact_pass_hat_k(n, c, k)
    if math.isnan(want):
        assert math.isnan(got)
    else:
        assert got == pytest.approx(want, rel=1e-11, abs=1e-300)


def test_vectorised_matches_scalar_grid() -> None:
    n, c, k = np.meshgrid(np.arange(0, 13), np.arange(0, 13), np.arange(1, 15), indexing="ij")
    ok = c <= n
    n, c, k = n[ok], c[ok], k[ok]
    got = pass_at_k(n, c, k)
    got_hat = pass_hat_k(n, c, k)
    got_mean = mean_at_k(n, c, k)
    assert got.shape == n.shape
    for i in range(n.size):
        ni, ci, ki = int(n[i]), int(c[i]), int(k[i])
        np.testing.assert_allclose(got[i], exact_pass_at_k(ni, ci, ki), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(got_hat[i], exact_pass_hat_k(ni, ci, ki), rtol=1e-11)
        np.testing.assert_allclose(got_mean[i], ci / ni if ki <= ni else np.nan)


def test_broadcasting_shapes() -> None:
    out = pass_at_k(np.array([[10], [20]]), np.array([[1], [5]]), np.array([1, 2, 3]))
    assert out.shape == (2, 3)
    np.testing.assert_allclose(out[1, 2], exact_pass_at_k(20, 5, 3), rtol=1e-12)


# ---------------------------------------------------------------- large-n stability


@pytest.mark.parametrize(("c", "k"), [(1, 1), (3, 10), (500, 100), (990, 5), (10, 990), (0, 7)])
def test_large_n_1000_exact(c: int, k: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = pass_at_k(1000, c, k)
        got_hat = pass_hat_k(1000, c, k)
    assert got == pytest.approx(exact_pass_at_k(1000, c, k), rel=1e-12, abs=1e-300)
    assert got_hat == pytest.approx(exact_pass_hat_k(1000, c, k), rel=1e-10, abs=1e-300)


def test_huge_n_no_overflow_and_small_values_keep_precision() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # pass@1 with one success in a million: 1e-6 exactly, which 1 - prod loses
        assert pass_at_k(10**6, 1, 1) == pytest.approx(1e-6, rel=1e-12)
        v = pass_at_k(10**6, 3, 10)
        assert v == pytest.approx(exact_pass_at_k(10**6, 3, 10), rel=1e-10)
        assert pass_hat_k(10**6, 10**6 - 1, 2) == pytest.approx(1 - 2e-6, rel=1e-12)


# ------------------------------------------------------------------------- curve


def test_curve_matches_pass_at_k_per_k() -> None:
    rng = np.random.default_rng(1)
    n = rng.integers(3, 40, size=25)
    c = rng.integers(0, n + 1)
    per = pass_at_k_curve(n, c, per_group=True)
    assert per.shape == (25, int(n.min()))
    for k in range(1, int(n.min()) + 1):
        np.testing.assert_allclose(per[:, k - 1], pass_at_k(n, c, k), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(pass_at_k_curve(n, c), per.mean(axis=0))


def test_curve_scalar_and_monotone() -> None:
    curve = pass_at_k_curve(5, 2)
    np.testing.assert_allclose(curve, [0.4, 0.7, 0.9, 1.0, 1.0], atol=1e-12)
    assert np.all(np.diff(curve) >= -1e-15)
    assert pass_at_k_curve([3, 0], [1, 0]).shape == (0,)


# ---------------------------------------------------------------------------- CI


def test_ci_bootstrap_properties() -> None:
    rng = np.random.default_rng(0)
    n = np.full(200, 8)
    c = rng.binomial(8, rng.uniform(0, 1, size=200))
    res = pass_at_k_ci(n, c, 2)
    assert isinstance(res, PassAtKCI)
    assert res.n_groups == 200
    assert res.mean == pytest.approx(float(np.mean(pass_at_k(n, c, 2))))
    assert res.low < res.mean < res.high
    # the bootstrap SE of a mean is close to s / sqrt(G)
    analytic = pass_at_k_ci(n, c, 2, method="normal")
    assert res.se == pytest.approx(analytic.se, rel=0.15)
    assert analytic.low == pytest.approx(analytic.mean - 1.959964 * analytic.se, rel=1e-6)
    assert pass_at_k_ci(n, c, 2, seed=0) == res  # seeded
    assert pass_at_k_ci(n, c, 2, seed=1) != res
    wider = pass_at_k_ci(n, c, 2, level=0.99)
    assert wider.high - wider.low > res.high - res.low


def test_ci_edge_cases() -> None:
    empty = pass_at_k_ci([1, 2], [0, 1], 3)  # every group has k > n
    assert empty.n_groups == 0 and math.isnan(empty.mean) and math.isnan(empty.low)
    one = pass_at_k_ci([5, 1], [2, 1], 2)  # second group dropped (k > n)
    assert one.n_groups == 1 and one.low == one.high == pytest.approx(0.7) and one.se == 0.0
    one_normal = pass_at_k_ci([5], [2], 2, method="normal")
    assert math.isnan(one_normal.se) and math.isnan(one_normal.low)
    with pytest.raises(ValueError):
        pass_at_k_ci([5], [2], 2, level=1.0)
