"""Inspect AI logs: the real samples, and synthetic logs for what they lack (unfinished
.eval, attachments, errors, limits, N / NaN / dict scores, several scorers)."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import orjson
import pytest

import rolloutlab
from rolloutlab.io import InputError
from rolloutlab.io.importers import detect_format
from tests._verl import write_verl

EVAL_SPEC = {
    "eval_id": "EVAL1", "run_id": "RUN1", "created": "2025-07-01T10:00:00+00:00", "task": "quiz",
    "task_id": "T1", "dataset": {"name": "quiz", "samples": 2, "sample_ids": [1, 2]},
    "model": "openai/gpt-test", "config": {"epochs": 2},
}


def _msgs(question: str, answer: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": question, "source": "input"},
        {"role": "assistant", "content": answer, "source": "generate"},
    ]


def _sample(sid: int | str, epoch: int, value: Any, **kw: Any) -> dict[str, Any]:
    s: dict[str, Any] = {
        "id": sid, "epoch": epoch, "input": f"q{sid}", "target": "A",
        "messages": _msgs(f"q{sid}", "A"),
        "output": {"model": "gpt-test", "choices": [{"message": {"role": "assistant", "content": "A"}, "stop_reason": "stop"}],
                   "usage": {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}},
        "scores": {"match": {"value": value, "answer": "A"}},
        "model_usage": {"openai/gpt-test": {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}},
    }
    s.update(kw)
    return s


def _write_eval(path: Path, samples: list[dict[str, Any]], *, header: dict[str, Any] | None = None,
                raw: dict[str, str] | None = None) -> Path:
    """A ``.eval`` ZIP; without ``header`` it is an unfinished log (journal only)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("_journal/start.json", json.dumps({"version": 2, "eval": EVAL_SPEC, "plan": {"name": "plan", "steps": []}}))
        for s in samples:
            z.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))  # json: NaN stays NaN
        for name, text in (raw or {}).items():
            z.writestr(name, text)
        if header is not None:
            z.writestr("header.json", json.dumps(header))
    return path


def _traj(st: Any, cols: str = "traj_id, reward, graded, success, termination") -> list[tuple[Any, ...]]:
    return st.sql(f"SELECT {cols} FROM trajectories ORDER BY traj_id").fetchall()


# -- the real samples ---------------------------------------------------------------

def test_real_samples_are_detected(samples: Path, tmp_path: Path) -> None:
    for name in ("log_read_sample.eval", "popularity.json", "browser.json"):
        assert detect_format(samples / "inspect" / name).name == "inspect_ai"
    assert detect_format(samples / "inspect").name == "inspect_ai"
    verl = write_verl(tmp_path / "verl", {1: [[1, 0]]})
    from rolloutlab.io.importers import REGISTRY

    assert REGISTRY["inspect_ai"].detect(verl) == 0
    assert REGISTRY["inspect_ai"].detect(verl / "1.jsonl") == 0
    for other in (samples / "nemo_gym", samples / "nemo_gym" / "blackjack.rollouts.jsonl"):
        assert REGISTRY["inspect_ai"].detect(other) == 0


def test_log_read_sample_eval(samples: Path, ingest_one) -> None:
    report, st = ingest_one(samples / "inspect" / "log_read_sample.eval")
    assert report.sources[0].counts == {"trajectories": 1, "turns": 1, "metrics": 2}
    run = st.sql("SELECT run_id, model, status, env, source FROM runs").fetchall()
    assert run == [("popularity-C3pqnFnsCUx6ZpmsRU9Ape", "ollama/gemma3", "finished", "popularity", "inspect_ai")]
    rows = _traj(st, "traj_id, split, step, group_id, sample_idx, task_id, data_source, reward, reward_components, "
                     "success, graded, termination, num_turns, tool_calls, prompt_tokens, response_tokens")
    assert rows == [("log_read_sample.eval/1_epoch_1", "eval", 0, "log_read_sample.eval/1", 0, "popularity/1", "popularity",
                     1.0, {"match": 1.0}, True, True, "done", 1, 0, 66, 3)]
    prompt, response, extras = st.sql("SELECT prompt, response, extras FROM texts WHERE turn_idx = -1").fetchall()[0]
    assert [m["role"] for m in orjson.loads(prompt)] == ["system", "user"]
    assert response == "Yes\n"
    assert orjson.loads(extras)["scores"]["match"] == {"value": "C", "answer": "Yes", "explanation": "Yes\n"}
    metrics = st.sql("SELECT split, step, name, value FROM metrics ORDER BY name").fetchall()
    assert metrics == [("eval", 0, "popularity/match/accuracy", 1.0), ("eval", 0, "popularity/match/stderr", 0.0)]


def test_popularity_json_cancelled(samples: Path, ingest_one) -> None:
    _, st = ingest_one(samples / "inspect" / "popularity.json")
    assert st.sql("SELECT status FROM runs").fetchall() == [("aborted",)]  # status "cancelled"
    assert _traj(st) == [
        ("popularity.json/1_epoch_1", 1.0, True, True, "done"),
        ("popularity.json/2_epoch_1", 1.0, True, True, "done"),
        ("popularity.json/3_epoch_1", 0.0, True, False, "done"),  # "I"
    ]
    assert st.sql("SELECT count(DISTINCT group_id) FROM trajectories").fetchall() == [(3,)]
    acc = st.sql("SELECT value FROM metrics WHERE name = 'popularity/match/accuracy'").fetchall()
    assert acc == [(pytest.approx(2 / 3),)]


def test_browser_json_tool_calls(samples: Path, ingest_one) -> None:
    _, st = ingest_one(samples / "inspect" / "browser.json")
    assert _traj(st, "reward, success, num_turns, tool_calls, response_tokens") == [(1.0, True, 5, 4, 281)]
    assert st.sql("SELECT list(num_tool_calls ORDER BY turn_idx) FROM turns").fetchall() == [([1, 1, 1, 1, 0],)]
    turns = st.sql("SELECT turn_idx, observation, action, tool_calls FROM texts WHERE turn_idx >= 0 ORDER BY turn_idx").fetchall()
    calls = [orjson.loads(t[3]) if t[3] else [] for t in turns]
    assert [c[0]["name"] for c in calls[:4]] == ["web_browser_go", "web_browser_click", "web_browser_click", "web_browser_click"]
    assert orjson.loads(calls[0][0]["arguments"]) == {"url": "https://www.aisi.gov.uk/"}
    assert calls[0][0]["id"] == "call_35FTpd6shR9efioDgeEBZ33s"
    # a tool result is attached to its call and is the observation of the next turn
    assert calls[0][0]["result"].startswith('[132] link "We are now the AI Security Institute"')
    assert turns[1][1] == calls[0][0]["result"]
    assert turns[0][1] is None and turns[0][2] == ""
    assert turns[4][2].startswith("The AI Security Institute (AISI) is the premier governmental organization")
    response = st.sql("SELECT response FROM texts WHERE turn_idx = -1").fetchall()[0][0]
    assert response == turns[4][2]


# -- synthetic logs -------------------------------------------------------------------

def test_unfinished_eval_journal_only(tmp_path: Path, ingest_one) -> None:
    samples = [
        _sample(1, 1, "C"), _sample(1, 2, "I"),
        _sample(2, 1, "N"),  # no answer: graded 0
        _sample(2, 2, float("nan")),  # Inspect's unscored sentinel, written as NaN
        _sample("x", 1, 1.0, error={"message": "RuntimeError('sandbox died')", "traceback": "Traceback…",
                                     "traceback_ansi": ""}),
        _sample("y", 1, 0.25, limit={"type": "message", "limit": 10}),
        _sample("z", 1, True, limit={"type": "token", "limit": 1000}),
    ]
    src = _write_eval(tmp_path / "run.eval", samples)
    assert detect_format(src).name == "inspect_ai"
    report, st = ingest_one(src)
    assert report.sources[0].counts["metrics"] == 0  # no results before the log finishes
    assert st.sql("SELECT name, status, model FROM runs").fetchall() == [("quiz-EVAL1", "running", "openai/gpt-test")]
    assert _traj(st) == [
        ("run.eval/1_epoch_1", 1.0, True, True, "done"),
        ("run.eval/1_epoch_2", 0.0, True, False, "done"),
        ("run.eval/2_epoch_1", 0.0, True, False, "done"),
        ("run.eval/2_epoch_2", None, False, None, "done"),
        ("run.eval/x_epoch_1", None, False, None, "error"),
        ("run.eval/y_epoch_1", 0.25, True, None, "max_turns"),
        ("run.eval/z_epoch_1", 1.0, True, True, "truncated"),
    ]
    groups = st.sql("SELECT group_id, list(sample_idx ORDER BY sample_idx) FROM trajectories GROUP BY group_id ORDER BY group_id").fetchall()
    assert groups == [("run.eval/1", [0, 1]), ("run.eval/2", [0, 1]), ("run.eval/x", [0]), ("run.eval/y", [0]), ("run.eval/z", [0])]
    err, extras = st.sql("SELECT error, extras FROM texts WHERE traj_id = 'run.eval/x_epoch_1' AND turn_idx = -1").fetchall()[0]
    assert err == "RuntimeError('sandbox died')"
    ex = orjson.loads(extras)
    assert ex["reward_when_ungraded"] == 1.0 and ex["traceback"] == "Traceback…"
    nan_extras = orjson.loads(st.sql("SELECT extras FROM texts WHERE traj_id = 'run.eval/2_epoch_2' AND turn_idx = -1").fetchall()[0][0])
    assert nan_extras["ungraded_reason"] == "unscored (score value nan)"


def test_finished_eval_with_results_scorers_and_dict_values(tmp_path: Path, ingest_one) -> None:
    header = {"version": 2, "status": "success", "eval": EVAL_SPEC,
              "results": {"scores": [
                  {"name": "match", "scorer": "match", "reducer": "mean", "metrics": {"accuracy": {"name": "accuracy", "value": 0.5}}},
                  {"name": "match", "scorer": "match", "reducer": "pass_at_2", "metrics": {"accuracy": {"name": "accuracy", "value": 1.0}}},
                  {"name": "judge", "scorer": "judge", "metrics": {"mean": {"name": "mean", "value": 0.7}}},
              ]}}
    s1 = _sample(1, 1, "P", scores={"match": {"value": "P"}, "judge": {"value": {"helpful": 0.8, "honest": 1}}})
    s2 = _sample(2, 1, None, scores={"judge": {"value": {"helpful": 0.4, "honest": 0}}, "match": {"value": "C"}})
    src = _write_eval(tmp_path / "done.eval", [s1, s2], header=header)
    _, st = ingest_one(src)
    assert st.sql("SELECT status FROM runs").fetchall() == [("finished",)]
    rows = _traj(st, "traj_id, reward, reward_components, success")
    assert rows == [
        ("done.eval/1_epoch_1", 0.5, {"match": 0.5, "judge/helpful": 0.8, "judge/honest": 1.0}, False),
        # the first scorer is the reward: here a dict value, whose first key counts
        ("done.eval/2_epoch_1", 0.4, {"judge/helpful": 0.4, "judge/honest": 0.0, "match": 1.0}, None),
    ]
    metrics = st.sql("SELECT name, value FROM metrics ORDER BY name").fetchall()
    assert metrics == [("quiz/judge/mean", 0.7), ("quiz/match/mean/accuracy", 0.5), ("quiz/match/pass_at_2/accuracy", 1.0)]


def test_attachments_resolved(tmp_path: Path, ingest_one) -> None:
    h_prompt, h_page, h_final = "a" * 32, "b" * 32, "c" * 32
    messages = [
        {"role": "user", "content": f"attachment://{h_prompt}"},
        {"role": "assistant", "content": [{"type": "reasoning", "reasoning": "look first"}, {"type": "text", "text": "opening"}],
         "tool_calls": [{"id": "c1", "function": "open", "arguments": {"url": f"attachment://{h_page}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": f"attachment://{h_page}"}]},
        {"role": "assistant", "content": [{"type": "text", "text": f"attachment://{h_final}"}, {"type": "image", "image": "data:…"}]},
        {"role": "user", "content": "attachment://" + "d" * 32},  # unknown hash: kept, reported
    ]
    s = _sample(1, 1, "C", messages=messages, output={"choices": [{"message": messages[3]}]},
                attachments={h_prompt: "the long question", h_page: "<html>long page</html>", h_final: "final answer"})
    src = _write_eval(tmp_path / "att.eval", [s], header={"version": 2, "status": "success", "eval": EVAL_SPEC})
    _, st = ingest_one(src)
    prompt, response, extras = st.sql("SELECT prompt, response, extras FROM texts WHERE turn_idx = -1").fetchall()[0]
    assert orjson.loads(prompt) == [{"role": "user", "content": "the long question"}]
    assert response == "final answer\n[image]"
    ex = orjson.loads(extras)
    assert ex["unresolved_attachments"] == ["d" * 32]
    assert ex["final_observation"] == "attachment://" + "d" * 32
    turns = st.sql("SELECT observation, thought, action, tool_calls FROM texts WHERE turn_idx >= 0 ORDER BY turn_idx").fetchall()
    call = orjson.loads(turns[0][3])[0]
    assert call == {"name": "open", "arguments": '{"url":"<html>long page</html>"}', "id": "c1", "result": "<html>long page</html>"}
    assert turns[0][1:3] == ("look first", "opening")
    assert turns[1][0] == "<html>long page</html>"


def test_invalid_tool_call_and_tool_error(tmp_path: Path, ingest_one) -> None:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "function": "bash", "arguments": {}, "parse_error": "bad json"}]},
        {"role": "tool", "tool_call_id": "a", "content": "", "error": {"type": "parsing", "message": "bad json"}},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "b", "function": "bash", "arguments": {"cmd": "ls"}}]},
        {"role": "tool", "tool_call_id": "b", "content": "a.txt"},
        {"role": "assistant", "content": "done"},
    ]
    src = _write_eval(tmp_path / "tools.eval", [_sample(1, 1, "C", messages=messages)])
    _, st = ingest_one(src)
    assert _traj(st, "num_turns, tool_calls, invalid_actions") == [(3, 2, 1)]
    res = st.sql("SELECT tool_calls FROM texts WHERE turn_idx = 0").fetchall()[0][0]
    assert orjson.loads(res)[0]["result"] == "error (parsing): bad json"


def test_folder_of_logs_is_one_run(samples: Path, tmp_path: Path, ingest_one) -> None:
    d = tmp_path / "logs"
    d.mkdir()
    for name in ("popularity.json", "browser.json", "log_read_sample.eval"):
        shutil.copy(samples / "inspect" / name, d / name)
    (d / "logs.json").write_text('{"popularity.json": {"eval": {}}}')  # Inspect's listing: not a log
    report, st = ingest_one(d)
    assert report.sources[0].parts_read == 3
    # logs of two models: each trajectory keeps its model, the run says it is mixed
    assert st.sql("SELECT run_id, model, status FROM runs").fetchall() == [("logs", "mixed (2)", "aborted")]
    models = st.sql("SELECT model, count(*) FROM trajectories GROUP BY model ORDER BY model").fetchall()
    assert len(models) == 2 and sum(n for _, n in models) == 5 and all(m for m, _ in models)
    assert any("2 models" in w for w in report.sources[0].warnings)
    assert st.sql("SELECT count(*), count(DISTINCT group_id), count(DISTINCT task_id) FROM trajectories").fetchall() == [(5, 5, 4)]
    ids = [r[0] for r in st.sql("SELECT traj_id FROM trajectories ORDER BY traj_id").fetchall()]
    assert ids[0] == "browser.json/1_epoch_1" and "log_read_sample.eval/1_epoch_1" in ids
    names = st.sql("SELECT DISTINCT name FROM metrics ORDER BY name").fetchall()
    assert names == [("browser/includes/accuracy",), ("browser/includes/stderr",), ("popularity/match/accuracy",), ("popularity/match/stderr",)]


def test_bad_sample_names_file_and_line_and_store_unchanged(samples: Path, tmp_path: Path, ingest_one) -> None:
    store = tmp_path / "store"
    ingest_one(samples / "inspect" / "popularity.json", store=store)
    log = json.loads((samples / "inspect" / "popularity.json").read_text())
    del log["samples"][1]["epoch"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(log, indent=2))
    lines = bad.read_text().splitlines()
    expected_line = lines.index('      "id": 2,')  # the line before it (1-based: this index) opens sample 2
    with pytest.raises(InputError) as e:
        ingest_one(bad, store=store)
    assert e.value.path == str(bad) and e.value.line == expected_line
    assert "missing required field 'epoch'" in str(e.value)
    st = rolloutlab.open_store(store)
    assert st.sql("SELECT count(*) FROM trajectories").fetchall() == [(3,)]
    assert [r[0] for r in st.sql("SELECT run_id FROM runs").fetchall()] == ["popularity-VnKtvCqGnnegLQ7qSBFDzx"]


def test_bad_sample_skipped_in_skip_mode(tmp_path: Path, ingest_one) -> None:
    broken = _sample(2, 1, "C")
    del broken["id"]
    broken["epoch"] = 1
    src = _write_eval(tmp_path / "mixed.eval", [_sample(1, 1, "C")], raw={"samples/2_epoch_1.json": json.dumps(broken)})
    report, st = ingest_one(src, on_error="skip")
    assert report.rejects == 1
    assert _traj(st, "traj_id") == [("mixed.eval/1_epoch_1",)]
    src2 = _write_eval(tmp_path / "mixed2.eval", [_sample(1, 1, "C")], raw={"samples/2_epoch_1.json": json.dumps(broken)})
    with pytest.raises(InputError, match=r"mixed2\.eval!samples/2_epoch_1\.json: missing required field 'id'"):
        ingest_one(src2, store=tmp_path / "other")


def test_not_a_zip_named_eval_is_not_claimed(tmp_path: Path) -> None:
    p = tmp_path / "x.eval"
    p.write_text("not a zip")
    from rolloutlab.io.importers import REGISTRY

    assert REGISTRY["inspect_ai"].detect(p) == 0
