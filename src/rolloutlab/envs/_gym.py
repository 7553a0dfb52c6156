"""Adapter for Gymnasium-style text environments (TextArena-, BALROG- and gym-like packages).

Wraps any object with ``reset(seed=...) -> (obs, info)`` and ``step(action) -> (obs, reward,
terminated, truncated, info)`` (Gymnasium, ``gymnasium/core.py``), or the legacy
``step -> (obs, reward, done, info)``, whose observations are text (or a dict holding the
text under ``text``, ``observation``, ``prompt`` or ``obs``), into the async contract.

From the wrapped ``info`` dict the adapter takes, when present: ``success`` / ``won``
(bool), ``action_valid`` / ``valid_action`` (bool; BALROG replaces an invalid action by a
default one and reports it), ``available_actions`` / ``admissible_commands`` (list of str),
``score`` (number).  The calls run in a worker thread, so a slow package does not stall the
event loop that runs the other episodes.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rolloutlab.envs._core import (
    Action,
    EnvSpec,
    Info,
    Observation,
    StepResult,
    Task,
    ToolInvocation,
)

TEXT_KEYS = ("text", "observation", "prompt", "obs")


def observation_text(obs: Any) -> str:
    """The text of a Gymnasium-style text observation; TypeError if there is none."""
    if isinstance(obs, str):
        return obs
    if isinstance(obs, Mapping):
        for key in TEXT_KEYS:
            if isinstance(obs.get(key), str):
                return str(obs[key])
    raise TypeError(f"the observation is not text (a str, or a dict with one of {TEXT_KEYS}): {str(obs)[:120]!r}")


def _info(raw: Any, *, ended: bool) -> Info:
    d = raw if isinstance(raw, Mapping) else {}
    success = next((d[k] for k in ("success", "won") if isinstance(d.get(k), bool)), None)
    valid = next((d[k] for k in ("action_valid", "valid_action") if isinstance(d.get(k), bool)), None)
    actions = next((d[k] for k in ("available_actions", "admissible_commands") if isinstance(d.get(k), list)), None)
    score = d.get("score")
    return Info(
        success=success if (ended or success) else None,
        score=float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None,
        action_valid=valid,
        available_actions=tuple(str(a) for a in actions) if actions is not None else None,
    )


class GymTextEnv:
    """One Gymnasium-style environment instance behind the async contract."""

    def __init__(self, spec: EnvSpec, make: Callable[[], Any]) -> None:
        self.spec = spec
        self._make = make
        self._env: Any = None

    async def reset(self, *, task: Task | str | None = None, seed: int | None = None) -> Observation:
        tid = task.id if isinstance(task, Task) else task
        if tid is not None:  # tasks of a gym environment are seeds: "train/17"
            try:
                seed = int(tid.rsplit("/", 1)[-1])
            except ValueError:
                raise ValueError(f"tasks of a Gymnasium-style environment are seeds like 'test/17', got {tid!r}") from None
        if self._env is None:
            self._env = await asyncio.to_thread(self._make)
        obs, info = await asyncio.to_thread(self._env.reset, seed=seed)
        text = observation_text(obs)
        return Observation(messages=({"role": "user", "content": text},), anchor=text, info=_info(info, ended=False))

    async def step(self, action: Action) -> StepResult:
        if isinstance(action, ToolInvocation):
            raise ValueError("Gymnasium-style text environments take text actions, not tool calls")
        out = await asyncio.to_thread(self._env.step, action)
        if len(out) == 5:
            obs, reward, terminated, truncated, info = out
        elif len(out) == 4:  # legacy gym: done covers both; a TimeLimit says which in info
            obs, reward, done, info = out
            truncated = bool(isinstance(info, Mapping) and info.get("TimeLimit.truncated"))
            terminated = bool(done) and not truncated
        else:
            raise ValueError(f"step returned {len(out)} values; expected (obs, reward, terminated, truncated, info)")
        r = None if reward is None else float(reward)
        if r is not None and not math.isfinite(r):
            raise ValueError(f"step returned a non-finite reward {reward!r}")
        text = observation_text(obs)
        ended = bool(terminated) or bool(truncated)
        return StepResult(
            messages=({"role": "user", "content": text},),
            reward=r,
            terminated=bool(terminated),
            truncated=bool(truncated),
            stop_reason=("terminated" if terminated else "truncated") if ended else None,
            anchor=text,
            info=_info(info, ended=ended),
        )

    async def close(self) -> None:
        env, self._env = self._env, None
        if env is not None and hasattr(env, "close"):
            await asyncio.to_thread(env.close)


def gym_spec(
    id: str,
    make: Callable[[], Any],
    *,
    description: str,
    max_turns: int,
    reward_range: tuple[float, float] = (0.0, 1.0),
    tasks_per_split: int = 100,
) -> EnvSpec:
    """An :class:`EnvSpec` for a Gymnasium-style text environment built by ``make()``.

    Register it with ``rolloutlab.envs.ENVS[spec.id] = spec`` (or return it from an entry
    point).  Tasks are seeds: train seeds from 0, test seeds from 1,000,000."""

    def tasks(split: str, seed: int) -> Sequence[Task]:
        base = (0 if split == "train" else 1_000_000) + seed * tasks_per_split
        return [Task(id=f"{split}/{base + i}", split=split) for i in range(tasks_per_split)]

    holder: list[EnvSpec] = []
    spec = EnvSpec(
        id=id,
        factory=lambda: GymTextEnv(holder[0], make),
        description=description,
        max_turns=max_turns,
        action_format="text",
        reward_range=reward_range,
        tasks=tasks,
        has_anchor=True,
    )
    holder.append(spec)
    return spec
