"""Labelling speed: labelled steps per second for both methods, and the share of the time
spent in model calls, on a small demo-like run.

The run: ``--episodes`` guess-number-v0 episodes of the demo's tiny model (randomly
initialised, 16-token vocabulary, the demo's shape), written by ``rolloutlab eval``.  Then
``rolloutlab label`` with ``--method mc`` (``--n`` continuations per step) and
``--method action-prob`` (the demo's replies carry no thought: one scoring pass per step),
each timed from a warm process (torch and transformers already imported, the model loaded
once before).  ``model share`` is the time inside sampling and scoring loops over the wall
time of the labelling.

Usage: ``python benchmarks/bench_label.py [--episodes 64 --n 8 --concurrency 256]``
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--max-tokens", type=int, default=1)
    args = ap.parse_args()
    warnings.simplefilter("ignore", UserWarning)  # eval's "mostly invalid actions": an untrained model

    from rolloutlab.agent import (
        HFPolicy,
        LoopConfig,
        guess_number_tokenizer,
        save_model,
        tiny_model,
    )
    from rolloutlab.evaluate import EvalConfig, run_eval
    from rolloutlab.label import LabelConfig, run_label

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        tok = guess_number_tokenizer()
        save_model(tiny_model(tok.vocab_size, seed=0), tok, d / "model")
        HFPolicy.from_pretrained(d / "model")  # warm: imports and the first load are not timed
        loop = LoopConfig(max_tokens_per_turn=args.max_tokens, concurrency=args.concurrency, split="eval")
        run_eval(EvalConfig(env="guess-number-v0", out=d / "run", policy=f"hf:{d / 'model'}",
                            episodes=args.episodes, loop=loop))
        print(f"run: {args.episodes} guess-number-v0 episodes of the tiny model (max {args.max_tokens} tokens/turn)")
        print(f"{'method':<12} {'steps':>6} {'seconds':>8} {'steps/s':>8} {'model share':>12}")
        for method in ("mc", "action-prob"):
            cfg = LabelConfig(run=d / "run", out=d / f"out-{method}", method=method, policy=f"hf:{d / 'model'}",
                              n=args.n, loop=LoopConfig(max_tokens_per_turn=args.max_tokens,
                                                        concurrency=args.concurrency))
            t0 = time.perf_counter()
            r = run_label(cfg)
            wall = time.perf_counter() - t0
            print(f"{method:<12} {r.steps:>6} {wall:>8.2f} {r.steps / wall:>8.1f} {r.model_seconds / wall:>12.2f}")


if __name__ == "__main__":
    main()
