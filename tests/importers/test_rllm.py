"""rLLM EpisodeLogger folders, written as ``rllm/utils/episode_logger.py`` writes them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

import rolloutlab
from rolloutlab.io import InputError
from rolloutlab.io.importers import REGISTRY, detect_format

SYS = {"role": "system", "content": "Solve with the calculator."}


def _task_hash(task: Any) -> str:
    return hashlib.sha256(json.dumps(task, sort_keys=True, default=str).encode()).hexdigest()[:8]


def _step(obs: Any, response: str, action: Any, reward: float, done: bool, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"observation": obs, "thought": "", "action": action, "reward": reward, "done": done,
            "model_response": response, "chat_completions": messages, "timing": {}}


def _traj(name: str, reward: float | None, steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": name, "uid": f"uid-{name}-{len(steps)}-{reward}", "reward": reward, "num_steps": len(steps),
            "timing": {}, "steps": steps}


def _write(folder: Path, step: int, epoch: int, episode_id: str, task: Any, trajectories: list[dict[str, Any]], *,
           is_correct: bool, reason: str | None = "env_done", metadata: dict[str, Any] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data = {"training_step": step, "epoch": epoch, "episode_id": episode_id, "session_id": None, "task": task,
            "task_hash": _task_hash(task), "is_correct": is_correct, "termination_reason": reason,
            "metrics": {"solver_acc": 1.0 if is_correct else 0.0}, "metadata": metadata or {},
            "timing": {"total": 1.5}, "trajectories": trajectories}
    path = folder / f"episode_hash{_task_hash(task)}_id{episode_id.replace(':', '_')}.json"
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    return path


def _summary(folder: Path, step: int, files: list[Path], correct: int, mode: str = "train") -> None:
    n = len(files)
    (folder / "batch_summary.json").write_text(json.dumps({
        "training_step": step, "epoch": 0, "mode": mode, "num_episodes": n,
        "episode_files": [f.name for f in files],
        "summary_stats": {"total_correct": correct, "total_incorrect": n - correct, "accuracy": correct / n,
                          "avg_trajectories_per_episode": 1.25}}, indent=2))


@pytest.fixture
def rllm_run(tmp_path: Path) -> Path:
    root = tmp_path / "logs" / "deepcoder"
    tr = root / "episodes" / "train_step_3_epoch_0"
    math_q = {"question": "What is 6*7?", "ground_truth": "42", "data_source": "gsm8k"}
    user = {"role": "user", "content": "What is 6*7?"}
    call = {"role": "assistant", "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "calc", "arguments": "{\"e\": \"6*7\"}"}}]}
    tool = {"role": "tool", "tool_call_id": "c1", "content": "42"}
    answer = {"role": "assistant", "content": "The answer is 42"}
    files = [
        # task0, rollout 0: two steps, a tool call and its result.
        _write(tr, 3, 0, "task0:0", math_q, [_traj("solver", 1.0, [
            _step(None, "", {"tool": "calc"}, 0.0, False, [SYS, user, call]),
            _step({"tool_output": "42"}, "The answer is 42", "42", 1.0, True, [SYS, user, call, tool, answer]),
        ])], is_correct=True),
        # task0, rollout 1: trajectory reward missing → the last step's.
        _write(tr, 3, 0, "task0:1", math_q, [_traj("solver", None, [
            _step(None, "41", "41", 0.0, True, [SYS, user, {"role": "assistant", "content": "41"}]),
        ])], is_correct=False, reason="max_turns_exceeded"),
        # task1, rollout 0: multi-agent (solver + judge).
        _write(tr, 3, 0, "task1:0", "Write hello world", [
            _traj("solver", 1.0, [_step(None, "print('hello world')", None, 1.0, True,
                                        [{"role": "user", "content": "Write hello world"},
                                         {"role": "assistant", "content": "print('hello world')"}])]),
            _traj("judge", 0.5, [_step(None, "looks right", None, 0.5, True,
                                       [{"role": "user", "content": "Judge it"},
                                        {"role": "assistant", "content": "looks right"}])]),
        ], is_correct=True),
        # task1, rollout 1: the workflow raised.
        _write(tr, 3, 0, "task1:1", "Write hello world", [
            _traj("solver", 0.0, [_step(None, "pri", None, 0.0, False,
                                        [{"role": "user", "content": "Write hello world"},
                                         {"role": "assistant", "content": "pri"}])]),
        ], is_correct=False, reason="error",
            metadata={"error": {"error_message": "sandbox died", "error_type": "RuntimeError", "traceback": "..."}}),
    ]
    _summary(tr, 3, files, correct=2)
    va = root / "episodes" / "val_step_0_epoch_0"
    vfile = _write(va, 0, 0, "task0:0", math_q, [_traj("solver", 0.0, [
        _step(None, "40", "40", 0.0, True, [SYS, user, {"role": "assistant", "content": "40"}])])],
        is_correct=False, reason="timeout")
    _summary(va, 0, [vfile], correct=0, mode="val")
    return root


def test_detected_in_every_shape(rllm_run: Path) -> None:
    ep = rllm_run / "episodes"
    step_dir = ep / "train_step_3_epoch_0"
    for src in (rllm_run, ep, step_dir, next(step_dir.glob("episode_*.json"))):
        imp = detect_format(src)
        assert imp is not None and imp.name == "rllm", src


def test_does_not_claim_others(tmp_path: Path, samples: Path) -> None:
    # The real samples of other formats (Inspect logs, NeMo Gym rollouts) are not claimed.
    for sample in [samples, *samples.rglob("*")]:
        assert REGISTRY["rllm"].detect(sample) == 0, sample
    d = tmp_path / "rollout"
    d.mkdir()
    (d / "1.jsonl").write_text(json.dumps({"input": "q", "output": "a", "score": 1.0, "step": 1}) + "\n")
    (tmp_path / "traj.json").write_text("[]")
    assert REGISTRY["rllm"].detect(d) == 0
    assert REGISTRY["rllm"].detect(tmp_path / "traj.json") == 0


def test_episodes_to_trajectories(rllm_run: Path, ingest_one: Any) -> None:
    report, store = ingest_one(rllm_run)
    assert report.sources[0].format == "rllm"
    assert report.sources[0].counts["trajectories"] == 6       # 5 train (one episode has 2) + 1 val
    rows = {r[0]: r[1:] for r in store.sql(
        "SELECT traj_id, split, step, group_id, sample_idx, task_id, data_source, reward, graded, success, "
        "termination, num_turns, tool_calls FROM trajectories").fetchall()}
    assert set(rows) == {"train/3/task0:0", "train/3/task0:1", "train/3/task1:0/0", "train/3/task1:0/1",
                         "train/3/task1:1", "val/0/task0:0"}
    assert rows["train/3/task0:0"] == ("train", 3, "train/3:task0:solver", 0, "task0", "gsm8k", 1.0, True, True,
                                       "done", 2, 1)
    # Missing trajectory reward: the last step's, still graded.
    assert rows["train/3/task0:1"][6:10] == (0.0, True, False, "max_turns")
    assert rows["train/3/task0:1"][3] == 1
    # Multi-agent: a judge is grouped with judges, a solver with solvers.
    assert rows["train/3/task1:0/0"][2] == "train/3:task1:solver"
    assert rows["train/3/task1:0/1"][2] == "train/3:task1:judge"
    assert rows["train/3/task1:0/1"][6] == 0.5
    # The workflow raised: ungraded, never a silent 0.
    assert rows["train/3/task1:1"][6:10] == (None, False, False, "error")
    assert rows["val/0/task0:0"][:2] == ("val", 0) and rows["val/0/task0:0"][9] == "truncated"
    # Groups: task0 has 2 solvers at step 3.
    assert store.sql("SELECT count(*) FROM trajectories WHERE group_id = 'train/3:task0:solver'").fetchall()[0][0] == 2


def test_turns_texts_and_tool_results(rllm_run: Path, ingest_one: Any) -> None:
    _, store = ingest_one(rllm_run)
    prompt, response, error, extras = store.sql(
        "SELECT prompt, response, error, extras FROM texts WHERE traj_id = 'train/3/task0:0' AND turn_idx = -1"
    ).fetchall()[0]
    assert json.loads(prompt) == [SYS, {"role": "user", "content": "What is 6*7?"}]
    assert response == "The answer is 42" and error is None
    ex = orjson.loads(extras)
    assert ex["trajectory_name"] == "solver" and ex["episode_id"] == "task0:0"
    assert ex["task"]["ground_truth"] == "42" and ex["termination_reason"] == "env_done"
    turns = store.sql("SELECT turn_idx, observation, action, parsed_action, tool_calls FROM texts "
                      "WHERE traj_id = 'train/3/task0:0' AND turn_idx >= 0 ORDER BY turn_idx").fetchall()
    assert [t[0] for t in turns] == [0, 1]
    assert turns[0][2] is None and json.loads(turns[0][3]) == {"tool": "calc"}
    assert json.loads(turns[0][4]) == [{"name": "calc", "arguments": "{\"e\": \"6*7\"}", "id": "c1", "result": "42"}]
    assert json.loads(turns[1][1]) == {"tool_output": "42"} and turns[1][2] == "The answer is 42"
    nums = store.sql("SELECT turn_idx, reward, done FROM turns WHERE traj_id = 'train/3/task0:0' ORDER BY 1").fetchall()
    assert nums == [(0, 0.0, False), (1, 1.0, True)]
    err = store.sql("SELECT error, prompt FROM texts WHERE traj_id = 'train/3/task1:1' AND turn_idx = -1").fetchall()[0]
    assert err[0] == "RuntimeError: sandbox died"
    assert json.loads(err[1]) == [{"role": "user", "content": "Write hello world"}]


def test_batch_summary_metrics(rllm_run: Path, ingest_one: Any) -> None:
    _, store = ingest_one(rllm_run)
    m = {(s, st, n): v for s, st, n, v in store.sql("SELECT split, step, name, value FROM metrics").fetchall()}
    assert m[("train", 3, "batch/accuracy")] == 0.5
    assert m[("train", 3, "batch/total_correct")] == 2
    assert m[("val", 0, "batch/accuracy")] == 0.0
    assert rolloutlab.open_store(store.path).sql("SELECT name FROM runs").fetchall() == [("deepcoder",)]


def test_missing_field_names_file(rllm_run: Path, tmp_path: Path, ingest_one: Any) -> None:
    ingest_one(rllm_run)
    bad = tmp_path / "bad" / "episodes" / "train_step_1_epoch_0"
    path = _write(bad, 1, 0, "t:0", "q", [{"name": "solver", "uid": "u", "num_steps": 0, "steps": []}],
                  is_correct=False)
    with pytest.raises(InputError) as e:
        ingest_one(tmp_path / "bad")
    assert e.value.path == str(path)
    assert "trajectories[0]" in e.value.message and "'reward'" in e.value.message
    store = rolloutlab.open_store(tmp_path / "store")
    assert store.sql("SELECT count(*) FROM trajectories").fetchall()[0][0] == 6


def test_file_being_written_is_left_pending(rllm_run: Path, ingest_one: Any) -> None:
    step_dir = rllm_run / "episodes" / "train_step_4_epoch_0"
    step_dir.mkdir()
    (step_dir / "episode_hash0123abcd_idtask9_0.json").write_text('{\n  "training_step": 4,\n  "epoch": 0,\n')
    report, store = ingest_one(rllm_run)
    assert report.sources[0].parts_pending == ["train_step_4"]
    assert store.sql("SELECT count(*) FROM trajectories WHERE step = 4").fetchall()[0][0] == 0


def test_corrupt_file_can_be_skipped(rllm_run: Path, ingest_one: Any) -> None:
    step_dir = rllm_run / "episodes" / "train_step_3_epoch_0"
    (step_dir / "episode_hash0123abcd_idtask9_0.json").write_text('{"training_step": 3, oops}\n')
    report, store = ingest_one(rllm_run, on_error="skip")
    assert report.rejects == 1
    assert store.sql("SELECT count(*) FROM trajectories").fetchall()[0][0] == 6
