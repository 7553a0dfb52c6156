"""Run directories, importers of foreign formats, and the Parquet + DuckDB store.

The names below are imported on first use (PEP 562), so that ``import rolloutlab`` and
the command line's ``--help`` do not pay for pyarrow, duckdb and pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rolloutlab._lazy import lazy_exports

if TYPE_CHECKING:
    from rolloutlab.errors import (
        DiskFull,
        IncompleteTail,
        InputError,
        RecordError,
        RolloutlabError,
        StoreDamaged,
        StoreWarning,
    )
    from rolloutlab.io._export import (
        EXPORT_KINDS,
        SELECT_BY,
        ExportOptions,
        ExportResult,
        export_rows,
        export_run,
    )
    from rolloutlab.io._fastpath import pyarrow_without_pandas
    from rolloutlab.io._files import is_archive
    from rolloutlab.io._health import HealthReport, check_store, report_json
    from rolloutlab.io._ingest import IngestReport, SourceReport, ingest, supported_formats
    from rolloutlab.io._rundir import RunWriter, read_run, read_trajectories
    from rolloutlab.io._sink import PartSink, TurnData
    from rolloutlab.io._store import (
        MANIFEST,
        Store,
        check_read_only,
        default_store,
        open_store,
        runs_table,
        slug,
        store_file,
    )

_WHERE = {
    **dict.fromkeys(("DiskFull", "IncompleteTail", "InputError", "RecordError", "RolloutlabError", "StoreDamaged",
                     "StoreWarning"), "rolloutlab.errors"),
    **dict.fromkeys(("HealthReport", "check_store", "report_json"), "_health"),
    **dict.fromkeys(("EXPORT_KINDS", "SELECT_BY", "ExportOptions", "ExportResult", "export_rows", "export_run"), "_export"),
    "pyarrow_without_pandas": "_fastpath",
    "is_archive": "_files",
    **dict.fromkeys(("IngestReport", "SourceReport", "ingest", "supported_formats"), "_ingest"),
    **dict.fromkeys(("RunWriter", "read_run", "read_trajectories"), "_rundir"),
    **dict.fromkeys(("PartSink", "TurnData"), "_sink"),
    **dict.fromkeys(("MANIFEST", "Store", "check_read_only", "default_store", "open_store", "runs_table", "slug",
                     "store_file"), "_store"),
}



__all__ = [
    "EXPORT_KINDS",
    "MANIFEST",
    "SELECT_BY",
    "DiskFull",
    "ExportOptions",
    "ExportResult",
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
    "check_read_only",
    "check_store",
    "default_store",
    "export_rows",
    "export_run",
    "ingest",
    "is_archive",
    "open_store",
    "pyarrow_without_pandas",
    "read_run",
    "read_trajectories",
    "report_json",
    "runs_table",
    "slug",
    "store_file",
    "supported_formats",
]

__getattr__, __dir__ = lazy_exports(__name__, _WHERE, __all__)
