"""ART model folders: trajectories/{split}/{step:04d}.parquet (both Parquet versions
ART has written), the older one-group-a-line JSONL, history.jsonl and model.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rolloutlab
from rolloutlab.io import InputError
from rolloutlab.io.importers import REGISTRY, detect_format

MSG = pa.struct([("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.string()),
                 ("tool_call_id", pa.string()), ("trainable", pa.bool_())])
V1 = pa.schema([("group_index", pa.int64()), ("group_metadata", pa.string()), ("group_metrics", pa.string()),
                ("group_logs", pa.list_(pa.string())), ("reward", pa.float64()), ("metrics", pa.string()),
                ("metadata", pa.string()), ("tools", pa.string()), ("logs", pa.list_(pa.string())),
                ("messages", pa.list_(MSG))])
V2 = pa.schema([("format_version", pa.int16()), ("group_index", pa.int64()), ("trajectory_index", pa.int64()),
                ("group_json", pa.large_string()), ("trajectory_json", pa.large_string()), *V1],
               metadata={b"art.trajectory_parquet.version": b"2"})
TOOLS = json.dumps([{"type": "function", "function": {"name": "search", "parameters": {}}}])


def msg(role: str, content: str | None, *, calls: list[dict[str, Any]] | None = None, call_id: str | None = None,
        trainable: bool = False) -> dict[str, Any]:
    return {"role": role, "content": content, "tool_calls": json.dumps(calls) if calls else None,
            "tool_call_id": call_id, "trainable": trainable}


def search_call(cid: str, q: str) -> list[dict[str, Any]]:
    return [{"id": cid, "type": "function", "function": {"name": "search", "arguments": json.dumps({"q": q})}}]


def conversation(q: str, answer: str) -> list[dict[str, Any]]:
    return [msg("system", "You are an email agent."), msg("user", q),
            msg("assistant", None, calls=search_call("call_1", q), trainable=True),
            msg("tool", "3 emails found", call_id="call_1"),
            msg("assistant", answer, trainable=True)]


def v1_row(group: int, reward: float, q: str, answer: str, **kw: Any) -> dict[str, Any]:
    return {"group_index": group, "group_metadata": None, "group_metrics": None, "group_logs": None,
            "reward": reward, "metrics": json.dumps({"correct": reward > 0.5}), "metadata": json.dumps({"scenario": q}),
            "tools": TOOLS, "logs": ["searched"], "messages": conversation(q, answer), **kw}


@pytest.fixture
def art_model(tmp_path: Path) -> Path:
    model = tmp_path / ".art" / "email-agent" / "models" / "agent-001"
    train = model / "trajectories" / "train"
    train.mkdir(parents=True)
    (model / "trajectories" / "val").mkdir()
    (model / "model.json").write_text(json.dumps({"name": "agent-001", "project": "email-agent",
                                                  "base_model": "Qwen/Qwen2.5-7B-Instruct", "trainable": True}))
    # Step 0, Parquet version 1: two groups of two.
    pq.write_table(pa.Table.from_pylist([
        v1_row(0, 1.0, "Find the invoice", "It is from ACME"),
        v1_row(0, 0.0, "Find the invoice", "No invoice"),
        v1_row(1, 0.5, "Who wrote last?", "Bob"),
        v1_row(1, 0.25, "Who wrote last?", "Alice"),
    ], schema=V1), train / "0000.parquet", compression="zstd")
    # Step 1, Parquet version 2: a group placeholder, and a row whose messages live only in trajectory_json.
    gjson = json.dumps({"metadata": {"scenario_id": "s1"}, "metrics": {"judge": 0.9}, "logs": [], "exceptions": []})
    full = {"messages_and_choices": [
        {"role": "user", "content": "Summarise"},
        {"finish_reason": "stop", "index": 0, "message": {"role": "assistant", "content": "A summary",
                                                          "tool_calls": None}}],
        "reward": 0.75, "metrics": {}, "metadata": {}, "tools": None, "logs": []}
    common = {"format_version": 2, "group_json": gjson, "group_metadata": json.dumps({"scenario_id": "s1"}),
              "group_metrics": json.dumps({"judge": 0.9}), "group_logs": None}
    pq.write_table(pa.Table.from_pylist([
        {**common, **v1_row(0, 1.0, "Find the invoice", "ACME"), "group_index": 0, "trajectory_index": 0,
         "trajectory_json": "{}"},
        {**common, "group_index": 0, "trajectory_index": 1, "trajectory_json": json.dumps(full), "reward": 0.75,
         "metrics": None, "metadata": None, "tools": None, "logs": None, "messages": None},
        {**common, "group_index": 1, "trajectory_index": None, "trajectory_json": None, "reward": None,
         "metrics": None, "metadata": None, "tools": None, "logs": None, "messages": None},
    ], schema=V2), train / "0001.parquet")
    # Validation at step 1.
    pq.write_table(pa.Table.from_pylist([v1_row(0, 1.0, "Find the invoice", "ACME")], schema=V1),
                   model / "trajectories" / "val" / "0001.parquet")
    # Step 2: the older JSONL log, one group per line.
    choice = {"finish_reason": "stop", "index": 0, "logprobs": None,
              "message": {"role": "assistant", "content": "Paris", "tool_calls": None}}
    lines = [{"trajectories": [
        {"reward": 1.0, "metrics": {}, "metadata": {}, "tools": None, "additional_histories": None, "logs": [],
         "messages_and_choices": [{"role": "user", "content": "Capital of France?"}, choice]},
        {"reward": 0.0, "metrics": {}, "metadata": {}, "tools": None, "additional_histories": None, "logs": [],
         "messages_and_choices": [{"role": "user", "content": "Capital of France?"},
                                  {**choice, "message": {"role": "assistant", "content": "Lyon"}}]},
    ]}]
    (train / "0002.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    # Step 3 mid-migration: both files; only the Parquet one is read.
    pq.write_table(pa.Table.from_pylist([v1_row(0, 0.5, "Q3", "A3")], schema=V1), train / "0003.parquet")
    (train / "0003.jsonl").write_text(json.dumps(lines[0]) + "\n")
    (model / "history.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"train/reward": 0.4375, "train/exception_rate": 0.0, "train/reward_std_dev": 0.3, "step": 0,
         "recorded_at": "2025-06-01T10:00:00"},
        {"val/reward": 1.0, "val/correct": 1.0, "step": 1, "recorded_at": "2025-06-01T10:05:00"},
        {"train/loss": 0.12, "train/learning_rate": 5e-6, "step": 1, "recorded_at": "2025-06-01T10:06:00"},
    ]) + "\n")
    return model


def test_detected_in_every_shape(art_model: Path) -> None:
    for src in (art_model, art_model / "trajectories", art_model / "trajectories" / "train",
                art_model / "trajectories" / "train" / "0000.parquet",
                art_model / "trajectories" / "train" / "0002.jsonl"):
        imp = detect_format(src)
        assert imp is not None and imp.name == "art", src


def test_does_not_claim_others(tmp_path: Path, samples: Path) -> None:
    # The real samples of other formats (Inspect logs, NeMo Gym rollouts) are not claimed.
    for sample in [samples, *samples.rglob("*")]:
        assert REGISTRY["art"].detect(sample) == 0, sample
    d = tmp_path / "rollout"
    d.mkdir()
    (d / "1.jsonl").write_text(json.dumps({"input": "q", "output": "a", "score": 1.0, "step": 1}) + "\n")
    assert REGISTRY["art"].detect(d) == 0 and REGISTRY["art"].detect(d / "1.jsonl") == 0
    pq.write_table(pa.table({"prompt": ["p"], "response": ["r"]}), tmp_path / "0001.parquet")
    assert REGISTRY["art"].detect(tmp_path / "0001.parquet") == 0


def test_trajectories_and_groups(art_model: Path, ingest_one: Any) -> None:
    report, store = ingest_one(art_model)
    assert report.sources[0].format == "art"
    assert report.sources[0].counts["trajectories"] == 10   # 4 + 2 + 1 (val) + 2 + 1
    rows = {r[0]: r[1:] for r in store.sql(
        "SELECT traj_id, split, step, group_id, sample_idx, reward, graded, num_turns, tool_calls, task_id "
        "FROM trajectories").fetchall()}
    assert rows["train/0/1"][:7] == ("train", 0, "train:0:0", 0, 1.0, True, 2)
    assert rows["train/0/1"][7] == 1
    assert rows["train/0/4"][2:5] == ("train:0:1", 1, 0.25)
    assert rows["train/0/1"][8] == rows["train/0/2"][8] != rows["train/0/3"][8]   # same prompt, same task
    assert rows["train/1/2"][2:7] == ("train:1:0", 1, 0.75, True, 1)              # from trajectory_json
    assert "train/1/3" not in rows                                                  # the empty group's placeholder
    assert rows["val/1/1"][:2] == ("val", 1)
    assert [rows[f"train/2/{i}"][4] for i in (1, 2)] == [1.0, 0.0]                  # JSONL, group per line
    assert rows["train/2/1"][2] == rows["train/2/2"][2] == "train:2:0"
    assert rows["train/3/1"][4] == 0.5                                              # Parquet wins over JSONL
    assert store.sql("SELECT count(*) FROM trajectories WHERE step = 3").fetchall()[0][0] == 1


def test_messages_to_prompt_turns_tools(art_model: Path, ingest_one: Any) -> None:
    _, store = ingest_one(art_model)
    prompt, response, extras = store.sql(
        "SELECT prompt, response, extras FROM texts WHERE traj_id = 'train/0/1' AND turn_idx = -1").fetchall()[0]
    assert json.loads(prompt) == [{"role": "system", "content": "You are an email agent."},
                                  {"role": "user", "content": "Find the invoice"}]
    assert response == "It is from ACME"
    ex = orjson.loads(extras)
    assert ex["metrics"] == {"correct": True} and ex["metadata"] == {"scenario": "Find the invoice"}
    assert ex["tools"] == ["search"] and ex["logs"] == ["searched"]
    turns = store.sql("SELECT turn_idx, observation, action, tool_calls FROM texts "
                      "WHERE traj_id = 'train/0/1' AND turn_idx >= 0 ORDER BY turn_idx").fetchall()
    assert len(turns) == 2
    assert turns[0][1] is None and turns[0][2] is None
    assert json.loads(turns[0][3]) == [{"name": "search", "arguments": json.dumps({"q": "Find the invoice"}),
                                        "id": "call_1", "result": "3 emails found"}]
    assert turns[1][1] == "3 emails found" and turns[1][2] == "It is from ACME"
    ex2 = orjson.loads(store.sql("SELECT extras FROM texts WHERE traj_id = 'train/1/2' AND turn_idx = -1"
                                 ).fetchall()[0][0])
    assert ex2["group_metadata"] == {"scenario_id": "s1"} and ex2["group_metrics"] == {"judge": 0.9}
    assert store.sql("SELECT response FROM texts WHERE traj_id = 'train/2/2' AND turn_idx = -1"
                     ).fetchall()[0][0] == "Lyon"


def test_history_metrics_and_run(art_model: Path, ingest_one: Any) -> None:
    _, store = ingest_one(art_model)
    m = {(s, st, n): v for s, st, n, v in store.sql("SELECT split, step, name, value FROM metrics").fetchall()}
    assert m == {("train", 0, "reward"): 0.4375, ("train", 0, "exception_rate"): 0.0,
                 ("train", 0, "reward_std_dev"): 0.3, ("val", 1, "reward"): 1.0, ("val", 1, "correct"): 1.0,
                 ("train", 1, "loss"): 0.12, ("train", 1, "learning_rate"): 5e-6}
    run = store.sql("SELECT name, model, config FROM runs").fetchall()[0]
    assert run[:2] == ("agent-001", "Qwen/Qwen2.5-7B-Instruct")
    assert json.loads(run[2])["project"] == "email-agent"


def test_bad_row_names_file_and_row(art_model: Path, tmp_path: Path, ingest_one: Any) -> None:
    ingest_one(art_model)
    bad = tmp_path / "bad" / "models" / "m" / "trajectories" / "train"
    bad.mkdir(parents=True)
    rows = [v1_row(0, 1.0, "q", "a"), v1_row(0, 1.0, "q", "a")]
    rows[1]["messages"][2]["tool_calls"] = "[{not json"
    pq.write_table(pa.Table.from_pylist(rows, schema=V1), bad / "0000.parquet")
    with pytest.raises(InputError) as e:
        ingest_one(bad.parent.parent)
    assert e.value.path == str(bad / "0000.parquet") and e.value.line == 2
    assert "tool_calls" in e.value.message
    store = rolloutlab.open_store(tmp_path / "store")
    assert store.sql("SELECT count(*) FROM trajectories").fetchall()[0][0] == 10


def test_legacy_jsonl_missing_reward(tmp_path: Path, ingest_one: Any) -> None:
    d = tmp_path / "m" / "trajectories" / "train"
    d.mkdir(parents=True)
    (d / "0001.jsonl").write_text(json.dumps({"trajectories": [{"messages_and_choices": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}]}) + "\n")
    with pytest.raises(InputError) as e:
        ingest_one(tmp_path / "m")
    assert e.value.line == 1 and "'reward'" in e.value.message


YAML_LOG = """\
- trajectories:
  - reward: 1.0
    metrics: {}
    metadata: {}
    logs: []
    messages_and_choices:
    - role: user
      content: hi
    - finish_reason: stop
      index: 0
      message:
        role: assistant
        content: hello
  metadata: {}
  exceptions: []
"""


def test_oldest_yaml_log(tmp_path: Path, ingest_one: Any) -> None:
    d = tmp_path / "m" / "trajectories" / "val"
    d.mkdir(parents=True)
    (d / "0005.yaml").write_text(YAML_LOG)
    assert detect_format(tmp_path / "m").name == "art"
    try:
        import yaml  # noqa: F401
    except ImportError:
        with pytest.raises(InputError) as e:
            ingest_one(tmp_path / "m")
        assert "pip install pyyaml" in e.value.message and e.value.path == str(d / "0005.yaml")
        return
    _, store = ingest_one(tmp_path / "m")
    assert store.sql("SELECT split, step, reward FROM trajectories").fetchall() == [("val", 5, 1.0)]
    assert store.sql("SELECT response FROM texts WHERE turn_idx = -1").fetchall() == [("hello",)]
