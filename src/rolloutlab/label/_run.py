"""Running a labelling: read the run, check it can be labelled, label each trajectory, write.

Layout of ``OUT`` (an ordinary run directory, :class:`rolloutlab.io.RunWriter`)::

    OUT/run.json                    # the source's record; config.labels = {method, model, params, source_run}
    OUT/rollouts/step_NNNNNN.jsonl  # every trajectory of the source, by step; labelled turns:
                                    #   reward = the label's value, extras.env_reward = the old reward,
                                    #   extras.label = {method, value, hard, n | g, ...}
    OUT/.labels.partial.jsonl       # while running: labelled trajectories, one complete line each

An evaluation's trajectories (``eval/<checkpoint>/episodes.jsonl``) are written with their
step files too, their ids prefixed ``eval/<checkpoint>/`` (split ``eval`` kept).

Nothing is created before the input is known good: the run has turns, the model exists
(and gives log-probabilities), and, for ``mc``, every trajectory to label replays exactly.
Resuming: a re-run with the same method, model and parameters reads the partial file,
skips the trajectories there (no trajectory is labelled or written twice) and labels the
rest; the step files are written at the end, atomically, and the partial file removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from rolloutlab.agent import Policy, make_policy
from rolloutlab.errors import RolloutlabError, spans
from rolloutlab.io import RunWriter, read_run
from rolloutlab.label._actionprob import HFScorer, OpenAIScorer, Scorer, action_prob_labels
from rolloutlab.label._config import LabelConfig
from rolloutlab.label._mc import mc_labels
from rolloutlab.label._source import Item, Source, check_replay, read_source
from rolloutlab.schema import Run, Trajectory

__all__ = ["PARTIAL", "LabelProgress", "LabelResult", "apply_labels", "run_label"]

PARTIAL = ".labels.partial.jsonl"


@dataclass
class LabelProgress:
    """Running figures for the progress bar."""

    total_steps: int
    """Turns to label."""
    done_steps: int = 0
    resumed: int = 0
    """Trajectories found labelled already (a resumed run)."""


@dataclass(frozen=True)
class LabelResult:
    out: Path
    trajectories: int
    """Trajectories written."""
    labelled: int
    """Trajectories labelled by this run (resumed ones not counted)."""
    steps: int
    """Turns labelled by this run."""
    seconds: float
    model_seconds: float
    """Time inside model calls (sampling and scoring)."""


def apply_labels(t: Trajectory, labels: list[dict[str, Any]]) -> Trajectory:
    """``t`` with each turn's reward replaced by its label's value; the old reward kept in
    ``extras.env_reward``, the label in ``extras.label``."""
    turns = []
    for u, lab in zip(t.turns, labels, strict=True):
        extras = {**(u.extras or {}), "env_reward": u.reward, "label": lab}
        turns.append(u.model_copy(update={"reward": lab["value"], "extras": extras}))
    return t.model_copy(update={"turns": turns})


def _labels_record(config: LabelConfig, source: Source, model: str) -> dict[str, Any]:
    return {"method": config.method, "model": model, "params": config.params(), "source_run": source.run.run_id}


def _model_name(config: LabelConfig) -> str:
    kind, _, rest = config.policy.partition(":")
    if kind == "hf":
        return f"hf:{Path(rest).name}"  # no folder of this machine in the record
    if kind == "openai":
        return f"openai:{rest.rpartition(':')[2]}"
    return config.policy


def _make_policy(config: LabelConfig) -> tuple[Policy, Scorer | None]:
    """The policy that samples (continuations, thoughts) and, for action-prob, the scorer."""
    kind, _, rest = config.policy.partition(":")
    if config.method == "mc":
        return make_policy(config.policy, parser=config.loop.parser or "text", seed=config.seed), None
    if kind == "hf":
        from rolloutlab.agent import HFPolicy

        hf = HFPolicy.from_pretrained(rest, seed=config.seed)
        assert hf.tokenizer is not None
        return hf, HFScorer(hf.model, hf.tokenizer)
    from rolloutlab.agent import OpenAIPolicy, load_tokenizer

    base_url, _, model = rest.rpartition(":")
    assert config.tokenizer is not None  # LabelConfig
    if not config.tokenizer.is_dir():
        raise RolloutlabError(f"--tokenizer {config.tokenizer}: not a folder")
    oa = OpenAIPolicy(base_url, model, api_key=os.environ.get("OPENAI_API_KEY", "EMPTY"),
                      tokenizer=load_tokenizer(config.tokenizer))
    return oa, OpenAIScorer(oa.client, model, base_url)


def _existing(config: LabelConfig, record: dict[str, Any]) -> dict[str, Trajectory]:
    """Trajectories labelled by an earlier run into ``config.out`` (its settings checked)."""
    out = config.out
    if not out.exists():
        return {}
    if not (out / "run.json").is_file():
        if any(out.iterdir()):
            raise RolloutlabError(f"--out {out} exists and is not a labelled run; choose an empty or new folder")
        return {}
    old = read_run(out).config.get("labels")
    if not isinstance(old, dict):
        raise RolloutlabError(f"--out {out} holds a run that is not a labelling; choose another folder")
    diff = [f"{k}: {old.get(k)!r} before, {record[k]!r} now" for k in record if old.get(k) != record[k]]
    if diff:
        raise RolloutlabError(f"--out {out} holds labels made with other settings ({'; '.join(diff)}); re-run with "
                              "the same settings to resume, or choose another --out")
    done: dict[str, Trajectory] = {}
    from rolloutlab.io import read_trajectories

    roll = out / "rollouts"
    if roll.is_dir():
        for f in sorted(roll.glob("step_*.jsonl")):
            for _, t in read_trajectories(f):
                if t.turns and t.turns[0].extras and "label" in t.turns[0].extras:
                    done[t.traj_id] = t
    part = out / PARTIAL
    if part.is_file():
        data = part.read_bytes()
        keep = data[: data.rfind(b"\n") + 1]  # a torn last line (a kill mid-write) is dropped
        if len(keep) != len(data):
            part.write_bytes(keep)
        for line in keep.splitlines():
            t = Trajectory.model_validate(orjson.loads(line))
            done[t.traj_id] = t
    return done


def run_label(config: LabelConfig, on_progress: Callable[[LabelProgress], None] | None = None) -> LabelResult:
    """Label the run ``config.run`` into ``config.out`` (see the module docstring)."""
    return asyncio.run(_run(config, on_progress))


async def _run(config: LabelConfig, on_progress: Callable[[LabelProgress], None] | None) -> LabelResult:
    t_start = time.perf_counter()
    source = read_source(config.run, config.env)
    todo = [i for i in source.items if i.labellable]
    span = config.step_range()
    if span is not None:
        todo = [i for i in todo if span[0] <= i.trajectory.step <= span[1]]
        if not todo:
            have = sorted({i.trajectory.step for i in source.items})
            raise RolloutlabError(f"--steps {config.steps}: {config.run} has no trajectory to label in steps "
                                  f"{span[0]}-{span[1]} (its steps: {spans(have)}); choose steps it holds")
    if config.limit is not None:
        todo = todo[: config.limit]
    if not todo:
        raise RolloutlabError(f"{config.run}: no trajectory can be labelled (each needs turns and a graded, finished "
                              "episode: termination done, truncated or max_turns)")
    record = _labels_record(config, source, _model_name(config))
    done = _existing(config, record)
    todo_new = [i for i in todo if i.key not in done]
    if config.method == "mc":
        spec = source.spec()
        if not spec.replayable:
            from rolloutlab.envs import NotReplayable

            raise NotReplayable(f"{spec.id} cannot be replayed (its spec declares replayable=False): Monte-Carlo labels "
                                "need each state rebuilt; use --method action-prob, which needs no environment")
        await check_replay(source, todo_new, parser=config.loop.parser, concurrency=config.loop.concurrency)
    policy, scorer = _make_policy(config)
    try:
        if scorer is not None and todo_new:  # a model without log-probs is refused before anything is written
            await scorer.logprobs([0], [0])
        if (config.out / "run.json").is_file():  # resuming: the same run (_existing checked its settings)
            run = read_run(config.out)
        else:
            # a run of its own (a store holds it beside its source): new id, named after the folder
            run = source.run.model_copy(deep=True, update={
                "run_id": uuid.uuid4().hex[:12], "name": config.out.name or f"{source.run.name}-{config.method}",
                "created_at": datetime.now(UTC), "status": "running", "last_step": None})
            run.config = {**run.config, "labels": record}
            run.labels = {**run.labels, "process_rewards": config.method}
            config.out.mkdir(parents=True, exist_ok=True)
            RunWriter(config.out, run)
        prog = LabelProgress(total_steps=sum(len(i.trajectory.turns) for i in todo),
                             resumed=sum(1 for i in todo if i.key in done))
        prog.done_steps = sum(len(i.trajectory.turns) for i in todo if i.key in done)
        if on_progress:
            on_progress(prog)
        steps_now = await _label_all(config, source, todo_new, policy, scorer, prog, on_progress)
    finally:
        await policy.close()
    done = _existing(config, record)
    _write(config.out, run, source, done)
    model_s = getattr(policy, "gen_seconds", 0.0) + (scorer.seconds if scorer is not None else 0.0)
    return LabelResult(out=config.out, trajectories=len(source.items), labelled=len(todo_new), steps=steps_now,
                       seconds=time.perf_counter() - t_start, model_seconds=model_s)


async def _label_all(config: LabelConfig, source: Source, items: list[Item], policy: Policy, scorer: Scorer | None,
                     prog: LabelProgress, on_progress: Callable[[LabelProgress], None] | None) -> int:
    part = config.out / PARTIAL
    per_traj = max(1, config.n * 2) if config.method == "mc" else max(1, config.g * 2)
    sem = asyncio.Semaphore(max(1, config.loop.concurrency // per_traj))
    steps = 0
    with open(part, "ab") as fh:

        async def one(item: Item) -> None:
            nonlocal steps
            async with sem:
                if config.method == "mc":
                    labels = await mc_labels(item, source, config, policy)
                else:
                    assert scorer is not None
                    labels = await action_prob_labels(item, source, config, policy, scorer)
            t = apply_labels(item.trajectory, labels)
            fh.write(orjson.dumps(t.model_dump(mode="json", exclude_none=True)) + b"\n")  # one complete line
            fh.flush()
            steps += len(labels)
            prog.done_steps += len(labels)
            if on_progress:
                on_progress(prog)

        await asyncio.gather(*(one(i) for i in items))
    return steps


def _write(out: Path, run: Run, source: Source, done: dict[str, Trajectory]) -> None:
    """Every trajectory of the source, labelled where it was, one atomic file per step."""
    by_step: dict[int, list[Trajectory]] = {}
    for item in source.items:
        t = done.get(item.key, item.trajectory)
        by_step.setdefault(t.step, []).append(t)
    w = RunWriter(out, run)
    for step in sorted(by_step):
        w.write_step(step, by_step[step])
    w.close("finished")
    with contextlib.suppress(FileNotFoundError):
        (out / PARTIAL).unlink()
