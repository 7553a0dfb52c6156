"""SFT throughput beside TRL's ``SFTTrainer``: the same tiny model, the same tokenized rows,
the same batches, tokens per second (issue 23, "Speed").

    pip install 'rolloutlab[bench]'        # trl (checked with trl 1.16.0); torch pinned first
    python benchmarks/bench_sft.py [--steps 8] [--warmup 2] [--rounds 3] [--threads 2]

The data: think-act rows exported (``rolloutlab.io.export_run``) from random-policy
episodes of ``guess-number-v0``, tokenized once by rolloutlab (``tokenize_row``) and handed
to TRL already tokenized (``input_ids`` + ``completion_mask``), so both sides train on the
very same token ids and loss mask.

Matched on both sides: rolloutlab's randomly initialised tiny Qwen2 (seed 0, the demo's
shape), fp32 on the CPU, ``--threads`` torch threads; 64 rows per optimizer step, no
accumulation, AdamW at lr 1e-3, grad-norm clip 1.0, loss on the reply tokens only, no
logging, saving or evaluation inside the timed steps.  Not matched: the row order (each
shuffles its own way) and TRL's loss normalisation (its own); each pads its batch its way.

Tokens per second = tokens of the timed steps (padding excluded) / their wall time, the
first ``--warmup`` steps of each run left out.  The two run one after the other, A B A B,
``--rounds`` times, so a change in the machine's load hits both; the figures are the
medians of the rounds and their spread (min .. max).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch

BATCH, LR = 64, 1e-3


def make_data(root: Path, rows: int) -> Path:
    """An export folder of think-act rows from random-policy episodes."""
    from rolloutlab.agent import LoopConfig
    from rolloutlab.evaluate import EvalConfig, run_eval
    from rolloutlab.io import ExportOptions, export_run

    episodes = rows // 3 + 1  # about three turns each
    loop = LoopConfig(max_tokens_per_turn=1, concurrency=256)
    run_eval(EvalConfig(env="guess-number-v0", out=root / "run", policy="random", episodes=episodes, split="train",
                        loop=loop))
    export_run(root / "run", root / "ex", ExportOptions(kind="think-act"))
    return root / "ex"


def ours(data: Path, steps: int, warmup: int, threads: int, out: Path) -> tuple[float, bool]:
    from rolloutlab.train import load_sft_config, sft

    cfg = load_sft_config("sft_tiny", [f"batch_size={BATCH}", "epochs=1", f"lr={LR}", f"threads={threads}",
                                       "progress=false", "save_initial=true"])
    marks: list[tuple[float, float]] = []  # (end time, tokens) per step

    def on_step(step: int, total: int, m: dict[str, float]) -> None:
        marks.append((time.perf_counter(), m["sft/tokens"]))

    res = sft(cfg, data, out, on_step=on_step)
    assert res.steps >= steps + warmup, (res.steps, steps + warmup)
    timed = marks[warmup - 1: steps + warmup] if warmup else marks[: steps]
    toks = sum(t for _, t in timed[1:]) if warmup else sum(t for _, t in timed)
    secs = timed[-1][0] - timed[0][0]
    from safetensors.torch import load_file

    a, b = (load_file(str(c / "model.safetensors")) for c in (res.checkpoints[0], res.checkpoints[-1]))
    return toks / secs, any(not torch.equal(a[k], b[k]) for k in a)


def trl_tokenizer() -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from rolloutlab.agent import guess_number_tokenizer

    vocab = {w: i for i, w in enumerate(guess_number_tokenizer().vocab)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>")


def theirs(data: Path, steps: int, warmup: int, threads: int, out: Path) -> tuple[float, bool]:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import SFTConfig, SFTTrainer

    from rolloutlab.agent import guess_number_tokenizer, tiny_model
    from rolloutlab.train import load_rows, tokenize_row

    torch.set_num_threads(threads)
    tok = guess_number_tokenizer()
    rows, _ = load_rows(data)
    exs = [tokenize_row(tok, r["prompt"], r["action"], max_seq_len=256) for r in rows]
    ds = Dataset.from_list([{"input_ids": e.input_ids, "completion_mask": e.mask} for e in exs])
    model = tiny_model(tok.vocab_size, seed=0)
    before = [p.detach().clone() for p in model.parameters()]
    ends: list[float] = []
    tokens: list[int] = []

    class Clock(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            ends.append(time.perf_counter())

    args = SFTConfig(output_dir=str(out), use_cpu=True, seed=0, max_steps=steps + warmup,
                     per_device_train_batch_size=BATCH, gradient_accumulation_steps=1, learning_rate=LR,
                     max_grad_norm=1.0, lr_scheduler_type="constant", warmup_steps=0, completion_only_loss=True,
                     report_to="none", save_strategy="no", logging_strategy="no", disable_tqdm=True,
                     dataloader_num_workers=0, max_length=256)
    trainer = SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=trl_tokenizer(), callbacks=[Clock()])
    collate = trainer.data_collator

    def counting(batch: list[dict[str, Any]]) -> Any:
        tokens.append(sum(len(b["input_ids"]) for b in batch))
        return collate(batch)

    trainer.data_collator = counting
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.train()
    # step i (0-based) ends at ends[i]; its batch is tokens[i]
    secs = ends[steps + warmup - 1] - ends[warmup - 1] if warmup else ends[steps - 1] - ends[0]
    toks = sum(tokens[warmup: steps + warmup]) if warmup else sum(tokens[1:steps])
    changed = any(not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters(), strict=True))
    return toks / secs, changed


def main() -> None:
    try:
        import trl
    except ImportError:
        raise SystemExit("bench_sft needs trl: pip install 'rolloutlab[bench]' (torch==2.13.0 first)") from None
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    got: dict[str, list[float]] = {"rolloutlab": [], "trl": []}
    trained: dict[str, bool] = {}
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        with contextlib.redirect_stderr(io.StringIO()):
            data = make_data(root, BATCH * (args.steps + args.warmup + 1))
        for r in range(args.rounds):
            for name, fn in (("rolloutlab", ours), ("trl", theirs)):
                tps, changed = fn(data, args.steps, args.warmup, args.threads, root / f"{name}{r}")
                got[name].append(tps)
                trained[name] = changed
    med = {k: statistics.median(v) for k, v in got.items()}
    print(f"think-act SFT, tiny Qwen2, guess-number-v0 rows, {BATCH} rows per step, {args.threads} threads, "
          f"TRL {trl.__version__}; {args.steps} timed steps per run, {args.rounds} rounds A B A B")
    for k, v in got.items():
        print(f"  {k:<11} {med[k]:9.0f} tokens/s  (spread {min(v):.0f} .. {max(v):.0f})   parameters changed: {trained[k]}")
    print(f"  ratio rolloutlab / TRL: {med['rolloutlab'] / med['trl']:.2f}×   (target ≥ 1.0)")


if __name__ == "__main__":
    main()
