"""Running an evaluation: N tasks × K samples per checkpoint, written so a killed run resumes.

Layout (a run directory, :class:`rolloutlab.io.RunWriter`)::

    OUT/run.json                              # Run: the evaluation's identity fields in config
    OUT/eval/<checkpoint>/episodes.jsonl      # Trajectory per line, in task × sample order
    OUT/eval/<checkpoint>/summary.json        # EvalSummary
    OUT/eval/<checkpoint>/.episodes.partial.jsonl   # while running: finished episodes, appended

Resuming: each finished episode is appended to the partial file as one complete line and
flushed.  A re-run reads ``episodes.jsonl`` and the partial file (a torn last line, from a
kill mid-write, is cut off the file before anything is appended, so repeated interruptions
never leave a torn line in the middle), keys episodes by ``traj_id`` (``TASK_ID#K``, deterministic),
runs only the missing ones, then writes ``episodes.jsonl`` and ``summary.json`` atomically
and removes the partial file — so no episode is run twice or written twice, and the files
the importer reads are always complete.  A re-run must keep the identity fields
(:data:`IDENTITY_FIELDS`); ``--episodes`` / ``--samples`` may grow.  Episode seeds are a
fixed function of (``seed``, task id, sample index), so a resumed run equals an
uninterrupted one for a deterministic policy.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import uuid
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from rolloutlab.agent import (
    GENERATION_FIELDS,
    Episode,
    EpisodeSpec,
    LoopConfig,
    generation_settings,
    get_parser,
    make_policy,
    run_episodes,
    run_ray,
)
from rolloutlab.envs import Task, get_env_spec
from rolloutlab.evaluate._checkpoints import find_checkpoints
from rolloutlab.evaluate._config import IDENTITY_FIELDS, EvalConfig
from rolloutlab.evaluate._summary import LOST_WARN_RATE, successes, summarize
from rolloutlab.io import InputError, RolloutlabError, RunWriter, read_run, read_trajectories
from rolloutlab.schema import EvalSummary, Run, Trajectory

__all__ = ["PARTIAL", "Progress", "Target", "run_eval"]

PARTIAL = ".episodes.partial.jsonl"


@dataclass(frozen=True)
class Target:
    """One thing to evaluate: a policy spec under a checkpoint name."""

    name: str
    """``eval/<name>/``."""
    step: int | None
    policy: str
    """The spec the policy is made from (``make_policy``)."""
    label: str
    """``EvalSummary.policy``: the spec, or ``hf:<checkpoint name>`` for a checkpoint (the
    records name no folder of this machine)."""


@dataclass
class Progress:
    """Running figures of the checkpoint being evaluated (for the progress bar)."""

    checkpoint: str
    total: int
    done: int = 0
    resumed: int = 0
    graded: int = 0
    solved: int = 0
    reward_sum: float = 0.0
    errors: int = 0
    running: int = 0
    """Episodes under way (at most ``--concurrency``), their requests in flight while ``done``
    stays still: the progress bar shows them (:meth:`in_flight`)."""

    def add(self, t: Trajectory, solved: bool | None) -> None:
        self.done += 1
        if t.reward is not None:
            self.graded += 1
            self.reward_sum += t.reward
        if solved:
            self.solved += 1
        if t.termination == "error":
            self.errors += 1

    def in_flight(self) -> str:
        """``"16 running"`` while episodes are under way, else nothing."""
        return f"{self.running} running" if self.running else ""

    def line(self) -> str:
        name = self.checkpoint[:16]
        if not self.graded:
            return f"{name} errors {self.errors}"
        errors = f" err {self.errors}" if self.errors else ""  # room for the running count at 80 columns
        return f"{name} success {self.solved / self.graded:.2f} reward {self.reward_sum / self.graded:.2f}{errors}"


def targets(config: EvalConfig) -> list[Target]:
    if config.checkpoints is not None:
        return [Target(c.name, c.step, f"hf:{c.path}", f"hf:{c.name}") for c in find_checkpoints(config.checkpoints)]
    assert config.policy is not None
    return [Target("policy", None, config.policy, config.policy)]


def target_loop(config: EvalConfig, target: Target, loop: LoopConfig) -> tuple[LoopConfig, bool]:
    """The loop settings ``target`` is sampled with: an ``hf:`` model's own generation settings
    (``generation_config.json``) in place of the ones not given explicitly, unless
    ``config.checkpoint_generation`` is off; and whether the token cap is the model's own."""
    if not (config.checkpoint_generation and target.policy.startswith("hf:")):
        return loop, False
    own = generation_settings(target.policy[3:])
    use: dict[str, Any] = {k: v for k, v in own.items() if k not in config.given}
    out = dataclasses.replace(loop, **use) if use else loop
    return out, own.get("max_tokens_per_turn") == out.max_tokens_per_turn


def _identity(config: EvalConfig) -> dict[str, Any]:
    # the loop's fields first: the evaluation's own ``split`` (the task split) wins over the loop's record label
    flat = {**dataclasses.asdict(config.loop), **{f.name: getattr(config, f.name) for f in dataclasses.fields(config)}}
    ident = {f: flat[f] for f in IDENTITY_FIELDS}
    ident["checkpoints"] = str(config.checkpoints) if config.checkpoints is not None else None
    # which sampling settings an hf: model's generation_config.json supplies: the same flag
    # values sample differently when one was given before and not now
    ident["from_checkpoint"] = (sorted(set(GENERATION_FIELDS.values()) - config.given)
                                if config.checkpoint_generation else [])
    return ident


def _open_run(config: EvalConfig) -> tuple[Run, str | None]:
    """The run record: the existing one when resuming (its identity checked), else a new one;
    and the status to leave it in whatever happens (``None``: the evaluation's outcome).

    A directory holding another kind of run (a training run, its checkpoints evaluated into
    it as ``rolloutlab demo`` does) keeps its record and its status untouched: its config is
    the trainer's, so the evaluation's identity is not recorded there and not checked."""
    ident = _identity(config)
    if (config.out / "run.json").is_file():
        run = read_run(config.out)
        if run.config and "eval" not in run.config:
            return run, run.status
        old = run.config.get("eval", {})
        diff = [f"{k}: {old.get(k)!r} before, {v!r} now" for k, v in ident.items()
                if old.get(k) != v and (k in old or k != "from_checkpoint")]  # absent: written before it existed
        if diff:
            raise RolloutlabError(
                f"{config.out} holds an evaluation with other settings ({'; '.join(diff)}); "
                "re-run with the same settings to resume, or choose another --out"
            )
        run.status = "running"
        return run, None
    return Run(run_id=uuid.uuid4().hex[:12], name=config.out.name or "eval", source="rolloutlab", config={"eval": ident},
               model=config.policy, env=config.env), None


def _load_done(d: Path) -> dict[str, Trajectory]:
    """Finished episodes of a checkpoint folder: ``episodes.jsonl`` then the partial file."""
    done: dict[str, Trajectory] = {}
    if (d / "episodes.jsonl").is_file():
        for _, t in read_trajectories(d / "episodes.jsonl"):
            done[t.traj_id] = t
    p = d / PARTIAL
    if p.is_file():
        data = p.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            # a torn last line (killed mid-write, no newline yet): cut it off, so that this run
            # appends after a complete line; its episode is run again
            with open(p, "r+b") as f:
                f.truncate(end)
                os.fsync(f.fileno())
        for i, raw in enumerate(data[:end].split(b"\n"), start=1):
            if not raw.strip():
                continue
            try:
                t = Trajectory.model_validate(orjson.loads(raw))
            except (orjson.JSONDecodeError, ValueError) as e:
                raise InputError(f"not a valid finished episode ({e}); delete the file to start over",
                                 path=p, line=i) from None
            done[t.traj_id] = t
    return done


def episode_seed(seed: int, task_id: str, k: int) -> int:
    """The reset/sampling seed of sample ``k`` of ``task_id`` (a fixed function)."""
    return zlib.crc32(f"{seed}/{task_id}/{k}".encode()) & 0x7FFFFFFF


def _specs(config: EvalConfig, tasks: list[Task], step: int | None) -> list[EpisodeSpec]:
    return [EpisodeSpec(env=config.env, task=t, seed=episode_seed(config.seed, t.id, k), step=step or 0,
                        traj_id=f"{t.id}#{k}", group_id=t.id, sample_idx=k)
            for t in tasks for k in range(config.samples)]


def _tasks(config: EvalConfig) -> tuple[list[Task], str]:
    spec = get_env_spec(config.env)
    if config.split not in spec.splits:
        raise RolloutlabError(f"{spec.id} has no split {config.split!r}; splits: {', '.join(spec.splits)}")
    tasks = list(spec.tasks(config.split, config.seed))
    if len(tasks) < config.episodes:
        raise RolloutlabError(
            f"{spec.id} split {config.split!r} has {len(tasks)} tasks; --episodes {config.episodes} asks for more"
        )
    parser = config.loop.parser or spec.action_format
    get_parser(parser)
    return tasks[: config.episodes], parser


async def _run_target(config: EvalConfig, target: Target, specs: list[EpisodeSpec], loop: LoopConfig,
                      parser: str, sink: BinaryIO, prog: Progress,
                      on_progress: Callable[[Progress], None] | None) -> list[Episode]:
    left = len(specs)

    def done(ep: Episode) -> None:
        nonlocal left
        t = ep.trajectory
        sink.write(orjson.dumps(t.model_dump(mode="json", exclude_none=True)) + b"\n")  # one complete line
        sink.flush()
        left -= 1
        # run_episodes keeps ``concurrency`` episodes under way while any is waiting to start
        prog.running = min(loop.concurrency, left)
        prog.add(t, successes([t])[0])
        if on_progress is not None:
            on_progress(prog)

    if config.executor == "ray":
        return await run_ray(specs, target.policy, config=loop, parser=parser, seed=config.seed, progress=done)
    policy = make_policy(target.policy, parser=parser, seed=config.seed)
    try:
        return await run_episodes([s.job() for s in specs], policy, config=loop, progress=done)
    finally:
        await policy.close()


def _warn_if_mostly_lost(summary: EvalSummary, parser: str, own_cap: bool) -> None:
    """Say so when the rewards mostly measure the action format or the token cap, not the task:
    more than :data:`LOST_WARN_RATE` of the turns invalid, or cut at the token cap (unless the
    cap is the checkpoint's own, which its run trained with: the demo's one-token replies)."""
    rate = summary.invalid_action_rate
    if rate is not None and rate > LOST_WARN_RATE:
        warnings.warn(
            f"{summary.checkpoint}: {rate:.0%} of the turns had an invalid action (the parser {parser!r} could "
            "not read the reply, or the environment refused it), so the rewards mostly measure the "
            "action format. Read a few turns in eval/*/episodes.jsonl; if the replies look right, "
            "pick the parser that matches the policy's output with --parser (e.g. hermes for "
            "<tool_call> blocks in text).",
            UserWarning,
            stacklevel=3,
        )
    cut = summary.length_cut_rate
    if cut is not None and cut > LOST_WARN_RATE and not own_cap:
        warnings.warn(
            f"{summary.checkpoint}: {cut:.0%} of the replies were cut at the token cap "
            f"({summary.max_tokens_per_turn} tokens per turn) before the model ended them, so the "
            "actions are mostly truncated text. Give the cap the policy was trained with (--max-tokens), "
            "or let a checkpoint's generation_config.json set it (--checkpoint-generation).",
            UserWarning,
            stacklevel=3,
        )


def run_eval(config: EvalConfig, *, on_progress: Callable[[Progress], None] | None = None) -> list[EvalSummary]:
    """Evaluate every target of ``config`` (resuming what a previous run finished); one
    summary per checkpoint, in step order."""
    tasks, parser = _tasks(config)
    tgts = targets(config)
    base = dataclasses.replace(config.loop, parser=parser)
    config.out.mkdir(parents=True, exist_ok=True)
    run, keep_status = _open_run(config)
    writer = RunWriter(config.out, run)
    summaries: list[EvalSummary] = []
    ok = False
    try:
        for target in tgts:
            d = config.out / "eval" / target.name
            d.mkdir(parents=True, exist_ok=True)
            loop, own_cap = target_loop(config, target, base)
            specs = _specs(config, tasks, target.step)
            done = _load_done(d)
            todo = [s for s in specs if s.traj_id not in done]
            prog = Progress(checkpoint=target.name, total=len(specs))
            for s in specs:
                if s.traj_id in done:
                    t = done[s.traj_id]
                    prog.add(t, successes([t])[0])
            prog.resumed = prog.done
            prog.running = min(loop.concurrency, len(todo))
            if on_progress is not None:
                on_progress(prog)
            if todo:
                with open(d / PARTIAL, "ab") as sink:
                    eps = asyncio.run(_run_target(config, target, todo, loop, parser, sink, prog, on_progress))
                    os.fsync(sink.fileno())
                for ep in eps:
                    done[ep.trajectory.traj_id] = ep.trajectory
            trajs = [done[s.traj_id] for s in specs]
            summary = summarize(target.name, target.step, trajs, config.ks, env=config.env, policy=target.label,
                                split=config.split, samples=config.samples,
                                max_tokens_per_turn=loop.max_tokens_per_turn, temperature=loop.temperature)
            writer.write_eval(target.name, trajs, summary)
            (d / PARTIAL).unlink(missing_ok=True)
            _warn_if_mostly_lost(summary, parser, own_cap)
            summaries.append(summary)
        ok = True
    finally:
        writer.close(status=keep_status or ("finished" if ok else "aborted"))
    return summaries
