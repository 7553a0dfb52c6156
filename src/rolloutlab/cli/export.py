"""``rolloutlab export RUN --as think-act|policy|rejection|preference [--by reward|label] --out DIR``.

A run directory's trajectories as supervised data in Act-PRM's row layout, written as
Parquet and as a Hugging Face ``datasets`` folder (``rolloutlab.io.export_run``; docs/sft.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rolloutlab.cli._app import app, err_console


@app.command("export")
def export(
    run: Annotated[Path, typer.Argument(help="Run directory (rolloutlab train / eval / label output).")],
    out: Annotated[Path, typer.Option("--out", help="Folder to write (new): data.parquet, dataset/, export.json.")],
    kind: Annotated[str, typer.Option("--as", help="think-act | policy | rejection | preference.")] = "think-act",
    gamma: Annotated[float, typer.Option("--gamma", help="Discount of the per-turn returns (return_).")] = 1.0,
    center: Annotated[bool, typer.Option("--center", help="advantage = return_ minus its mean over the batch (step).")] = False,
    hide_observations: Annotated[bool, typer.Option("--hide-observations", help="Hide earlier observations in the state.")] = False,
    threshold: Annotated[float, typer.Option("--threshold", help="rejection: smallest trajectory reward (--by reward) or step label (--by label) kept.")] = 1.0,
    by: Annotated[str, typer.Option("--by", help="rejection: reward (whole trajectories by outcome) | label (steps by their process reward from `rolloutlab label`).")] = "reward",
    split: Annotated[str | None, typer.Option("--split", help="Only trajectories of this split (train, val, eval).")] = None,
) -> None:
    """Export a run's trajectories as SFT / preference data (Parquet + HF datasets folder)."""
    from rolloutlab.io import ExportOptions, RolloutlabError, export_run

    if not 0.0 <= gamma <= 1.0:
        raise RolloutlabError(f"--gamma must be in [0, 1], got {gamma}")
    opts = ExportOptions(kind=kind, gamma=gamma, center=center, hide_observations=hide_observations,  # type: ignore[arg-type]
                         threshold=threshold, by=by, split=split)  # type: ignore[arg-type]
    res = export_run(run, out, opts)
    err_console.print(f"wrote {res.rows} rows from {res.trajectories} trajectories ({res.left_out(opts)}) "
                      f"to {out}/ (data.parquet, dataset/, export.json)", highlight=False)
