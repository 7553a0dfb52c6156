"""The grouped disagreement equals estimator_disagreement called group by group."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rolloutlab.algos import estimator_disagreement, estimator_disagreement_by_group


@pytest.mark.parametrize("seed", range(6))
def test_matches_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, n_groups = 400, 9
    g = rng.integers(0, n_groups - 1, n)  # the last group stays empty
    x = np.round(rng.normal(size=n), 1)  # rounding makes ties, for the ranks
    y = x * rng.choice([1.0, -1.0, 0.5], size=n) + rng.normal(scale=0.1, size=n)
    x[rng.random(n) < 0.1] = np.nan
    y[rng.random(n) < 0.05] = 0.0
    x[g == 3] = 1.0  # a constant group: correlations are undefined
    got = estimator_disagreement_by_group(x, y, g, n_groups)
    for k in range(n_groups):
        want = estimator_disagreement(x[g == k], y[g == k])
        for key, v in want.items():
            w = got[key][k]
            if math.isnan(v):
                assert math.isnan(w), (k, key, w)
            else:
                assert w == pytest.approx(v, abs=1e-12), (k, key)


def test_hand_case() -> None:
    out = estimator_disagreement_by_group([1.0, -1.0, 0.0, 2.0], [1.0, 1.0, 0.5, 2.0], [0, 0, 1, 1], 2)
    assert out["sign_disagreement"].tolist() == [0.5, 0.5]
    assert out["opposite_sign"].tolist() == [0.5, 0.0]
    assert out["max_abs_diff"].tolist() == [2.0, 0.5]


def test_no_complete_pair() -> None:
    out = estimator_disagreement_by_group([np.nan, 1.0], [1.0, np.nan], [0, 1], 2)
    assert out["n"].tolist() == [0.0, 0.0]
    assert np.isnan(out["spearman"]).all() and np.isnan(out["sign_disagreement"]).all()
