"""Shared test helpers: the bundled real samples and a one-call ingest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import rolloutlab
from rolloutlab.io import IngestReport, Store

FIXTURES = Path(__file__).parent / "fixtures"
SAMPLES = FIXTURES / "samples"


@pytest.fixture
def samples() -> Path:
    return SAMPLES


@pytest.fixture
def ingest_one(tmp_path: Path) -> Any:
    """``ingest_one(src, **kw) -> (report, store)`` into a fresh store under tmp_path."""

    def run(src: Path | list[Path], **kw: Any) -> tuple[IngestReport, Store]:
        store = kw.pop("store", tmp_path / "store")
        srcs = src if isinstance(src, list) else [src]
        report = rolloutlab.ingest(srcs, store, **kw)
        return report, rolloutlab.open_store(store)

    return run
