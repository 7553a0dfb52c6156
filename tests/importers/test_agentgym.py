"""AgentGym JSONL outputs and AgentGym-RL rollout logs (facts: FORMATS.md § AgentGym-RL and
AgentGym; ``agentenv/controller/task.py``, ``vllm_rollout.py``)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from rolloutlab.io import InputError, open_store
from rolloutlab.io.importers import REGISTRY, detect_format
from rolloutlab.io.importers.agentgym import split_conversation
from tests._verl import write_verl

INSTRUCTION = ("You are an exploration master that wants to finish every goal you are given. ...\n"
               "Your response should use the following format:\nThought:\n<Your Thought>\n\nAction:\n<Your Action>")
ACK = "OK. I'll follow your instructions and try my best to solve the task."


def react(thought: str, action: str) -> str:
    return f"Thought:\n{thought}\n\nAction:\n{action}"


def agentgym_conv(obs: list[str], actions: list[str]) -> list[dict[str, Any]]:
    """conversation_start (instruction, scripted acknowledgement), then the environment's
    observations (``loss: None``) and the agent's actions (``loss: True``)."""
    conv = [{"from": "human", "loss": None, "value": INSTRUCTION}, {"from": "gpt", "loss": False, "value": ACK}]
    for i, o in enumerate(obs):
        conv.append({"from": "human", "loss": None, "value": o})
        if i < len(actions):
            conv.append({"from": "gpt", "loss": True, "value": actions[i]})
    return conv


def api_conv(obs: list[str], actions: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The same conversation as an API agent writes it (role/content/reasoning_content)."""
    conv = [{"role": "user", "content": INSTRUCTION, "reasoning_content": None},
            {"role": "assistant", "content": ACK, "reasoning_content": None}]
    for i, o in enumerate(obs):
        conv.append({"role": "user", "content": o, "reasoning_content": None})
        if i < len(actions):
            conv.append({"role": "assistant", "content": actions[i][1], "reasoning_content": actions[i][0]})
    return conv


def agentgym_line(item_id: str, conv: list[dict[str, Any]], reward: float) -> dict[str, Any]:
    return {"conversations": conv, "item_id": item_id, "reward": reward, "success": 1 if reward == 1 else 0}


INFERENCE = [
    agentgym_line("babyai_3", agentgym_conv(["Goal: go to the red ball. You see a wall.", "You see a red ball.",
                                             "You reached the ball. Done."],
                                            [react("I should move.", "move forward"),
                                             react("There it is.", "go to red ball 1")]), 1.0),
    agentgym_line("babyai_7", agentgym_conv(["Goal: pick up the key.", "Nothing."], ["turn left"]), 0.0),
    agentgym_line("babyai_3", agentgym_conv(["Goal: go to the red ball. You see a wall.", "A wall."],
                                            [react("Left?", "turn left")]), 0.5),
]


def write_jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(x) + "\n" for x in lines).encode()
    if path.name.endswith(".gz"):
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return path


def test_agentgym_jsonl_turns_groups_success(tmp_path: Path, ingest_one) -> None:
    src = write_jsonl(tmp_path / "out" / "inference.jsonl", INFERENCE)
    assert detect_format(src).name == "agentgym"
    assert detect_format(src.parent).name == "agentgym"
    report, st = ingest_one(src)
    assert report.sources[0].counts == {"trajectories": 3, "turns": 4, "metrics": 0}
    rows = st.sql("""SELECT traj_id, split, step, task_id, data_source, sample_idx, reward, success, termination,
                            num_turns FROM trajectories ORDER BY traj_id""").fetchall()
    assert rows == [
        ("inference.jsonl/1", "eval", 0, "babyai_3", "babyai", 0, 1.0, True, "done", 2),
        ("inference.jsonl/2", "eval", 0, "babyai_7", "babyai", 0, 0.0, False, None, 1),
        ("inference.jsonl/3", "eval", 0, "babyai_3", "babyai", 1, 0.5, False, None, 1),
    ]
    assert st.sql("SELECT count(DISTINCT group_id) FROM trajectories").fetchall() == [(2,)]
    turns = st.sql("""SELECT turn_idx, observation, thought, parsed_action FROM texts
                      WHERE traj_id = 'inference.jsonl/1' AND turn_idx >= 0 ORDER BY turn_idx""").fetchall()
    assert turns == [(0, "Goal: go to the red ball. You see a wall.", "I should move.", "move forward"),
                     (1, "You see a red ball.", "There it is.", "go to red ball 1")]
    prompt, response, extras = st.sql("SELECT prompt, response, extras FROM texts "
                                      "WHERE traj_id = 'inference.jsonl/1' AND turn_idx = -1").fetchall()[0]
    assert [m["value"] for m in orjson.loads(prompt)] == [INSTRUCTION, ACK, "Goal: go to the red ball. You see a wall."]
    assert response == react("There it is.", "go to red ball 1")
    assert orjson.loads(extras) == {"final_observation": "You reached the ball. Done."}
    # a plain action (no ReAct markers) has no parsed action
    assert st.sql("SELECT thought, parsed_action, action FROM texts WHERE traj_id = 'inference.jsonl/2' "
                  "AND turn_idx = 0").fetchall() == [(None, None, "turn left")]


def test_agentevol_iteration_file_api_messages_gzip(tmp_path: Path, ingest_one) -> None:
    lines = [agentgym_line("webshop_12", api_conv(["Instruction: buy a red shirt [Search]", "Results..."],
                                                  [("search first", "search[red shirt]")]), 0.75)]
    src = write_jsonl(tmp_path / "evol" / "inference_iter_2.jsonl.gz", lines)
    assert detect_format(src).name == "agentgym"
    _, st = ingest_one(src)
    assert st.sql("SELECT split, step, reward, success, data_source FROM trajectories").fetchall() == [
        ("train", 2, 0.75, False, "webshop")]
    assert st.sql("SELECT observation, thought, action FROM texts WHERE turn_idx = 0").fetchall() == [
        ("Instruction: buy a red shirt [Search]", "search first", "search[red shirt]")]


def rl_conv(obs: list[str], actions: list[str]) -> list[dict[str, str]]:
    """AgentGym-RL: the dataset's raw_prompt (instruction + acknowledgement), then
    add_user_message(observation) / add_assistant_message(action)."""
    conv = [{"role": "user", "content": INSTRUCTION}, {"role": "assistant", "content": ACK}]
    for i, o in enumerate(obs):
        conv.append({"role": "user", "content": o})
        if i < len(actions):
            conv.append({"role": "assistant", "content": actions[i]})
    return conv


def write_rank(folder: Path, rank: int, records: list[dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{rank}.json").write_text(json.dumps(records, ensure_ascii=True, indent=4))


def write_rl_log(root: Path) -> Path:
    log = root / "rollout_logs"
    ok = rl_conv(["Your task: find milk.", "You see milk.", "Task done."], ["go to fridge", "take milk"])
    fail = rl_conv(["Your task: find milk.", "Nothing here."], ["look"])
    # item 5's four samples (rollout.n = 4) are spread over two ranks
    write_rank(log / "step1", 0, [{"item_id": 5, "conversations": ok, "reward": 1.0},
                                  {"item_id": 5, "conversations": fail, "reward": 0.0}])
    write_rank(log / "step1", 1, [{"item_id": 5, "conversations": ok, "reward": 1.0},
                                  {"item_id": 5, "conversations": ok[:-1], "reward": 0.0},  # env.step raised
                                  {"item_id": 9, "conversations": ok[:2], "reward": 0}])     # reset timed out
    write_rank(log / "step2", 0, [{"item_id": 9, "conversations": fail, "reward": 0.25}])
    write_rank(log / "steptest_batch_1", 0, [{"item_id": 5, "conversations": ok, "reward": 1.0}])
    return log


def test_agentgym_rl_log_steps_groups_errors(tmp_path: Path, ingest_one) -> None:
    log = write_rl_log(tmp_path)
    for p in (log, log / "step1", log / "step1" / "1.json", log / "steptest_batch_1"):
        assert detect_format(p).name == "agentgym-rl", p
    report, st = ingest_one(log)
    assert report.sources[0].counts == {"trajectories": 7, "turns": 10, "metrics": 0}
    rows = st.sql("""SELECT traj_id, split, step, group_id, sample_idx, reward, graded, success, termination, num_turns
                     FROM trajectories ORDER BY split, step, traj_id""").fetchall()
    assert rows == [
        ("eval/b1/r0/0", "eval", 0, "b1:5", 0, 1.0, True, True, "done", 2),
        ("train/1/r0/0", "train", 1, "1:5", 0, 1.0, True, True, "done", 2),
        ("train/1/r0/1", "train", 1, "1:5", 1, 0.0, True, False, None, 1),
        ("train/1/r1/0", "train", 1, "1:5", 2, 1.0, True, True, "done", 2),
        ("train/1/r1/1", "train", 1, "1:5", 3, None, False, None, "error", 2),
        ("train/1/r1/2", "train", 1, "1:9", 0, None, False, None, "error", 0),
        ("train/2/r0/0", "train", 2, "2:9", 0, 0.25, True, False, None, 1),
    ]
    errs = st.sql("SELECT traj_id, error, extras FROM texts WHERE error IS NOT NULL ORDER BY traj_id").fetchall()
    assert [(e[0], e[1].split(":")[0], orjson.loads(e[2])["reward_when_ungraded"]) for e in errs] == [
        ("train/1/r1/1", "environment step failed", 0.0), ("train/1/r1/2", "environment reset failed", 0.0)]
    ev = orjson.loads(st.sql("SELECT extras FROM texts WHERE traj_id = 'eval/b1/r0/0' AND turn_idx = -1").fetchall()[0][0])
    assert ev == {"eval_batch": 1, "final_observation": "Task done."}
    assert st.sql("SELECT observation, action FROM texts WHERE traj_id = 'train/1/r0/0' AND turn_idx >= 0 "
                  "ORDER BY turn_idx").fetchall() == [("Your task: find milk.", "go to fridge"),
                                                      ("You see milk.", "take milk")]
    assert st.sql("SELECT count(DISTINCT task_id) FROM trajectories").fetchall() == [(2,)]


def test_split_conversation_without_loss_flags_or_ack() -> None:
    conv = split_conversation([{"role": "system", "content": "s"}, {"role": "user", "content": "task"},
                               {"role": "assistant", "content": "a1"}, {"role": "assistant", "content": "a2"}])
    # no acknowledgement (the assistant message is followed by another): both are actions
    assert [t.action for t in conv.turns] == ["a1", "a2"] and conv.turns[0].observation == "task"
    with pytest.raises(Exception, match=r"conversations\[0\]"):
        split_conversation([{"text": "x"}])


def test_formats_keep_to_themselves(tmp_path: Path) -> None:
    verl = write_verl(tmp_path / "verl", {1: [[1, 0]]})
    gym = write_jsonl(tmp_path / "gym" / "inference.jsonl", INFERENCE)
    log = write_rl_log(tmp_path)
    for name in ("agentgym", "agentgym-rl"):
        assert REGISTRY[name].detect(verl) == 0 and REGISTRY[name].detect(verl / "1.jsonl") == 0
    assert REGISTRY["agentgym-rl"].detect(gym) == 0 and REGISTRY["agentgym"].detect(log) == 0
    for name in ("verl", "verl-agent", "skyrl"):
        assert REGISTRY[name].detect(gym) == 0 and REGISTRY[name].detect(log) == 0


def test_missing_reward_names_file_and_line(tmp_path: Path, ingest_one) -> None:
    lines = [dict(x) for x in INFERENCE]
    del lines[1]["reward"]
    src = write_jsonl(tmp_path / "inference.jsonl", lines)
    with pytest.raises(InputError) as e:
        ingest_one(src)
    assert e.value.path == str(src) and e.value.line == 2 and "'reward'" in e.value.message
    assert not (tmp_path / "store" / "_manifest.json").exists()


def test_rl_log_bad_element_names_its_line(tmp_path: Path, ingest_one) -> None:
    log = write_rl_log(tmp_path)
    ingest_one(log)
    path = log / "step2" / "0.json"
    recs = json.loads(path.read_text())
    recs.append({"item_id": 9, "reward": 1.0})  # no conversations
    path.write_text(json.dumps(recs, indent=4))
    with pytest.raises(InputError) as e:
        ingest_one(log)
    assert e.value.path == str(path) and "'conversations'" in e.value.message
    assert e.value.line == path.read_text().splitlines().index("    {", 2) + 1
    assert open_store(tmp_path / "store").sql("SELECT count(*) FROM trajectories").fetchall() == [(7,)]
