"""rolloutlab: record, import and explain the rollouts of agentic RL runs of LLM agents."""

from rolloutlab.io import RolloutlabError, Store, ingest, open_store
from rolloutlab.schema import FORMAT_VERSION

__version__ = "0.1.0"

__all__ = ["FORMAT_VERSION", "RolloutlabError", "Store", "__version__", "ingest", "open_store"]
