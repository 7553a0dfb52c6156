"""Run directories, importers of foreign formats, and the Parquet + DuckDB store."""

from rolloutlab.io._errors import (
    DiskFull,
    IncompleteTail,
    InputError,
    RecordError,
    RolloutlabError,
    StoreDamaged,
    StoreWarning,
)
from rolloutlab.io._health import HealthReport, check_store
from rolloutlab.io._ingest import IngestReport, SourceReport, ingest, supported_formats
from rolloutlab.io._rundir import RunWriter, read_run, read_trajectories
from rolloutlab.io._sink import PartSink, TurnData
from rolloutlab.io._store import Store, default_store, open_store

__all__ = [
    "DiskFull",
    "HealthReport",
    "IncompleteTail",
    "IngestReport",
    "InputError",
    "PartSink",
    "RecordError",
    "RolloutlabError",
    "RunWriter",
    "SourceReport",
    "Store",
    "StoreDamaged",
    "StoreWarning",
    "TurnData",
    "check_store",
    "default_store",
    "ingest",
    "open_store",
    "read_run",
    "read_trajectories",
    "supported_formats",
]
