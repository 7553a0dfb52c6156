"""``rolloutlab report RUN [RUN ...] -o report.html [--png DIR]``: one self-contained page.

Each RUN is a run in ``--store`` or a path to any supported artifacts, ingested on the fly
into the cache store exactly as for ``analyze``.  The page holds the findings, the metric
grid (several runs overlaid), pass@k vs k at the first and last step, a comparison table
with confidence intervals when there are several runs, and sampled trajectories per step;
it works offline (JavaScript inlined, no request of any kind).  ``--png DIR`` also writes
each figure as a PNG (matplotlib).  Needs the ``report`` extra.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Literal

import typer

from rolloutlab.cli._app import JsonOpt, StoreOpt, app, err_console


@contextlib.contextmanager
def damaged_store(store: Path | None) -> Iterator[None]:
    """A store that cannot be read (a damaged manifest or Parquet file) as one clear
    error naming the store, not a traceback."""
    import duckdb
    import orjson

    from rolloutlab.cli._app import store_path
    from rolloutlab.io import RolloutlabError

    try:
        yield
    except orjson.JSONDecodeError as e:
        raise RolloutlabError(f"cannot read the store at {store_path(store)}: its _manifest.json is not valid JSON "
                              f"({e}); re-ingest the sources into a new store") from None
    except (duckdb.Error, OSError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise RolloutlabError(f"cannot read the store at {store_path(store)}: {first[:300]} "
                              "(a damaged or missing file; re-ingest the sources into a new store)") from None


@app.command()
def report(
    runs: Annotated[list[str], typer.Argument(help="Run ids/names in the store, or paths to artifacts (first = baseline).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The HTML file to write.")] = Path("report.html"),
    png: Annotated[Path | None, typer.Option("--png", help="Also write every figure as a PNG into this folder.")] = None,
    store: StoreOpt = None,
    split: Annotated[str | None, typer.Option("--split", help="train, val or eval (default: train if present).")] = None,
    split_at: Annotated[float | None, typer.Option("--split-at", help="Fix the saturation breakpoint at this step.")] = None,
    fit: Annotated[Literal["hinge", "segments"], typer.Option("--fit", help="Saturation fit: hinge (continuous, one residual variance) or segments (a separate OLS line per segment, each with its own variance).")] = "hinge",
    success_threshold: Annotated[float | None, typer.Option("--success-threshold", help="Success = reward >= this (default: the source's success, else reward == 1 for rewards in [0, 1], else reward > 0).")] = None,
    groups_per_step: Annotated[int, typer.Option("--groups-per-step", help="Groups sampled per step (best, median and worst of each are shown).")] = 3,
    max_chars: Annotated[int, typer.Option("--max-chars", help="Cut every shown text at this many characters.")] = 2000,
    max_turns: Annotated[int, typer.Option("--max-turns", help="Turns shown per trajectory (first and last halves).")] = 12,
    max_sample_chars: Annotated[int, typer.Option("--max-sample-chars", help="Text budget of one run's samples; above it every k-th step is sampled.")] = 20_000_000,
    title: Annotated[str | None, typer.Option("--title", help="Page title (default: the run names).")] = None,
    metric: Annotated[list[str] | None, typer.Option("--metric", help="QUANTITY=COLUMN: read this logged column for a quantity in the health check, e.g. policy_kl=my/approx_kl (repeatable; as analyze takes it).")] = None,
    json_: JsonOpt = False,
) -> None:
    """Write a self-contained HTML report (findings, metric grid, comparison, trajectories)."""
    import orjson

    from rolloutlab.analysis import parse_overrides
    from rolloutlab.cli.analyze import resolve
    from rolloutlab.io import RolloutlabError
    from rolloutlab.report import ReportConfig, build_report, load_report_run, require, write_report

    require("plotly", "jinja2", *(("matplotlib",) if png is not None else ()))
    try:
        overrides = parse_overrides(metric or [])
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--metric") from None
    try:
        config = ReportConfig(split=split, success_threshold=success_threshold, split_at=split_at, fit=fit,
                              groups_per_step=groups_per_step, max_chars=max_chars, max_turns=max_turns,
                              max_sample_chars=max_sample_chars, title=title, metric=overrides or None)
    except ValueError as e:
        raise RolloutlabError(str(e)) from None
    if not output.parent.is_dir():
        raise RolloutlabError(f"cannot write {output}: the folder {output.parent} does not exist (create it first)")
    loaded = []
    for run in runs:
        with damaged_store(store):
            st, rid = resolve(run, store)
            with err_console.status(f"analysing {rid}"):
                try:
                    loaded.append(load_report_run(st, rid, config))
                except ValueError as e:  # a --metric column this run did not log
                    if not str(e).startswith("--metric"):
                        raise
                    raise typer.BadParameter(str(e), param_hint="--metric") from None
    with err_console.status("rendering the report"):
        rep = build_report(loaded, config)
        pngs = write_report(rep, output, png_dir=png)
    size = output.stat().st_size
    if json_:
        typer.echo(orjson.dumps({"output": str(output), "bytes": size, "figures": [n for n, _ in rep.figures],
                                 "missing": rep.missing, "pngs": [str(p) for p in pngs],
                                 "comparison_note": rep.comparison_note or None}).decode())
        return
    err_console.print(f"wrote {output} ({size / 1e6:.1f} MB, {len(rep.figures)} figures"
                      + (f", {len(pngs)} PNGs in {png}" if png is not None else "") + ")",
                      highlight=False, markup=False)
