"""rolloutlab: record, import and explain the rollouts of agentic RL runs of LLM agents.

The public names are imported on first use (PEP 562): ``import rolloutlab`` and the
command line's ``--help`` stay fast, and the store's dependencies load with the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rolloutlab.io import RolloutlabError, Store, ingest, open_store
    from rolloutlab.schema import FORMAT_VERSION

__version__ = "0.1.0"

__all__ = ["FORMAT_VERSION", "RolloutlabError", "Store", "__version__", "ingest", "open_store"]


def __getattr__(name: str) -> Any:
    if name == "FORMAT_VERSION":
        from rolloutlab.schema import FORMAT_VERSION

        return FORMAT_VERSION
    if name in ("RolloutlabError", "Store", "ingest", "open_store"):
        import rolloutlab.io

        value = getattr(rolloutlab.io, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
