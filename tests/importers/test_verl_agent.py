"""verl-agent per-turn dumps: trajectories rebuilt from the history in ``input``, or from
the logged ``traj_uid`` / ``uid`` fields (facts: FORMATS.md § verl-agent)."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import orjson
import pytest

from rolloutlab.io import InputError, open_store
from rolloutlab.io.importers import REGISTRY, detect_format
from rolloutlab.io.importers.verl_agent import link_turns
from tests._verl import write_verl

SYSTEM = "system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n"

# One GRPO group is n episodes of one task.  Each episode is a list of
# (observation, output, action_valid) turns; the episode reward goes on every turn, less
# the invalid-action penalty on turns whose action was invalid (what verl-agent dumps).
PENALTY = 0.1


def chat_turns(episode: list[tuple[str, str, bool]]) -> list[tuple[str, str, bool]]:
    """(input, output, valid) per turn of an environment that keeps the whole chat:
    the decoded prompt of turn k is the conversation so far, special tokens skipped."""
    out = []
    history = SYSTEM
    for obs, action, valid in episode:
        history += f"user\n{obs}\nassistant\n"
        out.append((history, action, valid))
        history += action + "\n"
    return out


def write_dump(dest: Path, step: int, groups: list[list[tuple[list[tuple[str, str, bool]], float]]],
               *, order: list[int] | None = None, copies: tuple[int, ...] = (), name: str | None = None,
               render: Any = chat_turns, extra: Any = None) -> list[dict[str, Any]]:
    """Lines of one step file; ``order`` permutes them (balance_batch), ``copies`` appends
    copies of some lines (adjust_batch)."""
    lines: list[dict[str, Any]] = []
    for g, group in enumerate(groups):
        for s, (episode, reward) in enumerate(group):
            for t, (inp, output, valid) in enumerate(render(episode)):
                rec: dict[str, Any] = {"input": inp, "output": output,
                                       "score": reward - (0.0 if valid else PENALTY), "step": step}
                if extra is not None:
                    rec.update(extra(g, s, t, valid, reward, len(episode)))
                lines.append(rec)
    if order is not None:
        lines = [lines[i] for i in order]
    lines += [lines[i] for i in copies]
    dest.mkdir(parents=True, exist_ok=True)
    data = b"".join(orjson.dumps(r) + b"\n" for r in lines)
    fname = name or f"{step}.jsonl"
    if fname.endswith(".gz"):
        with gzip.open(dest / fname, "wb") as f:
            f.write(data)
    else:
        (dest / fname).write_bytes(data)
    return lines


# Two tasks, two samples each: episodes of 3+2 and 1+2 turns (8 lines).
GROUPS = [
    [([("find the key", "go north", True), ("a hall", "take key", False), ("a key", "open door", True)], 1.0),
     ([("find the key", "go south", True), ("a wall", "give up", True)], 0.0)],
    [([("count to 2", "1 2", True)], 1.0),
     ([("count to 2", "1", True), ("wrong, again", "1 2", True)], 0.5)],
]
SHUFFLE = [5, 2, 7, 0, 3, 6, 1, 4]


def test_history_rebuilds_trajectories_groups_and_rewards(tmp_path: Path, ingest_one) -> None:
    src = tmp_path / "rollout_data"
    lines = write_dump(src, 3, GROUPS, order=SHUFFLE, copies=(4,))  # one adjust_batch copy
    assert detect_format(src).name == "verl-agent"
    assert REGISTRY["verl"].detect(src) == 80  # verl would take it, verl-agent is surer
    report, st = ingest_one(src)
    assert len(lines) == 9
    assert report.sources[0].counts == {"trajectories": 4, "turns": 8, "metrics": 0}
    assert any("dropped 1 lines that are exact copies" in w for w in report.sources[0].warnings)
    rows = st.sql("""SELECT t.num_turns, t.reward, t.graded, t.sample_idx, x.prompt LIKE '%find the key%',
                            t.invalid_actions, t.split, t.step
                     FROM trajectories t JOIN texts x USING (traj_id) WHERE x.turn_idx = -1
                     ORDER BY t.group_id, t.sample_idx""").fetchall()
    by_task = sorted(rows, key=lambda r: (not r[4], r[3]))
    assert [(r[0], r[1], r[2], r[3]) for r in by_task] == [
        (3, 1.0, True, 0), (2, 0.0, True, 1), (1, 1.0, True, 0), (2, 0.5, True, 1)]
    assert {r[6:] for r in rows} == {("train", 3)}
    assert all(r[5] is None for r in rows)  # validity is not in the dump, only the penalised score
    groups = st.sql("SELECT group_id, count(*), count(DISTINCT task_id) FROM trajectories GROUP BY group_id").fetchall()
    assert sorted(g[1:] for g in groups) == [(2, 1), (2, 1)]
    assert all(g[0].startswith("3:") for g in groups)
    # the penalised turn lowers its score only; the reward is the episode's
    extras = [orjson.loads(e[0]) for e in st.sql(
        "SELECT extras FROM texts WHERE turn_idx = -1 ORDER BY traj_id").fetchall()]
    assert {e["linked_by"] for e in extras} == {"history", "none"}
    assert [e["turn_scores"] for e in extras if "turn_scores" in e] == [[1.0, 0.9, 1.0]]
    # turns in order, each observation is what the prompt added to the previous turn
    turns = st.sql("""SELECT x.turn_idx, x.observation, x.action FROM texts x JOIN trajectories t USING (traj_id)
                      WHERE t.num_turns = 3 AND x.turn_idx >= 0 ORDER BY x.turn_idx""").fetchall()
    assert turns == [(0, SYSTEM + "user\nfind the key\nassistant\n", "go north"),
                     (1, "\nuser\na hall\nassistant\n", "take key"),
                     (2, "\nuser\na key\nassistant\n", "open door")]
    resp = st.sql("SELECT response FROM texts x JOIN trajectories t USING (traj_id) "
                  "WHERE t.num_turns = 3 AND x.turn_idx = -1").fetchall()
    assert resp == [("open door",)]


ALFWORLD_NO_HIS = ("user\n\nYou are an expert agent operating in the ALFRED Embodied Environment.\n"
                   "Your current observation is: {obs}\nYour admissible actions of the current situation are: [{acts}].\n"
                   "\nNow it's your turn to take an action.\nassistant\n")
ALFWORLD = ("user\n\nYou are an expert agent operating in the ALFRED Embodied Environment. Your task is to: {task}\n"
            "Prior to this step, you have already taken {k} step(s). Below are the most recent {k} observaitons "
            "and the corresponding actions you took: {hist}\nYou are now at step {k1} and your current "
            "observation is: {obs}\nYour admissible actions of the current situation are: [{acts}].\n"
            "\nNow it's your turn to take an action.\nassistant\n")


def alfworld_turns(episode: list[tuple[str, str, bool]]) -> list[tuple[str, str, bool]]:
    """verl-agent's ALFWorld prompts: a template with a history window, not the chat."""
    out = []
    hist = ""
    for k, (obs, action, valid) in enumerate(episode):
        if k == 0:
            inp = ALFWORLD_NO_HIS.format(obs=obs, acts="'look'")
        else:
            inp = ALFWORLD.format(task="put a pen on the desk", k=k, hist=hist, k1=k + 1, obs=obs, acts="'look'")
        hist += f"\n[Observation {k + 1}: '{obs}', Action {k + 1}: '{action}']"
        out.append((inp, f"<think>...</think><action>{action}</action>", valid))
    return out


EPISODES = [
    [([("You are in a room. Your task is to: put a pen on the desk", "go to desk 1", True),
       ("You arrive at desk 1.", "take pen 1", False), ("Nothing happens.", "put pen 1 on desk 1", True)], 10.0),
     ([("You are in a room. Your task is to: put a pen on the desk", "look", True),
       ("You are in a room.", "go to desk 1", True)], 0.0)],
]


def _ids(g: int, s: int, t: int, valid: bool, reward: float, length: int) -> dict[str, Any]:
    return {"uid": f"group-{g}", "traj_uid": f"traj-{g}-{s}", "anchor_obs": f"obs {s}.{t}",
            "rewards": reward if t == length - 1 else 0.0, "is_action_valid": valid,
            "episode_rewards": reward, "episode_lengths": length, "tool_callings": 0, "data_source": "alfworld"}


def test_logged_ids_are_used_and_templates_ordered_by_step_counter(tmp_path: Path, ingest_one) -> None:
    src = tmp_path / "rollouts"
    write_dump(src, 7, EPISODES, order=[4, 2, 3, 1, 0], copies=(1,), render=alfworld_turns, extra=_ids)
    assert detect_format(src).name == "verl-agent"
    report, st = ingest_one(src)
    assert report.sources[0].counts["trajectories"] == 2 and report.sources[0].counts["turns"] == 5
    rows = st.sql("""SELECT traj_id, group_id, sample_idx, reward, num_turns, invalid_actions, tool_calls, data_source
                     FROM trajectories ORDER BY traj_id""").fetchall()
    assert rows == [("train/7/traj-0-0", "7:group-0", 1, 10.0, 3, 1, 0, "alfworld"),
                    ("train/7/traj-0-1", "7:group-0", 0, 0.0, 2, 0, 0, "alfworld")]
    turns = st.sql("""SELECT u.turn_idx, u.reward, u.action_valid, u.anchor_hash IS NOT NULL, x.anchor_obs, x.action
                      FROM turns u JOIN texts x USING (traj_id, turn_idx)
                      WHERE u.traj_id = 'train/7/traj-0-0' ORDER BY u.turn_idx""").fetchall()
    assert turns == [(0, 0.0, True, True, "obs 0.0", "<think>...</think><action>go to desk 1</action>"),
                     (1, 0.0, False, True, "obs 0.1", "<think>...</think><action>take pen 1</action>"),
                     (2, 10.0, True, True, "obs 0.2", "<think>...</think><action>put pen 1 on desk 1</action>")]
    extras = orjson.loads(st.sql("SELECT extras FROM texts WHERE traj_id = 'train/7/traj-0-0' AND turn_idx = -1")
                          .fetchall()[0][0])
    assert extras["linked_by"] == "ids" and extras["turn_scores"] == [10.0, 9.9, 10.0]


def test_template_prompts_without_ids_are_left_to_verl(tmp_path: Path, ingest_one) -> None:
    src = tmp_path / "plain"
    write_dump(src, 1, EPISODES, render=alfworld_turns)
    assert REGISTRY["verl-agent"].detect(src) == 0
    assert detect_format(src).name == "verl"
    report, st = ingest_one(src, format="verl-agent")
    assert report.sources[0].counts["trajectories"] == 5  # no link: one trajectory per line
    assert any("no line continues another" in w for w in report.sources[0].warnings)
    # the two first turns share the initial prompt: one group of two, three singletons
    sizes = sorted(r[0] for r in st.sql("SELECT count(*) FROM trajectories GROUP BY group_id").fetchall())
    assert sizes == [1, 1, 1, 2]


def test_verl_dumps_are_not_claimed(tmp_path: Path) -> None:
    src = write_verl(tmp_path / "verl", {1: [[1, 0, 0, 1], [0, 1]]})
    assert REGISTRY["verl-agent"].detect(src) == 0
    assert detect_format(src).name == "verl"
    assert REGISTRY["verl-agent"].detect(src / "1.jsonl") == 0


def test_gzip_step_file_and_metrics(tmp_path: Path, ingest_one) -> None:
    src = tmp_path / "gz"
    write_dump(src, 2, GROUPS, order=SHUFFLE, name="2.jsonl.gz")
    (src / "exp.jsonl").write_text('{"step": 2, "data": {"episode/success_rate": 0.5, "episode/reward/mean": 0.6}}\n')
    assert detect_format(src).name == "verl-agent"
    assert detect_format(src / "2.jsonl.gz").name == "verl-agent"
    _, st = ingest_one(src)
    assert st.sql("SELECT count(*), sum(num_turns), sum(reward) FROM trajectories").fetchall() == [(4, 8, 2.5)]
    assert st.sql("SELECT name, value FROM metrics ORDER BY name").fetchall() == [
        ("episode/reward/mean", 0.6), ("episode/success_rate", 0.5)]


def qwen3_turns(episode: list[tuple[str, str, bool]]) -> list[tuple[str, str, bool]]:
    """A chat template that drops past reasoning: the next prompt extends the previous
    prompt, but not prompt + output."""
    out = []
    history = ""
    for obs, action, valid in episode:
        history += f"user\n{obs}\nassistant\n"
        out.append((history, f"<think>hm</think>{action}", valid))
        history += action + "\n"
    return out


def test_prompt_prefix_rule(tmp_path: Path, ingest_one) -> None:
    src = tmp_path / "q3"
    write_dump(src, 1, GROUPS, order=SHUFFLE, render=qwen3_turns)
    assert REGISTRY["verl-agent"].detect(src) == 0  # no verbatim history: not claimed
    _, st = ingest_one(src, format="verl-agent")
    assert sorted(r[0] for r in st.sql("SELECT num_turns FROM trajectories").fetchall()) == [1, 2, 2, 3]
    rules = {orjson.loads(r[0])["linked_by"] for r in st.sql("SELECT extras FROM texts WHERE turn_idx = -1").fetchall()}
    assert rules == {"prompt_prefix", "none"}
    obs = st.sql("""SELECT x.observation FROM texts x JOIN trajectories t USING (traj_id)
                    WHERE t.num_turns = 3 AND x.turn_idx = 1""").fetchall()
    assert obs == [("go north\nuser\na hall\nassistant\n",)]


def test_link_turns_copies_ties_and_orphans() -> None:
    a0, a1 = "u\nq\na\n", "x"
    b0 = a0 + a1 + "\nu\no\na\n"
    # two identical first turns (a group whose members acted alike) each get one successor;
    # a third identical successor with no parent left is an orphan; a copy of a linked
    # successor is dropped
    inputs = [a0, a0, b0, b0, b0, b0]
    outputs = [a1, a1, "y", "z", "w", "y"]
    same = [b"r0", b"r0", b"r2", b"r3", b"r4", b"r2"]
    links = link_turns(inputs, outputs, same)
    assert sorted(links.chains) == [[0, 2], [1, 3], [4]]
    assert links.duplicates == [5] and links.orphans == {4}
    assert set(links.rules) == {"history", "none"}
    # an isolated copy of a linked first turn is dropped too
    links = link_turns([a0, a0, b0], [a1, a1, "y"], [b"r0", b"r0", b"r2"])
    assert links.chains == [[0, 2]] and links.duplicates == [1]
    # empty outputs and identical inputs: no line continues its twin (no cycle)
    assert sorted(link_turns(["p", "p"], ["", ""], [b"1", b"2"]).chains) == [[0], [1]]
    # nothing in common: every line alone
    assert link_turns(["p", "q"], ["1", "2"], [b"1", b"2"]).chains == [[0], [1]]


def test_missing_output_names_file_and_line(tmp_path: Path, ingest_one) -> None:
    src = tmp_path / "bad"
    write_dump(src, 1, GROUPS)
    _, st = ingest_one(src)
    path = src / "1.jsonl"
    recs = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    del recs[3]["output"]
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    with pytest.raises(InputError) as e:
        ingest_one(src)
    assert e.value.path == str(path) and e.value.line == 4
    assert "missing required field 'output'" in e.value.message
    assert st.sql("SELECT count(*) FROM trajectories").fetchall() == [(4,)]
    assert open_store(tmp_path / "store").sql("SELECT count(*) FROM trajectories").fetchall() == [(4,)]  # unchanged


def test_hermes_tool_calls_with_results_from_next_observation(tmp_path: Path, ingest_one) -> None:
    call = '<tool_call>\n{"name": "search", "arguments": {"q": "%s"}}\n</tool_call>'
    episode = [("find it", call % "a", True), ("<tool_response>\nnothing\n</tool_response>", call % "b", True),
               ("<tool_response>\nfound b\n</tool_response>", "done: b", True)]
    src = tmp_path / "tools"
    write_dump(src, 1, [[(episode, 1.0), ([("find it", "give up", True)], 0.0)]])
    _, st = ingest_one(src, format="verl-agent")
    assert st.sql("SELECT num_turns, tool_calls FROM trajectories ORDER BY num_turns").fetchall() == [(1, 0), (3, 2)]
    rows = st.sql("SELECT turn_idx, tool_calls FROM texts WHERE turn_idx >= 0 AND tool_calls IS NOT NULL "
                  "ORDER BY turn_idx").fetchall()
    assert [(i, orjson.loads(c)) for i, c in rows] == [
        (0, [{"name": "search", "arguments": '{"q":"a"}', "result": "nothing"}]),
        (1, [{"name": "search", "arguments": '{"q":"b"}', "result": "found b"}])]
