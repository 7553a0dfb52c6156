"""A training step's episodes fanned out over Ray workers (``rollout.executor=ray``).

Only with generation on a server (``rollout.backend=openai``): each Ray task rebuilds the
environment from the config and a :class:`~rolloutlab.train._remote.RemotePolicy` client of
the same server (pointed at the same weights: the model name after the last refresh), runs
its chunk of episodes with the same :func:`~rolloutlab.agent.run_episode` the local path
uses — same seeds, ids and loop settings — and returns them; they come back in job order,
so a step's rollouts are the local executor's whatever the completion order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rolloutlab.agent._types import ChatTokenizer, Episode
from rolloutlab.envs import Task
from rolloutlab.io import RolloutlabError
from rolloutlab.train._config import TrainConfig

__all__ = ["Job", "run_on_ray"]


@dataclass(frozen=True)
class Job:
    """One episode of a step (picklable: what a worker needs besides the config)."""

    task: Task
    seed: int | None
    step: int
    traj_id: str
    group_id: str
    sample_idx: int


def _chunk(cfg: TrainConfig, tokenizer: ChatTokenizer, run_dir: str, model: str, policy_version: int,
           jobs: Sequence[Job], loop_cfg: Any) -> list[Episode]:
    """A Ray task: the chunk's episodes against the server, with asyncio (bounded)."""
    from rolloutlab.agent._loop import run_episode
    from rolloutlab.envs import make_env
    from rolloutlab.train._remote import RemotePolicy

    policy = RemotePolicy(cfg, tokenizer, Path(run_dir), model=model)
    policy.policy_version = policy_version
    kwargs = dict(cfg.env.kwargs)

    async def go() -> list[Episode]:
        sem = asyncio.Semaphore(cfg.rollout.concurrency)

        async def one(j: Job) -> Episode:
            async with sem:
                return await run_episode(lambda: make_env(cfg.env.id, **kwargs), policy, j.task, config=loop_cfg,
                                         seed=j.seed, step=j.step, traj_id=j.traj_id, group_id=j.group_id,
                                         sample_idx=j.sample_idx, policy_version=policy_version)

        return list(await asyncio.gather(*(one(j) for j in jobs)))

    return asyncio.run(go())


async def run_on_ray(cfg: TrainConfig, tokenizer: ChatTokenizer, run_dir: Path, model: str, policy_version: int,
                     jobs: Sequence[Job], loop_cfg: Any) -> list[Episode]:
    """The jobs' episodes over Ray (a local Ray instance is started if none is running)."""
    try:
        import ray
    except ImportError:
        raise RolloutlabError("rollout.executor=ray needs Ray: pip install 'rolloutlab[ray]'") from None
    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False, ignore_reinit_error=True, configure_logging=False)
    workers = cfg.rollout.ray_workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
    size = -(-len(jobs) // workers)
    chunks = [list(jobs[i:i + size]) for i in range(0, len(jobs), size)]
    remote: Any = ray.remote(num_cpus=1)(_chunk)
    futures = [asyncio.wrap_future(remote.remote(cfg, tokenizer, str(run_dir), model, policy_version, c,
                                                 loop_cfg).future()) for c in chunks]
    by_id: dict[str, Episode] = {}
    for fut in asyncio.as_completed(futures):
        for ep in await fut:
            by_id[ep.trajectory.traj_id] = ep
    return [by_id[j.traj_id] for j in jobs]
