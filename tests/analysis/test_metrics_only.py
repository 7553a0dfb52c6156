"""Analysis from per-step metrics alone: a SkyRL console log (gz, with noise), a
TensorBoard event file, a W&B CSV export and a verl console log, each with a planted
saturation (reward rises to step 10, then stays flat) and a planted entropy decay."""

from __future__ import annotations

import gzip
import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import rolloutlab
from rolloutlab.analysis import (
    analyze,
    analyze_run,
    compare_metric_runs,
    frame_from_records,
    metric_step_table,
)
from rolloutlab.analysis._metrics_only import lag1_from_differences, window_diff_ci
from rolloutlab.cli import main
from tests._skyrl_log import NOISE, console_record

STEPS = range(1, 31)
KNEE = 10


def planted(step: int, rng: random.Random, *, top: float = 0.6) -> tuple[float, float]:
    """(reward, entropy): reward 0.2 + (top − 0.2)·min(step, 10)/10 plus noise, entropy 1.2·0.93^step."""
    r = 0.2 + (top - 0.2) * min(step, KNEE) / KNEE + rng.gauss(0, 0.01)
    return r, 1.2 * 0.93 ** step + rng.gauss(0, 0.002)


def skyrl_log(path: Path, *, seed: int = 0, top: float = 0.6) -> dict[int, tuple[float, float]]:
    rng = random.Random(seed)
    truth = {}
    text = []
    for s in STEPS:
        r, h = planted(s, rng, top=top)
        truth[s] = (r, h)
        data = {"reward/avg_raw_reward": r, "reward/avg_pass_at_4": min(1.0, r + 0.2), "policy/policy_entropy": h,
                "loss/avg_kl": 0.001 * s, "policy/grad_norm": 0.5, "generate/avg_num_tokens": 300.0 + s,
                "trainer/global_step": s}
        text.append(console_record(s, data, s))
        text += NOISE[s % len(NOISE):][:2]
    path.write_bytes(gzip.compress("".join(text).encode()))
    return truth


def check_saturation(a: Any, sources: dict[str, str]) -> None:
    assert a.metrics_only
    assert a.metric_sources["mean_reward"] == sources["mean_reward"]
    assert a.metric_sources["entropy"] == sources["entropy"]
    sat = a.saturation["mean_reward"]
    assert sat["fit"].status == "ok"
    assert abs(sat["fit"].breakpoint - KNEE) <= 2
    assert sat["verdict"].plateau
    assert any(f.kind == "plateau" for f in a.findings)
    assert a.entropy is not None and a.entropy["trend"].slope < 0
    assert a.entropy["law"].status == "ok"
    for section in ("ledger", "passk", "replay"):
        assert "needs trajectories" in a.skipped[section]


def test_skyrl_console_log_through_the_metrics_only_path(tmp_path: Path) -> None:
    src = tmp_path / "arm_a.log.gz"
    truth = skyrl_log(src)
    rolloutlab.ingest([src], tmp_path / "store")
    a = analyze_run(rolloutlab.open_store(tmp_path / "store"), "arm_a")
    check_saturation(a, {"mean_reward": "reward/avg_raw_reward", "entropy": "policy/policy_entropy"})
    # the per-step table is the logged values, four decimals as SkyRL printed them
    assert a.steps.loc[7, "mean_reward"] == float(f"{truth[7][0]:.4f}")
    assert a.metric_sources["pass@4"] == "reward/avg_pass_at_4"
    assert a.metric_sources["kl"] == "loss/avg_kl"
    assert a.metric_sources["mean_response_tokens"] == "generate/avg_num_tokens"
    assert "pass@4" in a.saturation
    assert a.success_rule == "unknown: no success metric logged"  # SkyRL logs no success rate
    json.dumps(a.to_dict(), default=str)


def test_cli_analyze_metrics_only_and_vs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_src, b_src = tmp_path / "a" / "train.log.gz", tmp_path / "b" / "train.log.gz"
    a_src.parent.mkdir()
    b_src.parent.mkdir()
    skyrl_log(a_src, seed=1, top=0.6)
    skyrl_log(b_src, seed=2, top=0.8)
    store = tmp_path / "store"
    rolloutlab.ingest([a_src.parent, b_src.parent], store)
    capsys.readouterr()
    assert main(["analyze", "a", "--store", str(store), "--json", "--vs", "b"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metrics_only"] and out["metric_sources"]["mean_reward"] == "reward/avg_raw_reward"
    rows = {(r["metric"], r["arm"]): r for r in out["comparison"]["metrics"]["table"]}
    st = rolloutlab.open_store(store)
    logged = {rid: dict(st.sql("SELECT step, value FROM metrics WHERE run_id = ? AND name = 'reward/avg_raw_reward'",
                                params=[rid]).fetchall()) for rid in ("a", "b")}
    w = out["comparison"]["metrics"]["window"]
    assert w == 6  # a fifth of 30 steps
    last = {rid: np.mean([logged[rid][s] for s in range(31 - w, 31)]) for rid in logged}
    assert rows[("mean_reward", "b")]["diff"] == pytest.approx(last["b"] - last["a"])
    assert rows[("mean_reward", "b")]["diff_low"] > 0.1  # planted gap 0.2, noise 0.01
    assert main(["analyze", "a", "--store", str(store), "--vs", "b"]) == 0
    text = capsys.readouterr().out
    assert "needs trajectories" in text and "Arms on logged metrics" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_tensorboard_metrics_only(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tests.importers.test_tensorboard import _write_events

    rng = random.Random(3)
    scalars = []
    for s in STEPS:
        r, h = planted(s, rng)
        scalars += [(s, "critic/score/mean", r), (s, "actor/entropy", h), (s, "actor/grad_norm", 1.0)]
    _write_events(tmp_path / "tb" / "run1", scalars)
    rolloutlab.ingest([tmp_path / "tb" / "run1"], tmp_path / "store")
    a = analyze_run(rolloutlab.open_store(tmp_path / "store"), "run1")
    check_saturation(a, {"mean_reward": "critic/score/mean", "entropy": "actor/entropy"})


def test_wandb_csv_metrics_only(tmp_path: Path) -> None:
    rng = random.Random(4)
    lines = ["_step,train/reward,train/entropy,train/success_rate,_runtime"]
    for s in STEPS:
        r, h = planted(s, rng)
        lines.append(f"{s},{r},{h},{min(1.0, r + 0.1)},{s * 10.5}")
    p = tmp_path / "wandb_export.csv"
    p.write_text("\n".join(lines) + "\n")
    rolloutlab.ingest([p], tmp_path / "store")
    a = analyze_run(rolloutlab.open_store(tmp_path / "store"), "wandb_export")
    check_saturation(a, {"mean_reward": "train/reward", "entropy": "train/entropy"})
    assert a.metric_sources["success_rate"] == "train/success_rate"
    assert "success_rate" in a.saturation and "train/success_rate" in a.success_rule


def test_verl_console_log_metrics_only(tmp_path: Path) -> None:
    rng = random.Random(5)
    lines = ["(main_task pid=123) Training Progress:   3%|▎ 1/30"]
    for s in STEPS:
        r, h = planted(s, rng)
        lines.append(f"(main_task pid=123) step:{s} - critic/score/mean:{r:.6f} - actor/entropy:{h:.6f} - "
                     f"response_length/mean:{400 + s}.0")
    p = tmp_path / "verl_run" / "train.log"
    p.parent.mkdir()
    p.write_text("\n".join(lines) + "\n")
    rolloutlab.ingest([p], tmp_path / "store")
    st = rolloutlab.open_store(tmp_path / "store")
    rid = next(iter(st.manifest["runs"]))
    a = analyze_run(st, rid)
    check_saturation(a, {"mean_reward": "critic/score/mean", "entropy": "actor/entropy"})
    assert a.metric_sources["mean_response_tokens"] == "response_length/mean"


def test_metric_step_table_aliases() -> None:
    wide = pd.DataFrame({"critic/rewards/mean": [0.1, 0.2], "critic/score/mean": [0.3, np.nan],
                         "train/entropy": [1.0, 0.9], "reward/avg_pass_at_8": [0.5, 0.6], "other": [1, 2]},
                        index=pd.Index([3, 4], name="step"))
    t = metric_step_table(wide)
    # verl's score wins over rewards (listed first), even with a missing value
    assert t.attrs["sources"] == {"mean_reward": "critic/score/mean", "entropy": "train/entropy",
                                  "pass@8": "reward/avg_pass_at_8"}
    assert t.loc[3, "mean_reward"] == 0.3 and math.isnan(t.loc[4, "mean_reward"])
    assert list(t.columns) == ["mean_reward", "entropy", "pass@8"]
    ev = metric_step_table(pd.DataFrame({"eval/all/avg_score": [0.4], "eval/all/pass_at_5": [0.7],
                                         "eval/gsm8k/avg_score": [0.4]}, index=pd.Index([10], name="step")))
    assert ev.attrs["sources"] == {"mean_reward": "eval/all/avg_score", "pass@5": "eval/all/pass_at_5"}


def test_no_canonical_metric_says_so() -> None:
    f = frame_from_records([], metrics={1: {"foo": 1.0}, 2: {"foo": 2.0}})
    a = analyze(f)
    assert a.metrics_only and a.saturation == {} and not a.findings
    assert "no canonical name" in a.skipped["metrics"] or "has a canonical name" in a.skipped["metrics"]
    assert "no reward" in a.skipped["saturation"]


def test_lag1_from_differences() -> None:
    rng = np.random.default_rng(0)
    e = rng.normal(size=20_000)
    x = np.zeros_like(e)
    for i in range(1, len(e)):
        x[i] = 0.5 * x[i - 1] + e[i]
    assert abs(lag1_from_differences(x + np.linspace(0, 50, len(x))) - 0.5) < 0.03  # a trend does not bias it
    assert lag1_from_differences(rng.normal(size=20_000)) < 0.03
    assert lag1_from_differences(np.arange(4.0)) == 0.0


@pytest.mark.parametrize(("phi", "lo", "hi"), [(0.0, 0.93, 0.99), (0.5, 0.92, 0.98)])
def test_window_diff_ci_coverage(phi: float, lo: float, hi: float) -> None:
    """The simulation behind the coverage figures in compare_metric_runs' docstring (1,000
    runs here): a saturating trend plus AR(1) noise, windows of 6 of 30 steps."""
    rng = np.random.default_rng(11)
    n, w = 30, 6
    trend = np.minimum(np.arange(n) / 10, 1.0) * 2
    true = -trend[-w:].mean()

    def ar() -> np.ndarray:
        e = rng.normal(size=n + 50)
        x = np.zeros(n + 50)
        for i in range(1, n + 50):
            x[i] = phi * x[i - 1] + e[i]
        return x[50:]

    hits = 0
    for _ in range(1000):
        _, low, high = window_diff_ci(ar() + trend, ar(), w)
        hits += low <= true <= high
    assert lo <= hits / 1000 <= hi


def test_compare_metric_runs_by_hand() -> None:
    base = frame_from_records([], metrics={s: {"reward/mean": 0.5} for s in range(1, 11)})
    arm = frame_from_records([], metrics={s: {"reward/mean": 0.5 + 0.01 * s} for s in range(1, 11)})
    mc = compare_metric_runs([base, arm], ["base", "arm"], window=3)
    r = mc.table.set_index(["metric", "arm"]).loc[("mean_reward", "arm")]
    assert r["first"] == pytest.approx(0.52) and r["last"] == pytest.approx(0.59)
    assert r["diff"] == pytest.approx(0.09) and r["first_steps"] == "1–3" and r["last_steps"] == "8–10"
    # by hand: base has no variance; arm's last 3 are 0.58, 0.59, 0.60 (sd 0.01), a straight
    # line, so its differences are constant and rho = 0: se = 0.01/sqrt(3), df = 2
    half = 4.302652729911275 * 0.01 / 3 ** 0.5
    assert r["diff_low"] == pytest.approx(0.09 - half) and r["diff_high"] == pytest.approx(0.09 + half)
