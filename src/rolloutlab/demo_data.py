"""Bundled demo input: a small verl-style dump written locally (nothing is downloaded).

``python -m rolloutlab.demo_data DIR`` writes ``DIR/verl_rollouts/{1..30}.jsonl`` (groups of
8 samples of 16 prompts whose solve probability rises then flattens) and a verl file-logger
metrics file beside it.  It stands in for ``rolloutlab demo`` until the trainer exists.
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import orjson


def write_demo(dest: Path, *, steps: int = 30, prompts: int = 16, n: int = 8, seed: int = 0) -> Path:
    rng = random.Random(seed)
    out = dest / "verl_rollouts"
    out.mkdir(parents=True, exist_ok=True)
    difficulty = [rng.uniform(-2.5, 2.5) for _ in range(prompts)]
    metrics = []
    for step in range(1, steps + 1):
        skill = 2.0 * (1 - math.exp(-step / 8))
        lines = []
        for i, d in enumerate(difficulty):
            p = 1 / (1 + math.exp(-(skill - d)))
            prompt = f"system\nYou are a careful agent.\nuser\nSolve task {i}: reach the goal.\nassistant\n"
            for _ in range(n):
                ok = rng.random() < p
                turns = rng.randint(1, 3)
                output = "\nuser\n<observation>moved</observation>\nassistant\n".join(
                    f"<think>step {t}</think><action>move</action>" for t in range(turns))
                lines.append(orjson.dumps({"input": prompt, "output": output, "gts": "goal",
                                           "score": 1.0 if ok else 0.0, "step": step, "acc": ok}))
        (out / f"{step}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
        metrics.append(orjson.dumps({"step": step, "data": {"actor/entropy": 1.2 * math.exp(-step / 15) + 0.2,
                                                             "actor/lr": 1e-6, "critic/score/mean": skill / 2}}))
    (out / "metrics.jsonl").write_bytes(b"\n".join(metrics) + b"\n")
    return out


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "out/demo/sources")
    print(write_demo(target))
