"""τ-bench results arrays, synthetic (built from ``tau_bench/types.py`` and ``run.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

import rolloutlab
from rolloutlab.io import InputError
from rolloutlab.io.importers import REGISTRY, detect_format
from tests._verl import write_verl

RUN_FILE = "tool-calling-gpt-4o-0.0_range_0-3_user-gpt-4o-llm_0318103606.json"
TASK = {"user_id": "u1", "actions": [{"name": "get_order", "kwargs": {"id": "#1"}}], "instruction": "get my order", "outputs": []}


def _tool_traj(final: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "# Retail agent policy"},
        {"role": "user", "content": "Hi, where is my order #1?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_order", "arguments": '{"id": "#1"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_order", "content": '{"status": "shipped"}'},
        {"role": "assistant", "content": final},
        {"role": "user", "content": "Thanks ###STOP###"},
    ]


def _done(reward: float, r_actions: float) -> dict[str, Any]:
    return {"task": TASK, "source": "user", "user_cost": 0.01,
            "reward_info": {"reward": reward, "info": {"r_actions": r_actions, "gt_data_hash": "abc"}, "actions": []}}


def results() -> list[dict[str, Any]]:
    react = [
        {"role": "system", "content": "policy\n#Available tools\n[]"},
        {"role": "user", "content": "cancel order #2"},
        {"role": "assistant", "content": 'Thought:\nI should look it up.\nAction:\n{"name": "get_order", "arguments": {"id": "#2"}}'},
        {"role": "user", "content": "API output: {\"status\": \"pending\"}"},
        {"role": "assistant", "content": "Thought:\nDone.\nAction:\n{\"name\": \"respond\", \"arguments\": {\"content\": \"ok\"}}"},
        {"role": "user", "content": "###STOP###"},
    ]
    return [
        {"task_id": 0, "reward": 1.0, "info": _done(1.0, 1.0), "traj": _tool_traj("It has shipped."), "trial": 0},
        {"task_id": 0, "reward": 0.0, "info": _done(0.0, 0.0), "traj": _tool_traj("It is lost."), "trial": 1},
        {"task_id": 1, "reward": 0.0, "info": {"error": "litellm.RateLimitError: 429", "traceback": "Traceback …"}, "traj": [], "trial": 0},
        # the agent's 30-step cap: no reward_info, reward left at 0
        {"task_id": 1, "reward": 0.0, "info": {"task": TASK, "source": "get_order"}, "traj": _tool_traj("…")[:5], "trial": 1},
        {"task_id": 2, "reward": 1.0, "info": {"task": TASK, "reward_info": {"reward": 1.0, "info": {"r_outputs": 1.0, "outputs": {"ok": True}}}},
         "traj": react, "trial": 0},
    ]


def _write(path: Path, recs: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(recs, indent=2))  # as run.py writes it
    return path


def test_detection(tmp_path: Path, samples: Path) -> None:
    src = _write(tmp_path / RUN_FILE, results())
    assert detect_format(src).name == "tau_bench"
    assert detect_format(tmp_path).name == "tau_bench"
    imp = REGISTRY["tau_bench"]
    verl = write_verl(tmp_path / "verl", {1: [[1, 0]]})
    assert imp.detect(verl) == 0 and imp.detect(verl / "1.jsonl") == 0
    assert imp.detect(samples / "inspect" / "popularity.json") == 0
    agentgym_rl = tmp_path / "0.json"
    agentgym_rl.write_text(json.dumps([{"item_id": "webshop_1", "conversations": [], "reward": 1.0}]))
    assert imp.detect(agentgym_rl) == 0


def test_groups_rewards_terminations(tmp_path: Path, ingest_one) -> None:
    src = _write(tmp_path / RUN_FILE, results())
    report, st = ingest_one(src)
    assert report.sources[0].counts["trajectories"] == 5
    run = st.sql("SELECT name, model, algorithm, config FROM runs").fetchall()[0]
    assert run[:3] == (RUN_FILE[:-5], "gpt-4o", "tool-calling")
    assert orjson.loads(run[3])["user_model"] == "gpt-4o"
    rows = st.sql("SELECT traj_id, split, step, group_id, sample_idx, task_id, reward, reward_components, success, graded, "
                  "termination, num_turns, tool_calls FROM trajectories ORDER BY traj_id").fetchall()
    k = RUN_FILE
    assert rows == [
        (f"{k}:0/0", "eval", 0, f"{k}:0", 0, "0", 1.0, {"r_actions": 1.0}, True, True, "done", 2, 1),
        (f"{k}:0/1", "eval", 0, f"{k}:0", 1, "0", 0.0, {"r_actions": 0.0}, False, True, "done", 2, 1),
        (f"{k}:1/0", "eval", 0, f"{k}:1", 0, "1", None, {}, None, False, "error", 0, None),
        (f"{k}:1/1", "eval", 0, f"{k}:1", 1, "1", 0.0, {}, False, True, "max_turns", 2, 1),
        (f"{k}:2/0", "eval", 0, f"{k}:2", 0, "2", 1.0, {"r_outputs": 1.0}, True, True, "done", 2, 0),
    ]
    err, extras = st.sql(f"SELECT error, extras FROM texts WHERE traj_id = '{k}:1/0' AND turn_idx = -1").fetchall()[0]
    assert err == "litellm.RateLimitError: 429"
    assert orjson.loads(extras)["reward_when_ungraded"] == 0.0  # run.py's placeholder 0 is not a grade


def test_turns_tool_results_and_final_observation(tmp_path: Path, ingest_one) -> None:
    _, st = ingest_one(_write(tmp_path / RUN_FILE, results()))
    k = RUN_FILE
    turns = st.sql(f"SELECT observation, action, tool_calls FROM texts WHERE traj_id = '{k}:0/0' AND turn_idx >= 0 ORDER BY turn_idx").fetchall()
    assert orjson.loads(turns[0][2]) == [{"name": "get_order", "arguments": '{"id": "#1"}', "id": "call_1", "result": '{"status": "shipped"}'}]
    assert turns[0][:2] == (None, None)
    assert turns[1] == ('{"status": "shipped"}', "It has shipped.", None)
    prompt, response, extras = st.sql(f"SELECT prompt, response, extras FROM texts WHERE traj_id = '{k}:0/0' AND turn_idx = -1").fetchall()[0]
    assert [m["role"] for m in orjson.loads(prompt)] == ["system", "user"]
    assert response == "It has shipped."
    ex = orjson.loads(extras)
    assert ex["final_observation"] == "Thanks ###STOP###" and ex["info"]["task"]["instruction"] == "get my order"


def test_react_text_actions_are_parsed(tmp_path: Path, ingest_one) -> None:
    _, st = ingest_one(_write(tmp_path / RUN_FILE, results()))
    rows = st.sql(f"SELECT thought, parsed_action, observation FROM texts WHERE traj_id = '{RUN_FILE}:2/0' AND turn_idx >= 0 ORDER BY turn_idx").fetchall()
    assert rows == [
        ("I should look it up.", '{"name": "get_order", "arguments": {"id": "#2"}}', None),
        ("Done.", '{"name": "respond", "arguments": {"content": "ok"}}', 'API output: {"status": "pending"}'),
    ]


def test_nan_reward_is_ungraded(tmp_path: Path, ingest_one) -> None:
    recs = results()[:1]
    recs[0]["reward"] = float("nan")  # json.dump writes NaN
    src = _write(tmp_path / "r.json", recs)
    assert "NaN" in src.read_text()
    _, st = ingest_one(src)
    assert st.sql("SELECT reward, graded, success FROM trajectories").fetchall() == [(None, False, None)]


def test_folder_is_one_run(tmp_path: Path, ingest_one) -> None:
    d = tmp_path / "results"
    d.mkdir()
    _write(d / RUN_FILE, results())
    _write(d / "react-claude-1.0_range_0-1_user-gpt-4o-llm_0318110000.json", results()[:2])
    report, st = ingest_one(d)
    assert report.sources[0].parts_read == 2
    assert st.sql("SELECT count(*), count(DISTINCT group_id) FROM trajectories").fetchall() == [(7, 4)]
    # two models, two strategies: the models are kept per trajectory, the run says "mixed"
    assert st.sql("SELECT model, algorithm FROM runs").fetchall() == [("mixed (2)", None)]
    assert st.sql("SELECT model, count(*) FROM trajectories GROUP BY model ORDER BY model").fetchall() == [
        ("claude", 2), ("gpt-4o", 5)]


def test_missing_traj_names_file_and_line(tmp_path: Path, ingest_one) -> None:
    store = tmp_path / "store"
    ingest_one(_write(tmp_path / "good.json", results()), store=store)
    recs = results()
    del recs[3]["traj"]
    bad = _write(tmp_path / "bad.json", recs)
    starts = [i for i, ln in enumerate(bad.read_text().splitlines(), 1) if ln == "  {"]
    with pytest.raises(InputError) as e:
        ingest_one(bad, store=store)
    assert (e.value.path, e.value.line) == (str(bad), starts[3])
    assert "missing required field 'traj'" in e.value.message
    assert rolloutlab.open_store(store).sql("SELECT count(*) FROM trajectories").fetchall() == [(5,)]
    report, st = ingest_one(bad, store=tmp_path / "skip", on_error="skip")
    assert report.rejects == 1 and st.sql("SELECT count(*) FROM trajectories").fetchall() == [(4,)]


def test_not_an_array(tmp_path: Path, ingest_one) -> None:
    p = tmp_path / "r.json"
    p.write_text('{"task_id": 1}')
    with pytest.raises(InputError, match="expected a JSON array"):
        ingest_one(p, format="tau_bench")
