"""Failure semantics of the agent loop: environments that raise, hang or return malformed
data are retried with a fresh instance and then give an ungraded error episode; policy
failures are retried with backoff; close() is always called; huge and binary actions."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import orjson
import pytest

from rolloutlab.agent import EpisodeJob, LoopConfig, ScriptedPolicy, run_episode, run_episodes
from rolloutlab.envs import Task
from rolloutlab.io import RolloutlabError
from rolloutlab.schema import Trajectory
from tests.agent._fakes import FakeGuessEnv, FlakyPolicy, bisect_answer

TASK = Task(id="train/3", split="train")
FAST = LoopConfig(env_timeout_s=0.2, policy_timeout_s=0.2, policy_backoff_s=0.001, env_retries=2, policy_retries=2)


def _episode(factory: Any, policy: Any = None, config: LoopConfig = FAST) -> Trajectory:
    policy = policy or ScriptedPolicy(bisect_answer)
    ep = asyncio.run(run_episode(factory, policy, TASK, config=config, seed=0, step=3, traj_id="x"))
    Trajectory.model_validate(ep.trajectory.model_dump())  # the record round-trips the schema
    orjson.dumps(ep.trajectory.model_dump(mode="json"))
    return ep.trajectory


def _factory(**faults: Any) -> tuple[list[FakeGuessEnv], Any]:
    made: list[FakeGuessEnv] = []

    def make() -> FakeGuessEnv:
        env = FakeGuessEnv(target=6, **faults)
        made.append(env)
        return env

    return made, make


@pytest.mark.parametrize("fault,why", [
    ({"raise_at": 1}, "env.step raised ValueError: step exploded"),
    ({"hang_at": 0}, "env.step did not answer within 0.2s"),
    ({"malformed_at": 0}, "env.step returned malformed data"),
    ({"fail_reset": True}, "env.reset raised RuntimeError: reset exploded"),
])
def test_env_failure_retries_fresh_env_then_error(fault: dict[str, Any], why: str) -> None:
    made, make = _factory(**fault)
    t = _episode(make)
    assert len(made) == 3  # the first try and env_retries = 2 fresh environments
    assert all(e.closed == 1 for e in made)  # close() always called
    assert t.termination == "error" and t.graded is False and t.reward is None and t.success is None
    assert why in (t.error or "") and "environment failed 3 times" in (t.error or "")
    assert len(t.extras["attempt_errors"]) == 3


def test_env_failure_then_success_on_retry() -> None:
    made: list[FakeGuessEnv] = []

    def make() -> FakeGuessEnv:
        env = FakeGuessEnv(target=6, raise_at=0 if not made else None)
        made.append(env)
        return env

    t = _episode(make)
    assert len(made) == 2 and t.termination == "done" and t.reward == 1.0 and t.graded
    assert made[1].actions == ["3", "5", "6"]  # the episode restarted from scratch
    assert len(t.extras["attempt_errors"]) == 1


def test_env_factory_raising_is_an_error_episode() -> None:
    def make() -> FakeGuessEnv:
        raise OSError("cannot start")

    t = _episode(make)
    assert t.termination == "error" and not t.graded and "cannot start" in (t.error or "")


@pytest.mark.parametrize("how", ["raise", "hang", "garbage"])
def test_policy_failures_retried_then_succeed(how: str) -> None:
    policy = FlakyPolicy(fail=2, how=how)
    t = _episode(lambda: FakeGuessEnv(target=6), policy)
    assert t.termination == "done" and t.reward == 1.0
    assert policy.calls == 2 + 3


@pytest.mark.parametrize("how", ["raise", "hang", "garbage"])
def test_policy_failures_exhausted_mark_the_episode(how: str) -> None:
    made, make = _factory()
    policy = FlakyPolicy(fail=100, how=how)
    t = _episode(make, policy)
    assert policy.calls == 3  # 1 + policy_retries
    assert len(made) == 1 and made[0].closed == 1  # not an env failure: no fresh env
    assert t.termination == "error" and t.graded is False and t.reward is None
    assert "policy failed 3 times" in (t.error or "")


def test_huge_and_binary_actions_do_not_crash() -> None:
    huge = "7" * 1_000_000
    binary = "\x00\x01\udcff\ufffe" + bytes(range(256)).decode("latin-1")
    answers = iter([huge, binary, "6"])
    _, make = _factory()
    t = _episode(make, ScriptedPolicy(lambda m: next(answers)), LoopConfig(max_turns=3))
    assert t.termination == "done" and t.reward == 1.0
    assert [u.action_valid for u in t.turns] == [False, False, True]  # the env rejected them
    assert "\udcff" not in (t.turns[1].action or "")  # lone surrogate replaced, JSON-safe


def test_close_failure_is_recorded_not_fatal() -> None:
    class BadClose(FakeGuessEnv):
        async def close(self) -> None:
            raise RuntimeError("close exploded")

    t = _episode(lambda: BadClose(target=6))
    assert t.termination == "done" and t.graded
    assert "close exploded" in t.extras["close_errors"][0]


def test_run_episodes_keeps_job_order_and_isolates_failures() -> None:
    jobs = [
        EpisodeJob(env_factory=(lambda i=i: FakeGuessEnv(target=i % 8, raise_at=0 if i == 2 else None)),
                   task=Task(id=f"train/{i}", split="train"), seed=i, step=0, traj_id=f"e{i}",
                   group_id=f"g{i // 2}", sample_idx=i % 2)
        for i in range(6)
    ]
    seen: list[str] = []
    eps = asyncio.run(run_episodes(jobs, ScriptedPolicy(bisect_answer), config=replace(FAST, concurrency=3),
                                   progress=lambda ep: seen.append(ep.trajectory.traj_id)))
    assert [e.trajectory.traj_id for e in eps] == [f"e{i}" for i in range(6)]
    assert sorted(seen) == sorted(f"e{i}" for i in range(6))
    assert eps[2].trajectory.termination == "error"
    assert all(e.trajectory.success for i, e in enumerate(eps) if i != 2)
    assert eps[3].trajectory.group_id == "g1" and eps[3].trajectory.sample_idx == 1


def test_bad_config_is_refused() -> None:
    with pytest.raises(RolloutlabError, match="unknown action parser 'nope'"):
        LoopConfig(parser="nope")
    with pytest.raises(RolloutlabError, match="max_turns"):
        LoopConfig(max_turns=0)
    with pytest.raises(RolloutlabError, match="concurrency must be >= 1, got 0"):
        LoopConfig(concurrency=0)


def test_records_carry_timings_seed_and_stop_reason() -> None:
    t = _episode(lambda: FakeGuessEnv(target=6))
    assert t.extras["env_seed"] == 0 and t.extras["stop_reason"] == "solved"
    assert len(t.extras["timings"]) == 3 and set(t.extras["timings"][0]) == {"policy_s", "env_s"}
    assert [u.finish_reason for u in t.turns] == ["stop"] * 3 and t.extras["target"] == 6
    assert t.reward_components == {"correct": 1.0} and t.step == 3 and t.task_id == "train/3"
    assert t.turns[0].observation == "Guess a number 0-7.\nYour guess?" and t.turns[1].observation == "higher"
    assert t.turns[0].anchor_obs == "start" and t.response == "6" and t.prompt_tokens is None


def test_reset_extras_are_kept_when_the_env_is_never_stepped() -> None:
    """Every reply unparseable: the env is never stepped, yet the gold sets it gave at reset
    reach the trajectory (an F1 of 0, not a trajectory the set analysis leaves out)."""
    import asyncio

    from rolloutlab.agent import LoopConfig, run_episode
    from rolloutlab.agent._policies import ScriptedPolicy
    from rolloutlab.envs import get_env_spec

    spec = get_env_spec("code-search-v0")
    task = spec.tasks("test", 0)[0]
    policy = ScriptedPolicy(lambda messages: "no tool call here", name="mute", parser="hermes")
    ep = asyncio.run(
        run_episode(spec.make, policy, task, config=LoopConfig(max_turns=2, parser="hermes"), seed=0, step=0,
                    traj_id="t", group_id=None, sample_idx=None)
    )
    t = ep.trajectory
    assert t.invalid_actions == 2 and set(t.extras["gold"]) == {"file", "module", "entity"}
    assert t.extras["predicted"] == {"file": [], "module": [], "entity": []}


def test_a_single_failure_reads_once_and_every_failed_policy_call_is_listed() -> None:
    once = replace(FAST, env_retries=0, policy_retries=0)
    t = _episode(_factory(raise_at=1)[1], config=once)
    assert (t.error or "").startswith("environment failed once; last: env.step raised ValueError")
    t = _episode(lambda: FakeGuessEnv(target=6), FlakyPolicy(fail=100), config=once)
    assert (t.error or "").startswith("policy failed once; last: ConnectionError: HTTP 500")
    t = _episode(lambda: FakeGuessEnv(target=6), FlakyPolicy(fail=2))  # retried, then it answers
    assert t.graded and t.extras["policy_errors"] == ["turn 0: ConnectionError: HTTP 500"] * 2
