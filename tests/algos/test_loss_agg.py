"""verl agg_loss modes against row-by-row loops."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rolloutlab.algos import (
    agg_loss,
    seq_mean_token_mean,
    seq_mean_token_sum,
    seq_mean_token_sum_norm,
    token_mean,
)


def _case(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    loss = rng.normal(size=(6, 9))
    mask = np.zeros((6, 9))
    for b, n in enumerate(rng.integers(0, 10, size=6)):
        mask[b, :n] = 1
    loss[mask == 0] = np.nan  # padding garbage must not leak
    return loss, mask


@pytest.mark.parametrize("seed", range(5))
def test_modes_match_loops(seed: int) -> None:
    loss, mask = _case(seed)
    mask[0, :] = 0  # always one fully masked sequence: left out of the count
    rows = [[loss[b, t] for t in range(9) if mask[b, t]] for b in range(6)]
    live = [r for r in rows if r]
    flat = [x for row in rows for x in row]
    assert token_mean(loss, mask) == pytest.approx(sum(flat) / len(flat) if flat else 0.0)
    assert seq_mean_token_sum(loss, mask) == pytest.approx(
        sum(sum(r) for r in live) / len(live) if live else 0.0
    )
    assert seq_mean_token_mean(loss, mask) == pytest.approx(
        sum(sum(r) / len(r) for r in live) / len(live) if live else 0.0
    )
    assert seq_mean_token_sum_norm(loss, mask) == pytest.approx(sum(flat) / 9)
    assert seq_mean_token_sum_norm(loss, mask, norm_constant=4096) == pytest.approx(
        sum(flat) / 4096
    )
    assert agg_loss(loss, mask, "seq-mean-token-mean") == seq_mean_token_mean(loss, mask)
    assert agg_loss(loss, mask, "seq-mean-token-sum-norm", norm_constant=3.0) == pytest.approx(
        sum(flat) / 3
    )


def test_modes_differ_on_unequal_lengths() -> None:
    # long sequence of 1s, short sequence of 1s: token-mean 1, seq-mean-token-sum 2.5
    loss = np.ones((2, 4))
    mask = np.array([[1, 1, 1, 1], [1, 0, 0, 0]])
    assert token_mean(loss, mask) == 1.0
    assert seq_mean_token_sum(loss, mask) == 2.5
    assert seq_mean_token_mean(loss, mask) == 1.0
    assert seq_mean_token_sum_norm(loss, mask) == 5 / 4


def test_fully_masked_sequence_left_out_as_in_verl_0_6_1() -> None:
    # issue 7 item 15: verl >= 0.6.1 drops a sequence with no unmasked token from the
    # sequence count (verl/trainer/ppo/core_algos.py::agg_loss, seq_mask = n_b > 0);
    # counting it would give 0.5 and 1.0.
    loss = np.array([[1.0, 1.0], [5.0, 5.0]])
    mask = np.array([[1, 1], [0, 0]])
    assert agg_loss(loss, mask, "seq-mean-token-mean") == 1.0
    assert agg_loss(loss, mask, "seq-mean-token-sum") == 2.0
    assert agg_loss(loss, mask, "token-mean") == 1.0
    assert agg_loss(loss, mask, "seq-mean-token-sum-norm") == 1.0  # 2 / L


def test_nan_padding_never_leaks_in_any_mode() -> None:
    # departure from verl: its per-sequence sum(loss * mask) turns NaN padding into NaN
    loss = np.array([[2.0, np.nan, np.inf], [np.nan, np.nan, np.nan], [4.0, 6.0, np.nan]])
    mask = np.array([[1, 0, 0], [0, 0, 0], [1, 1, 0]])
    assert agg_loss(loss, mask, "token-mean") == 4.0
    assert agg_loss(loss, mask, "seq-mean-token-sum") == 6.0
    assert agg_loss(loss, mask, "seq-mean-token-mean") == 3.5
    assert agg_loss(loss, mask, "seq-mean-token-sum-norm") == 4.0


def test_empty_and_invalid() -> None:
    z = np.zeros((2, 3))
    assert token_mean(z, z) == 0.0
    assert seq_mean_token_mean(z, z) == 0.0
    assert seq_mean_token_sum(z, z) == 0.0
    assert seq_mean_token_sum(np.zeros((0, 3)), np.zeros((0, 3))) == 0.0
    assert seq_mean_token_mean(np.zeros((0, 3)), np.zeros((0, 3))) == 0.0
    assert not math.isnan(seq_mean_token_mean(np.full((1, 2), np.nan), np.zeros((1, 2))))
    with pytest.raises(ValueError):
        token_mean(np.zeros(3), np.zeros(3))
    with pytest.raises(ValueError):
        agg_loss(z, z, "bogus")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        seq_mean_token_sum_norm(z, z, norm_constant=0)
