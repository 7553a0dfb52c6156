"""The HF policy's per-draw sampling: inverse-CDF sampling checked by hand and against the
distribution, and a keyed request's reply independent of its batch (issue 21 item 2)."""

from __future__ import annotations

import asyncio
import random

import pytest
import torch

from rolloutlab.agent._hf import HFPolicy, draw_seed, inverse_cdf, tiny_model
from rolloutlab.agent._policies import RandomPolicy
from rolloutlab.agent._tokenizers import guess_number_tokenizer
from rolloutlab.agent._types import GenerateRequest


def test_inverse_cdf_by_hand() -> None:
    # cdf 0.25, 0.25, 0.75, 1.0: [0, 0.25) -> 0, [0.25, 0.75) -> 2 (id 1 has no mass), [0.75, 1) -> 3
    probs = torch.tensor([[0.25, 0.0, 0.5, 0.25]] * 6)
    u = torch.tensor([0.0, 0.2499, 0.25, 0.7499, 0.75, 0.99999])
    assert inverse_cdf(probs, u).tolist() == [0, 0, 2, 2, 3, 3]
    # unnormalised rows (a top-p tail zeroed) scale u by the row's total
    assert inverse_cdf(torch.tensor([[1.0, 3.0, 0.0]]), torch.tensor([0.3])).tolist() == [1]
    # u * total reaching the total (rounding) never picks a trailing id without mass
    assert inverse_cdf(torch.tensor([[0.5, 0.5, 0.0, 0.0]]), torch.tensor([1.0])).tolist() == [1]


def test_inverse_cdf_follows_the_distribution() -> None:
    """Frequencies of 40,000 draws against the probabilities (the slow, obvious check): each
    within 5 standard errors."""
    g = torch.Generator().manual_seed(0)
    p = torch.tensor([0.05, 0.0, 0.25, 0.1, 0.6])
    n = 40_000
    idx = inverse_cdf(p.expand(n, -1), torch.rand(n, generator=g, dtype=torch.float64))
    freq = torch.bincount(idx, minlength=5).double() / n
    se = (p.double() * (1 - p.double()) / n).sqrt()
    assert freq[1] == 0
    assert ((freq - p.double()).abs() <= 5 * se + 1e-12).all(), freq


def test_draw_seed_is_stable_and_spreads() -> None:
    assert draw_seed(0, "1-g0-0/0") == draw_seed(0, "1-g0-0/0")
    seeds = {draw_seed(s, f"1-g{g}-{i}/{t}") for s in (0, 1) for g in range(4) for i in range(4) for t in range(4)}
    assert len(seeds) == 2 * 4 * 4 * 4 and all(0 <= x < 2**63 for x in seeds)


def _policy(seed: int = 3) -> HFPolicy:
    tok = guess_number_tokenizer()
    return HFPolicy(tiny_model(tok.vocab_size, seed=0), tok, seed=seed)


def test_a_keyed_reply_does_not_depend_on_its_batch() -> None:
    """Before: one generator for the whole batch, so a row's sample depended on the rows
    before it and on their number."""
    pol = _policy()
    prompt = tuple(pol.tok.render([{"role": "user", "content": "0 7"}], add_generation_prompt=True))
    longer = (*prompt, 5, 1, 2, 12, 1, 3)

    def req(key: str, p: tuple[int, ...] = prompt, k: int = 6) -> GenerateRequest:
        return GenerateRequest(messages=(), prompt_ids=p, max_tokens=k, sample_key=key)

    alone = pol.generate_batch([req("e/0")])[0]
    crowd = pol.generate_batch([req(f"x{i}/0", longer, 9) for i in range(7)] + [req("e/0")])[-1]
    first = pol.generate_batch([req("e/0"), req("y/0", longer)])[0]
    assert alone.token_ids == crowd.token_ids == first.token_ids
    assert alone.logprobs == pytest.approx(crowd.logprobs, abs=1e-5)
    # another key or another seed: other draws (over 8 keys at least one differs)
    others = pol.generate_batch([req(f"e{i}/0") for i in range(8)])
    assert any(o.token_ids != alone.token_ids for o in others)
    pol.reseed(4)
    assert any(g.token_ids != alone.token_ids for g in pol.generate_batch([req("e/0")] * 1 + [req(f"e{i}/0") for i in range(7)]))
    pol.reseed(3)
    assert pol.generate_batch([req("e/0")])[0].token_ids == alone.token_ids


def test_the_random_policy_draws_per_key_not_per_call_order() -> None:
    pol = RandomPolicy(seed=1)
    reqs = [GenerateRequest(messages=({"role": "user", "content": "a b c d e f g h"},), prompt_ids=None,
                            max_tokens=4, sample_key=f"e{i}/0") for i in range(12)]

    async def answers(order: list[int]) -> dict[int, str]:
        return {i: (await pol.generate(reqs[i])).text for i in order}

    forward = asyncio.run(answers(list(range(12))))
    shuffled = list(range(12))
    random.Random(0).shuffle(shuffled)
    assert asyncio.run(answers(shuffled)) == forward
    assert len(set(forward.values())) > 1
