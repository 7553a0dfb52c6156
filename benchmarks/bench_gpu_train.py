"""Trainer throughput on one GPU: local generation and the update of a model of a real shape
(issue 24, part 3).  Not yet run on a GPU.

    python benchmarks/bench_gpu_train.py [--steps 4] [--tasks 8] [--n 8]   # one CUDA GPU, ~8 min on an H200
    python benchmarks/bench_gpu_train.py --smoke                          # the same flow on the CPU, seconds

The model is Qwen2.5-0.5B's shape (:data:`QWEN25_05B`: 24 layers, hidden 896, vocabulary
151,936, tied embeddings), randomly initialised from a config built here, in bfloat16, saved
to a temporary folder with the byte tokenizer (``rolloutlab_tokenizer.json``): nothing is
downloaded.  It trains with the ``alfworld_gigpo`` preset (``household-v0``, multi-turn) and
``rollout.backend=local`` twice:

1. one process: ``python -m rolloutlab train ...``;
2. FSDP: ``python -m torch.distributed.run --standalone --nproc-per-node=1 -m rolloutlab train
   ... trainer.strategy=fsdp`` (one rank: the sharded code path, not a speed-up).

From each run's ``metrics.jsonl``, steps after the first (warm-up: CUDA context, kernels), it
prints:

- generation tokens/s (sampled tokens / ``timing/generation_s``) against the decode bound of
  a batch: every decode step reads all parameter bytes once, so ``c`` sequences decoding
  together make at most ``c * bandwidth / parameter bytes`` tokens/s (``c`` =
  ``rollout.concurrency``, at most the step's episodes);
- update tokens/s (``perf/update_tokens`` / ``timing/update_s``) and its MFU,
  ``6 * parameters * tokens / time / peak bf16 FLOP/s`` (dense, no sparsity);
- the share of the step outside generation and update (environments, agent loop, advantages,
  logging, writing rollouts);
- the peak GPU memory (``perf/peak_memory_gb``).

Peaks come from :data:`PEAKS` by device name (``--peak-tflops``, ``--hbm-tbps`` override).
Targets (issue 24): update MFU >= 35 %, generation >= 30 % of the decode bound.

``--smoke`` runs both trainings on the CPU with a tiny model of the same family (float32,
gloo) for 2 steps: it checks the flow and the report, not speed (no bound, no MFU).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

QWEN25_05B: dict[str, Any] = {
    "vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
    "num_attention_heads": 14, "num_key_value_heads": 2, "max_position_embeddings": 32768,
    "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "hidden_act": "silu",
    "use_sliding_window": False, "attention_dropout": 0.0,
}
"""Qwen2.5-0.5B's ``config.json`` (architecture keys; the weights are random)."""

TINY: dict[str, Any] = {**QWEN25_05B, "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
                        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                        "max_position_embeddings": 4096}
"""The ``--smoke`` shape."""

PEAKS: dict[str, tuple[float, float]] = {"H200": (989.4, 4.8), "H100": (989.4, 3.35), "A100": (312.0, 2.0)}
"""Device name fragment -> (dense bf16 TFLOP/s, HBM TB/s), SXM parts (NVIDIA data sheets)."""


def build_model(folder: Path, shape: dict[str, Any], dtype: str) -> int:
    """A randomly initialised Qwen2 of ``shape`` saved in ``folder`` with the byte tokenizer;
    returns its parameter count."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from rolloutlab.agent._tokenizers import TOKENIZER_FILE

    cfg = Qwen2Config(**shape, pad_token_id=0, bos_token_id=None, eos_token_id=None)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).to(getattr(torch, dtype))
    model.save_pretrained(folder)
    (folder / TOKENIZER_FILE).write_text(json.dumps({"kind": "byte"}))
    return sum(p.numel() for p in model.parameters())


def overrides(args: argparse.Namespace, folder: Path) -> list[str]:
    dev, dtype = ("cpu", "float32") if args.smoke else ("cuda", "bfloat16")
    return [
        f"model.path={folder}", f"model.dtype={dtype}", f"model.device={dev}", f"trainer.total_steps={args.steps}",
        f"rollout.tasks_per_step={args.tasks}", f"rollout.n={args.n}", f"rollout.max_turns={args.turns}",
        f"rollout.max_tokens_per_turn={args.tokens}", f"rollout.concurrency={args.tasks * args.n}",
        "actor.mini_batches=1", "actor.micro_batch_size=0", f"actor.micro_batch_tokens={args.micro_tokens}",
        "trainer.save_every=0", "trainer.check_memory=false", "logging.progress=false", "logging.tensorboard=false",
        "trainer.threads=1",
    ]


def commands(args: argparse.Namespace, folder: Path, out: Path) -> dict[str, list[str]]:
    train = ["-m", "rolloutlab", "train", "alfworld_gigpo"]
    o = overrides(args, folder)
    return {
        "one process": [sys.executable, *train, *o, "--out", str(out / "plain")],
        "FSDP, torchrun x1": [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1",
                              *train, *o, "trainer.strategy=fsdp", "--out", str(out / "fsdp")],
    }


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """Each step's metrics (the ``metrics`` of each line of ``metrics.jsonl``)."""
    return [json.loads(x)["metrics"] for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]


def summary(rows: Sequence[dict[str, Any]], *, params: int, param_bytes: int, concurrency: int,
            peak_tflops: float | None, hbm_tbps: float | None) -> dict[str, float | None]:
    """The figures of the module docstring from the steady-state steps' metrics (medians of
    per-step values)."""
    def med(f: Any) -> float | None:
        vals = [v for r in rows if (v := f(r)) is not None]
        return statistics.median(vals) if vals else None

    def get(r: dict[str, Any], k: str) -> float:
        return float(r.get(k) or 0.0)

    gen_tps = med(lambda r: get(r, "perf/sampled_tokens") / get(r, "timing/generation_s")
                  if get(r, "timing/generation_s") > 0 else None)
    upd_tps = med(lambda r: get(r, "perf/update_tokens") / get(r, "timing/update_s")
                  if get(r, "timing/update_s") > 0 else None)
    outside = med(lambda r: 1 - (get(r, "timing/generation_s") + get(r, "timing/update_s")) / get(r, "timing/step_s")
                  if get(r, "timing/step_s") > 0 else None)
    bound = concurrency * hbm_tbps * 1e12 / param_bytes if hbm_tbps else None
    mfu = 6 * params * upd_tps / (peak_tflops * 1e12) if (upd_tps and peak_tflops) else None
    return {
        "step_s": med(lambda r: r.get("timing/step_s")),
        "gen_tokens_per_s": gen_tps,
        "decode_bound_tokens_per_s": bound,
        "gen_of_bound": gen_tps / bound if (gen_tps and bound) else None,
        "update_tokens_per_s": upd_tps,
        "mfu": mfu,
        "outside_share": outside,
        "padding_share": med(lambda r: r.get("perf/padding_share")),
        "peak_memory_gb": max((float(r["perf/peak_memory_gb"]) for r in rows if r.get("perf/peak_memory_gb")),
                              default=None),
    }


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def report(name: str, s: dict[str, float | None]) -> None:
    print(f"{name}: {_fmt(s['step_s'], '.2f')} s/step (median after warm-up)")
    print(f"  generation {_fmt(s['gen_tokens_per_s'], ',.0f')} tok/s; decode bound "
          f"{_fmt(s['decode_bound_tokens_per_s'], ',.0f')} tok/s -> {_fmt(s['gen_of_bound'], '.1%')} (target >= 30 %)")
    print(f"  update {_fmt(s['update_tokens_per_s'], ',.0f')} tok/s; MFU {_fmt(s['mfu'], '.1%')} (target >= 35 %);"
          f" padding {_fmt(s['padding_share'], '.1%')}")
    print(f"  outside generation and update {_fmt(s['outside_share'], '.1%')}; "
          f"peak GPU memory {_fmt(s['peak_memory_gb'], '.1f')} GB")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="run on the CPU with a tiny model (checks the flow only)")
    ap.add_argument("--steps", type=int, default=None, help="training steps per run (the first is warm-up)")
    ap.add_argument("--tasks", type=int, default=None, help="rollout.tasks_per_step")
    ap.add_argument("--n", type=int, default=None, help="rollout.n (episodes per task)")
    ap.add_argument("--turns", type=int, default=None, help="rollout.max_turns")
    ap.add_argument("--tokens", type=int, default=None, help="rollout.max_tokens_per_turn")
    ap.add_argument("--micro-tokens", type=int, default=None, help="actor.micro_batch_tokens")
    ap.add_argument("--peak-tflops", type=float, default=None, help="dense bf16 TFLOP/s of the GPU")
    ap.add_argument("--hbm-tbps", type=float, default=None, help="memory bandwidth of the GPU, TB/s")
    ap.add_argument("--only", choices=["plain", "fsdp"], default=None, help="run one of the two trainings")
    args = ap.parse_args(argv)
    big = {"steps": 4, "tasks": 8, "n": 8, "turns": 6, "tokens": 48, "micro_tokens": 16384}
    small = {"steps": 2, "tasks": 2, "n": 2, "turns": 2, "tokens": 4, "micro_tokens": 2048}
    for k, v in (small if args.smoke else big).items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    import torch

    peak, hbm = args.peak_tflops, args.hbm_tbps
    if not args.smoke:
        if not torch.cuda.is_available():
            print("bench_gpu_train needs a CUDA GPU for this Python's torch; --smoke runs the flow on the CPU")
            return 0
        name = torch.cuda.get_device_name(0)
        known = next((v for k, v in PEAKS.items() if k in name), None)
        peak = peak or (known[0] if known else None)
        hbm = hbm or (known[1] if known else None)
        print(f"device: {name}; peak {_fmt(peak, '.0f')} TFLOP/s bf16, {_fmt(hbm, '.2f')} TB/s"
              + ("" if known else " (unknown device: give --peak-tflops and --hbm-tbps)"))
    with tempfile.TemporaryDirectory(prefix="bench_gpu_train") as d:
        folder, out = Path(d) / "model", Path(d) / "runs"
        shape, dtype = (TINY, "float32") if args.smoke else (QWEN25_05B, "bfloat16")
        params = build_model(folder, shape, dtype)
        param_bytes = params * (4 if dtype == "float32" else 2)
        print(f"model: Qwen2 {params / 1e6:.1f} M parameters ({dtype}, random), alfworld_gigpo on household-v0, "
              f"{args.tasks}x{args.n} episodes, <= {args.turns} turns x {args.tokens} tokens, {args.steps} steps")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        for name, cmd in commands(args, folder, out).items():
            if args.only and (args.only == "fsdp") != name.startswith("FSDP"):
                continue
            t0 = time.perf_counter()
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if p.returncode != 0:
                print(f"{name}: failed (exit {p.returncode})\n{p.stderr[-4000:]}")
                return 1
            run = out / ("fsdp" if name.startswith("FSDP") else "plain")
            rows = read_metrics(run)
            steady = rows[1:] or rows
            s = summary(steady, params=params, param_bytes=param_bytes, concurrency=args.tasks * args.n,
                        peak_tflops=None if args.smoke else peak, hbm_tbps=None if args.smoke else hbm)
            report(f"{name} ({time.perf_counter() - t0:.0f} s wall)", s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
