"""Trainer speed on the demo configuration: steps per minute and the share of step time
spent outside model forward/backward passes (target < 15 %, goal 10 %).

    python benchmarks/bench_train.py [--steps 20] [--threads 2]

Forward/backward time counts the sampler's batched forwards (``timing/generation_s``) and the
trainer's log-prob/backward passes (``timing/forward_backward_s``); everything else
(agent loop, environment, advantages, optimizer step, writing the step's rollouts, logging) is
overhead.  The comparison with TRL's GRPOTrainer is ``bench_train_trl.py``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    from rolloutlab.train import load_config
    from rolloutlab.train._loop import Trainer

    cfg = load_config("demo", [f"trainer.total_steps={args.steps + args.warmup}", "trainer.save_every=0",
                               f"trainer.threads={args.threads}", "logging.progress=false"])
    with tempfile.TemporaryDirectory() as d:
        t = Trainer(cfg, Path(d) / "run")
        rows = []
        t0 = time.perf_counter()
        for i in range(args.steps + args.warmup):
            m = t.train_step()
            if i >= args.warmup:
                rows.append(m)
        wall = time.perf_counter() - t0
    step = [float(r["timing/step_s"] or 0) for r in rows]
    model = [float(r["timing/generation_s"] or 0) + float(r.get("timing/forward_backward_s") or 0) for r in rows]
    share = 1 - sum(model) / sum(step)
    print(f"demo config: {cfg.batch_size} episodes/step, {args.threads} threads, {args.steps} steps timed")
    print(f"step time: median {statistics.median(step):.3f} s -> {60 / statistics.median(step):.1f} steps/min")
    print(f"outside model forward/backward: {share:.1%} (target < 15 %, goal 10 %)")
    print(f"wall incl. warm-up: {wall:.1f} s")


if __name__ == "__main__":
    main()
