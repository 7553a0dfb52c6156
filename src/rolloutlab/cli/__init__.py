"""The ``rolloutlab`` command: one module per subcommand, heavy imports inside each."""

from __future__ import annotations

import sys

from rolloutlab.cli._app import app, main

__all__ = ["app", "main", "run"]


def run() -> None:
    sys.exit(main())
