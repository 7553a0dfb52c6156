"""The training loop, top to bottom: collect → rewards → advantages → update → log → checkpoint.

Each step ``s`` (counted from 1):

1. **Horizon.** ``max_rounds = max_rounds_at(s, rounds, steps_scaling_inter)``
   (ScalingInter-RL, :func:`rolloutlab.algos.max_rounds_at`) or the fixed cap: a pure
   function of ``s``, logged as ``max_rounds``.
2. **Collect.** Draw ``tasks_per_step`` tasks (:class:`TaskSampler`); run ``n`` episodes of
   each through the agent loop (:func:`rolloutlab.agent.run_episode`) with the policy at
   version ``s - 1``.  The sampler is reseeded from ``(seed, s)`` so the rollouts of a step do
   not depend on how the run got there (exact resume).
3. **Failures.** A group with an ungraded episode is rerun whole with fresh environments
   (``on_failure=retry``, up to ``max_retries``) or dropped (``drop``); an ungraded episode
   is never scored 0.  Counted in ``rollout/retried_groups`` / ``rollout/dropped_groups``.
4. **Dynamic sampling** (DAPO, optional). Groups of two or more whose rewards are all equal
   are set aside (:func:`filtered_by_dynamic_sampling`) and more tasks are collected until
   ``tasks_per_step`` informative groups exist (at most ``max_refills`` extra rounds).
5. **Advantages** from :mod:`rolloutlab.algos` (KL-in-reward first subtracts
   ``kl_coef * sum KL`` from each episode's reward).
6. **Update** (:class:`Updater`): PPO-clip over the sampled tokens, trainer log-probs
   recomputed, sampler/trainer KL logged.
7. **Log** ``metrics.jsonl`` (names in ``docs/training.md``), progress bar, TensorBoard.
8. **Write** every episode of the step (trained on or not) to ``rollouts/step_NNNNNN.jsonl``
   atomically; dropped ones carry ``extras.dropped``.
9. **Checkpoint** every ``save_every`` steps and at the last step.

Departures from the papers: GRPO/DAPO's per-step schedule is one optimizer step per training
step by default (verl's ``ppo_mini_batch_size = train_batch_size``); dynamic sampling keeps
at most ``max_refills`` extra rounds and then trains on what it has (DAPO generates until
full); the ScalingInter cap follows the step alone (see ``max_rounds_at``).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import gc
import logging
import math
import os
import shutil
import sys
import time
import uuid
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import torch

from rolloutlab import algos, outcomes
from rolloutlab.agent import Episode, LoopConfig, TrainablePolicy
from rolloutlab.envs import EnvSpec, Task, get_env_spec
from rolloutlab.errors import spans
from rolloutlab.io import RolloutlabError, RunWriter, read_run
from rolloutlab.outcomes import METRIC_NAMES, step_outcome
from rolloutlab.schema import Run, Trajectory
from rolloutlab.train._checkpoint import (
    STATE_FILE,
    latest_checkpoint,
    list_checkpoints,
    load_state,
    load_weights,
    save_checkpoint,
)
from rolloutlab.train._config import ConfigError, TrainConfig
from rolloutlab.train._data import (
    Group,
    TaskSampler,
    compute_advantages,
    record_token_data,
    zero_variance,
)
from rolloutlab.train._logging import MetricLogger, check_loggers, make_loggers
from rolloutlab.train._parallel import (
    gather_into,
    init_distributed,
    load_optimizer_state,
    optimizer_state,
    shard,
    unwrap,
    wrap,
)
from rolloutlab.train._process_labels import load_process_labels
from rolloutlab.train._update import Updater, reference_model

__all__ = ["TrainResult", "Trainer", "horizon_at", "train"]

log = logging.getLogger("rolloutlab.train")


def horizon_at(cfg: TrainConfig, step: int, env_max_turns: int) -> int:
    """The turn cap in force at ``step`` (pure function of the step)."""
    rc = cfg.rollout.rounds_ctrl
    if rc.type == "scaling_inter_stepwise":
        return algos.max_rounds_at(step, rc.rounds, rc.steps_scaling_inter)
    if rc.rounds:
        return int(rc.rounds[0])
    return int(cfg.rollout.loop.max_turns or env_max_turns)


def filtered_by_dynamic_sampling(group: Group) -> bool:
    """DAPO's dynamic-sampling rule: set a group aside when its rewards are all equal
    (:func:`zero_variance`) and it has more than one member.  A group of one is kept, as in
    verl's DAPO trainer, which keeps a prompt whose metric std > 0 or that has a single
    trajectory (``recipe/dapo/dapo_ray_trainer.py`` at verl commit 9d772002, lines 255-259);
    without that exception every group is filtered when ``rollout.n = 1``."""
    return zero_variance(group) and len(group.episodes) > 1


SUMMED = frozenset({"rollout/retried_groups", "rollout/dropped_groups", "rollout/filtered_groups",
                    "perf/sampled_tokens"})
"""Per-rank counts: the step's value is their sum over the ranks."""
MAXED = frozenset({"rollout/refills"})
"""Per-rank rounds: the step's value is the largest rank's."""


def combine_ranks(shares: Sequence[dict[str, float | None]]) -> dict[str, float | None]:
    """One metrics dict from each rank's: :data:`SUMMED` keys summed, :data:`MAXED` the
    largest, any other the mean over the ranks that have a value (None where none has)."""
    out: dict[str, float | None] = {}
    for k in sorted({k for d in shares for k in d}):
        vals = [float(v) for d in shares if (v := d.get(k)) is not None]
        if not vals:
            out[k] = None
        elif k in SUMMED:
            out[k] = float(sum(vals))
        elif k in MAXED:
            out[k] = max(vals)
        else:
            out[k] = float(np.mean(vals))
    return out


def _seed(*parts: object) -> int:
    return zlib.crc32("/".join(map(str, parts)).encode()) & 0x7FFFFFFF


@dataclass
class TrainResult:
    """What a finished (or stopped) run left behind."""

    run_dir: Path
    last_step: int
    checkpoints: list[Path]
    history: list[dict[str, float | None]] = field(default_factory=list)
    """The metrics of the steps run in this call."""


class Trainer:
    """One training run in ``run_dir`` (see the module docstring for the step)."""

    def __init__(self, cfg: TrainConfig, run_dir: str | Path, *, resume: bool = False, progress: bool | None = None) -> None:
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.process_labels = (load_process_labels(cfg.algorithm.process_rewards)
                               if cfg.algorithm.process_rewards else None)
        """Step labels replacing per-turn rewards (``algorithm.process_rewards``), read once."""
        self.show_progress = cfg.logging.progress if progress is None else progress
        check_loggers(wandb=cfg.logging.wandb)  # before the run directory is written
        if cfg.model.device == "cpu":
            torch.set_num_threads(max(1, cfg.trainer.threads))
        # launched by torchrun (WORLD_SIZE > 1): one process per rank
        had_group = torch.distributed.is_initialized()
        self.rank, self.world, device = init_distributed(cfg.model.device, group_of_one=cfg.trainer.strategy == "fsdp")
        self.owns_process_group = not had_group and torch.distributed.is_initialized()
        """This trainer started the process group (:meth:`close` ends it)."""
        self.distributed = torch.distributed.is_initialized()
        self.fsdp = self.distributed and cfg.trainer.strategy == "fsdp"
        self.spec: EnvSpec = get_env_spec(cfg.env.id)
        est = cfg.algorithm.adv_estimator
        if algos.estimator_spec(est).needs_anchor and not self.spec.has_anchor:
            raise ConfigError(
                f"algorithm.adv_estimator={est} groups turns by anchor state, but {self.spec.id} gives no anchor "
                "observations (EnvSpec.has_anchor is false); use grpo or a per-turn estimator for this environment"
            )
        from rolloutlab.train._model import build_model

        torch.manual_seed(cfg.seed)
        np.random.seed(cfg.seed % 2**32)
        model, self.tokenizer = build_model(cfg, device=device)
        self.memory_estimate: Any = None
        """The step's estimated peak memory (``_memory.MemoryEstimate``; None when not checked)."""
        if cfg.trainer.check_memory and str(device).startswith("cpu"):
            self._check_memory(model)
        from rolloutlab.agent import HFPolicy, suppress_mask

        vocab = int(model.get_output_embeddings().weight.shape[0])
        suppress = suppress_mask(self.tokenizer, vocab, next(model.parameters()).device)
        ref = reference_model(cfg, model)  # the initial weights, taken before a resume loads others
        self._resume_from = latest_checkpoint(self.run_dir) if resume else None
        if resume and self._resume_from is None:
            raise RolloutlabError(_no_checkpoint(self.run_dir, cfg))
        if self._resume_from is not None:
            load_weights(self._resume_from, model)  # unsharded: FSDP shards what was loaded
        self.full: Any = None
        """FSDP only: an unsharded copy of the policy, refreshed from the shards (``gather_into``);
        with backend=local every rank samples with it, else rank 0 writes checkpoints from it (CPU)."""
        if self.fsdp and (cfg.rollout.backend == "local" or self.rank == 0):
            self.full = copy.deepcopy(model).to(device if cfg.rollout.backend == "local" else "cpu")
            self.full.requires_grad_(False)
        self.model = wrap(model, cfg.trainer.strategy) if self.distributed else model
        if self.fsdp and ref is not None:
            ref = shard(ref)
        self.updater = Updater(cfg, self.model, pad_id=int(getattr(self.tokenizer, "pad_token_id", 0)), suppress=suppress,
                               distributed=self.distributed, ref_model=ref, env_max_turns=self.spec.max_turns)
        self.policy: TrainablePolicy
        if cfg.rollout.backend == "local":
            # a sharded forward is a collective: ranks sampling different lengths would deadlock
            sampler = self.full if self.fsdp else model
            self.policy = HFPolicy(sampler, self.tokenizer, name="trainer", seed=cfg.seed)
        else:
            from rolloutlab.train._remote import RemotePolicy

            self.policy = RemotePolicy(cfg, self.tokenizer, self.run_dir)
        if cfg.env.split not in self.spec.splits:
            raise ConfigError(f"env.split={cfg.env.split!r}: {self.spec.id} has splits {', '.join(self.spec.splits)}")
        tasks = list(self.spec.tasks(cfg.env.split, cfg.env.task_seed))
        if cfg.env.max_tasks is not None:
            tasks = tasks[: cfg.env.max_tasks]
        self.sampler = TaskSampler(tasks, seed=cfg.seed)
        self.step = 0
        self.history: list[dict[str, float | None]] = []
        self._empty_steps = 0
        self._saved_at: int | None = None
        """The step of the last checkpoint this trainer wrote or resumed from."""
        self.writer: RunWriter | None = None
        if self.rank == 0:
            self._open_run_dir(resume)
        if resume:
            self._resume()
        self.loggers: list[MetricLogger] = []
        if self.rank == 0:
            assert self.writer is not None
            self.loggers = make_loggers(
                self.run_dir, tensorboard=cfg.logging.tensorboard, wandb=cfg.logging.wandb,
                name=cfg.logging.wandb_run_name or cfg.name, config=cfg.to_dict(), run_id=self.writer.run.run_id,
                wandb_project=cfg.logging.wandb_project,
            )
        # What is alive now (imported modules, the model, the tokenizer) lives as long as the
        # run, yet every full garbage collection rescans it: ~400k objects once transformers is
        # imported, 0.3-0.5 s per collection on a CPU core, and the agent loop's allocations
        # trigger one about every step of the tiny task.  Frozen, a collection scans only what
        # the steps allocated.  close() unfreezes.
        gc.freeze()

    # -------------------------------------------------------------------- memory

    def _prompt_tokens(self) -> int:
        """Token count of the opening observation of the split's first task (chat-rendered)."""
        cfg = self.cfg
        if cfg.env.split not in self.spec.splits:
            raise ConfigError(f"env.split={cfg.env.split!r}: {self.spec.id} has splits {', '.join(self.spec.splits)}")
        task = next(iter(self.spec.tasks(cfg.env.split, cfg.env.task_seed)))

        async def opening() -> int:
            env = self.spec.make(**cfg.env.kwargs)
            try:
                obs = await env.reset(task=task, seed=cfg.seed)
            finally:
                await env.close()
            return len(self.tokenizer.render(obs.messages, add_generation_prompt=True))

        return asyncio.run(opening())

    def _check_memory(self, model: Any) -> None:
        """Refuse a run whose estimated peak exceeds the memory available (``_memory``)."""
        from rolloutlab.train._memory import (
            GB,
            available_bytes,
            estimate_memory,
            fitting_overrides,
            process_rss,
            run_horizon,
            shape_of,
        )

        budget = available_bytes()
        if budget is None:
            return
        cfg = self.cfg
        process = process_rss()
        budget += process  # what the process holds now is part of the estimate
        shape = shape_of(model, bytes_per_value=next(model.parameters()).element_size())
        prompt, turns = self._prompt_tokens(), run_horizon(cfg, self.spec.max_turns)
        est = estimate_memory(cfg, shape, prompt_tokens=prompt, turns=turns, process=process)
        self.memory_estimate = est
        if est.total <= budget:
            return
        fit = fitting_overrides(cfg, shape, prompt_tokens=prompt, turns=turns, process=process, budget=budget)
        advice = (f"these overrides fit: {' '.join(fit)}" if fit else
                  "no smaller rollout.max_tokens_per_turn, rollout.max_turns, actor.micro_batch_size or "
                  "rollout.concurrency fits; use a smaller model or a machine with more memory")
        raise ConfigError(
            f"the run would need about {est.describe()}, but {budget / GB:.1f} GB is available; {advice} "
            "(trainer.check_memory=false runs it anyway; the estimate is an upper bound, docs/training.md)"
        )

    # ------------------------------------------------------------------- run dir

    def _open_run_dir(self, resume: bool) -> None:
        d = self.run_dir
        if resume:
            run = read_run(d)
            run.status = "running"
            self.writer = RunWriter(d, run)
            return
        if (d / "run.json").exists():
            raise RolloutlabError(f"{d} already holds a run (run.json); continue it with --resume {d}, or choose another --out")
        run = Run(
            run_id=f"{self.cfg.name}-{uuid.uuid4().hex[:8]}",
            source="rolloutlab",
            name=self.cfg.name,
            config=self.cfg.to_dict(),
            model=self.cfg.model.path or "tiny",
            algorithm=self.cfg.algorithm.adv_estimator,
            env=self.cfg.env.id,
            labels={"estimator": self.cfg.algorithm.adv_estimator, "env": self.cfg.env.id},
        )
        self.writer = RunWriter(d, run)

    def _resume(self) -> None:
        ck = self._resume_from  # its weights are in the model already (__init__ refused a run without one)
        assert ck is not None
        state = load_state(ck)
        load_optimizer_state(self.model, self.updater.optimizer, state["optimizer"])
        self.updater.scheduler.load_state_dict(state["scheduler"])
        self.sampler.load_state_dict(state["sampler"])
        self.step = int(state["step"])
        self._saved_at = self.step
        self._empty_steps = int(state.get("empty_steps", 0))
        if self.rank == 0:
            self._truncate_after(self.step)

    def _truncate_after(self, step: int) -> None:
        """Forget what a killed run wrote after its last checkpoint: later step files and
        metrics lines (the resumed run writes them again, so each step appears once).  What
        is dropped is said on the ``rolloutlab.train`` logger (stderr unless configured)."""
        dropped: set[int] = set()
        roll = self.run_dir / "rollouts"
        if roll.is_dir():
            for p in roll.iterdir():
                if p.name.startswith("."):
                    p.unlink(missing_ok=True)  # a temporary file of an interrupted write
                elif p.name.startswith("step_") and int(p.stem[5:]) > step:
                    dropped.add(int(p.stem[5:]))
                    p.unlink()
        mp = self.run_dir / "metrics.jsonl"
        if mp.exists():
            kept = []
            for line in mp.read_bytes().splitlines():
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue  # a torn last line
                if int(rec.get("step", 0)) <= step:
                    kept.append(line)
                else:
                    dropped.add(int(rec["step"]))
            tmp = mp.with_name(".metrics.jsonl.tmp")
            tmp.write_bytes(b"".join(x + b"\n" for x in kept))
            os.replace(tmp, mp)
        if dropped:
            log.warning(
                "%s: resuming from checkpoint step_%06d; discarded steps %s written after it (their rollouts "
                "and metrics lines); they are trained again", self.run_dir, step, spans(sorted(dropped)),
            )
        ck = self.run_dir / "checkpoints"
        if ck.is_dir():
            for p in ck.iterdir():
                if p.name.startswith("."):
                    shutil.rmtree(p, ignore_errors=True)
        if self.writer is not None:
            self.writer.run.last_step = step or None
            self.writer.write_run()

    # ------------------------------------------------------------------- collect

    def _loop_config(self, max_turns: int) -> LoopConfig:
        # the step's horizon (rounds_ctrl) over the configured loop settings
        return dataclasses.replace(self.cfg.rollout.loop, max_turns=max_turns, split="train")

    async def _run_groups(self, tasks: Sequence[Task], step: int, tag: str, loop_cfg: Any) -> list[Group]:
        from rolloutlab.agent import EpisodeJob, run_episodes

        cfg = self.cfg
        kwargs = dict(cfg.env.kwargs)

        def factory() -> Any:
            return self.spec.make(**kwargs)

        distinct_seeds = cfg.rollout.backend != "local"  # a server honours per-request seeds

        def label(g: int) -> int:
            # the group's index among every rank's groups (rank r holds r, r + world, …): ids
            # and environment seeds are those of the same group in one process, never repeated
            return self.rank + g * self.world

        def seed_of(g: int, i: int) -> int:
            return _seed(cfg.seed, step, tag, label(g), i if distinct_seeds else "")

        n = cfg.rollout.n
        if cfg.rollout.executor == "ray":
            from rolloutlab.agent import EpisodeSpec
            from rolloutlab.train._ray import run_on_ray
            from rolloutlab.train._remote import RemotePolicy

            assert isinstance(self.policy, RemotePolicy)  # TrainConfig: executor=ray needs backend=openai
            specs = [EpisodeSpec(env=cfg.env.id, env_kwargs=kwargs, task=t, seed=seed_of(g, i), step=step,
                                 traj_id=f"{step}-{tag}{label(g)}-{i}", group_id=f"{step}-{tag}{label(g)}", sample_idx=i,
                                 policy_version=step - 1)
                     for g, t in enumerate(tasks) for i in range(n)]
            eps = await run_on_ray(cfg, self.tokenizer, self.run_dir, self.policy.model, step - 1, specs, loop_cfg)
        else:
            jobs = [EpisodeJob(env_factory=factory, task=t, seed=seed_of(g, i), step=step,
                               traj_id=f"{step}-{tag}{label(g)}-{i}", group_id=f"{step}-{tag}{label(g)}", sample_idx=i,
                               policy_version=step - 1)
                    for g, t in enumerate(tasks) for i in range(n)]
            eps = await run_episodes(jobs, self.policy, config=loop_cfg)
        return [Group(task=t, episodes=list(eps[g * n : (g + 1) * n])) for g, t in enumerate(tasks)]

    def collect(self, step: int, max_turns: int) -> tuple[list[Group], list[tuple[Episode, str]], dict[str, float]]:
        """Groups to train on, episodes set aside (with the reason), and counts."""
        cfg, a = self.cfg, self.cfg.algorithm
        loop_cfg = self._loop_config(max_turns)
        share = self._shard(cfg.rollout.tasks_per_step)
        tasks = self._draw(cfg.rollout.tasks_per_step)[share]
        groups = asyncio.run(self._run_groups(tasks, step, "g", loop_cfg))
        m = {"rollout/retried_groups": 0.0, "rollout/dropped_groups": 0.0, "rollout/filtered_groups": 0.0, "rollout/refills": 0.0}
        aside: list[tuple[Episode, str]] = []
        first = [e for g in groups for e in g.episodes]
        keep = self._handle_failures(groups, step, loop_cfg, aside, m)
        if a.dynamic_sampling:
            good = [g for g in keep if not filtered_by_dynamic_sampling(g)]
            for g in keep:
                if filtered_by_dynamic_sampling(g):
                    aside.extend((e, "zero_variance") for e in g.episodes)
                    m["rollout/filtered_groups"] += 1
            want = len(tasks)
            r = 0
            while len(good) < want and r < a.max_refills:
                r += 1
                extra_tasks = self._draw(cfg.rollout.tasks_per_step)[share][: max(1, want - len(good))]
                extra = asyncio.run(self._run_groups(extra_tasks, step, f"r{r}g", loop_cfg))
                extra = self._handle_failures(extra, step, loop_cfg, aside, m)
                for g in extra:
                    if filtered_by_dynamic_sampling(g):
                        aside.extend((e, "zero_variance") for e in g.episodes)
                        m["rollout/filtered_groups"] += 1
                    elif len(good) < want:
                        good.append(g)
                    else:
                        aside.extend((e, "surplus") for e in g.episodes)
            m["rollout/refills"] = float(r)
            keep = good
        # the first attempts' share (before retries and refills); rollout/ungraded_rate is over
        # every rollout of the step (outcomes.StepOutcome, in _metrics)
        m["rollout/ungraded_rate_first"] = float(np.mean([not e.trajectory.graded for e in first])) if first else math.nan
        return keep, aside, m

    def _draw(self, k: int) -> list[Task]:
        # every rank draws the same tasks and keeps its share, so the sampler stays in step
        return self.sampler.draw(k)

    def _shard(self, k: int) -> slice:
        return slice(self.rank, k, self.world)

    def _handle_failures(
        self, groups: list[Group], step: int, loop_cfg: Any, aside: list[tuple[Episode, str]], m: dict[str, float]
    ) -> list[Group]:
        a = self.cfg.algorithm
        keep: list[Group] = []
        for gi, g in enumerate(groups):
            tries = 0
            while not g.graded and a.on_failure == "retry" and tries < a.max_retries:
                tries += 1
                m["rollout/retried_groups"] += 1
                aside.extend((e, "failed_group_retried") for e in g.episodes)
                g = asyncio.run(self._run_groups([g.task], step, f"t{tries}x{gi}-", loop_cfg))[0]
            if g.graded:
                keep.append(g)
            else:
                m["rollout/dropped_groups"] += 1
                aside.extend((e, "failed_group_dropped") for e in g.episodes)
        return keep

    # ---------------------------------------------------------------------- step

    def train_step(self) -> dict[str, float | None]:
        cfg = self.cfg
        step = self.step + 1
        t_step = time.perf_counter()
        max_turns = horizon_at(cfg, step, self.spec.max_turns)
        if cfg.trainer.deterministic:
            self.policy.reseed(_seed(cfg.seed, "sample", step, self.rank))
        self.policy.policy_version = step - 1
        gen0 = self.policy.gen_seconds
        t0 = time.perf_counter()
        groups, aside, m = self.collect(step, max_turns)
        rollout_s = time.perf_counter() - t0
        gen_s = self.policy.gen_seconds - gen0
        n_eps = sum(len(g.episodes) for g in groups)
        samples, adv_diag = compute_advantages(cfg, groups, labels=self.process_labels) if groups else ([], {})
        upd: dict[str, float] = {}
        has_data = bool(samples) and any(any(s.loss_mask) for s in samples)
        if self.distributed:  # every rank trains, or none (the update is a collective)
            flag = torch.tensor([1.0 if has_data else 0.0])
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MIN)
            has_data = bool(flag.item())
        if has_data and cfg.actor.kl_coef > 0 and cfg.actor.kl_in == "reward":
            shift = self.updater.kl_reward_penalty(samples, n_eps)
            samples, adv_diag = compute_advantages(cfg, groups, reward_shift=shift, labels=self.process_labels)
            upd["actor/kl_in_reward"] = -float(np.mean(shift)) / cfg.actor.kl_coef
        if has_data:
            upd.update(self.updater.update(samples, kl_in_reward=cfg.actor.kl_in == "reward"))
            if self.full is not None and cfg.rollout.backend == "local":
                gather_into(self.full, self.model)  # the next step samples with the new weights
            self._empty_steps = 0
        else:
            self._empty_steps += 1
        if samples and cfg.rollout.loop.record_tokens:
            record_token_data(groups, samples)
        self.step = step
        trained = [e.trajectory for g in groups for e in g.episodes]
        set_aside = [(e.trajectory, why) for e, why in aside]
        if self.distributed:  # every rank's share: the step's file and its metrics hold them all
            trained, set_aside = self._everyone(trained, set_aside)
        m["perf/sampled_tokens"] = float(sum(sum(s.loss_mask) for s in samples))
        metrics = self._metrics(step, trained, set_aside, m, adv_diag, upd, max_turns)
        metrics["timing/rollout_s"] = rollout_s
        metrics["timing/generation_s"] = gen_s
        metrics["timing/env_and_loop_s"] = max(0.0, rollout_s - gen_s)
        step_s = time.perf_counter() - t_step
        metrics["timing/step_s"] = step_s
        metrics["perf/tokens_per_s"] = (metrics["perf/sampled_tokens"] or 0.0) / step_s if step_s > 0 else None
        dev = next(unwrap(self.model).parameters()).device
        if dev.type == "cuda":
            metrics["perf/peak_memory_gb"] = torch.cuda.max_memory_allocated(dev) / 1e9
        if self.rank == 0:
            self._write_step(step, trained, set_aside)
            assert self.writer is not None
            self.writer.log_metrics(step, metrics)
            for lg in self.loggers:
                lg.log(step, metrics)
        if self._empty_steps >= 3:
            last_err = next((e.trajectory.error for e, _ in reversed(aside) if e.trajectory.error), None)
            raise RolloutlabError(
                f"no trainable episode for 3 steps in a row (step {step}); last episode error: {last_err or 'none'}. "
                f"The run directory is intact up to step {step}; fix the environment, then --resume"
            )
        every = cfg.trainer.save_every
        if (every and step % every == 0) or step == cfg.trainer.total_steps:
            self.save()
        self.history.append(metrics)
        return metrics

    def _everyone(self, trained: list[Trajectory], aside: list[tuple[Trajectory, str]]
                  ) -> tuple[list[Trajectory], list[tuple[Trajectory, str]]]:
        """Every rank's trajectories, in rank order, on every rank (a collective)."""
        shares: list[Any] = [None] * self.world
        torch.distributed.all_gather_object(shares, (trained, aside))
        return [t for tr, _ in shares for t in tr], [x for _, a in shares for x in a]

    def _metrics(
        self, step: int, trained: list[Trajectory], aside: list[tuple[Trajectory, str]], m: dict[str, float],
        adv_diag: dict[str, float], upd: dict[str, float], max_turns: int,
    ) -> dict[str, float | None]:
        """The step's metrics.  ``trained`` and ``aside`` are every rank's: what is read from
        the trajectories is exact over the whole step.  The rest is this rank's own; under
        ``torchrun`` it is combined over the ranks (:data:`SUMMED` summed, :data:`MAXED` the
        largest, the others — rates, advantage statistics, losses — the mean of the ranks that
        have a value)."""
        def mean(xs: Sequence[float]) -> float | None:
            return float(np.mean(xs)) if len(xs) else None

        # the step's outcome figures, over every rollout of the step as its file records it
        # (retried and set-aside attempts included): the one definition analyze, show, the
        # report and the viewer read from that file (rolloutlab.outcomes)
        every = trained + [t for t, _ in aside]
        row = step_outcome([t.reward for t in every], [t.graded for t in every], [t.success for t in every],
                           [t.group_id for t in every], [t.num_turns for t in every],
                           [t.response_tokens for t in every], [t.invalid_actions for t in every])
        out: dict[str, float | None] = {
            name: (None if (v := getattr(row, f)) is None else float(v)) for f, name in METRIC_NAMES.items()
        }
        out.update({
            "episode/tool_calls_mean": mean([float(t.tool_calls or 0) for t in every]),
            "episode/invalid_actions_mean": mean([float(t.invalid_actions or 0) for t in every]),
            "rollout/trained_groups": float(len({t.group_id for t in trained})),
            "response_length/clip_ratio": length_cut_rate(every, self.cfg.rollout.loop.max_tokens_per_turn),
            "response/repetition_rate": repetition_rate(every),
            "max_rounds": float(max_turns),
        })
        own: dict[str, float | None] = {**m, **adv_diag, **upd}
        if self.distributed:
            shares: list[Any] = [None] * self.world
            torch.distributed.all_gather_object(shares, own)
            own = combine_ranks(shares)
        out.update(own)
        return out

    def _write_step(self, step: int, trained: list[Trajectory], aside: list[tuple[Trajectory, str]]) -> None:
        if not self.cfg.logging.write_rollouts:
            return
        assert self.writer is not None
        trajs = list(trained)
        for t, why in aside:
            trajs.append(t.model_copy(update={"extras": {**t.extras, "dropped": why}}))
        try:
            self.writer.write_step(step, trajs)
        except OSError as e:
            for p in (self.run_dir / "rollouts").glob(".step_*"):
                p.unlink(missing_ok=True)
            raise RolloutlabError(
                f"could not write rollouts of step {step}: {e.strerror or e}. Steps before {step} and the "
                "checkpoints are intact; free space, then rolloutlab train --resume "
                f"{self.run_dir}"
            ) from None

    # ---------------------------------------------------------------- checkpoint

    def save(self) -> Path | None:
        """Write a checkpoint (rank 0); every rank calls it, as gathering the full state is a
        collective under FSDP.  Returns the folder on rank 0, None elsewhere."""
        optimizer = optimizer_state(self.model, self.updater.optimizer)
        self._saved_at = self.step
        if self.fsdp and self.cfg.rollout.backend != "local":
            gather_into(self.full, self.model)  # with backend=local it is refreshed after every update
        path = self._write_checkpoint(optimizer) if self.rank == 0 else None
        if path is not None:  # a server reloads the weights; a local model ignores it
            self.policy.after_save(path)
        from rolloutlab.train._remote import RemotePolicy

        if self.distributed and isinstance(self.policy, RemotePolicy):
            # every rank's client asks for the weights the server now has
            name = [self.policy.model]
            torch.distributed.broadcast_object_list(name, src=0)
            self.policy.model = name[0]
        return path

    def _write_checkpoint(self, optimizer: dict[str, Any]) -> Path:
        state = {
            "optimizer": optimizer,
            "scheduler": self.updater.scheduler.state_dict(),
            "sampler": self.sampler.state_dict(),
            "horizon": {"max_rounds": horizon_at(self.cfg, max(1, self.step), self.spec.max_turns)},
            "empty_steps": self._empty_steps,
            "policy_generator": self.policy.sampler_state(),
        }
        weights = self.full if self.fsdp else unwrap(self.model)
        path = save_checkpoint(self.run_dir, self.step, weights, self.tokenizer, state, sampling=self.cfg.rollout.loop)
        keep = self.cfg.trainer.keep_checkpoints
        if keep:
            for old in list_checkpoints(self.run_dir)[:-keep]:
                shutil.rmtree(old, ignore_errors=True)
        return path

    # ------------------------------------------------------------------------ run

    def run(self, *, steps: int | None = None, on_step: Callable[[int, dict[str, float | None]], None] | None = None) -> TrainResult:
        """Train up to ``trainer.total_steps`` (or ``steps`` more steps, whichever is first)."""
        total = self.cfg.trainer.total_steps
        start = self.step
        end = total if steps is None else min(total, self.step + steps)
        bar: _Progress | _StepLines | None = None
        if self.show_progress and self.rank == 0:
            bar = _Progress(end, self.step) if sys.stdout.isatty() else _StepLines(end)
        status = "aborted"
        try:
            while self.step < end:
                metrics = self.train_step()
                if bar is not None:
                    bar.update(self.step, metrics)
                if on_step is not None:
                    on_step(self.step, metrics)
            if self.step > start and self._saved_at != self.step:
                self.save()  # stopped at --steps between save_every marks: --resume continues from here
            status = "finished" if self.step >= total else "running"
        finally:
            if bar is not None:
                bar.close()
            for lg in self.loggers:
                lg.close()
            if self.writer is not None:
                self.writer.close(status=status)
        return TrainResult(self.run_dir, self.step, list_checkpoints(self.run_dir), self.history)

    def close(self, *, finished: bool = True) -> None:
        """End the process group if this trainer started it: a torchrun rank that exits with
        it open can abort in gloo's threads ("terminate called without an active exception").
        After a run that ``finished`` (no exception) the ranks first meet at a barrier, so none
        tears down while a peer still works; after a failure there is no barrier (the peers may
        sit in another collective, and a barrier would wait for gloo's 30-minute timeout)."""
        gc.unfreeze()
        if self.owns_process_group and torch.distributed.is_initialized():
            try:
                if finished:
                    torch.distributed.barrier()
            finally:
                torch.distributed.destroy_process_group()
            self.owns_process_group = False


KEY_FIGURES = ("success/rate", "reward/mean", "actor/entropy", "actor/pg_loss", "actor/grad_norm",
               "response/length_mean", "timing/step_s")
"""The figures a step's progress shows (bar or line)."""


class _StepLines:
    """One line per step on stdout when it is not a terminal (a file, a pipe, a job log), as
    verl's console logger prints (``verl/utils/tracking.py``, ``step:N - key:value - ...``)."""

    def __init__(self, total: int) -> None:
        self.total = total

    def update(self, step: int, m: dict[str, float | None]) -> None:
        parts = [f"step:{step}/{self.total}"]
        for k in KEY_FIGURES:
            v = m.get(k)
            parts.append(f"{k}:{v:.4g}" if v is not None and math.isfinite(v) else f"{k}:-")
        print(" - ".join(parts), flush=True)

    def close(self) -> None:
        return None


class _Progress:
    """A rich progress bar with the key figures of the last step."""

    def __init__(self, total: int, start: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.p = Progress(
            TextColumn("train"), BarColumn(bar_width=20), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[figures]}"), transient=False,
        )
        self.p.start()
        self.task = self.p.add_task("train", total=total, completed=start, figures="")

    def update(self, step: int, m: dict[str, float | None]) -> None:
        def f(k: str, fmt: str) -> str:
            v = m.get(k)
            return format(v, fmt) if v is not None and math.isfinite(v) else "-"

        figures = f"succ {f('success/rate', '.2f')} rew {f('reward/mean', '.2f')} ent {f('actor/entropy', '.2f')}"
        self.p.update(self.task, completed=step, figures=figures)

    def close(self) -> None:
        self.p.stop()


def train(
    cfg: TrainConfig,
    out: str | Path,
    *,
    steps: int | None = None,
    progress: bool | None = None,
    on_step: Callable[[int, dict[str, float | None]], None] | None = None,
) -> TrainResult:
    """Start a run in ``out`` and train (see :class:`Trainer`)."""
    t = Trainer(cfg, out, progress=progress)
    finished = False
    try:
        res = t.run(steps=steps, on_step=on_step)
        finished = True
        return res
    finally:
        t.close(finished=finished)


def resume(
    run_dir: str | Path,
    *,
    steps: int | None = None,
    progress: bool | None = None,
    overrides: Sequence[str] = (),
) -> TrainResult:
    """Continue the run in ``run_dir`` from its last checkpoint, with the config of its
    ``run.json`` (``overrides`` may change e.g. ``trainer.total_steps``)."""
    if not (Path(run_dir) / "run.json").is_file():
        raise RolloutlabError(f"{run_dir} is not a run directory (no run.json); start a run with rolloutlab train CONFIG --out DIR")
    run = read_run(run_dir)
    cfg = TrainConfig.from_dict(run.config, source=str(Path(run_dir) / "run.json"))
    if overrides:
        cfg = cfg.with_overrides(overrides)
    t = Trainer(cfg, run_dir, resume=True, progress=progress)
    if overrides and t.writer is not None:
        t.writer.run.config = cfg.to_dict()
        t.writer.write_run()
    finished = False
    try:
        res = t.run(steps=steps)
        finished = True
        return res
    finally:
        t.close(finished=finished)


def length_cut_rate(trajs: Sequence[Trajectory], max_tokens: int) -> float | None:
    """Share of the step's generated turns cut at ``rollout.max_tokens_per_turn`` (verl's
    ``response_length/clip_ratio``, per turn here: each turn is one generation); None when no
    turn recorded its token count."""
    return outcomes.length_cut_rate((tu.tokens for t in trajs for tu in t.turns), max_tokens)


def repetition_rate(trajs: Sequence[Trajectory]) -> float | None:
    """Share of turns (after an episode's first) whose action repeats the turn before word
    for word — an agent stuck in a loop; None when no episode has a second turn."""
    repeats = [b.action == a.action for t in trajs for a, b in zip(t.turns, t.turns[1:], strict=False)]
    return float(np.mean(repeats)) if repeats else None


def _no_checkpoint(run_dir: Path, cfg: TrainConfig) -> str:
    """Why a run without a complete checkpoint cannot be resumed, and what to do."""
    written = sorted(int(p.stem[5:]) for p in (run_dir / "rollouts").glob("step_*.jsonl")) if (run_dir / "rollouts").is_dir() else []
    wrote = f"it wrote steps {spans(written)} but" if written else "it"
    return (
        f"{run_dir} has no complete checkpoint (checkpoints/step_NNNNNN/ with {STATE_FILE}): {wrote} saved none "
        f"(trainer.save_every={cfg.trainer.save_every}, and it ended before a stop could save), so there is no "
        "model, optimizer or sampler state to continue from. Start a new run with another --out, "
        f"or remove {run_dir} and start it again"
    )
