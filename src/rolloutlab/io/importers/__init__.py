"""Importers: one module per foreign format, auto-detected by ``rolloutlab ingest``."""

from __future__ import annotations

import importlib
from pathlib import Path

from rolloutlab.errors import RolloutlabError
from rolloutlab.io.importers._base import (
    REGISTRY,
    Importer,
    Part,
    PartRows,
    ReadContext,
    Reject,
    RunInfo,
    default_name,
    register,
    require,
)

# Importing a module registers its importer; the order is the order of `--help` listings.
for _module in (
    "rolloutlab", "verl", "verl_agent", "skyrl", "skyrl_console", "agentgym", "trl", "rllm", "tinker", "art",
    "inspect_ai", "nemo_gym", "tau_bench", "swe_agent", "act_prm", "metrics_table", "tensorboard", "console_kv", "mapped",
):
    importlib.import_module(f"rolloutlab.io.importers.{_module}")

__all__ = [
    "REGISTRY",
    "Importer",
    "Part",
    "PartRows",
    "ReadContext",
    "Reject",
    "RunInfo",
    "default_name",
    "detect_format",
    "register",
    "require",
]


def detect_format(
    src: Path,
    *,
    format: str | None = None,
    mapping: dict[str, str] | None = None,
    split: str | None = None,
    quiet: bool = False,
) -> Importer | None:
    """The importer for ``src``: the one named by ``format``, the mapped importer when a
    field mapping is given, else the one most sure of itself."""
    from rolloutlab.io.importers.mapped import MappedImporter

    if mapping:
        if format not in (None, "mapped"):
            raise RolloutlabError(f"--map goes with the generic importer, not --format {format}")
        return MappedImporter(mapping, split=split)
    if format is not None:
        if format not in REGISTRY:
            raise RolloutlabError(f"unknown format {format!r}; supported: {', '.join(sorted(REGISTRY))}")
        return REGISTRY[format]
    scores = sorted(((imp.detect(src), imp.name) for imp in REGISTRY.values()), reverse=True)
    if scores and scores[0][0] > 0:
        if len(scores) > 1 and scores[1][0] == scores[0][0] and not quiet:
            raise RolloutlabError(
                f"{src}: could be {scores[0][1]} or {scores[1][1]}; choose with --format"
            )
        return REGISTRY[scores[0][1]]
    if quiet:
        return None
    lines = "\n".join(f"  {imp.name:<18} {imp.summary}" for imp in REGISTRY.values() if imp.name != "mapped")
    raise RolloutlabError(
        f"{src}: unknown format — no importer recognises it.\nSupported formats:\n{lines}\n"
        "Force one with --format NAME, or map the fields of any JSONL/Parquet file with "
        "--map prompt=FIELD --map response=FIELD --map reward=FIELD --map group=FIELD"
    )
