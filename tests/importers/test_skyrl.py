"""SkyRL eval dumps (facts: FORMATS.md § SkyRL, ``dump_per_dataset_eval_results``)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from rolloutlab.io import InputError, open_store
from rolloutlab.io.importers import REGISTRY, detect_format
from rolloutlab.io.importers.skyrl import split_chat
from tests._verl import write_verl


def prompt(q: str) -> str:
    return ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n")


def sample(ds: str, q: str, answer: str, score: Any, stop: str | None = "stop") -> dict[str, Any]:
    return {"input_prompt": prompt(q), "output_response": answer + "<|im_end|>", "score": score,
            "stop_reason": stop, "env_class": "gsm8k",
            "env_extras": {"data_source": ds, "reward_spec": {"method": "rule", "ground_truth": "2"}},
            "data_source": ds}


def write_step(folder: Path, per_ds: dict[str, list[dict[str, Any]]], metrics: dict[str, float],
               *, gz: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for ds, lines in per_ds.items():
        data = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode()
        name = ds.replace("/", "_") + ".jsonl"
        if gz:
            with gzip.open(folder / (name + ".gz"), "wb") as f:
                f.write(data)
        else:
            (folder / name).write_bytes(data)
    (folder / "aggregated_results.jsonl").write_text(json.dumps(metrics) + "\n")
    return folder


def gsm8k_step(scores: list[list[float]]) -> dict[str, list[dict[str, Any]]]:
    """Two samples per prompt, consecutive (``eval_n_samples_per_prompt=2``)."""
    return {
        "openai/gsm8k": [sample("openai/gsm8k", f"q{g}", f"a{s}", x, "stop" if s == 0 else "length")
                         for g, row in enumerate(scores) for s, x in enumerate(row)],
        "aime": [sample("aime", "hard", "no idea", 0.0, "abort"), sample("aime", "hard", "42", 1.0)],
    }


def write_export(root: Path) -> Path:
    evals = root / "exports" / "dumped_evals"
    write_step(evals / "global_step_0_evals", gsm8k_step([[0.0, 1.0], [0.0, 0.0]]),
               {"eval/openai_gsm8k/avg_score": 0.25, "eval/openai_gsm8k/pass_at_2": 0.5,
                "eval/aime/avg_score": 0.5, "eval/all/avg_score": 0.333})
    write_step(evals / "global_step_10_evals", gsm8k_step([[1.0, 1.0], [1.0, 0.0]]),
               {"eval/openai_gsm8k/avg_score": 0.75, "eval/all/pass_at_2": 1.0})
    return root / "exports"


def test_export_dir_steps_groups_metrics(tmp_path: Path, ingest_one) -> None:
    src = write_export(tmp_path)
    evals = src / "dumped_evals"
    for p in (src, evals, evals / "global_step_10_evals", evals / "global_step_10_evals" / "aime.jsonl"):
        assert detect_format(p).name == "skyrl", p
    report, st = ingest_one(src)
    assert report.sources[0].counts == {"trajectories": 12, "turns": 12, "metrics": 6}
    assert st.sql("SELECT name FROM runs").fetchall() == [("exports",)]
    rows = st.sql("""SELECT step, data_source, count(*), count(DISTINCT group_id), sum(reward),
                            sum(success::INT), list(DISTINCT split)
                     FROM trajectories GROUP BY step, data_source ORDER BY step, data_source""").fetchall()
    assert rows == [(0, "aime", 2, 1, 1.0, 1, ["eval"]), (0, "openai/gsm8k", 4, 2, 1.0, 1, ["eval"]),
                    (10, "aime", 2, 1, 1.0, 1, ["eval"]), (10, "openai/gsm8k", 4, 2, 3.0, 3, ["eval"])]
    # same prompt = same group at a step (sample_idx in line order) and same task across steps
    g = st.sql("""SELECT list(sample_idx ORDER BY traj_id), count(DISTINCT task_id) FROM trajectories
                  WHERE data_source = 'openai/gsm8k' AND step = 0 GROUP BY group_id""").fetchall()
    assert sorted(g) == [([0, 1], 1), ([0, 1], 1)]
    assert st.sql("SELECT count(DISTINCT task_id) FROM trajectories").fetchall() == [(3,)]
    terms = st.sql("SELECT termination, count(*) FROM trajectories GROUP BY 1 ORDER BY 1").fetchall()
    assert terms == [("aborted", 2), ("done", 6), ("truncated", 4)]
    finish = st.sql("SELECT finish_reason, count(*) FROM turns GROUP BY 1 ORDER BY 1 NULLS LAST").fetchall()
    assert finish == [("length", 4), ("stop", 6), (None, 2)]  # abort: the episode's, no turn's
    m = st.sql("SELECT split, step, name, value FROM metrics ORDER BY step, name").fetchall()
    assert m[:2] == [("eval", 0, "eval/aime/avg_score", 0.5), ("eval", 0, "eval/all/avg_score", 0.333)]
    assert ("eval", 10, "eval/all/pass_at_2", 1.0) in m
    text = st.sql("""SELECT x.prompt, x.response, x.extras FROM texts x JOIN trajectories t USING (traj_id)
                     WHERE t.step = 10 AND t.data_source = 'aime' AND t.sample_idx = 1 AND x.turn_idx = -1""").fetchall()
    p, r, e = text[0]
    assert p == prompt("hard") and r == "42<|im_end|>"
    extras = orjson.loads(e)
    assert extras["env_class"] == "gsm8k" and extras["env_extras"]["reward_spec"]["ground_truth"] == "2"
    assert extras["stop_reason"] == "stop"
    assert st.sql("""SELECT x.action FROM texts x JOIN trajectories t USING (traj_id)
                     WHERE t.step = 10 AND t.data_source = 'aime' AND t.sample_idx = 1 AND x.turn_idx = 0""").fetchall() == [("42",)]


MULTI = ("<search>capital of France</search><|im_end|>\n<|im_start|>user\n<information>Paris</information>"
         "<|im_end|>\n<|im_start|>assistant\n<answer>Paris</answer><|im_end|>")


def test_token_level_scores_multi_turn_gzip(tmp_path: Path, ingest_one) -> None:
    lines = [dict(sample("searchR1_nq", "capital?", "", [0.0, 0.0, 0.0, 1.0]), output_response=MULTI),
             dict(sample("searchR1_nq", "capital?", "", [0.5, 0.0, -0.25]), output_response="Lyon<|im_end|>")]
    step = write_step(tmp_path / "run" / "dumped_evals" / "global_step_5_evals", {"searchR1_nq": lines},
                      {"eval/searchR1_nq/avg_score": 0.625}, gz=True)
    assert detect_format(step).name == "skyrl"
    _, st = ingest_one(step)
    rows = st.sql("SELECT reward, success, num_turns, step FROM trajectories ORDER BY traj_id").fetchall()
    # sum of the token rewards; success is the last token's reward > 0 (SkyRL's pass@n)
    assert rows == [(1.0, True, 2, 5), (0.25, False, 1, 5)]
    extras = [orjson.loads(r[0]) for r in st.sql("SELECT extras FROM texts WHERE turn_idx = -1 ORDER BY traj_id").fetchall()]
    assert [(e["token_rewards"], e["last_token_reward"]) for e in extras] == [(4, 1.0), (3, -0.25)]
    turns = st.sql("""SELECT turn_idx, observation, action FROM texts WHERE turn_idx >= 0 AND traj_id LIKE '%/1'
                      ORDER BY turn_idx""").fetchall()
    assert turns == [(0, None, "<search>capital of France</search>"),
                     (1, "<information>Paris</information>", "<answer>Paris</answer>")]


def test_split_chat_llama3_and_final_observation() -> None:
    text = ("call()<|eot_id|><|start_header_id|>tool<|end_header_id|>\n\nresult<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\ndone<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nbye<|eot_id|>")
    turns, final = split_chat(text)
    assert [(t.observation, t.action) for t in turns] == [(None, "call()"), ("result", "done")]
    assert final == "bye"
    assert [t.action for t in split_chat("plain")[0]] == ["plain"]


def test_eval_only_is_step_zero_beside_step_zero(tmp_path: Path, ingest_one) -> None:
    evals = tmp_path / "exp" / "dumped_evals"
    write_step(evals / "global_step_0_evals", {"aime": [sample("aime", "hard", "1", 0.0)]}, {"eval/aime/avg_score": 0.0})
    write_step(evals / "eval_only", {"aime": [sample("aime", "hard", "42", 1.0)]}, {"eval/aime/avg_score": 1.0})
    _, st = ingest_one(tmp_path / "exp")
    rows = st.sql("SELECT traj_id, step, group_id, reward FROM trajectories ORDER BY traj_id").fetchall()
    assert [r[0] for r in rows] == ["eval/0/aime/1", "eval/eval_only/0/aime/1"]
    assert {r[1] for r in rows} == {0}
    assert len({r[2] for r in rows}) == 2


def test_others_not_claimed(tmp_path: Path) -> None:
    verl = write_verl(tmp_path / "verl", {1: [[1, 0]]})
    assert REGISTRY["skyrl"].detect(verl) == 0
    sky = write_export(tmp_path)
    assert REGISTRY["verl"].detect(sky) == 0 and REGISTRY["verl-agent"].detect(sky) == 0


def test_missing_response_names_file_and_line(tmp_path: Path, ingest_one) -> None:
    src = write_export(tmp_path)
    ingest_one(src)
    f = src / "dumped_evals" / "global_step_10_evals" / "openai_gsm8k.jsonl"
    lines = f.read_text().splitlines()
    bad = json.loads(lines[2])
    del bad["output_response"]
    lines[2] = json.dumps(bad)
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as e:
        ingest_one(src)
    assert e.value.path == str(f) and e.value.line == 3 and "output_response" in e.value.message
    assert open_store(tmp_path / "store").sql("SELECT count(*) FROM trajectories").fetchall() == [(12,)]


def test_split_chat_hermes_tool_calls() -> None:
    text = ('<tool_call>\n{"name": "search", "arguments": {"q": "x"}}\n</tool_call><|im_end|>\n'
            "<|im_start|>user\n<tool_response>\nfound x\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\nx it is<|im_end|>")
    turns, final = split_chat(text)
    assert [t.tool_calls for t in turns] == [[{"name": "search", "arguments": '{"q":"x"}', "result": "found x"}], []]
    assert final is None


# -- issue 19: dumped evals without chat markers ------------------------------------------

_CALL = '<tool_call>\n{"name": "search", "arguments": {"q": "capital of France"}}\n</tool_call>'
_BARE = (f"assistant\nLet me look.\n{_CALL}\nuser\n<tool_response>\nParis\n</tool_response>\n"
         f"assistant\n{_CALL}\nuser\n<tool_response>\nstill Paris\n</tool_response>\nassistant\nParis")


def test_bare_role_lines_split_into_turns(tmp_path: Path, ingest_one) -> None:
    line = dict(sample("tau", "capital?", "", 1.0), output_response=_BARE)
    step = write_step(tmp_path / "dumped_evals" / "global_step_3_evals", {"tau": [line]}, {"eval/tau/avg_score": 1.0})
    _, st = ingest_one(step)
    assert st.sql("SELECT num_turns, tool_calls FROM trajectories").fetchall() == [(3, 2)]
    turns = st.sql("SELECT observation, action, tool_calls FROM texts WHERE turn_idx >= 0 ORDER BY turn_idx").fetchall()
    assert [t[1] for t in turns] == [f"Let me look.\n{_CALL}", _CALL, "Paris"]
    assert [t[0] for t in turns] == [None, "<tool_response>\nParis\n</tool_response>",
                                     "<tool_response>\nstill Paris\n</tool_response>"]
    assert [c["result"] for t in turns[:2] for c in orjson.loads(t[2])] == ["Paris", "still Paris"]


def test_conversation_gives_the_turns(tmp_path: Path, ingest_one) -> None:
    # the response kept no role words at all; the row's conversation has the messages
    conv = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "capital?"},
            {"role": "assistant", "content": "looking", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "France"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "Paris"},
            {"role": "assistant", "content": [{"type": "text", "text": "It is Paris."}]},
            {"role": "user", "content": "thanks"}]
    line = dict(sample("tau", "capital?", "", 1.0), output_response="lookingIt is Paris.", conversation=conv)
    step = write_step(tmp_path / "dumped_evals" / "global_step_3_evals", {"tau": [line]}, {"eval/tau/avg_score": 1.0})
    _, st = ingest_one(step)
    assert st.sql("SELECT num_turns, tool_calls FROM trajectories").fetchall() == [(2, 1)]
    turns = st.sql("SELECT observation, action, tool_calls FROM texts WHERE turn_idx >= 0 ORDER BY turn_idx").fetchall()
    assert [(t[0], t[1]) for t in turns] == [(None, "looking"), ("Paris", "It is Paris.")]
    assert orjson.loads(turns[0][2]) == [{"name": "search", "arguments": '{"q": "France"}', "id": "c1", "result": "Paris"}]
    extras = orjson.loads(st.sql("SELECT extras FROM texts WHERE turn_idx = -1").fetchall()[0][0])
    assert extras["final_observation"] == "thanks" and "conversation" not in extras


def test_unread_subfolders_are_reported(tmp_path: Path, ingest_one) -> None:
    # issue 19 item 6: test_airline/ and test_retail/ subfolders were silently unread
    root = tmp_path / "exports"
    step = write_step(root / "dumped_evals" / "global_step_2_evals", {"tau": [sample("tau", "q", "a", 1.0)]},
                      {"eval/tau/avg_score": 1.0})
    write_step(step / "test_airline", {"airline": [sample("airline", "q", "a", 0.0)] * 3}, {})
    write_step(root / "dumped_evals" / "test_retail", {"retail": [sample("retail", "q", "a", 0.0)]}, {})
    report, st = ingest_one(root)
    assert st.sql("SELECT count(*) FROM trajectories").fetchall() == [(1,)]
    (w,) = [w for w in report.sources[0].warnings if "not read" in w]
    assert "2 not read" in w
    assert "dumped_evals/global_step_2_evals/test_airline/: a subfolder of a step folder (2 files)" in w
    assert "dumped_evals/test_retail/: not a step folder" in w
