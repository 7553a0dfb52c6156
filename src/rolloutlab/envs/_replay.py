"""Replay: bring an environment back to a recorded state by replaying the recorded actions.

Monte-Carlo step values (``rolloutlab label --method mc``) continue an episode from the
middle, so the environment has to stand where it stood after turn ``t``.  The contract
already makes that possible: ``reset(task, seed)`` followed by the same actions gives the
same episode (``check_env``'s ``determinism``).  :func:`replay` does exactly that and checks
it — every observation the environment gives back is compared with the one recorded, and
the first difference refuses the environment with :class:`ReplayDiverged`, naming the
environment, the task and the turn.  An environment that knows it cannot be replayed (a
live website, a simulator seeded from the clock) says so in its spec
(``EnvSpec.replayable = False``) and is refused before anything runs
(:class:`NotReplayable`).

An environment that can do better than replaying from the start may implement the optional
:class:`SnapshotEnv` hooks (``snapshot()`` / ``restore(state)``); ``guess-number-v0`` does.

The observation text compared is the one the agent loop records in ``Turn.observation``:
the contents of the messages joined by newlines (:func:`observation_text`, the one
definition both use).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from rolloutlab.envs._core import Action, Env, Message, Observation, StepResult, Task
from rolloutlab.errors import RolloutlabError

__all__ = ["NotReplayable", "ReplayDiverged", "ReplayResult", "SnapshotEnv", "check_observation", "observation_text",
           "replay"]


class ReplayDiverged(RolloutlabError):
    """Replaying the recorded actions gave another observation than the one recorded."""


class NotReplayable(RolloutlabError):
    """The environment declares that it cannot be brought back to a state by replay."""


@runtime_checkable
class SnapshotEnv(Protocol):
    """Optional hooks of an environment whose state can be copied out and put back
    (cheaper than replaying every action from the reset)."""

    def snapshot(self) -> Any:
        """The whole state of the current episode, as a value ``restore`` accepts (on this or
        another instance of the same environment with the same constructor arguments)."""
        ...

    def restore(self, state: Any) -> None:
        """Put the environment in ``state`` (taken by ``snapshot``); the next ``step``
        behaves as it would have at the moment of the snapshot."""
        ...


def _clean(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8") if not text.isascii() else text


def observation_text(messages: Sequence[Message]) -> str:
    """What ``Turn.observation`` records of ``messages``: their contents joined by newlines
    (lone surrogates replaced, so the text is writable as JSON)."""
    return "\n".join(_clean(str(m.get("content", ""))) for m in messages)


def _short(text: str | None, limit: int = 80) -> str:
    if text is None:
        return "None"
    return repr(text if len(text) <= limit else text[:limit] + "…")


def check_observation(env_id: str, task_id: str, turn: int, expected: str | None, got: str) -> None:
    """Raise :class:`ReplayDiverged` when ``got`` is not the recorded ``expected`` (``None``:
    nothing recorded to compare with)."""
    if expected is not None and expected != got:
        raise ReplayDiverged(
            f"{env_id} task {task_id!r}: replaying the recorded actions diverged at turn {turn}: "
            f"the environment now answers {_short(got)} where the run recorded {_short(expected)}; "
            "the environment is not deterministic in (task, seed, actions), so states cannot be "
            "rebuilt by replay (fix its seeding — `rolloutlab env check` shows it — or declare "
            "replayable=False in its spec)"
        )


def require_replayable(env: Env) -> None:
    if not env.spec.replayable:
        raise NotReplayable(
            f"{env.spec.id} cannot be replayed (its spec declares replayable=False): states in the middle "
            "of an episode cannot be rebuilt, so Monte-Carlo labels are not available for it; "
            "use --method action-prob, which needs no environment"
        )


@dataclass(frozen=True)
class ReplayResult:
    """Where a replay left the environment."""

    messages: tuple[Message, ...]
    """The conversation the environment gave: reset messages, then after each turn the
    messages of its steps (agent replies are not included)."""
    ended: bool
    """The environment ended the episode (terminated or truncated) during the replay."""


async def replay(
    env: Env,
    *,
    task: Task | str,
    seed: int | None,
    actions: Sequence[Sequence[Action]],
    observations: Sequence[str | None] = (),
) -> ReplayResult:
    """Reset ``env`` on ``(task, seed)`` and step each turn's ``actions`` in order, checking
    that the observation before turn ``t`` equals ``observations[t]`` (where recorded).

    A turn with no actions (a reply the parser could not read) does not step the
    environment, and the next turn's observation (the agent loop's corrective message, not
    the environment's) is not compared."""
    require_replayable(env)
    task_id = task.id if isinstance(task, Task) else task
    obs = await env.reset(task=task, seed=seed)
    if not isinstance(obs, Observation):
        raise RolloutlabError(f"{env.spec.id}: reset returned {type(obs).__name__}, not Observation")
    messages: list[Message] = list(obs.messages)
    seen = observation_text(obs.messages)
    compare = True
    ended = False
    for t, turn_actions in enumerate(actions):
        if compare and t < len(observations):
            check_observation(env.spec.id, task_id, t, observations[t], seen)
        if ended:
            raise ReplayDiverged(f"{env.spec.id} task {task_id!r}: the environment ended the episode before "
                                 f"turn {t}, which the run recorded; replay diverged")
        new: list[Message] = []
        for a in turn_actions:
            res = await env.step(a)
            if not isinstance(res, StepResult):
                raise RolloutlabError(f"{env.spec.id}: step returned {type(res).__name__}, not StepResult")
            new.extend(res.messages)
            if res.terminated or res.truncated:
                ended = True
                break
        compare = bool(turn_actions)
        messages.extend(new)
        seen = observation_text(new)
    if compare and len(observations) > len(actions):
        check_observation(env.spec.id, task_id, len(actions), observations[len(actions)], seen)
    return ReplayResult(messages=tuple(messages), ended=ended)
