"""A blocking in-process environment is contained (issue 21 item 2): ``reset`` / ``step`` run
on a thread of their own, so a call that blocks (``time.sleep``, a long computation in C) ends
the episode ungraded at ``env_timeout_s`` in ``eval`` and ``train``, the other episodes go on,
and SIGINT / SIGTERM stop ``eval`` within seconds.  Before, the block held the event loop:
the timeout never fired, and a signal waited for the blocked call to return."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from rolloutlab.agent import EpisodeJob, LoopConfig, ScriptedPolicy, run_episodes
from rolloutlab.cli import main
from rolloutlab.envs import ENVS, Action, StepResult, Task, register_env
from rolloutlab.envs.builtin.guess_number import GuessNumberEnv, guess_number_tasks

from ._fakes import FakeGuessEnv, bisect_answer

BLOCK_S = 30.0
"""How long a blocking step sleeps: far beyond every bound asserted here."""


class _SleepsOnOddTasks(GuessNumberEnv):
    """guess-number whose tasks with an odd index block in ``time.sleep`` at the second step."""

    async def reset(self, *, task: Task | str | None = None, seed: int | None = None) -> Any:
        self._odd = int(str(task.id if isinstance(task, Task) else task).rsplit("/", 1)[-1]) % 2 == 1
        self._steps = 0
        return await super().reset(task=task, seed=seed)

    async def step(self, action: Action) -> StepResult:
        self._steps += 1
        if self._odd and self._steps == 2:
            time.sleep(BLOCK_S)  # no await: the loop it runs on cannot time it out
        return await super().step(action)


if "sleepy-guess-v0" not in ENVS:
    register_env("sleepy-guess-v0", description="test: blocks in time.sleep", max_turns=4, action_format="text",
                 reward_range=(0.0, 1.0), tasks=guess_number_tasks, has_anchor=True)(_SleepsOnOddTasks)


class _Blocking(FakeGuessEnv):
    async def step(self, action: Action) -> StepResult:
        time.sleep(BLOCK_S)
        return await super().step(action)


def test_one_blocking_episode_ends_ungraded_and_the_others_go_on() -> None:
    cfg = LoopConfig(env_timeout_s=1.0, env_retries=0, concurrency=8, max_turns=6)
    jobs = [EpisodeJob(env_factory=(lambda: _Blocking(target=3)) if i == 0 else (lambda: FakeGuessEnv(target=5)),
                       task=Task(id=f"train/{i}", split="train"), seed=i, step=0, traj_id=f"e{i}") for i in range(4)]
    t0 = time.monotonic()
    eps = asyncio.run(run_episodes(jobs, ScriptedPolicy(bisect_answer), config=cfg))
    elapsed = time.monotonic() - t0
    blocked = eps[0].trajectory
    assert blocked.termination == "error" and blocked.graded is False and blocked.reward is None
    assert "env.step did not answer within 1s" in (blocked.error or "")
    assert "close not called" in blocked.extras["close_errors"][0]
    assert all(e.trajectory.graded and e.trajectory.reward == 1.0 for e in eps[1:])
    assert elapsed < 8, f"{elapsed:.1f}s (the step blocks {BLOCK_S:g}s)"


def test_eval_with_a_blocking_environment_ends_it_ungraded_at_the_timeout(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    t0 = time.monotonic()
    rc = main(["eval", "--env", "sleepy-guess-v0", "--policy", "scripted:guess-number", "--episodes", "4",
               "--env-timeout", "1", "--env-retries", "0", "--out", str(tmp_path)])
    elapsed = time.monotonic() - t0
    capsys.readouterr()
    assert rc == 0
    rows = [orjson.loads(x) for x in (tmp_path / "eval" / "policy" / "episodes.jsonl").read_bytes().splitlines()]
    by_task = {r["task_id"]: r for r in rows}
    assert len(by_task) == 4
    for tid, r in by_task.items():
        if int(tid.rsplit("/", 1)[-1]) % 2:  # blocked at its second step (if it got there)
            if r["num_turns"] >= 1 and r["termination"] == "error":
                assert r["graded"] is False and r.get("reward") is None
                assert "env.step did not answer within 1s" in r["error"]
        else:
            assert r["graded"] is True
    assert any(r["termination"] == "error" for r in rows), "no episode reached the blocking step"
    assert elapsed < 15, f"{elapsed:.1f}s (each blocking step sleeps {BLOCK_S:g}s)"


def test_train_with_a_blocking_environment_drops_its_groups_at_the_timeout(tmp_path: Path) -> None:
    from rolloutlab.train import load_config, train

    cfg = load_config(None, ["model.tiny=true", "model.hidden_size=32", "model.intermediate_size=64",
                             "rollout.max_tokens_per_turn=1", "trainer.threads=1", "logging.progress=false",
                             "logging.tensorboard=false", "env.id=sleepy-guess-v0", "rollout.tasks_per_step=4",
                             "rollout.n=2", "trainer.save_every=0", "trainer.total_steps=2",
                             "rollout.env_timeout_s=1", "algorithm.on_failure=drop"])
    train(cfg, tmp_path / "r", progress=False)
    rows = [orjson.loads(x) for s in (1, 2)
            for x in (tmp_path / "r" / "rollouts" / f"step_{s:06d}.jsonl").read_bytes().splitlines()]
    failed = [r for r in rows if r["termination"] == "error"]
    assert failed, "no episode reached the blocking step"
    for r in failed:
        assert r["graded"] is False and r.get("reward") is None
        assert "env.step did not answer within 1s" in r["error"]
        assert r["extras"]["dropped"] == "failed_group_dropped"
    # the collection, not the run (model building and imports take long on a loaded machine)
    metrics = [orjson.loads(x)["metrics"] for x in (tmp_path / "r" / "metrics.jsonl").read_bytes().splitlines()]
    rollout_s = [m["timing/rollout_s"] for m in metrics]
    assert max(rollout_s) < BLOCK_S / 2, f"{rollout_s} (each blocking step sleeps {BLOCK_S:g}s)"


# eval in a child process whose environment blocks in a C call that releases the GIL and never
# checks for signals (PBKDF2: tens of seconds); it touches MARKER first, so the parent signals
# it while the call runs
_BLOCKED_EVAL = """
import hashlib, sys
from pathlib import Path
from rolloutlab.envs import register_env
from rolloutlab.envs.builtin.guess_number import GuessNumberEnv, guess_number_tasks
marker = Path(sys.argv[1])

class Stuck(GuessNumberEnv):
    async def step(self, action):
        marker.touch()
        hashlib.pbkdf2_hmac("sha256", b"x", b"y", 100_000_000)
        return await super().step(action)

register_env("stuck-guess-v0", description="test", max_turns=4, action_format="text", reward_range=(0.0, 1.0),
             tasks=guess_number_tasks)(Stuck)
from rolloutlab.cli import main
raise SystemExit(main(sys.argv[2:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(2))
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_a_blocked_step_stops_eval_within_seconds(tmp_path: Path, sig: int, code: int,
                                                                   trial: int) -> None:
    marker = tmp_path / "stepping"
    proc = subprocess.Popen(
        [sys.executable, "-c", _BLOCKED_EVAL, str(marker), "eval", "--env", "stuck-guess-v0", "--policy",
         "scripted:guess-number", "--episodes", "2", "--env-timeout", "600", "--out", str(tmp_path / "out")],
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), proc.communicate()
        time.sleep(0.3)  # well inside the C call
        t0 = time.monotonic()
        proc.send_signal(sig)
        try:
            out, err = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            pytest.fail(f"eval still running 15 s after signal {sig}: the blocked step held the event loop")
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code, out + err
    assert "interrupted" in err
    assert elapsed < 10, f"{elapsed:.1f}s to stop"


def test_pbkdf2_blocks_long_enough() -> None:
    """The blocked call above lasts well past the 15 s the test allows (else it would pass
    whatever held the loop): 100M iterations at 0.15 µs or more each."""
    t0 = time.perf_counter()
    hashlib.pbkdf2_hmac("sha256", b"x", b"y", 200_000)
    assert (time.perf_counter() - t0) / 200_000 * 100_000_000 > 15


def test_rollouts_do_not_depend_on_environment_timing() -> None:
    """The same jobs with the tiny HF policy give identical trajectories and token samples
    whether the environments answer in random order (jittered sleeps on their threads) or
    at once: sampling is per draw, batches are ordered by episode."""
    import random

    from rolloutlab.agent._hf import HFPolicy, tiny_model
    from rolloutlab.agent._tokenizers import guess_number_tokenizer

    class _Jittery(GuessNumberEnv):
        def __init__(self, rng: random.Random | None, **kw: Any) -> None:
            super().__init__(**kw)
            self.rng = rng

        async def step(self, action: Action) -> StepResult:
            if self.rng is not None:
                time.sleep(self.rng.random() * 0.02)
            return await super().step(action)

    tok = guess_number_tokenizer()
    spec = ENVS["guess-number-v0"]
    tasks = spec.tasks("train", 0)[:6]

    def run(jitter: random.Random | None) -> list[Any]:
        policy = HFPolicy(tiny_model(tok.vocab_size, seed=0), tok, seed=5)
        cfg = replace(LoopConfig(max_tokens_per_turn=2, concurrency=12, env_retries=0))
        jobs = [EpisodeJob(env_factory=lambda: _Jittery(jitter), task=t, seed=7, step=1, traj_id=f"1-g{g}-{i}",
                           group_id=f"1-g{g}", sample_idx=i)
                for g, t in enumerate(tasks) for i in range(2)]
        eps = asyncio.run(run_episodes(jobs, policy, config=cfg))
        return [(e.trajectory.model_dump(exclude={"extras"}), [vars(s) for s in e.samples]) for e in eps]

    a = run(None)
    assert run(random.Random(1)) == a
    assert run(random.Random(2)) == a
    # the draws differ between the two members of a group (same task, same environment seed)
    assert any(a[2 * g][0]["turns"] != a[2 * g + 1][0]["turns"] for g in range(len(tasks)))
