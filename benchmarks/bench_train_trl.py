"""Training step time beside TRL's ``GRPOTrainer``: the same single-turn task, the same
tiny model and batch, measured in interleaved rounds (issues 9 and 24).

    pip install 'rolloutlab[bench]'        # trl (checked with trl 1.16.0); torch pinned first
    python benchmarks/bench_train_trl.py [--steps 8] [--warmup 2] [--rounds 4] [--threads 2]

The task: ``guess-number-v0`` cut to one turn (``env.kwargs.max_turns=1``, and the agent
loop's cap ``rollout.max_turns=1``: without it an unreadable reply, which the environment does
not count as a guess, got up to three more turns, i.e. more generation and longer update rows
than TRL's one completion per prompt): the prompt ``<user> 0 7 <eos> <assistant>``, one
sampled token, reward 1 when it is the hidden number.

Matched on both sides:
- the model: rolloutlab's randomly initialised tiny Qwen2 (``tiny_model``, seed 0, the demo's
  shape), one copy each, fp32 on the CPU, ``--threads`` torch threads;
- the token ids: TRL gets a local ``PreTrainedTokenizerFast`` (WordLevel) over the same
  16-word vocabulary, so its prompt is the same five ids;
- the batch: 32 prompts × 8 samples = 256 completions of one token per training step, split
  into 4 optimizer steps of 64 (ours: ``actor.mini_batches=4``; TRL:
  ``per_device_train_batch_size=64, steps_per_generation=4``), one pass over them;
- the loss: group-normalised advantages (mean and std), PPO clip 0.2 / 0.28 (clip-higher),
  token-mean aggregation (TRL ``loss_type="dapo"``), no KL, no reference model (TRL
  ``beta=0``), Adam at lr 2e-3, grad-norm clip 1.0, temperature 1.0;
- no logging, saving or evaluation inside the timed steps on either side.

Not matched: each side samples with its own code (TRL: ``model.generate`` over all 16 ids;
rolloutlab: its batched sampler, which never samples the special ids, through the agent loop
and the environment; so the rewards differ), and each recomputes
log-probabilities its own way — that is what is compared.  A "training step" is one
generation batch plus its 4 optimizer steps; TRL's time per step is the wall time between
the ends of its 4th, 8th, ... optimizer steps (a ``TrainerCallback``).

Interleaved: ``--rounds`` rounds, each running both trainers, each in a fresh process (so
neither inherits the other's imports, threads or garbage), in the order AB, BA, AB, ... so
that a change in the machine's load hits both sides alike and neither always goes first.
Printed: each side's median over every timed step, the per-round medians, and the ratio
rolloutlab / TRL as the median of the per-round ratios with their range (min-max) — the
spread says how far load moved the figure.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch

TASKS, N, MINI = 32, 8, 4
PROMPT = "<user> 0 7 <eos> <assistant>"


def ours(steps: int, warmup: int, threads: int) -> tuple[list[float], bool]:
    from rolloutlab.train import load_config
    from rolloutlab.train._loop import Trainer

    cfg = load_config("demo", ["env.kwargs.max_turns=1", "rollout.max_turns=1", f"rollout.tasks_per_step={TASKS}", f"rollout.n={N}",
                               f"actor.mini_batches={MINI}", f"trainer.total_steps={steps + warmup}",
                               "trainer.save_every=0", f"trainer.threads={threads}", "logging.progress=false"])
    with tempfile.TemporaryDirectory() as d:
        t = Trainer(cfg, Path(d) / "run")
        before = [p.detach().clone() for p in t.model.parameters()]
        times = []
        for i in range(steps + warmup):
            s = time.perf_counter()
            t.train_step()
            if i >= warmup:
                times.append(time.perf_counter() - s)
        changed = any(not torch.equal(a, b.detach()) for a, b in zip(before, t.model.parameters(), strict=True))
    return times, changed


def trl_tokenizer() -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from rolloutlab.agent._tokenizers import guess_number_tokenizer

    vocab = {w: i for i, w in enumerate(guess_number_tokenizer().vocab)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>")
    assert tok(PROMPT)["input_ids"] == [2, 4, 11, 1, 3], tok(PROMPT)["input_ids"]
    return tok


def theirs(steps: int, warmup: int, threads: int) -> tuple[list[float], bool]:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rolloutlab.agent._hf import tiny_model
    from rolloutlab.train import load_config

    torch.set_num_threads(threads)
    m = load_config("demo", []).model
    model = tiny_model(16, seed=0, shape=m.tiny_shape)
    tok = trl_tokenizer()
    model.generation_config.pad_token_id, model.generation_config.eos_token_id = 0, 1
    total = (steps + warmup) * TASKS
    data = Dataset.from_list([{"prompt": PROMPT, "target": str(i * 5 % 8)} for i in range(total)])

    def reward(prompts: list[str], completions: list[str], target: list[str], **_: Any) -> list[float]:
        return [1.0 if c.strip() == t else 0.0 for c, t in zip(completions, target, strict=True)]

    ends: list[float] = []

    class Clock(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            ends.append(time.perf_counter())

    before = [p.detach().clone() for p in model.parameters()]
    with tempfile.TemporaryDirectory() as d:
        args = GRPOConfig(
            output_dir=d, use_cpu=True, seed=0, max_steps=(steps + warmup) * MINI,
            per_device_train_batch_size=TASKS * N // MINI, steps_per_generation=MINI, gradient_accumulation_steps=1,
            num_generations=N, num_iterations=1, max_completion_length=1, temperature=1.0,
            beta=0.0, loss_type="dapo", epsilon=0.2, epsilon_high=0.28, scale_rewards="group",
            learning_rate=2e-3, max_grad_norm=1.0, lr_scheduler_type="constant", warmup_steps=0,
            report_to="none", save_strategy="no", logging_strategy="no", disable_tqdm=True,
            dataloader_num_workers=0, shuffle_dataset=False,
        )
        trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=data,
                              processing_class=tok, callbacks=[Clock()])
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):  # its end-of-training summary
            trainer.train()
    marks = [start, *ends[MINI - 1::MINI]]
    times = [b - a for a, b in itertools.pairwise(marks)][warmup:]
    changed = any(not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters(), strict=True))
    return times, changed


SIDES = {"rolloutlab": ours, "trl": theirs}


def run_side(name: str, steps: int, warmup: int, threads: int) -> tuple[list[float], bool]:
    """One side in a fresh interpreter (``--side``); its step times and whether it trained."""
    cmd = [sys.executable, __file__, "--side", name, "--steps", str(steps), "--warmup", str(warmup),
           "--threads", str(threads)]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise SystemExit(f"the {name} side failed (exit {p.returncode}):\n{p.stderr[-3000:]}")
    got = json.loads(p.stdout.strip().splitlines()[-1])
    return [float(x) for x in got["times"]], bool(got["changed"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8, help="timed training steps per side and round")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first, per side and round")
    ap.add_argument("--rounds", type=int, default=4, help="rounds of both sides, alternating which goes first")
    ap.add_argument("--threads", type=int, default=2, help="torch threads of each side")
    ap.add_argument("--side", choices=sorted(SIDES), help=argparse.SUPPRESS)  # internal: run one side, print JSON
    args = ap.parse_args()
    try:
        import trl
    except ImportError:
        raise SystemExit("bench_train_trl needs trl: pip install 'rolloutlab[bench]' (torch==2.13.0 first)") from None
    warnings.filterwarnings("ignore", category=FutureWarning)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    if args.side:
        times, changed = SIDES[args.side](args.steps, args.warmup, args.threads)
        print(json.dumps({"times": times, "changed": changed}))
        return

    from rich.progress import Progress

    got: dict[str, list[float]] = {k: [] for k in SIDES}
    rounds: dict[str, list[float]] = {k: [] for k in SIDES}
    trained = dict.fromkeys(SIDES, True)
    with Progress(transient=True) as bar:
        task = bar.add_task("rounds", total=2 * args.rounds)
        for r in range(args.rounds):
            order = list(SIDES) if r % 2 == 0 else list(SIDES)[::-1]
            for name in order:
                times, changed = run_side(name, args.steps, args.warmup, args.threads)
                got[name] += times
                rounds[name].append(statistics.median(times))
                trained[name] &= changed
                bar.advance(task)

    med = {k: statistics.median(v) for k, v in got.items()}
    ratios = [a / b for a, b in zip(rounds["rolloutlab"], rounds["trl"], strict=True)]
    print(f"one-turn guess-number, tiny Qwen2, {TASKS}x{N} completions, {MINI} optimizer steps per")
    print(f"training step, {args.threads} threads, TRL {trl.__version__}; {args.rounds} interleaved rounds of")
    print(f"{args.steps} timed steps per side (medians)")
    for k in SIDES:
        per = " ".join(f"{x:.3f}" for x in rounds[k])
        print(f"  {k:<11} {med[k]:6.3f} s/step {60 / med[k]:6.1f} steps/min  trained: {trained[k]}")
        print(f"    per round: {per}")
    print(f"  ratio rolloutlab / TRL: {statistics.median(ratios):.2f}x  (rounds {min(ratios):.2f}-{max(ratios):.2f}x;"
          " target <= 1.0)")


if __name__ == "__main__":
    main()
