"""Shared pieces of the trainer tests: tiny configs and hand-made samples."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
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


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run_ranks(script: str, args: Sequence[str], *, world: int = 2, timeout: float = 300) -> list[str]:
    """Run ``python -c script *args`` as ``world`` ranks of one process group on this machine
    (the environment ``torchrun`` sets: RANK, WORLD_SIZE, MASTER_ADDR/PORT); the CPU ranks use
    gloo.  Returns each rank's output; a rank that fails fails the test with its output."""
    port = free_port()
    procs = []
    for rank in range(world):
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
               "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank), "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, "-c", script, *args], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=timeout)
            outs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for rank, (p, out) in enumerate(zip(procs, outs, strict=True)):
        assert p.returncode == 0, f"rank {rank} failed:\n{out}"
    return outs
