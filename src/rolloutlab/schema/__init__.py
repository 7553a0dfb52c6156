"""The data model every layer speaks: typed records, Arrow schemas, format version."""

from rolloutlab.schema._arrow import METRICS, REJECTS, RUNS, TABLES, TEXTS, TRAJECTORIES, TURNS
from rolloutlab.schema._records import (
    FORMAT_VERSION,
    SPLITS,
    TERMINATIONS,
    EvalSummary,
    MetricsRecord,
    Run,
    RunStatus,
    Split,
    Termination,
    ToolCall,
    Trajectory,
    Turn,
)

__all__ = [
    "FORMAT_VERSION",
    "METRICS",
    "REJECTS",
    "RUNS",
    "SPLITS",
    "TABLES",
    "TERMINATIONS",
    "TEXTS",
    "TRAJECTORIES",
    "TURNS",
    "EvalSummary",
    "MetricsRecord",
    "Run",
    "RunStatus",
    "Split",
    "Termination",
    "ToolCall",
    "Trajectory",
    "Turn",
]
