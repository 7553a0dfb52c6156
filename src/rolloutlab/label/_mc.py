"""Monte-Carlo step values (Math-Shepherd, Wang et al. 2024, §3.2 "hard" and "soft" estimation).

The value of step ``t`` of a trajectory is the success rate of ``N`` continuations of the
policy from the state *after* that step's action::

    soft_t = (1 / N_graded) * sum_i success_i        hard_t = any_i success_i

The environment is brought to the state by replaying the recorded replies from the seeded
reset (:class:`rolloutlab.agent.ReplayPrefix`; the loop checks every replayed observation),
then the policy continues to the episode's end under the trajectory's own horizon and
parser.  The last step needs no sampling: the episode already ended there, so its value is
the recorded outcome (``n = 0``, ``terminal``).  Departure from Math-Shepherd: a
continuation the environment or the policy failed (``graded = false``) is left out of the
rate, not counted a failure, and is reported as ``ungraded``; a step whose continuations
all failed gets no value (``None``).
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Any

from rolloutlab.agent import EpisodeJob, LoopConfig, Policy, ReplayPrefix, run_episodes
from rolloutlab.envs import Task
from rolloutlab.label._config import LabelConfig
from rolloutlab.label._source import Item, Source, parser_of, reply_of

__all__ = ["mc_jobs", "mc_labels"]


def _seed(*parts: Any) -> int:
    return zlib.crc32("/".join(str(p) for p in parts).encode()) & 0x7FFFFFFF


def loop_for(item: Item, source: Source, config: LabelConfig) -> LoopConfig:
    """The continuation's loop settings: the trajectory's own horizon and parser unless set."""
    t = item.trajectory
    spec = source.spec()
    max_turns = config.loop.max_turns or t.extras.get("max_turns") or spec.max_turns
    return dataclasses.replace(config.loop, max_turns=int(max_turns), parser=parser_of(t, spec, config.loop.parser),
                               split="train")


def mc_jobs(item: Item, source: Source, config: LabelConfig) -> list[tuple[int, EpisodeJob]]:
    """(turn, job) for the N continuations of each non-final turn of ``item``."""
    t = item.trajectory
    spec = source.spec()
    parser = parser_of(t, spec, config.loop.parser)
    kwargs = source.env_kwargs
    replies = tuple(reply_of(u.action, u.tool_calls, parser) for u in t.turns)
    observations = tuple(u.observation for u in t.turns)
    task = Task(id=t.task_id or "", split=t.split, category=t.extras.get("task_category"))
    out: list[tuple[int, EpisodeJob]] = []
    for turn in range(len(t.turns) - 1):
        prefix = (replies[: turn + 1], observations[: turn + 1])
        for i in range(config.n):
            out.append((turn, EpisodeJob(
                env_factory=lambda: spec.make(**kwargs), task=task, seed=t.extras.get("env_seed"), step=t.step,
                traj_id=f"{item.key}@{turn}#{i}", sample_idx=i,
                prefix=ReplayPrefix(replies=prefix[0], observations=prefix[1],
                                    sample_seed=_seed(config.seed, item.key, turn, i)),
            )))
    return out


def mc_value(successes: int, graded: int, n: int, ungraded: int) -> dict[str, Any]:
    return {"method": "mc", "value": successes / graded if graded else None, "hard": successes > 0 if graded else None,
            "n": n, "successes": successes, "ungraded": ungraded}


async def mc_labels(item: Item, source: Source, config: LabelConfig, policy: Policy) -> list[dict[str, Any]]:
    """The label of each turn of ``item`` (``extras.label`` of the turn)."""
    t = item.trajectory
    jobs = mc_jobs(item, source, config)
    eps = await run_episodes([j for _, j in jobs], policy, config=loop_for(item, source, config))
    succ = [0] * len(t.turns)
    graded = [0] * len(t.turns)
    for (turn, _), ep in zip(jobs, eps, strict=True):
        if ep.trajectory.graded:
            graded[turn] += 1
            succ[turn] += bool(ep.trajectory.success)
    labels = [mc_value(succ[k], graded[k], config.n, config.n - graded[k]) for k in range(len(t.turns) - 1)]
    # the episode ended after its last step: that step's value is the recorded outcome
    final = None if t.success is None else float(t.success)
    labels.append({"method": "mc", "value": final, "hard": None if final is None else bool(final), "n": 0,
                   "successes": int(final or 0), "ungraded": 0, "terminal": True})
    return labels
