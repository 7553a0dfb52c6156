"""The ``rolloutlab`` command: one module per subcommand, heavy imports inside each."""

from __future__ import annotations

import os
import sys

from rolloutlab.cli._app import app, main

__all__ = ["app", "main", "run"]

_QUICK_EXIT = frozenset({"ingest"})
"""Commands whose process ends without interpreter teardown once they have returned: they
release what they hold themselves (the store's lock, staging and temporary folders, worker
processes), and tearing down polars, pyarrow and numpy costs a tenth of a second (measured
by benchmarks/bench_ingest.py: 6 % of an ingest of 213 MB)."""


def run() -> None:
    args = sys.argv[1:]
    code = main(args)
    torchrun_rank = int(os.environ.get("WORLD_SIZE", "1")) > 1 and "torch" in sys.modules
    # A torchrun rank has finished its work (run directory written and closed, process
    # group destroyed); interpreter shutdown can still abort it ("terminate called without
    # an active exception": a C++ thread of torch's distributed objects, still referenced by
    # module globals, destroyed while joinable), failing a finished run.
    if torchrun_rank or next((a for a in args if not a.startswith("-")), None) in _QUICK_EXIT:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
