"""rolloutlab: record, import and explain the rollouts of agentic RL runs of LLM agents.

The public names are imported on first use (PEP 562): ``import rolloutlab`` and the
command line's ``--help`` stay fast, and the store's dependencies load with the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rolloutlab._lazy import lazy_exports

if TYPE_CHECKING:
    from rolloutlab.io import RolloutlabError, Store, ingest, open_store
    from rolloutlab.schema import FORMAT_VERSION

__version__ = "0.1.0"

__all__ = ["FORMAT_VERSION", "RolloutlabError", "Store", "__version__", "ingest", "open_store"]


_WHERE = {"FORMAT_VERSION": "rolloutlab.schema",
          **dict.fromkeys(("RolloutlabError", "Store", "ingest", "open_store"), "rolloutlab.io")}
__getattr__, __dir__ = lazy_exports(__name__, _WHERE, __all__)
