"""Every ingest in the importer tests is checked against the store's turn-row rule
(docs/store.md § Turn rows): a trajectory with ``num_turns = n`` has exactly n rows in
``turns`` and n turn rows in ``texts``, numbered 0..n-1; with ``num_turns`` null, none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import rolloutlab
from rolloutlab.io import IngestReport, Store


def turn_row_violations(st: Store) -> list[tuple[Any, ...]]:
    """Trajectories breaking the turn-row rule: (traj_id, num_turns, turn rows, text rows, max turn_idx)."""
    return st.sql(
        """WITH u AS (SELECT run_id, traj_id, count(*) AS n, max(turn_idx) AS hi, count(DISTINCT turn_idx) AS nd
                      FROM turns GROUP BY ALL),
                x AS (SELECT run_id, traj_id, count(*) AS n FROM texts WHERE turn_idx >= 0 GROUP BY ALL)
           SELECT t.traj_id, t.num_turns, coalesce(u.n, 0), coalesce(x.n, 0), u.hi
           FROM trajectories t LEFT JOIN u USING (run_id, traj_id) LEFT JOIN x USING (run_id, traj_id)
           WHERE coalesce(t.num_turns, 0) != coalesce(u.n, 0) OR coalesce(t.num_turns, 0) != coalesce(x.n, 0)
              OR coalesce(u.nd, 0) != coalesce(u.n, 0) OR coalesce(u.hi, -1) != coalesce(t.num_turns, 0) - 1
           ORDER BY t.traj_id LIMIT 5"""
    ).fetchall()


@pytest.fixture
def ingest_one(tmp_path: Path) -> Any:
    """``ingest_one(src, **kw) -> (report, store)`` into a fresh store under tmp_path,
    checking the turn-row rule on the result."""

    def run(src: Path | list[Path], **kw: Any) -> tuple[IngestReport, Store]:
        store = kw.pop("store", tmp_path / "store")
        srcs = src if isinstance(src, list) else [src]
        report = rolloutlab.ingest(srcs, store, **kw)
        st = rolloutlab.open_store(store)
        bad = turn_row_violations(st)
        assert not bad, f"turn-row rule broken (traj_id, num_turns, turn rows, text rows, max turn_idx): {bad}"
        return report, st

    return run
