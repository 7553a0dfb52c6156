"""The typer application and ``main(argv) -> int``.

Errors rolloutlab raises on purpose (:class:`RolloutlabError`) are printed as one clear
message and exit with status 1; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

app = typer.Typer(
    name="rolloutlab",
    help="Record, import and explain the rollouts of agentic RL runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

err_console = Console(stderr=True)

StoreOpt = Annotated[
    Path | None,
    typer.Option("--store", help="Store folder (default: $ROLLOUTLAB_STORE, else ./.rolloutlab)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]


def store_path(store: Path | None) -> Path:
    from rolloutlab.io import default_store

    return store if store is not None else default_store()


def _register() -> None:
    # one module per command; env_serve adds `env serve` to the env sub-app
    from rolloutlab.cli import (  # noqa: F401
        analyze,
        env,
        env_serve,
        eval,
        ingest,
        report,
        runs,
        serve,
        show,
        sql,
    )


def main(argv: Sequence[str] | None = None) -> int:
    from rolloutlab.io import RolloutlabError

    _register()
    try:
        # with standalone_mode=False click returns typer.Exit's code instead of raising it
        rv = app(args=list(argv) if argv is not None else None, standalone_mode=False)
    except RolloutlabError as e:
        err_console.print(f"[bold red]error:[/] {e}", highlight=False, markup=True, soft_wrap=True)
        return 1
    except typer.Exit as e:
        return int(e.exit_code or 0)
    except typer.Abort:
        err_console.print("aborted")
        return 130
    except typer.TyperException as e:  # usage errors: the message and the exit code click would give
        show = getattr(e, "show", None)
        if callable(show):
            show()
        return int(getattr(e, "exit_code", 2))
    return rv if isinstance(rv, int) else 0
