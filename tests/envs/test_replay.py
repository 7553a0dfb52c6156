"""Replay: the recorded actions, replayed from the seeded reset, reproduce the recorded
observations for every built-in environment that claims it; one that cannot says so, and
one that diverges is refused naming the environment, the task and the turn."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from typing import Any

import pytest

from rolloutlab.agent import LoopConfig, RandomPolicy, get_parser, run_episode
from rolloutlab.envs import (
    ENVS,
    Info,
    NotReplayable,
    Observation,
    ReplayDiverged,
    SnapshotEnv,
    StepResult,
    get_env_spec,
    known_envs,
    missing_requirements,
    replay,
)
from rolloutlab.label import read_source
from rolloutlab.schema import Trajectory

BUILTIN = [i for i in known_envs() if ENVS[i].factory.__module__.startswith("rolloutlab.envs.builtin")
           and not missing_requirements(ENVS[i])]


def _actions(t: Trajectory, parser: str) -> list[tuple[Any, ...]]:
    from rolloutlab.agent import Generation

    parse = get_parser(parser)
    out = []
    for u in t.turns:
        p = parse(Generation(text=u.action or "", token_ids=None, logprobs=None, finish_reason="stop"))
        out.append(tuple(p.actions) if p.valid else ())
    return out


async def _episode(env_id: str, seed: int) -> Trajectory:
    spec = get_env_spec(env_id)
    task = spec.tasks(spec.splits[-1], 0)[seed]
    cfg = LoopConfig(max_turns=min(4, spec.max_turns), concurrency=1, parser=None)
    ep = await run_episode(spec.make, RandomPolicy(seed=seed, parser=spec.action_format), task, config=cfg,
                           seed=seed, step=0, traj_id=f"{env_id}-{seed}")
    return ep.trajectory


SLOW = {"scienceworld-v0"}
"""Starts a Java simulator (about half a minute)."""


@pytest.mark.parametrize("env_id", [pytest.param(i, marks=pytest.mark.slow) if i in SLOW else i for i in BUILTIN])
def test_replay_reproduces_every_builtin_env(env_id: str) -> None:
    spec = get_env_spec(env_id)
    assert spec.replayable, f"{env_id} is built in and deterministic: it claims replay"

    async def go() -> None:
        for seed in (0, 1):
            t = await _episode(env_id, seed)
            assert t.turns and t.termination != "error", t.error
            parser = str(t.extras["parser"])
            env = spec.make()
            try:
                await replay(env, task=t.task_id or "", seed=seed, actions=_actions(t, parser),
                             observations=[u.observation for u in t.turns])
            finally:
                await env.close()
            # a recorded observation changed: the replay is refused at that turn
            acts = _actions(t, parser)
            # the last turn whose observation is the environment's (after an unparseable reply
            # the loop's corrective message stands there, which replay does not compare)
            last = max(k for k in range(len(t.turns)) if k == 0 or acts[k - 1])
            bad = [u.observation for u in t.turns]
            bad[last] = (bad[last] or "") + " (tampered)"
            env = spec.make()
            try:
                with pytest.raises(ReplayDiverged, match=rf"{env_id} task .* diverged at turn {last}"):
                    await replay(env, task=t.task_id or "", seed=seed, actions=_actions(t, parser), observations=bad)
            finally:
                await env.close()

    asyncio.run(go())


class _Drifting:
    """Answers with a counter shared by every instance: a replay sees other observations."""

    counter = itertools.count()

    def __init__(self) -> None:
        self.spec = _DRIFT

    async def reset(self, *, task: Any = None, seed: int | None = None) -> Observation:
        return Observation(messages=({"role": "user", "content": "go"},))

    async def step(self, action: Any) -> StepResult:
        return StepResult(messages=({"role": "user", "content": f"tick {next(self.counter)}"},), reward=0.0,
                          terminated=False, truncated=False, info=Info())

    async def close(self) -> None:
        pass


_DRIFT = dataclasses.replace(get_env_spec("guess-number-v0"), id="drift-v0", factory=_Drifting)


def test_nondeterministic_env_is_refused_naming_env_task_turn() -> None:
    async def go() -> None:
        env = _Drifting()
        obs = [(await env.reset()).messages[0]["content"]]
        for _ in range(2):
            obs.append((await env.step("x")).messages[0]["content"])
        with pytest.raises(ReplayDiverged) as e:
            await replay(_Drifting(), task="train/3", seed=0, actions=[("x",), ("x",)], observations=obs)
        msg = str(e.value)
        assert "drift-v0" in msg and "'train/3'" in msg and "turn 1" in msg and "replayable=False" in msg

    asyncio.run(go())


def test_env_that_cannot_replay_says_so() -> None:
    spec = dataclasses.replace(get_env_spec("guess-number-v0"), replayable=False)
    env = spec.make()
    env.spec = spec

    with pytest.raises(NotReplayable, match=r"cannot be replayed.*action-prob"):
        asyncio.run(replay(env, task="train/0", seed=0, actions=[]))


def test_guess_number_snapshot_restore_continues_identically() -> None:
    async def go() -> None:
        spec = get_env_spec("guess-number-v0")
        a, b = spec.make(), spec.make()
        assert isinstance(a, SnapshotEnv)
        await a.reset(task="test/5")
        await a.step("3")
        snap = a.snapshot()
        rest_a = [(await a.step(x)).messages for x in ("5", "6")]
        await b.reset(task="train/0")  # another task: restore replaces the whole state
        b.restore(snap)
        rest_b = [(await b.step(x)).messages for x in ("5", "6")]
        assert rest_a == rest_b

    asyncio.run(go())


def test_read_source_refuses_a_run_without_turns(tmp_path: Any) -> None:
    from rolloutlab.errors import RolloutlabError
    from rolloutlab.io import RunWriter
    from rolloutlab.schema import Run

    with RunWriter(tmp_path / "r", Run(run_id="r1", name="r")) as w:
        w.write_step(1, [Trajectory(traj_id="a", step=1, reward=1.0, task_id="train/0")])
    with pytest.raises(RolloutlabError, match="none of its 1 trajectories has turns"):
        read_source(tmp_path / "r")
    with pytest.raises(RolloutlabError, match="not a rolloutlab run directory"):
        read_source(tmp_path / "nothing")


def test_the_loop_plays_a_recorded_prefix_back_and_checks_it() -> None:
    from rolloutlab.agent import Generation, ReplayPrefix, ScriptedPolicy
    from rolloutlab.envs import Task

    spec = get_env_spec("guess-number-v0")
    task = Task(id="test/5", split="test")
    policy = ScriptedPolicy.named("rolloutlab.envs.builtin.guess_number:binary_search")

    def reply(text: str) -> Generation:
        return Generation(text=text, token_ids=None, logprobs=None, finish_reason="stop")

    async def go() -> None:
        whole = (await run_episode(spec.make, policy, task, config=LoopConfig(), seed=0, step=0, traj_id="a")).trajectory
        # two recorded replies played back (the policy would have chosen others), then the policy
        prefix = ReplayPrefix(replies=(reply("0"), reply("7")), observations=(whole.turns[0].observation, None))
        cont = (await run_episode(spec.make, policy, task, config=LoopConfig(), seed=0, step=0, traj_id="b",
                                  prefix=prefix)).trajectory
        assert [u.action for u in cont.turns[:2]] == ["0", "7"]
        assert cont.turns[2].action == policy.answer([
            {"role": "user", "content": whole.turns[0].observation},
            {"role": "assistant", "content": "0"}, {"role": "user", "content": cont.turns[1].observation},
            {"role": "assistant", "content": "7"}, {"role": "user", "content": cont.turns[2].observation}])
        bad = ReplayPrefix(replies=(reply("0"),), observations=("guess a number from 0 to 9",))
        with pytest.raises(ReplayDiverged, match="diverged at turn 0"):
            await run_episode(spec.make, policy, task, config=LoopConfig(), seed=0, step=0, traj_id="c", prefix=bad)

    asyncio.run(go())
