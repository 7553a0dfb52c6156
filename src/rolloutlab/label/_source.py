"""The run being labelled: its trajectories, its environment, and each turn as the loop saw it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rolloutlab.agent import Generation, get_parser
from rolloutlab.envs import Action, EnvSpec, Message, ToolInvocation, get_env_spec, replay
from rolloutlab.errors import RolloutlabError
from rolloutlab.io import read_run, read_trajectories
from rolloutlab.schema import Run, Trajectory

__all__ = ["Item", "Source", "actions_of", "check_replay", "history_before", "parser_of", "read_source", "reply_of"]

_ENDED = ("done", "truncated", "max_turns")
"""Terminations of a finished episode: its trajectories are labelled; ``error`` / ``aborted`` ones
are copied unlabelled (an ungraded episode has no outcome to learn a value from)."""


@dataclass(frozen=True)
class Item:
    """One trajectory of the run, under the id it is written with."""

    key: str
    """``traj_id`` in the output: the run's own, prefixed ``eval/<checkpoint>/`` for an evaluation's."""
    trajectory: Trajectory

    @property
    def labellable(self) -> bool:
        t = self.trajectory
        return bool(t.turns) and t.graded and t.termination in _ENDED


@dataclass
class Source:
    path: Path
    run: Run
    items: list[Item]
    env_id: str | None
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    def spec(self) -> EnvSpec:
        if self.env_id is None:
            raise RolloutlabError(f"{self.path}: no environment is named in run.json nor in the trajectories' "
                                  "data_source; give it with --env")
        return get_env_spec(self.env_id)


def read_source(path: Path, env: str | None = None) -> Source:
    """The trajectories of the run directory ``path`` (training steps, then evaluations), and
    its environment.  Refuses a run without trajectories or without a single turn."""
    if not (path / "run.json").is_file():
        raise RolloutlabError(f"{path} is not a rolloutlab run directory (no run.json); label a folder that "
                              "`rolloutlab train` or `rolloutlab eval` wrote, or `rolloutlab ingest` another format first")
    run = read_run(path)
    items: list[Item] = []
    roll = path / "rollouts"
    if roll.is_dir():
        for f in sorted(roll.glob("step_*.jsonl")):
            items.extend(Item(t.traj_id, t) for _, t in read_trajectories(f))
    ev = path / "eval"
    if ev.is_dir():
        for d in sorted(ev.iterdir()):
            f = d / "episodes.jsonl"
            if f.is_file():
                for _, t in read_trajectories(f):
                    key = f"eval/{d.name}/{t.traj_id}"
                    items.append(Item(key, t.model_copy(update={"traj_id": key})))
    if not items:
        raise RolloutlabError(f"{path} holds no trajectories (rollouts/step_*.jsonl or eval/*/episodes.jsonl): "
                              "nothing to label")
    if not any(i.trajectory.turns for i in items):
        raise RolloutlabError(f"{path}: none of its {len(items)} trajectories has turns (a single-turn import "
                              "without turn records?); step labels need the turns of multi-turn episodes")
    cfg = run.config
    env_cfg: dict[str, Any] = cfg["env"] if isinstance(cfg.get("env"), dict) else {}
    eval_cfg: dict[str, Any] = cfg["eval"] if isinstance(cfg.get("eval"), dict) else {}
    env_id = (env or env_cfg.get("id") or eval_cfg.get("env") or run.env
              or next((i.trajectory.data_source for i in items if i.trajectory.data_source), None))
    kwargs: dict[str, Any] = env_cfg["kwargs"] if isinstance(env_cfg.get("kwargs"), dict) else {}
    return Source(path=path, run=run, items=items, env_id=env_id, env_kwargs=dict(kwargs))


def reply_of(turn_action: str | None, tool_calls: Sequence[Any], parser: str) -> Generation:
    """A recorded reply as the generation the loop parsed (tool calls an endpoint parsed
    itself are rebuilt from the turn's record for the ``tool_call`` parser)."""
    calls: tuple[ToolInvocation, ...] = ()
    if parser == "tool_call":
        calls = tuple(ToolInvocation(name=c.name, arguments=_arguments(c.arguments), id=c.id) for c in tool_calls)
    return Generation(text=turn_action or "", token_ids=None, logprobs=None, finish_reason="stop", tool_calls=calls)


def _arguments(raw: str | None) -> dict[str, Any]:
    """A recorded call's arguments as the endpoint client decoded them (bad JSON kept as
    ``_raw``, which the environment reports as an invalid action, as it did when recorded)."""
    import json

    try:
        args = json.loads(raw) if raw and raw.strip() else {}
    except ValueError:
        return {"_raw": raw}
    return args if isinstance(args, dict) else {"_raw": raw}


def parser_of(t: Trajectory, spec: EnvSpec, override: str | None) -> str:
    return override or str(t.extras.get("parser") or spec.action_format)


def actions_of(t: Trajectory, parser: str) -> list[tuple[Action, ...]]:
    """Each turn's actions as the loop stepped them (empty for a reply it could not read)."""
    parse = get_parser(parser)
    out: list[tuple[Action, ...]] = []
    for u in t.turns:
        p = parse(reply_of(u.action, u.tool_calls, parser))
        out.append(tuple(p.actions) if p.valid else ())
    return out


def history_before(t: Trajectory, turn: int) -> list[Message]:
    """The conversation the agent saw before ``turn``: the prompt, then each earlier reply and
    the observation that followed it (as a ``user`` message: the record keeps the text of an
    observation, not its role)."""
    if isinstance(t.prompt, list):
        msgs: list[Message] = [dict(m) for m in t.prompt]
    else:
        msgs = [{"role": "user", "content": t.prompt or (t.turns[0].observation or "")}]
    for k in range(turn):
        msgs.append({"role": "assistant", "content": t.turns[k].action or ""})
        msgs.append({"role": "user", "content": t.turns[k + 1].observation or ""})
    return msgs


async def check_replay(source: Source, items: Sequence[Item], *, parser: str | None, concurrency: int) -> None:
    """Replay every trajectory to its end on a fresh environment and compare each
    observation with the recorded one, before anything is written: an environment that
    cannot be replayed is refused with the environment, task and turn named."""
    spec = source.spec()
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(item: Item) -> None:
        t = item.trajectory
        async with sem:
            env = spec.make(**source.env_kwargs)
            try:
                await replay(env, task=t.task_id or "", seed=t.extras.get("env_seed"),
                             actions=actions_of(t, parser_of(t, spec, parser)),
                             observations=[u.observation for u in t.turns])
            finally:
                await env.close()

    await asyncio.gather(*(one(i) for i in items))
