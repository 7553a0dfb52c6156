"""The ``rolloutlab`` command: one module per subcommand, heavy imports inside each."""

from __future__ import annotations

import os
import sys

from rolloutlab.cli._app import app, main

__all__ = ["app", "main", "run"]


def run() -> None:
    code = main()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and "torch" in sys.modules:
        # A torchrun rank has finished its work (run directory written and closed, process
        # group destroyed); interpreter shutdown can still abort it ("terminate called without
        # an active exception": a C++ thread of torch's distributed objects, still referenced by
        # module globals, destroyed while joinable), failing a finished run.  Skip finalisation.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
