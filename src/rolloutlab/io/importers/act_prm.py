"""Act-PRM rollout rows: ``think_act_policy`` datasets (Parquet or JSONL, one row per step).

Reads the rows Act-PRM's pipeline publishes (``act-prm-tinker``; ACTING.md § Act-PRM) and
``rolloutlab export`` writes: ``state`` (chat messages before the action), ``action``
(thought + action), ``next_obs``, ``reward``, ``return_``, ``advantage``, ``done``,
``truncated``, ``timestep``, ``batch_id``, ``unique_data_sample_id``, ``generation_id``,
``split``, ``tools``.  A ``.parquet`` / ``.jsonl`` file, a folder of them, or an export
folder (its ``data.parquet``) is one run, one part per file.

Recovered:

- **trajectories**: one per ``unique_data_sample_id`` (its id), turns ordered by
  ``timestep``; ``step`` = ``batch_id``; ``sample_idx`` = ``generation_id``; split as
  written (``test`` read as ``eval``);
- **turns**: ``action`` as written (thought and action are one text in these rows);
  ``observation`` = the state's last non-assistant message (the one the action answers);
  ``reward`` = the row's per-step reward (a process reward when the rows were labelled);
  ``done`` = ``done or truncated``;
- **prompt** = the first step's state; **reward** = the sum of the step rewards (the
  undiscounted return from the first step); **termination**: ``done`` when the last step
  is done, ``truncated`` when it was cut, else unknown.  ``return_``, ``advantage`` of each
  step and the ``tools`` are kept in extras (``steps``).

Not recoverable: groups (Act-PRM samples one generation per task), success (the rows carry
rewards only), token counts.  Two rows of one sample with the same ``timestep`` are refused.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from rolloutlab.errors import InputError, RecordError
from rolloutlab.io._files import logical_name
from rolloutlab.io._sink import PartSink, TurnData
from rolloutlab.io.importers._base import (
    Importer,
    Part,
    ReadContext,
    RunInfo,
    default_name,
    register,
    require,
)

REQUIRED = ("state", "action", "reward", "timestep", "unique_data_sample_id")
_SPLITS = {"train": "train", "val": "val", "eval": "eval", "test": "eval", "validation": "val"}


def _parquet_columns(path: Path) -> set[str]:
    import pyarrow.parquet as pq

    try:
        return set(pq.read_schema(path).names)
    except Exception:  # not Parquet at all: not ours
        return set()


def _is_rows(path: Path) -> bool:
    if not path.is_file():
        return False
    name = logical_name(path)
    if name.endswith(".parquet"):
        return set(REQUIRED) <= _parquet_columns(path)
    if name.endswith(".jsonl"):
        from rolloutlab.io.importers._agentlog import read_head

        head = read_head(path, 1 << 16).split(b"\n", 1)[0]
        return all(f'"{k}"'.encode() in head for k in REQUIRED)
    return False


def _files(src: Path) -> list[Path]:
    if src.is_file():
        return [src]
    if (src / "export.json").is_file() and (src / "data.parquet").is_file():
        return [src / "data.parquet"]
    return [p for p in sorted(src.iterdir()) if _is_rows(p)]


@register
class ActPrmImporter(Importer):
    name = "act_prm"
    summary = "Act-PRM think_act_policy rows (state, action, reward, timestep, unique_data_sample_id)"
    recovers = __doc__ or ""

    def detect(self, src: Path) -> int:
        if src.is_dir():
            return 85 if any(_is_rows(p) for p in _files(src)[:20]) else 0
        return 85 if _is_rows(src) else 0

    def run_info(self, src: Path) -> RunInfo:
        config: dict[str, Any] = {}
        if src.is_dir() and (src / "export.json").is_file():
            try:
                config = {"export": json.loads((src / "export.json").read_text())}
            except ValueError:
                config = {}
        env = (config.get("export") or {}).get("env")
        return RunInfo(name=default_name(src), env=env if isinstance(env, str) else None, config=config)

    def parts(self, src: Path) -> list[Part]:
        return [Part(key=p.name, paths=(p,)) for p in _files(src)]

    def read(self, part: Part, sink: PartSink, ctx: ReadContext) -> None:
        path = part.paths[0]
        if logical_name(path).endswith(".parquet"):
            import pyarrow.parquet as pq

            try:
                table = pq.read_table(path)
            except Exception as e:
                raise InputError(f"not a readable Parquet file ({str(e).splitlines()[0][:200]})", path=path) from None
            missing = [k for k in REQUIRED if k not in table.column_names]
            if missing:
                raise InputError(f"missing required column(s) {', '.join(missing)} "
                                 f"(columns present: {', '.join(table.column_names[:16])})", path=path)
            lines: list[tuple[int | None, Any]] = [(None, r) for r in table.to_pylist()]
        else:
            lines = list(ctx.jsonl(path))
        samples: dict[str, list[tuple[int | None, dict[str, Any]]]] = defaultdict(list)
        for line, row in lines:
            with ctx.record(path, line, row):
                sid = require(row, "unique_data_sample_id", (str, int))
                samples[str(sid)].append((line, row))
        for sid, rows in samples.items():
            with ctx.record(path, rows[0][0], rows[0][1]):
                _trajectory(sid, rows, sink)


def _observation(state: Any) -> str | None:
    if isinstance(state, str):
        return state
    if not isinstance(state, list):
        raise RecordError(f"field 'state' must be chat messages or text, got {type(state).__name__}")
    for m in reversed(state):
        if isinstance(m, dict) and m.get("role") != "assistant":
            c = m.get("content")
            return c if isinstance(c, str) else None
    return None


def _trajectory(sid: str, rows: list[tuple[int | None, dict[str, Any]]], sink: PartSink) -> None:
    steps = sorted(rows, key=lambda lr: _timestep(lr[1]))
    seen: set[int] = set()
    turns: list[TurnData] = []
    extras_steps: list[dict[str, Any]] = []
    total = 0.0
    for _, r in steps:
        ts = _timestep(r)
        if ts in seen:
            raise RecordError(f"sample {sid!r} has two rows at timestep {ts}")
        seen.add(ts)
        reward = require(r, "reward", (int, float))
        if isinstance(reward, bool) or not math.isfinite(reward):
            raise RecordError(f"field 'reward' must be a finite number, got {reward!r} (sample {sid!r}, timestep {ts})")
        total += float(reward)
        action = require(r, "action", str)
        done = bool(r.get("done")) or bool(r.get("truncated"))
        turns.append(TurnData(observation=_observation(r.get("state")), action=action, reward=float(reward), done=done))
        extras_steps.append({k: r.get(k) for k in ("timestep", "return_", "advantage", "next_obs") if k in r})
    first, last = steps[0][1], steps[-1][1]
    split = _SPLITS.get(str(first.get("split") or "train"))
    if split is None:
        raise RecordError(f"field 'split' must be one of {', '.join(_SPLITS)}, got {first.get('split')!r}")
    termination = "done" if last.get("done") else "truncated" if last.get("truncated") else None
    batch = first.get("batch_id", 0)
    gen = first.get("generation_id")
    tools = first.get("tools")
    extras: dict[str, Any] = {"steps": extras_steps}
    if tools not in (None, "", "[]", []):
        extras["tools"] = tools
    state = first.get("state")
    sink.add_trajectory(
        traj_id=sid, step=batch if isinstance(batch, int) and batch >= 0 else 0, split=split,
        sample_idx=gen if isinstance(gen, int) and not isinstance(gen, bool) and gen >= 0 else None,
        prompt=state if isinstance(state, list | str) else None, response=turns[-1].action,
        reward=total, termination=termination, turns=turns, extras=extras,
    )


def _timestep(r: dict[str, Any]) -> int:
    ts = require(r, "timestep", int)
    if isinstance(ts, bool) or ts < 0:
        raise RecordError(f"field 'timestep' must be a whole number >= 0, got {ts!r}")
    return int(ts)
