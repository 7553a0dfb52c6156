"""benchmarks/bench_gpu_train.py does not rot: its figures are the documented formulas, its
commands are valid configurations, and its CPU smoke mode runs both trainings and reports."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from rolloutlab.train import load_config

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_gpu_train.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_gpu_train", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_figures_by_hand() -> None:
    rows = [
        {"timing/step_s": 10.0, "timing/generation_s": 4.0, "timing/update_s": 5.0, "perf/sampled_tokens": 400.0,
         "perf/update_tokens": 5000.0, "perf/padding_share": 0.05, "perf/peak_memory_gb": 7.0},
        {"timing/step_s": 12.0, "timing/generation_s": 4.0, "timing/update_s": 6.0, "perf/sampled_tokens": 800.0,
         "perf/update_tokens": 6000.0, "perf/padding_share": 0.07, "perf/peak_memory_gb": 9.0},
    ]
    s = _bench().summary(rows, params=10**9, param_bytes=2 * 10**9, concurrency=64, peak_tflops=1000.0, hbm_tbps=4.0)
    assert s["gen_tokens_per_s"] == pytest.approx(150.0)  # median of 100 and 200
    assert s["decode_bound_tokens_per_s"] == pytest.approx(64 * 4e12 / 2e9)  # 128,000
    assert s["gen_of_bound"] == pytest.approx(150 / 128_000)
    assert s["update_tokens_per_s"] == pytest.approx(1000.0)
    assert s["mfu"] == pytest.approx(6 * 1e9 * 1000 / 1e15)
    assert s["outside_share"] == pytest.approx((0.1 + 2 / 12) / 2)
    assert s["peak_memory_gb"] == 9.0
    assert s["step_s"] == 11.0


def test_commands_are_valid_configs(tmp_path: Path) -> None:
    b = _bench()
    args = argparse.Namespace(smoke=False, steps=4, tasks=8, n=8, turns=6, tokens=48, micro_tokens=32768)
    cmds = b.commands(args, tmp_path, tmp_path / "runs")
    assert set(cmds) == {"one process", "FSDP, torchrun x1"}
    for cmd in cmds.values():
        words = cmd[cmd.index("train") + 1 : cmd.index("--out")]
        cfg = load_config(words[0], words[1:])
        assert cfg.model.device == "cuda" and cfg.model.dtype == "bfloat16"
        assert cfg.actor.micro_batch_tokens == 32768 and cfg.rollout.backend == "local"
    assert "--nproc-per-node=1" in cmds["FSDP, torchrun x1"]


@pytest.mark.slow
def test_smoke_runs_both_trainings(capsys: pytest.CaptureFixture[str]) -> None:
    assert _bench().main(["--smoke"]) == 0
    out = capsys.readouterr().out
    for name in ("one process", "FSDP, torchrun x1"):
        line = next(x for x in out.splitlines() if x.startswith(name))
        assert "s/step" in line and not line.split(": ")[1].startswith("-"), out
    assert out.count("  generation ") == 2 and "generation - tok/s" not in out, out
