"""``rolloutlab eval``: scripted and mock-endpoint policies on guess-number, output read by
ingest and analyze, summaries checked by hand, resuming a killed evaluation, checkpoints,
and bad input (unknown env, split, too many tasks, changed settings)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import rolloutlab
from rolloutlab.agent import LoopConfig
from rolloutlab.cli import main
from rolloutlab.evaluate import PARTIAL, EvalConfig, find_checkpoints, run_eval, summarize
from rolloutlab.io import InputError, RolloutlabError, read_trajectories
from rolloutlab.schema import EvalSummary, Trajectory
from tests._mock_openai import MockOpenAI, guess_answer

ENV = "guess-number-v0"


def _episodes(out: Path, ckpt: str = "policy") -> list[Trajectory]:
    return [t for _, t in read_trajectories(out / "eval" / ckpt / "episodes.jsonl")]


def _summary(out: Path, ckpt: str = "policy") -> EvalSummary:
    return EvalSummary.model_validate_json((out / "eval" / ckpt / "summary.json").read_text())


def _ingest_and_analyze(out: Path, store: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["ingest", str(out), "--store", str(store), "--name", "ev"]) == 0
    st = rolloutlab.open_store(store)
    n = st.sql("SELECT count(*) FROM trajectories WHERE split = 'eval'").fetchall()[0][0]
    capsys.readouterr()
    assert main(["analyze", "ev", "--store", str(store), "--split", "eval", "--json"]) == 0
    return {"n": n, "analysis": json.loads(capsys.readouterr().out)}


def test_scripted_eval_then_ingest_and_analyze(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ev"
    assert main(["eval", "--env", ENV, "--policy", "scripted:guess-number", "--episodes", "12", "--samples", "3",
                 "--out", str(out), "--concurrency", "4"]) == 0
    trajs = _episodes(out)
    assert len(trajs) == 36 and len({t.traj_id for t in trajs}) == 36
    assert all(t.split == "eval" and t.success and t.reward == 1.0 for t in trajs)  # binary search wins in <= 3
    assert [t.sample_idx for t in trajs[:3]] == [0, 1, 2] and trajs[0].group_id == trajs[2].group_id
    s = _summary(out)
    assert (s.episodes, s.graded, s.success_rate, s.ungraded_rate) == (36, 36, 1.0, 0.0)
    assert s.pass_at_k == {"1": 1.0, "2": 1.0, "3": 1.0} and s.samples == 3 and s.split == "test"
    assert s.mean_turns == pytest.approx(sum(t.num_turns or 0 for t in trajs) / 36)
    assert not (out / "eval" / "policy" / PARTIAL).exists()
    got = _ingest_and_analyze(out, tmp_path / "store", capsys)
    assert got["n"] == 36


def test_mock_endpoint_eval_then_ingest_and_analyze(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ev"
    with MockOpenAI(answer=guess_answer) as mock:
        assert main(["eval", "--env", ENV, "--policy", f"openai:{mock.base_url}:mock", "--episodes", "6",
                     "--samples", "2", "--out", str(out), "--json"]) == 0
        requests = mock.requests
    summaries = json.loads(capsys.readouterr().out)
    assert summaries[0]["success_rate"] == 1.0 and summaries[0]["policy"].startswith("openai:")
    trajs = _episodes(out)
    assert requests == sum(t.num_turns or 0 for t in trajs)  # one request per turn, none wasted
    got = _ingest_and_analyze(out, tmp_path / "store", capsys)
    assert got["n"] == 12


def test_summary_by_hand() -> None:
    def t(task: str, k: int, reward: float | None, success: bool | None, turns: int, cat: str) -> Trajectory:
        return Trajectory(traj_id=f"{task}#{k}", step=0, task_id=task, group_id=task, reward=reward, success=success,
                          graded=reward is not None, num_turns=turns,
                          termination="done" if reward is not None else "error", extras={"task_category": cat})

    trajs = [t("a", 0, 1.0, True, 2, "x"), t("a", 1, 0.0, False, 4, "x"), t("b", 0, 0.0, False, 4, "y"),
             t("b", 1, None, None, 1, "y"), t("c", 0, 0.5, None, 3, "y"), t("c", 1, 1.0, None, 3, "y")]
    s = summarize("ck", 7, trajs, [1, 2])
    assert (s.episodes, s.graded, s.step) == (6, 5, 7)
    assert s.mean_reward == pytest.approx(2.5 / 5)
    # success: given for a and b; c has none -> reward == 1 (rewards lie in [0, 1]): c0 no, c1 yes
    assert s.success_rate == pytest.approx(2 / 5)
    # pass@1 per task: a 1/2, b 0/1 (its ungraded sample left out), c 1/2 -> mean 1/3
    assert s.pass_at_k["1"] == pytest.approx((0.5 + 0.0 + 0.5) / 3)
    # pass@2 only over tasks with 2 graded samples: a 1, c 1
    assert s.pass_at_k["2"] == pytest.approx(1.0)
    assert s.ungraded_rate == pytest.approx(1 / 6) and s.mean_turns == pytest.approx(17 / 6)
    assert s.terminations == {"done": 5, "error": 1}
    # zero-variance: groups a (1, 0) and c (0.5, 1) vary; b has one graded sample, so is not counted
    assert s.zero_variance_frac == 0.0
    assert s.per_category["x"] == {"episodes": 2.0, "graded": 2.0, "mean_reward": 0.5, "success_rate": 0.5,
                                   "ungraded_rate": 0.0, "zero_variance_frac": 0.0, "mean_turns": 3.0}
    assert s.per_category["y"]["graded"] == 3.0 and s.per_category["y"]["success_rate"] == pytest.approx(1 / 3)


def test_resume_skips_finished_and_ignores_a_torn_line(tmp_path: Path) -> None:
    out = tmp_path / "ev"
    with MockOpenAI(answer=guess_answer) as mock:
        cfg = EvalConfig(env=ENV, policy=f"openai:{mock.base_url}:mock", episodes=8, samples=1, out=out)
        run_eval(cfg)
        full = _episodes(out)
        first_requests = mock.requests
        # simulate a kill: only 3 episodes finished (in the partial file), the 4th torn mid-line
        d = out / "eval" / "policy"
        lines = (d / "episodes.jsonl").read_bytes().splitlines()
        (d / "episodes.jsonl").unlink()
        (d / "summary.json").unlink()
        (d / PARTIAL).write_bytes(b"\n".join(lines[:3]) + b"\n" + lines[3][:40])
        mock.requests = 0
        run_eval(cfg)
        resumed = _episodes(out)
        kept = {Trajectory.model_validate_json(x).traj_id for x in lines[:3]}
        assert mock.requests == sum(t.num_turns or 0 for t in full if t.traj_id not in kept)
        assert mock.requests < first_requests
    assert [t.traj_id for t in resumed] == [t.traj_id for t in full]
    assert [t.model_dump(exclude={"extras"}) for t in resumed] == [t.model_dump(exclude={"extras"}) for t in full]
    assert not (d / PARTIAL).exists()
    # a third run has nothing left to do: the endpoint is gone, and nothing changes
    [s] = run_eval(cfg)
    assert s.graded == 8 and [t.traj_id for t in _episodes(out)] == [t.traj_id for t in full]
    with pytest.raises(RolloutlabError, match=r"other settings.*policy"):
        run_eval(EvalConfig(env=ENV, policy="scripted:echo", episodes=8, out=out))


def test_corrupt_partial_line_in_the_middle_is_located(tmp_path: Path) -> None:
    out = tmp_path / "ev"
    d = out / "eval" / "policy"
    d.mkdir(parents=True)
    (d / PARTIAL).write_bytes(b"{not json\n{}\n")
    with pytest.raises(InputError, match=r"\.episodes\.partial\.jsonl:1"):
        run_eval(EvalConfig(env=ENV, policy="scripted:guess-number", episodes=2, out=out))


@pytest.mark.slow
def test_killed_eval_process_resumes_without_duplicates(tmp_path: Path) -> None:
    out = tmp_path / "ev"
    n = 24
    with MockOpenAI(answer=guess_answer, latency_s=0.05) as mock:
        args = [sys.executable, "-m", "rolloutlab", "eval", "--env", ENV, "--policy", f"openai:{mock.base_url}:mock",
                "--episodes", str(n), "--concurrency", "2", "--out", str(out)]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        partial = out / "eval" / "policy" / PARTIAL
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                if partial.exists() and partial.read_bytes().count(b"\n") >= 4:
                    break
                time.sleep(0.05)
            else:
                pytest.fail("the eval wrote no episodes within 60 s")
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finished = partial.read_bytes().count(b"\n")
        assert 4 <= finished < n
        mock.requests = 0
        run_eval(EvalConfig(env=ENV, policy=f"openai:{mock.base_url}:mock", episodes=n, loop=LoopConfig(concurrency=2),
                            out=out))
        rerun_requests = mock.requests
    trajs = _episodes(out)
    counts = Counter(t.traj_id for t in trajs)
    assert len(trajs) == n and max(counts.values()) == 1
    assert all(t.success for t in trajs)
    assert rerun_requests <= sum(t.num_turns or 0 for t in trajs) - finished  # each finished episode had >= 1 turn


def test_bad_input_is_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(RolloutlabError, match=r"unknown environment 'guess-nunber-v0'.*guess-number-v0"):
        run_eval(EvalConfig(env="guess-nunber-v0", policy="random", out=tmp_path / "a"))
    with pytest.raises(RolloutlabError, match="no split 'dev'"):
        run_eval(EvalConfig(env=ENV, policy="random", split="dev", out=tmp_path / "a"))
    with pytest.raises(RolloutlabError, match="has 128 tasks; --episodes 500"):
        run_eval(EvalConfig(env=ENV, policy="random", episodes=500, out=tmp_path / "a"))
    with pytest.raises(RolloutlabError, match="exactly one of --policy and --checkpoints"):
        EvalConfig(env=ENV, out=tmp_path / "a")
    with pytest.raises(RolloutlabError, match="unknown action parser"):
        run_eval(EvalConfig(env=ENV, policy="random", loop=LoopConfig(parser="yaml"), out=tmp_path / "a"))
    assert main(["eval", "--env", "nope-v0", "--policy", "random", "--out", str(tmp_path / "b")]) == 1


def test_random_policy_on_admissible_actions(tmp_path: Path) -> None:
    out = tmp_path / "ev"
    [s] = run_eval(EvalConfig(env=ENV, policy="random", episodes=30, out=out))
    trajs = _episodes(out)
    assert all(u.action_valid for t in trajs for u in t.turns)  # drawn from available_actions
    assert 0.0 < (s.success_rate or 0.0) < 1.0


def test_bad_task_id_is_an_error_episode_not_a_crash() -> None:
    import asyncio

    from rolloutlab.agent import LoopConfig, ScriptedPolicy, run_episode
    from rolloutlab.envs import Task, make_env

    ep = asyncio.run(run_episode(lambda: make_env(ENV), ScriptedPolicy(guess_answer), Task(id="test/999", split="test"),
                                 config=LoopConfig(env_retries=1), seed=0, step=0, traj_id="x"))
    t = ep.trajectory
    assert t.termination == "error" and not t.graded and "unknown task 'test/999'" in (t.error or "")


def test_find_checkpoints(tmp_path: Path) -> None:
    for name in ["checkpoint-20", "global_step_5", "step_100", "7", "notes", "checkpoint-x"]:
        (tmp_path / name).mkdir()
    (tmp_path / "global_step_5" / "actor" / "huggingface").mkdir(parents=True)
    (tmp_path / "global_step_5" / "actor" / "huggingface" / "config.json").write_text("{}")
    found = find_checkpoints(tmp_path)
    assert [(c.name, c.step) for c in found] == [("global_step_5", 5), ("7", 7), ("checkpoint-20", 20), ("step_100", 100)]
    assert found[0].path == tmp_path / "global_step_5" / "actor" / "huggingface"
    with pytest.raises(InputError, match="no checkpoint folders"):
        find_checkpoints(tmp_path / "notes")


@pytest.mark.slow
def test_checkpoints_each_evaluated_with_hf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    from rolloutlab.agent._hf import save_model, tiny_model
    from rolloutlab.agent._tokenizers import guess_number_tokenizer

    tok = guess_number_tokenizer()
    for step in (10, 20):
        save_model(tiny_model(tok.vocab_size, seed=step), tok, tmp_path / "run" / f"checkpoint-{step}")
    out = tmp_path / "ev"
    assert main(["eval", "--env", ENV, "--checkpoints", str(tmp_path / "run"), "--episodes", "4", "--samples", "2",
                 "--max-tokens", "4", "--out", str(out)]) == 0
    for step in (10, 20):
        s = _summary(out, f"checkpoint-{step}")
        assert s.step == step
        assert s.episodes == 8 and s.policy is not None and s.policy.startswith("hf:")
        trajs = _episodes(out, f"checkpoint-{step}")
        assert all(t.step == step and t.response_tokens is not None for t in trajs)
    capsys.readouterr()
    assert main(["ingest", str(out), "--store", str(tmp_path / "store"), "--name", "ck"]) == 0
    st = rolloutlab.open_store(tmp_path / "store")
    assert sorted(r[0] for r in st.sql("SELECT DISTINCT step FROM trajectories WHERE split = 'eval'").fetchall()) == [10, 20]
    # the checkpoint curve: analyze and report read the evaluation
    assert main(["analyze", "ck", "--store", str(tmp_path / "store"), "--split", "eval", "--json"]) == 0
    steps = [row["step"] for row in json.loads(capsys.readouterr().out)["steps"]]
    assert steps == [10, 20]
    assert main(["report", "ck", "--store", str(tmp_path / "store"), "-o", str(tmp_path / "r.html")]) == 0
    assert (tmp_path / "r.html").stat().st_size > 10_000


@pytest.mark.slow
def test_checkpoints_evaluated_into_their_training_run(tmp_path: Path) -> None:
    """`eval --checkpoints RUN/checkpoints --out RUN` (the README's example; what the demo does):
    the training run's record is kept as it was, so the run still resumes from it."""
    pytest.importorskip("torch")
    from rolloutlab.agent._hf import save_model, tiny_model
    from rolloutlab.agent._tokenizers import guess_number_tokenizer
    from rolloutlab.io import RunWriter, read_run
    from rolloutlab.schema import Run
    from rolloutlab.train import TrainConfig, load_config

    run_dir = tmp_path / "run"
    train_cfg = load_config("demo", [])
    writer = RunWriter(run_dir, Run(run_id="t1", name="t", config=train_cfg.to_dict(), status="finished", last_step=10))
    writer.close(status="finished")
    before = (run_dir / "run.json").read_text()
    tok = guess_number_tokenizer()
    save_model(tiny_model(tok.vocab_size, seed=1), tok, run_dir / "checkpoints" / "step_000010")
    assert main(["eval", "--env", ENV, "--checkpoints", str(run_dir / "checkpoints"), "--out", str(run_dir),
                 "--episodes", "2", "--max-tokens", "1", "--json"]) == 0
    assert _summary(run_dir, "step_000010").policy == "hf:step_000010"  # no folder of this machine in the record
    assert (run_dir / "run.json").read_text() == before
    assert TrainConfig.from_dict(read_run(run_dir).config) == train_cfg


def _eval_flags() -> dict[str, str]:
    """Each option of `rolloutlab eval`: its flag -> its help."""
    import typer

    from rolloutlab.cli._app import _register, app

    _register(["eval"])
    cmd = typer.main.get_command(app).commands["eval"]  # type: ignore[attr-defined]
    return {opt: p.help or "" for p in cmd.params if p.param_type_name == "option" for opt in p.opts}


def test_every_config_field_has_a_cli_option() -> None:
    """The options are generated from EvalConfig, its loop settings (LoopConfig) included, each
    with its field's docstring as help; the flags the README and docs use keep their names."""
    import dataclasses

    flags = _eval_flags()
    documented = ["--env", "--out", "--policy", "--checkpoints", "--parser", "--episodes", "--samples", "--split",
                  "--seed", "--concurrency", "--executor", "--max-turns", "--max-tokens", "--temperature", "--top-p",
                  "--invalid-penalty", "--env-timeout", "--env-retries", "--policy-retries", "--json"]
    assert [f for f in documented if f not in flags] == []
    # every loop setting, not only the ones the old hand-written command listed
    for f in dataclasses.fields(LoopConfig):
        if f.name == "split":  # the record's split: the evaluation writes eval; --split is the task split
            continue
        flag = {"max_tokens_per_turn": "--max-tokens", "invalid_action_penalty": "--invalid-penalty"}.get(
            f.name, "--" + f.name.removesuffix("_s").replace("_", "-"))
        assert flag in flags, f"LoopConfig.{f.name} has no option"
    assert flags["--policy-timeout"].startswith("Longest wait for one policy call")
    assert flags["--samples"].startswith("K: episodes per task")
    assert flags["--split"].startswith("Task split")  # EvalConfig.split, not the loop's record label

def test_mostly_invalid_run_warns_and_the_env_names_its_format(tmp_path: Path) -> None:
    """code-search's scripted policy writes Hermes ``<tool_call>`` text: under the default
    ``tool_call`` parser nothing is read, so every turn is invalid.  The policy hears the
    environment's message naming the tools and formats, and eval warns (more than half of
    the turns invalid); with ``--parser hermes`` it neither hears it nor warns."""
    import warnings

    from rolloutlab.envs.builtin.code_search import INVALID_ACTION

    policy = "scripted:rolloutlab.envs.builtin.scripts:code_search"
    out = tmp_path / "bad"
    with pytest.warns(UserWarning, match=r"100% of the turns had an invalid action .*--parser"):
        run_eval(EvalConfig(env="code-search-v0", policy=policy, episodes=2, out=out, loop=LoopConfig(max_turns=3)))
    [t, _] = _episodes(out)
    assert t.invalid_actions == t.num_turns == 3 and t.reward == 0.0
    second = t.turns[1].observation or ""
    assert second.startswith("Your reply could not be read: no tool call. ") and INVALID_ACTION in second
    assert "ls(path)" in INVALID_ACTION and "finish(locations)" in INVALID_ACTION and "hermes" in INVALID_ACTION

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        [s] = run_eval(EvalConfig(env="code-search-v0", policy=policy, episodes=2, out=tmp_path / "ok",
                                 loop=LoopConfig(parser="hermes")))
    assert s.mean_reward and s.mean_reward > 0



def test_cli_options_reach_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each flag sets its field: the loop's in ``config.loop``, the rest on the config; what is
    not given keeps EvalConfig's default."""
    import rolloutlab.evaluate

    seen: list[EvalConfig] = []

    def fake_run_eval(config: EvalConfig, **_: object) -> list[EvalSummary]:
        seen.append(config)
        return []

    monkeypatch.setattr(rolloutlab.evaluate, "run_eval", fake_run_eval)
    assert main(["eval", "--env", ENV, "--policy", "random", "--out", str(tmp_path / "o"), "--max-tokens", "7",
                 "--invalid-penalty", "-0.5", "--env-timeout", "3", "--policy-timeout", "9", "--policy-backoff", "0.25",
                 "--concurrency", "5", "--parser", "xml", "--samples", "3", "--json"]) == 0
    [c] = seen
    assert c == EvalConfig(env=ENV, policy="random", out=tmp_path / "o", samples=3,
                           given=frozenset({"max_tokens_per_turn"}),  # given: wins over a checkpoint's own
                           loop=LoopConfig(max_tokens_per_turn=7, invalid_action_penalty=-0.5, env_timeout_s=3.0,
                                           policy_timeout_s=9.0, policy_backoff_s=0.25, concurrency=5, parser="xml"))
    assert c.loop.split == "eval" and c.split == "test"


def test_two_interruptions_then_a_third_run_finish_every_episode_once(tmp_path: Path) -> None:
    """Issue 21 item 7: each interrupted run leaves a torn last line; the next run cuts it
    off before appending, so the third run reads a clean partial file."""
    out = tmp_path / "ev"
    partial = out / "eval" / "policy" / PARTIAL

    class Killed(Exception):
        pass

    def interrupt_after(n: int) -> Callable[[Any], None]:
        def on_progress(prog: Any) -> None:
            if prog.done - prog.resumed >= n:
                raise Killed
        return on_progress

    with MockOpenAI(answer=guess_answer, latency_s=0.01) as mock:
        cfg = EvalConfig(env=ENV, policy=f"openai:{mock.base_url}:mock", episodes=8, samples=1, out=out,
                         loop=LoopConfig(concurrency=1))
        for _ in range(2):
            with pytest.raises(Killed):
                run_eval(cfg, on_progress=interrupt_after(2))
            first = partial.read_bytes().split(b"\n")[0]
            with open(partial, "ab") as f:
                f.write(first[:40])  # killed while writing one more episode
        assert partial.read_bytes().count(b"\n") == 4  # two finished episodes per interrupted run
        [s] = run_eval(cfg)
    trajs = _episodes(out)
    assert s.graded == 8 and len({t.traj_id for t in trajs}) == len(trajs) == 8
    assert not partial.exists()
