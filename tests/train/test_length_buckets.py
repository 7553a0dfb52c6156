"""Micro-batches under a token budget (``actor.micro_batch_tokens``): little padding, and the
loss and gradient of the whole mini-batch unchanged."""

from __future__ import annotations

import copy

import pytest
import torch

from rolloutlab.train._data import TrainSample
from rolloutlab.train._update import collate, length_buckets, padding_share

from ._helpers import samples
from .test_update import _sampler_consistent, _updater


def _of_length(n: int, i: int) -> TrainSample:
    return TrainSample([2, 3], [4] * (n - 2), [1] * (n - 2), [-1.0] * (n - 2), [0.5] * (n - 2), group=0, episode=i)


def test_buckets_by_hand() -> None:
    ss = [_of_length(n, i) for i, n in enumerate([5, 12, 7, 12, 3])]
    got = length_buckets(ss, 24)
    # longest first: 12 + 12 fill 2 x 12 = 24; a third row would make 36; then 7, 5, 3 in 3 x 7 = 21
    assert [[s.episode for s in c] for c in got] == [[1, 3], [2, 0, 4]]
    assert padding_share(got) == pytest.approx(1 - 39 / 45)
    # a sample over the budget runs alone
    assert [[s.episode for s in c] for c in length_buckets(ss, 4)] == [[1], [3], [2], [0], [4]]


def test_padding_share_counts_the_collated_padding() -> None:
    ss = samples(16, seed=3)
    for chunks in (length_buckets(ss, 60), [ss[:5], ss[5:]]):
        slow = [collate(c, 0) for c in chunks]
        pad = sum(int((b.attn == 0).sum()) for b in slow) / sum(b.attn.numel() for b in slow)
        assert padding_share(chunks) == pytest.approx(pad, abs=1e-12)


def test_every_sample_once_and_less_padding() -> None:
    ss = samples(32, seed=5)
    got = length_buckets(ss, 70)
    assert sorted(s.episode for c in got for s in c) == list(range(32))
    assert all(len(c) * max(len(s.prompt_ids) + len(s.response_ids) for s in c) <= 70 for c in got)
    assert padding_share(got) < padding_share([ss[:8], ss[8:16], ss[16:24], ss[24:]])


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_bucketed_loss_and_gradient_equal_the_whole_batch(mode: str) -> None:
    ss = samples(16, seed=7)
    a = _updater(f"actor.loss_agg_mode={mode}", "actor.micro_batch_size=0", "actor.entropy_coef=0.01")
    b = _updater(f"actor.loss_agg_mode={mode}", "actor.micro_batch_tokens=60", "actor.entropy_coef=0.01")
    b.model.load_state_dict(a.model.state_dict())
    ss = _sampler_consistent(a, ss)
    assert len(length_buckets(ss, 60)) > 2  # the budget does cut the mini-batch
    ma = a.update(copy.deepcopy(ss))
    mb = b.update(copy.deepcopy(ss))
    assert mb["actor/pg_loss"] == pytest.approx(ma["actor/pg_loss"], abs=1e-6)
    assert mb["actor/entropy"] == pytest.approx(ma["actor/entropy"], abs=1e-6)
    assert mb["perf/padding_share"] < ma["perf/padding_share"]
    for x, y in zip(a.model.parameters(), b.model.parameters(), strict=True):
        assert x.grad is not None and y.grad is not None
        assert torch.allclose(x.grad, y.grad, rtol=0, atol=1e-6), float((x.grad - y.grad).abs().max())
