"""The data model every layer speaks: typed records, Arrow schemas, format version.

The names below are imported on first use (PEP 562): the store's writers need the Arrow
schemas and the constants, not pydantic, which only the records import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rolloutlab._lazy import lazy_exports

if TYPE_CHECKING:
    from rolloutlab.schema._arrow import METRICS, REJECTS, RUNS, TABLES, TEXTS, TRAJECTORIES, TURNS
    from rolloutlab.schema._constants import FINISH_REASONS, FORMAT_VERSION, SPLITS, TERMINATIONS
    from rolloutlab.schema._records import (
        EvalSummary,
        FinishReason,
        MetricsRecord,
        Run,
        RunStatus,
        Split,
        Termination,
        ToolCall,
        Trajectory,
        Turn,
        TurnTokens,
    )

_WHERE = {
    **dict.fromkeys(("METRICS", "REJECTS", "RUNS", "TABLES", "TEXTS", "TRAJECTORIES", "TURNS"), "_arrow"),
    **dict.fromkeys(("FINISH_REASONS", "FORMAT_VERSION", "SPLITS", "TERMINATIONS"), "_constants"),
    **dict.fromkeys(("EvalSummary", "FinishReason", "MetricsRecord", "Run", "RunStatus", "Split", "Termination", "ToolCall",
                     "Trajectory", "Turn", "TurnTokens"), "_records"),
}



__all__ = [
    "FINISH_REASONS",
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
    "FinishReason",
    "MetricsRecord",
    "Run",
    "RunStatus",
    "Split",
    "Termination",
    "ToolCall",
    "Trajectory",
    "Turn",
    "TurnTokens",
]

__getattr__, __dir__ = lazy_exports(__name__, _WHERE, __all__)
