"""Padding in the update on a multi-turn preset, before and after ``actor.micro_batch_tokens``
(issue 24, part 2).

    python benchmarks/bench_padding.py [--preset textcraft_scalinginter] [--tasks 8] [--n 8] [--repeats 3]

One step's episodes are collected once with the tiny model (``model.tiny=true``, the byte
tokenizer: episodes range from a few turns to the cap), their training samples built, and
the same samples are trained on from the same weights with the preset's micro-batches
(``actor.micro_batch_size``, samples in collection order: "before") and with a token budget
per micro-batch (``actor.micro_batch_tokens``, longest first: "after").  Printed: the share of
the forward/backward positions that are padding, the micro-batches, and the update's time
(median of ``--repeats``, the two alternating, weights restored before each), with the
largest difference of the two updates' gradients.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time
import warnings
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="textcraft_scalinginter")
    ap.add_argument("--tasks", type=int, default=8, help="rollout.tasks_per_step")
    ap.add_argument("--n", type=int, default=4, help="rollout.n")
    ap.add_argument("--turns", type=int, default=10, help="rollout.max_turns cap of the collection")
    ap.add_argument("--tokens", type=int, default=8, help="rollout.max_tokens_per_turn")
    ap.add_argument("--budget", type=int, default=None,
                    help="actor.micro_batch_tokens (default: micro_batch_size x the median sample length)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message="Seems like `optimizer.step", category=UserWarning)  # stubbed below
    import torch
    from rich.progress import Progress

    from rolloutlab.train import load_config
    from rolloutlab.train._data import compute_advantages
    from rolloutlab.train._loop import Trainer
    from rolloutlab.train._update import Updater, length_buckets, padding_share

    over = ["model.tiny=true", f"rollout.tasks_per_step={args.tasks}", f"rollout.n={args.n}",
            f"rollout.max_tokens_per_turn={args.tokens}", "actor.mini_batches=1", "actor.ppo_epochs=1",
            "actor.kl_coef=0", "trainer.total_steps=1", "trainer.save_every=0", "trainer.check_memory=false",
            f"trainer.threads={args.threads}", "logging.progress=false", "logging.tensorboard=false"]
    cfg = load_config(args.preset, over)
    with tempfile.TemporaryDirectory() as d:
        t = Trainer(cfg, Path(d) / "run")
        t0 = time.perf_counter()
        groups, _, _ = t.collect(1, args.turns)
        samples, _ = compute_advantages(cfg, groups)
        print(f"{args.preset}, tiny model: {len(samples)} samples collected in {time.perf_counter() - t0:.0f} s")
        lengths = sorted(len(s.prompt_ids) + len(s.response_ids) for s in samples)
        print(f"  lengths: min {lengths[0]}, median {lengths[len(lengths) // 2]}, max {lengths[-1]} tokens")
        micro = cfg.actor.micro_batch_size or len(samples)
        budget = args.budget or micro * lengths[len(lengths) // 2]
        state = copy.deepcopy(t.model.state_dict())
        setups = {
            f"before: micro_batch_size={micro}": cfg.with_overrides([f"actor.micro_batch_size={micro}"]),
            f"after: micro_batch_tokens={budget}": cfg.with_overrides([f"actor.micro_batch_tokens={budget}"]),
        }
        chunks = {
            next(iter(setups)): [samples[k : k + micro] for k in range(0, len(samples), micro)],
            list(setups)[1]: length_buckets(samples, budget),
        }
        times: dict[str, list[float]] = {k: [] for k in setups}
        grads: dict[str, list[torch.Tensor]] = {}
        with Progress(transient=True) as bar:
            task = bar.add_task("updates", total=args.repeats * len(setups))
            for _ in range(args.repeats):
                for name, c in setups.items():
                    t.model.load_state_dict(state)
                    up = Updater(c, t.model, pad_id=t.updater.pad_id, suppress=t.updater.suppress, env_max_turns=t.spec.max_turns)
                    up.optimizer.step = lambda *a, **k: None  # type: ignore[method-assign]  # the same weights each time
                    s0 = time.perf_counter()
                    up.update(copy.deepcopy(samples))
                    times[name].append(time.perf_counter() - s0)
                    grads[name] = [p.grad.detach().clone() for p in t.model.parameters() if p.grad is not None]
                    bar.advance(task)
    for name in setups:
        print(f"  {name:<34} padding {padding_share(chunks[name]):5.1%}  {len(chunks[name]):3d} passes  "
              f"update {statistics.median(times[name]):6.2f} s")
    a, b = grads.values()
    diff = max(float((x - y).abs().max()) for x, y in zip(a, b, strict=True))
    print(f"  largest gradient difference: {diff:.1e}")


if __name__ == "__main__":
    main()
