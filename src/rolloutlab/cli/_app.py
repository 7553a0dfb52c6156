"""The typer application and ``main(argv) -> int``.

Errors rolloutlab raises on purpose (:class:`RolloutlabError`) are printed as one clear
message and exit with status 1; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
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
    # Plain click help: typer's rich help imports rich's Markdown renderer (markdown-it)
    # and its traceback module, which would double the start time of `--help`.
    rich_markup_mode=None,
)

err_console = Console(stderr=True, soft_wrap=True)  # paths in messages are never broken across lines


def _esc(text: str) -> str:
    """A message for the terminal: its values (file text, names) never read as rich markup
    nor as escape sequences."""
    from rich.markup import escape

    from rolloutlab.cli._tables import escape_control

    return escape(escape_control(text, keep_newlines=True))


StoreOpt = Annotated[
    Path | None,
    typer.Option("--store", help="Store folder (default: $ROLLOUTLAB_STORE, else ./.rolloutlab)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]


def store_path(store: Path | None) -> Path:
    from rolloutlab.io import default_store

    return store if store is not None else default_store()


@app.callback()
def _group() -> None:
    # A callback keeps `rolloutlab` a group of commands when _register loads only one
    # (typer would otherwise run a lone command without its name).
    pass


_MODULES = ("analyze", "check_store", "demo", "env", "env_serve", "eval", "export", "ingest", "label", "report", "runs",
            "serve", "sft", "show", "sql", "train", "watch")
"""One module per command, in the order the help lists them; env_serve adds `env serve`
to the env sub-app."""
_COMMAND_MODULES = {"check-store": ("check_store",), "env": ("env", "env_serve"), "formats": ("ingest",)}


def _register(argv: Sequence[str] | None = None) -> None:
    """Import the command modules: only the one that defines the command ``argv`` names
    first (building every command's options costs a tenth of a second at each start),
    all of them for the help, an option first or a name no module defines."""
    import importlib

    first = argv[0] if argv else ""
    modules = _COMMAND_MODULES.get(first) or ((first,) if first in _MODULES and first != "env_serve" else _MODULES)
    for m in modules:
        importlib.import_module(f"rolloutlab.cli.{m}")


_AFTER_INTERRUPT = {
    "eval": "finished episodes are kept; run the same command again to resume",
    "label": "labelled trajectories are kept; run the same command again to resume",
    "train": "completed steps are kept; continue from the last checkpoint with `rolloutlab train --resume RUN_DIR`",
    "demo": "run `rolloutlab demo` again to start over",
    "env": "environment sessions were closed",
}
"""What an interrupt leaves behind, for commands that do not write a store."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; the exit status: 0, 1 (an error, printed as one message),
    2 (usage), 130 / 143 (SIGINT / SIGTERM: one line saying what became of the store)."""
    from rolloutlab.errors import Interrupted
    from rolloutlab.io import RolloutlabError

    args = list(argv) if argv is not None else sys.argv[1:]
    _register(args)
    try:
        # with standalone_mode=False click returns typer.Exit's code instead of raising it
        with _signals_raise(), _warnings_as_lines():
            rv = app(args=args, standalone_mode=False)
    except Interrupted as e:
        name = signal.Signals(e.signum).name
        after = _AFTER_INTERRUPT.get(next((a for a in args if not a.startswith("-")), ""))
        if after is not None:
            err_console.print(f"interrupted ({name}): {after}", highlight=False)
        elif e.committed:
            err_console.print(f"interrupted ({name}) after the store was committed: it holds the new data", highlight=False)
        else:
            err_console.print(f"interrupted ({name}): the store is unchanged", highlight=False)
        return e.exit_code
    except RolloutlabError as e:
        err_console.print(f"[bold red]error:[/] {_esc(str(e))}", highlight=False, markup=True, soft_wrap=True)
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
    except Exception as e:
        damaged = _damaged_store_line(e)
        if damaged is None:
            raise  # a bug: keep its traceback
        err_console.print(f"[bold red]error:[/] {_esc(damaged)}", highlight=False, markup=True, soft_wrap=True)
        return 1
    return rv if isinstance(rv, int) else 0


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    """SIGINT and SIGTERM raise :class:`Interrupted` (a BaseException typer does not
    catch, unlike KeyboardInterrupt), so an ingest removes its staging folder and the exit
    status is 130 / 143."""
    from rolloutlab.errors import Interrupted

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise Interrupted(signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """Warnings about the store (a damaged manifest read from its previous copy...) as
    one ``warning:`` line each, without the source line Python would add."""
    from rolloutlab.errors import StoreWarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: object = None, line: str | None = None) -> None:
        err_console.print(f"[yellow]warning:[/] {_esc(str(message))}", highlight=False, markup=True, soft_wrap=True)

    with warnings.catch_warnings():
        warnings.simplefilter("always", StoreWarning)
        warnings.showwarning = show
        yield


_TABLE_DIRS = ("trajectories", "turns", "texts", "metrics", "rejects", "runs")


def _damaged_store_line(e: Exception) -> str | None:
    """One line for a DuckDB error about a store file a query could not read (zeroed or
    overwritten in place: the size check made before queries cannot see that)."""
    if "duckdb" not in type(e).__module__:  # _duckdb.InvalidInputException, duckdb.IOException...
        return None
    import re

    m = re.search(r"(/[^\s'\"]+?\.parquet)", str(e))
    if m is None:
        return None
    file = Path(m.group(1))
    root = next((p.parent for p in file.parents if p.name in _TABLE_DIRS), None)
    if root is None:
        return None
    reason = str(e).splitlines()[0][:120]
    return (f"store {root} is damaged: {file} cannot be read ({reason}); "
            f"run `rolloutlab check-store --repair --store {root}`, then ingest the sources again")
