"""``rolloutlab label RUN --method mc|action-prob --policy MODEL --out OUT``: process rewards
for every step of a run's trajectories.

The options are generated from :class:`rolloutlab.label.LabelConfig` (its loop settings
included): one flag per field, its help the field's docstring (``rolloutlab.cli._options``).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any

import typer

from rolloutlab.cli._app import JsonOpt, app, err_console
from rolloutlab.cli._options import config_command
from rolloutlab.label import LabelConfig

RENAMED = {"max_tokens_per_turn": "--max-tokens", "invalid_action_penalty": "--invalid-penalty"}
"""Flags that are not their field's name (as ``rolloutlab eval`` spells them)."""

RunArg = Annotated[Path, typer.Argument(help="Run directory to label (written by train or eval).")]


def _label(settings: dict[str, Any], *, run: Path, json_: bool) -> None:
    """Label each step of RUN's trajectories with a process reward; writes a run directory to --out."""
    import orjson
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from rolloutlab.agent import from_flat
    from rolloutlab.label import LabelProgress, run_label

    config: LabelConfig = from_flat(LabelConfig, {**settings, "run": run})
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), console=err_console, transient=False, disable=json_) as bar:
        task = bar.add_task(f"label {config.method} steps", total=None)

        def progress(p: LabelProgress) -> None:
            bar.update(task, total=p.total_steps, completed=p.done_steps)

        result = run_label(config, on_progress=progress)
    summary = {"out": str(result.out), "trajectories": result.trajectories, "labelled": result.labelled,
               "steps": result.steps, "seconds": round(result.seconds, 3),
               "steps_per_s": round(result.steps / result.seconds, 3) if result.seconds > 0 else None,
               "model_share": round(result.model_seconds / result.seconds, 3) if result.seconds > 0 else None}
    if json_:
        typer.echo(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
        return
    err_console.print(
        f"labelled {result.steps} steps of {result.labelled} trajectories ({config.method}) in {result.seconds:.1f}s; "
        f"wrote {result.out} — read it with `rolloutlab ingest {result.out}` then `rolloutlab analyze`",
        highlight=False)


label = app.command("label")(config_command(
    LabelConfig, renamed=RENAMED, body=_label,
    extra=[inspect.Parameter("run", inspect.Parameter.KEYWORD_ONLY, annotation=RunArg),
           inspect.Parameter("json_", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=JsonOpt)],
))
