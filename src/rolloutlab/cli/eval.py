"""``rolloutlab eval``: trainer-free evaluation of a policy or of every checkpoint of a run.

The options are generated from :class:`rolloutlab.evaluate.EvalConfig` (its loop settings,
:class:`rolloutlab.agent.LoopConfig`, included): one flag per field, its help the field's
docstring (``rolloutlab.cli._options``).
"""

from __future__ import annotations

import inspect
from typing import Any

import typer

from rolloutlab.cli._app import JsonOpt, app, err_console
from rolloutlab.cli._options import config_command
from rolloutlab.evaluate import EvalConfig

RENAMED = {"max_tokens_per_turn": "--max-tokens", "invalid_action_penalty": "--invalid-penalty"}
"""Flags that are not their field's name (the names the README and docs have always used)."""


def _eval(settings: dict[str, Any], *, json_: bool, ctx: typer.Context) -> None:
    """Evaluate N tasks x K samples; writes eval/<checkpoint>/episodes.jsonl and summary.json."""
    import orjson
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskID,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from rolloutlab.agent import GENERATION_FIELDS, from_flat
    from rolloutlab.evaluate import Progress as EvalProgress
    from rolloutlab.evaluate import run_eval

    # the sampling flags given on the command line win over a checkpoint's generation_config.json
    given = frozenset(n for n in GENERATION_FIELDS.values()
                      if (src := ctx.get_parameter_source(n)) is not None and src.name != "DEFAULT")
    config: EvalConfig = from_flat(EvalConfig, {**settings, "given": given})
    # the running episodes beside the count: a slow policy shows "0/80 16 running", not a stalled bar
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[running]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                  console=err_console, transient=False, disable=json_) as bar:
        tasks: dict[str, TaskID] = {}

        def progress(p: EvalProgress) -> None:
            if p.checkpoint not in tasks:
                tasks[p.checkpoint] = bar.add_task(p.checkpoint, total=p.total, running="")
            bar.update(tasks[p.checkpoint], completed=p.done, description=p.line()[:42], running=p.in_flight())

        summaries = run_eval(config, on_progress=progress)
    if json_:
        typer.echo(orjson.dumps([s.model_dump(mode="json") for s in summaries], option=orjson.OPT_INDENT_2).decode())
        return
    from rich.console import Console
    from rich.table import Table

    ks = [str(k) for k in config.ks][-2:]
    table = Table(title=f"{config.env} ({config.split}, {config.episodes} tasks x {config.samples})",
                  title_justify="left")
    for col in ["checkpoint", "success", "reward", *[f"pass@{k}" for k in ks], "turns", "ungraded"]:
        table.add_column(col, justify="left" if col == "checkpoint" else "right", overflow="fold")

    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    for s in summaries:
        table.add_row(s.checkpoint[:24], f(s.success_rate), f(s.mean_reward), *[f(s.pass_at_k.get(k)) for k in ks],
                      f(s.mean_turns), f(s.ungraded_rate))
    out = Console(width=80, highlight=False)
    out.print(table)
    for s in summaries:  # what each was sampled with, and the turns lost to the format or the cap
        out.print(f"{s.checkpoint[:24]}: cap {s.max_tokens_per_turn} tokens, temp {s.temperature}; "
                  f"invalid {f(s.invalid_action_rate)}, cut at cap {f(s.length_cut_rate)}", markup=False)
    err_console.print(f"wrote {config.out}/eval/ — read it with `rolloutlab ingest {config.out}` then "
                      "`rolloutlab analyze`", highlight=False)


eval_ = app.command("eval")(config_command(
    EvalConfig, renamed=RENAMED, body=_eval,
    extra=[inspect.Parameter("json_", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=JsonOpt),
           inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)],
))
