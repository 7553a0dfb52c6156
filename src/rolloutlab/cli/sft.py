"""``rolloutlab sft DATASET [CONFIG] [key=value ...] --out DIR``.

Weighted supervised fine-tuning on an exported dataset (``rolloutlab export``): the loss
weighs the thought + action tokens only (or by the row's advantage / return), LoRA or
full, checkpoints in the trainer's layout (docs/sft.md).  CONFIG is a YAML file or a preset
name (``sft_tiny``, ``sft_act_prm_qwen3_4b``); overrides use the config's dotted keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rolloutlab.cli._app import app, err_console


@app.command("sft", context_settings={"allow_extra_args": False})
def sft(
    dataset: Annotated[Path, typer.Argument(help="Export folder (rolloutlab export), datasets folder or .parquet file.")],
    args: Annotated[list[str] | None, typer.Argument(help="A preset or YAML file first (optional), then key=value overrides.")] = None,
    out: Annotated[Path, typer.Option("--out", help="Run directory to write (checkpoints/step_N/ inside).")] = Path("runs/sft"),
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
) -> None:
    """Supervised fine-tuning (think-act SFT, Act-PRM) on an exported dataset."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from rolloutlab.train import load_sft_config
    from rolloutlab.train import sft as run_sft

    items = list(args or [])
    preset = items.pop(0) if items and "=" not in items[0] else None
    cfg = load_sft_config(preset, items)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), console=err_console, disable=no_progress or not cfg.progress) as bar:
        task = bar.add_task("sft", total=None)

        def on_step(step: int, total: int, m: dict[str, float]) -> None:
            bar.update(task, completed=step, total=total,
                       description=f"sft loss {m['sft/loss']:.4f} {m.get('sft/tokens_per_s', 0):,.0f} tok/s")

        res = run_sft(cfg, dataset, out, on_step=on_step)
    first, last = (res.losses[0], res.losses[-1]) if res.losses else (float("nan"), float("nan"))
    err_console.print(f"run: {res.run_dir}  ({res.steps} steps over {res.rows} rows; loss {first:.4f} -> {last:.4f}; "
                      f"{res.tokens_per_s:,.0f} tokens/s)", highlight=False)
    if res.truncated_rows:
        err_console.print(f"truncated: {res.truncated_rows} of {res.rows} rows were longer than "
                          f"max_seq_len={cfg.max_seq_len} (their oldest state tokens were cut)", highlight=False)
    if res.checkpoints:
        err_console.print(f"checkpoints: {', '.join(p.name for p in res.checkpoints)} "
                          f"(rolloutlab eval --checkpoints {res.run_dir}/checkpoints)", highlight=False)
