"""The data model's constants, apart from the pydantic records so that the store's
writers (ingest) can name them without importing pydantic."""

from __future__ import annotations

FORMAT_VERSION = "1.0"
"""Version of the run-directory format and of the store's tables."""

SPLITS: tuple[str, ...] = ("train", "val", "eval")
TERMINATIONS: tuple[str, ...] = ("done", "truncated", "max_turns", "error", "aborted")
FINISH_REASONS: tuple[str, ...] = ("stop", "length", "tool_calls", "error")
