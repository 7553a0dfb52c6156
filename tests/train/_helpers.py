"""Shared pieces of the trainer tests: tiny configs and hand-made samples."""

from __future__ import annotations

import random
from collections.abc import Sequence

from rolloutlab.train import TrainConfig, load_config
from rolloutlab.train._data import TrainSample

TINY = [
    "model.tiny=true",
    "model.hidden_size=32",
    "model.intermediate_size=64",
    "rollout.max_tokens_per_turn=1",
    "trainer.threads=1",
    "logging.progress=false",
    "logging.tensorboard=false",
]


def tiny_config(*overrides: str, preset: str | None = None) -> TrainConfig:
    return load_config(preset, [*TINY, *overrides])


def samples(n: int, *, seed: int = 0, vocab: int = 16, groups: int = 2) -> list[TrainSample]:
    """Random samples shaped like guess-number episodes: a prompt, then sampled tokens
    (mask 1, a negative sampler log-prob) between observation tokens (mask 0, log-prob 0)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        prompt = [2, rng.randrange(4, 14), rng.randrange(4, 14), 1, 3]
        resp: list[int] = []
        mask: list[int] = []
        lps: list[float] = []
        for _turn in range(rng.randrange(1, 4)):
            resp += [rng.randrange(4, 14)]
            mask += [1]
            lps += [-rng.uniform(0.5, 3.0)]
            resp += [1, 2, rng.choice([14, 15]), 1, 3]
            mask += [0] * 5
            lps += [0.0] * 5
        adv = [rng.uniform(-1, 1)] * len(resp)
        out.append(TrainSample(prompt, resp, mask, lps, [a if m else 0.0 for a, m in zip(adv, mask, strict=True)], group=i % groups, episode=i))
    return out


def grads(model: object) -> list:
    return [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]  # type: ignore[attr-defined]


def flat(xs: Sequence) -> list[float]:
    return [float(v) for x in xs for v in x.flatten()]
