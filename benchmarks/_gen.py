"""Synthetic verl-style dumps for the benchmarks (deterministic, no downloads)."""

from __future__ import annotations

import random
from pathlib import Path

import orjson

WORDS = ["the", "agent", "searches", "for", "the", "answer", "then", "calls", "a", "tool", "and", "reads", "observation", "state", "action", "reward", "think", "plan", "file", "module", "entity", "search", "result", "page", "click", "buy", "item", "cart", "done"]


def text(rng: random.Random, n_chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < n_chars:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n_chars]


def make_verl_dump(dest: Path, *, steps: int = 100, trajs: int = 512, group: int = 8, chars: int = 4000, seed: int = 0) -> Path:
    """``dest/{1..steps}.jsonl``, ``trajs`` lines each, groups of ``group`` identical inputs."""
    dest.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    prompts = [f"system\nYou are a helpful agent.\nuser\nTask {i}: " + text(rng, 600) + "\nassistant\n" for i in range(trajs // group * 4)]
    for step in range(1, steps + 1):
        p_success = min(0.9, 0.2 + 0.6 * step / steps)
        lines = []
        for g in range(trajs // group):
            prompt = prompts[(step * 7 + g) % len(prompts)]
            for _ in range(group):
                ok = rng.random() < p_success
                lines.append(orjson.dumps({
                    "input": prompt,
                    "output": text(rng, chars - 600),
                    "gts": "answer",
                    "score": 1.0 if ok else 0.0,
                    "step": step,
                    "acc": ok,
                    "pred": "answer" if ok else "other",
                }))
        (dest / f"{step}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return dest
