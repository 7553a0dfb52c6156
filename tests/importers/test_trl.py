"""TRL GRPOTrainer: completions_{step:05d}.parquet + trainer_state.json.

The fixture is written the way ``GRPOTrainer.log`` writes it: a pandas DataFrame
``{step, prompt, completion, <reward fns>, <extra columns, sorted>, advantage}`` saved
with ``to_parquet``; NaN where a reward function returned None.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rolloutlab
from rolloutlab.io import InputError
from rolloutlab.io.importers import REGISTRY, detect_format

NAN = float("nan")
P1 = "system\nSolve.\nuser\nWhat is 2+3?\nassistant\n"
P2 = "system\nSolve.\nuser\nWhat is 7*6?\nassistant\n"


def _completions(out: Path, step: int, rows: list[dict[str, Any]]) -> Path:
    d = out / "completions"
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"completions_{step:05d}.parquet"
    pd.DataFrame({"step": [step] * len(rows), **{k: [r[k] for r in rows] for k in rows[0]}}).to_parquet(path)
    return path


def _state(path: Path, log_history: list[dict[str, Any]], global_step: int, max_steps: int = 2) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"global_step": global_step, "max_steps": max_steps, "logging_steps": 1,
                                "num_train_epochs": 1, "train_batch_size": 6, "log_history": log_history},
                               indent=2))


def _row(prompt: str, completion: str, acc: float, fmt: float, pred: str, adv: float) -> dict[str, Any]:
    return {"prompt": prompt, "completion": completion, "accuracy_reward": acc, "format_reward": fmt,
            "pred": pred, "advantage": adv}


@pytest.fixture
def trl_run(tmp_path: Path) -> Path:
    out = tmp_path / "Qwen-GRPO"
    _completions(out, 1, [
        _row(P1, "<think>2+3</think>5", 1.0, 1.0, "5", 0.9),
        _row(P1, "4", 0.0, 0.0, "4", -0.5),
        _row(P1, "five", NAN, 0.5, "five", -0.4),     # accuracy_reward returned None
        _row(P2, "42", 1.0, 1.0, "42", 0.0),
        _row(P2, "41", NAN, NAN, "41", 0.0),          # every reward function returned None
        _row(P2, "42.0", 1.0, 0.0, "42.0", 0.0),
    ])
    _completions(out, 2, [
        _row(P1, "5", 1.0, 0.0, "5", 0.0),
        _row(P1, "5", 1.0, 0.0, "5", 0.0),
        _row(P1, "5", 1.0, 0.0, "5", 0.0),
        _row(P2, "42", 1.0, 1.0, "42", 0.0),
        _row(P2, "42", 1.0, 1.0, "42", 0.0),
        _row(P2, "6", 0.0, 1.0, "6", 0.0),
    ])
    history = [
        {"loss": 0.01, "grad_norm": 1.5, "learning_rate": 1e-6, "reward": 1.1, "reward_std": 0.7,
         "rewards/accuracy_reward/mean": 0.75, "rewards/accuracy_reward/std": 0.5,
         "rewards/format_reward/mean": 0.5, "frac_reward_zero_std": 0.0, "kl": 0.0, "entropy": 0.6,
         "completions/mean_length": 12.5, "clip_ratio/region_mean": 0.0, "epoch": 0.5, "step": 1},
        {"eval_loss": 0.02, "eval_reward": 1.4, "eval_runtime": 3.2, "epoch": 0.5, "step": 1},
        {"loss": 0.02, "reward": 1.5, "rewards/accuracy_reward/mean": 0.83, "kl": 0.001,
         "learning_rate": 5e-7, "epoch": 1.0, "step": 2},
        {"train_runtime": 60.0, "train_loss": 0.015, "total_flos": 0.0, "epoch": 1.0, "step": 2},
    ]
    _state(out / "checkpoint-1" / "trainer_state.json", history[:2], 1)
    _state(out / "checkpoint-2" / "trainer_state.json", history, 2)
    (out / "config.json").write_text(json.dumps({"_name_or_path": "Qwen/Qwen2.5-0.5B-Instruct"}))
    return out


def test_detected_in_every_shape(trl_run: Path) -> None:
    for src in (trl_run, trl_run / "completions", trl_run / "completions" / "completions_00001.parquet",
                trl_run / "checkpoint-2", trl_run / "checkpoint-2" / "trainer_state.json"):
        imp = detect_format(src)
        assert imp is not None and imp.name == "trl", src


def test_does_not_claim_verl_dumps(tmp_path: Path, samples: Path) -> None:
    # The real samples of other formats (Inspect logs, NeMo Gym rollouts) are not claimed.
    for sample in [samples, *samples.rglob("*")]:
        assert REGISTRY["trl"].detect(sample) == 0, sample
    d = tmp_path / "rollout"
    d.mkdir()
    (d / "1.jsonl").write_text(json.dumps({"input": "q", "output": "a", "gts": "a", "score": 1.0, "step": 1}) + "\n")
    assert REGISTRY["trl"].detect(d) == 0
    assert REGISTRY["trl"].detect(d / "1.jsonl") == 0
    assert detect_format(d).name == "verl"


def test_trajectories_groups_rewards(trl_run: Path, ingest_one: Any) -> None:
    report, store = ingest_one(trl_run)
    assert report.sources[0].format == "trl"
    assert report.sources[0].counts["trajectories"] == 12
    rows = store.sql(
        "SELECT step, group_id, sample_idx, task_id, reward, graded, num_turns, reward_components "
        "FROM trajectories ORDER BY step, traj_id").fetchall()
    assert len(rows) == 12
    step1 = [r for r in rows if r[0] == 1]
    # Groups: identical prompt within the step, in order.
    assert len({r[1] for r in step1}) == 2
    assert [r[2] for r in step1] == [0, 1, 2, 0, 1, 2]
    # The same prompt is the same task across steps.
    assert {r[3] for r in rows if r[0] == 1} == {r[3] for r in rows if r[0] == 2}
    rewards = [r[4] for r in step1]
    assert rewards[:4] == [2.0, 0.0, 0.5, 2.0]
    assert rewards[4] is None and step1[4][5] is False    # all reward functions returned None
    assert rewards[5] == 1.0
    assert [r[5] for r in step1] == [True, True, True, True, False, True]
    # NaN components are left out, not zero.
    assert dict(step1[2][7]) == {"format_reward": 0.5}
    assert dict(step1[0][7]) == {"accuracy_reward": 1.0, "format_reward": 1.0}
    assert {r[6] for r in rows} == {1}


def test_texts_extras_and_run(trl_run: Path, ingest_one: Any) -> None:
    _, store = ingest_one(trl_run)
    prompt, response, extras = store.sql(
        "SELECT prompt, response, extras FROM texts WHERE traj_id = '1/1' AND turn_idx = -1").fetchall()[0]
    assert prompt == P1 and response == "<think>2+3</think>5"
    ex = orjson.loads(extras)
    assert ex["advantage"] == pytest.approx(0.9) and ex["pred"] == "5"
    ex5 = orjson.loads(store.sql("SELECT extras FROM texts WHERE traj_id = '1/5' AND turn_idx = -1").fetchall()[0][0])
    assert "reward_when_ungraded" not in ex5     # no reward at all, not a hidden 0
    run = store.sql("SELECT name, model, algorithm, status FROM runs").fetchall()[0]
    assert run == ("Qwen-GRPO", "Qwen/Qwen2.5-0.5B-Instruct", "grpo", "finished")


def test_metrics_from_newest_trainer_state(trl_run: Path, ingest_one: Any) -> None:
    _, store = ingest_one(trl_run)
    m = {(s, st, n): v for s, st, n, v in store.sql("SELECT split, step, name, value FROM metrics").fetchall()}
    assert m[("train", 1, "reward")] == 1.1
    assert m[("train", 1, "rewards/accuracy_reward/mean")] == 0.75
    assert m[("train", 1, "completions/mean_length")] == 12.5
    assert m[("train", 2, "reward")] == 1.5                 # only in checkpoint-2's state
    assert m[("val", 1, "reward")] == 1.4                   # eval_ prefix → val
    assert m[("val", 1, "loss")] == 0.02
    assert m[("train", 2, "train_runtime")] == 60.0
    assert ("train", 1, "eval_reward") not in m
    # Each entry once: the older checkpoint's copy is not read as well.
    assert store.sql("SELECT count(*) FROM metrics WHERE name = 'reward' AND split = 'train' AND step = 1").fetchall()[0][0] == 1


def test_reward_columns_without_trainer_state(tmp_path: Path, ingest_one: Any) -> None:
    d = tmp_path / "out" / "completions"
    d.mkdir(parents=True)
    pd.DataFrame({"step": [3, 3], "prompt": ["p", "p"], "completion": ["a", "b"],
                  "exact": [1.0, 0.0], "pred": ["a", "b"], "n_tokens": [3, 4],
                  "advantage": [0.7, -0.7]}).to_parquet(d / "completions_00003.parquet")
    _, store = ingest_one(d / "completions_00003.parquet")
    rows = store.sql("SELECT reward, reward_components FROM trajectories ORDER BY traj_id").fetchall()
    assert [r[0] for r in rows] == [1.0, 0.0]
    assert dict(rows[0][1]) == {"exact": 1.0}             # n_tokens follows a text column: an extra
    ex = orjson.loads(store.sql("SELECT extras FROM texts WHERE traj_id = '3/1'").fetchall()[0][0])
    assert ex == {"pred": "a", "n_tokens": 3, "advantage": 0.7}


def test_chat_message_columns(tmp_path: Path, ingest_one: Any) -> None:
    msg = pa.struct([("role", pa.string()), ("content", pa.string())])
    table = pa.table({
        "step": pa.array([4], pa.int64()),
        "prompt": pa.array([[{"role": "user", "content": "hi"}]], pa.list_(msg)),
        "completion": pa.array([[{"role": "assistant", "content": "hello"}]], pa.list_(msg)),
        "r": pa.array([0.5]),
        "advantage": pa.array([0.0]),
    })
    (tmp_path / "completions").mkdir()
    pq.write_table(table, tmp_path / "completions" / "completions_00004.parquet")
    _, store = ingest_one(tmp_path / "completions")
    prompt, response = store.sql("SELECT prompt, response FROM texts WHERE turn_idx = -1").fetchall()[0]
    assert json.loads(prompt) == [{"role": "user", "content": "hi"}]
    assert response == "hello"
    assert store.sql("SELECT reward FROM trajectories").fetchall()[0][0] == 0.5


def test_missing_column_is_refused_and_store_unchanged(trl_run: Path, tmp_path: Path, ingest_one: Any) -> None:
    ingest_one(trl_run)
    d = tmp_path / "bad" / "completions"
    d.mkdir(parents=True)
    pd.DataFrame({"step": [1], "prompt": ["p"], "r": [1.0], "advantage": [0.0]}).to_parquet(d / "completions_00001.parquet")
    with pytest.raises(InputError) as e:
        ingest_one(d, format="trl")
    assert e.value.path.endswith("completions_00001.parquet")
    assert "'completion'" in e.value.message
    store = rolloutlab.open_store(tmp_path / "store")
    assert store.sql("SELECT count(*) FROM trajectories").fetchall()[0][0] == 12
    assert len(store.run_ids()) == 1


def test_bad_row_names_file_and_row(tmp_path: Path, ingest_one: Any) -> None:
    d = tmp_path / "completions"
    d.mkdir()
    pd.DataFrame({"step": [1, 1], "prompt": ["p", "p"], "completion": ["a", "b"],
                  "r": [1.0, math.inf], "advantage": [0.0, 0.0]}).to_parquet(d / "completions_00001.parquet")
    with pytest.raises(InputError) as e:
        ingest_one(d)
    assert e.value.path.endswith("completions_00001.parquet") and e.value.line == 2
    assert "finite" in e.value.message


def test_bad_log_history_entry(tmp_path: Path, ingest_one: Any) -> None:
    _state(tmp_path / "ck" / "trainer_state.json", [{"loss": 1.0, "step": 1}, {"loss": 0.5}], 2)
    with pytest.raises(InputError) as e:
        ingest_one(tmp_path / "ck")
    assert e.value.path.endswith("trainer_state.json")
    assert "log_history[1]" in e.value.message and "'step'" in e.value.message
