"""rolloutlab's own run directory (DESIGN.md §2) — everything is recovered.

A ``running`` run whose newest step file is not yet renamed into place is simply not seen
(step files appear atomically); a truncated last line of ``metrics.jsonl`` is left for the
next ingest.  Evaluations ``eval/<checkpoint>/episodes.jsonl`` land in split ``eval`` at
the checkpoint's step (the number in the checkpoint name, else the summary's ``step``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from rolloutlab.errors import RecordError
from rolloutlab.io._files import load_json
from rolloutlab.io._sink import PartSink, TurnData
from rolloutlab.io.importers._base import Importer, Part, ReadContext, RunInfo, register

if TYPE_CHECKING:
    from rolloutlab.schema import Trajectory

# pydantic (the records, _rundir) is imported where a run directory is read: detecting
# the format of other sources, and ingesting them, does without it (start time).

_STEP = re.compile(r"^step_(\d+)\.jsonl(\.gz|\.zst)?$")


@register
class RolloutlabImporter(Importer):
    name = "rolloutlab"
    summary = "rolloutlab run directory (run.json, metrics.jsonl, rollouts/step_NNNNNN.jsonl, eval/)"
    recovers = __doc__ or ""

    def detect(self, src: Path) -> int:
        return 100 if src.is_dir() and (src / "run.json").is_file() else 0

    def run_info(self, src: Path) -> RunInfo:
        from rolloutlab.io._rundir import read_run

        run = read_run(src)
        return RunInfo(name=run.name, model=run.model, algorithm=run.algorithm, env=run.env,
                       config=run.config, labels=dict(run.labels),
                       status=run.status, created_at=run.created_at.isoformat())

    def parts(self, src: Path) -> list[Part]:
        parts: list[Part] = []
        roll = src / "rollouts"
        if roll.is_dir():
            for p in sorted(roll.iterdir()):
                if _STEP.match(p.name):
                    parts.append(Part(key=f"rollouts/{p.name}", paths=(p,), exclusive_steps=True))
        if (src / "metrics.jsonl").is_file():
            parts.append(Part(key="metrics.jsonl", paths=(src / "metrics.jsonl",)))
        ev = src / "eval"
        if ev.is_dir():
            for d in sorted(ev.iterdir()):
                if (d / "episodes.jsonl").is_file():
                    paths = (d / "episodes.jsonl",) + ((d / "summary.json",) if (d / "summary.json").is_file() else ())
                    parts.append(Part(key=f"eval/{d.name}", paths=paths))
        return parts

    def read(self, part: Part, sink: PartSink, ctx: ReadContext) -> None:
        from pydantic import ValidationError

        from rolloutlab.io._rundir import _first_error
        from rolloutlab.schema import MetricsRecord, Trajectory

        path = part.paths[0]
        if part.key == "metrics.jsonl":
            for lineno, obj in ctx.jsonl(path):
                with ctx.record(path, lineno, obj):
                    try:
                        rec = MetricsRecord.model_validate(obj)
                    except ValidationError as e:
                        raise RecordError(f"not a valid metrics line: {_first_error(e)}") from None
                    for k, v in rec.metrics.items():
                        sink.add_metric(rec.step, k, v, split=rec.split)
            return
        eval_step: int | None = None
        if part.key.startswith("eval/"):
            m = re.search(r"(\d+)", part.key[5:])
            if m:
                eval_step = int(m.group(1))
            elif len(part.paths) > 1:
                summary = load_json(part.paths[1])
                eval_step = summary.get("step") if isinstance(summary, dict) else None
            eval_step = eval_step or 0
        for lineno, obj in ctx.jsonl(path):
            with ctx.record(path, lineno, obj):
                try:
                    t = Trajectory.model_validate(obj)
                except ValidationError as e:
                    raise RecordError(f"not a valid trajectory: {_first_error(e)}") from None
                add_trajectory(sink, t, split="eval" if eval_step is not None else None,
                               step=eval_step, prefix=part.key if eval_step is not None else "")


def add_trajectory(sink: PartSink, t: Trajectory, *, split: str | None = None, step: int | None = None, prefix: str = "") -> None:
    """Hand a validated :class:`Trajectory` to the sink."""
    turns = [
        TurnData(observation=u.observation, anchor_obs=u.anchor_obs, thought=u.thought, action=u.action,
                 parsed_action=u.parsed_action, tool_calls=[c.model_dump(exclude_none=True) for c in u.tool_calls],
                 action_valid=u.action_valid, reward=u.reward, done=u.done, tokens=u.tokens, entropy=u.entropy,
                 finish_reason=u.finish_reason,
                 token_data=u.token_data.model_dump(exclude_none=True) if u.token_data is not None else None)
        for u in t.turns
    ]
    sink.add_trajectory(
        traj_id=f"{prefix}/{t.traj_id}" if prefix else t.traj_id,
        step=t.step if step is None else step,
        split=split or t.split,
        group_id=t.group_id, sample_idx=t.sample_idx, task_id=t.task_id, data_source=t.data_source,
        model=t.model, prompt=t.prompt, response=t.response, reward=t.reward, reward_components=t.reward_components,
        success=t.success, graded=t.graded, termination=t.termination, error=t.error,
        num_turns=t.num_turns, prompt_tokens=t.prompt_tokens, response_tokens=t.response_tokens,
        tool_calls=t.tool_calls, invalid_actions=t.invalid_actions, extras=t.extras, turns=turns,
    )
