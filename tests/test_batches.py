"""A batch of parts shares its files (docs/store.md § Batches; issue 7, "Ingest at native
speed": one pass over many step files, not one per file).

verl step files read by polars in one ingest are one batch: one Parquet file per table for
all of them.  What the store promises per part still holds: every reader takes each file
once; ``check-store`` checks a shared file against all its parts' rows and drops them
together; a part read again (rewritten, or its shared file damaged) leaves its batch-mates'
rows intact — copied by their steps into files of their own — whether their sources are
unchanged, gone, or not yet complete.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import rolloutlab
from rolloutlab.io import open_store
from rolloutlab.io._health import check_store
from tests._verl import write_verl

pytest.importorskip("polars")  # batches are polars' (without it each step file is read alone)

STEPS = (1, 2, 3, 4)
_KEYS = {"trajectories": "traj_id", "turns": "traj_id, turn_idx", "texts": "traj_id, turn_idx"}


def _tables(store: Path) -> dict[str, list[tuple[Any, ...]]]:
    st = open_store(store)
    return {t: st.sql(f"SELECT * FROM {t} ORDER BY {k}").fetchall() for t, k in _KEYS.items()}


def _of_steps(tables: dict[str, list[tuple[Any, ...]]], steps: set[int]) -> dict[str, list[tuple[Any, ...]]]:
    return {t: [r for r in rows if r[2] in steps] for t, rows in tables.items()}  # column 2: step


def _parts(store: Path) -> dict[str, dict[str, Any]]:
    return {p["key"]: p for p in open_store(store).manifest["runs"]["r"]["parts"].values()}


def _on_disk(store: Path) -> set[str]:
    return {str(p.relative_to(store)) for t in _KEYS for p in (store / t).rglob("*.parquet")}


@pytest.fixture
def batched(tmp_path: Path) -> tuple[Path, Path]:
    src = write_verl(tmp_path / "src", {s: [[1, 0, 0, 1], [0, 1, 1, 1]] for s in STEPS})
    store = tmp_path / "s"
    rolloutlab.ingest([src], store, name="r")
    return src, store


def test_a_dump_is_one_batch_whose_parts_share_their_files(batched: tuple[Path, Path], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    src, store = batched
    st = open_store(store)
    parts = _parts(store)
    assert sorted(parts) == [f"train/{s}.jsonl" for s in STEPS]
    for table in _KEYS:
        assert len({p["files"][table] for p in parts.values()}) == 1, table
        (f,) = st.files(table)  # each file once
        assert pq.ParquetFile(f).metadata.num_rows == sum(p["counts"][table] for p in parts.values())
    assert _on_disk(store) == {p["files"][t] for p in parts.values() for t in _KEYS}
    rep = check_store(store)
    assert rep.healthy and rep.files_checked == len(_KEYS) + 1  # and the runs file

    # the same rows as each step file read alone
    from rolloutlab.io.importers.verl import VerlImporter

    monkeypatch.setattr(VerlImporter, "batchable", lambda self, part: False)
    rolloutlab.ingest([src], tmp_path / "alone", name="r")
    assert len(open_store(tmp_path / "alone").files("trajectories")) == len(STEPS)
    assert _tables(tmp_path / "alone") == _tables(store)


def test_a_rewritten_step_is_read_again_and_its_batch_mates_keep_their_rows(batched: tuple[Path, Path]) -> None:
    src, store = batched
    before, old_files = _tables(store), _on_disk(store)
    write_verl(src, {3: [[0, 0, 0, 0], [1, 1, 1, 1], [1, 1]]})  # step 3 rewritten: new scores, 2 more lines
    rep = rolloutlab.ingest([src], store, name="r").sources[0]
    assert (rep.parts_read, rep.parts_unchanged) == (1, 3)
    after = _tables(store)
    assert _of_steps(after, {1, 2, 4}) == _of_steps(before, {1, 2, 4})  # nothing lost, nothing twice
    rewards = [r[9] for r in after["trajectories"] if r[2] == 3]  # column 9: reward
    assert sorted(rewards) == [0.0] * 4 + [1.0] * 6
    parts = _parts(store)
    kept = {parts[f"train/{s}.jsonl"]["files"]["trajectories"] for s in (1, 2, 4)}
    assert len(kept) == 1 and kept != {parts["train/3.jsonl"]["files"]["trajectories"]}
    assert not old_files & _on_disk(store)  # the old batch's files are gone
    assert _on_disk(store) == {p["files"][t] for p in parts.values() for t in _KEYS}
    assert check_store(store).healthy
    again = rolloutlab.ingest([src], store, name="r").sources[0]  # and stays put
    assert (again.parts_read, again.parts_unchanged) == (0, 4) and _tables(store) == after


def test_a_batch_mate_whose_source_is_gone_keeps_its_rows(batched: tuple[Path, Path]) -> None:
    src, store = batched
    before = _tables(store)
    (src / "2.jsonl").unlink()
    write_verl(src, {3: [[0, 0, 0, 0]]})
    rolloutlab.ingest([src], store, name="r")
    after = _tables(store)
    assert _of_steps(after, {1, 2, 4}) == _of_steps(before, {1, 2, 4})
    assert len(_of_steps(after, {3})["trajectories"]) == 4
    assert check_store(store).healthy


def test_a_batch_mate_not_yet_complete_keeps_its_old_rows(batched: tuple[Path, Path]) -> None:
    src, store = batched
    before = _tables(store)
    step2 = (src / "2.jsonl").read_bytes()
    (src / "2.jsonl").write_bytes(step2 + step2.splitlines(keepends=True)[0][:40])  # a line being written
    write_verl(src, {3: [[0, 0, 0, 0]]})
    rep = rolloutlab.ingest([src], store, name="r").sources[0]
    assert rep.parts_pending == ["train/2.jsonl"] and rep.parts_read == 1
    after = _tables(store)
    assert _of_steps(after, {1, 2, 4}) == _of_steps(before, {1, 2, 4})
    assert check_store(store).healthy
    (src / "2.jsonl").write_bytes(step2 + step2.splitlines(keepends=True)[0])  # the line completed
    rep = rolloutlab.ingest([src], store, name="r").sources[0]
    assert (rep.parts_read, rep.parts_pending) == (1, [])
    final = _tables(store)
    assert _of_steps(final, {1, 4}) == _of_steps(before, {1, 4})
    assert len(_of_steps(final, {2})["trajectories"]) == 9  # 8 and the completed line
    assert check_store(store).healthy


@pytest.mark.parametrize("kind", ["deleted", "truncated"])
def test_a_damaged_shared_file_is_every_parts_damage_and_ingest_restores_them(batched: tuple[Path, Path],
                                                                             kind: str) -> None:
    src, store = batched
    before = _tables(store)
    (bad,) = open_store(store).files("texts")
    if kind == "deleted":
        bad.unlink()
    else:
        bad.write_bytes(bad.read_bytes()[:100])
    rep = check_store(store)
    assert not rep.healthy and {d.file for d in rep.damage} == {str(bad)}
    assert sorted(d.part for d in rep.damage) == sorted(open_store(store).manifest["runs"]["r"]["parts"])
    assert check_store(store, repair=True).parts_dropped == len(STEPS)
    again = rolloutlab.ingest([src], store, name="r").sources[0]
    assert again.parts_read == len(STEPS)
    assert _tables(store) == before and check_store(store).healthy


def test_ingest_alone_rereads_a_batch_whose_file_is_gone(batched: tuple[Path, Path]) -> None:
    src, store = batched
    before = _tables(store)
    open_store(store).files("trajectories")[0].unlink()
    rep = rolloutlab.ingest([src], store, name="r").sources[0]
    assert rep.parts_read == len(STEPS) and any("missing or damaged" in w for w in rep.warnings)
    assert _tables(store) == before and check_store(store).healthy


@pytest.mark.parametrize("ahead", [1, 10**6])
def test_a_slow_disk_holds_few_batches_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ahead: int) -> None:
    """Before reading the next batch, ingest waits until at most WRITES_AHEAD batches wait
    for the writer threads: with a slow disk, a large dump's rows would pile up in memory
    (10**6: no bound, to show that the count below can exceed it)."""
    import threading
    import time

    from rolloutlab.io import _ingest, _sink

    src = write_verl(tmp_path / "src", {s: [[1, 0, 0, 1]] * 8 for s in range(1, 25)})
    monkeypatch.setattr(_ingest, "WRITES_AHEAD", ahead)
    monkeypatch.setattr(_ingest, "EDGE_BATCH_BYTES", 1)  # 24 files: a batch each
    monkeypatch.setattr(_ingest, "BATCH_BYTES", 1)
    queued, most, total, lock = [0], [0], [0], threading.Lock()
    real = _sink._writer_pool

    class Slow:
        def __init__(self, pool: Any) -> None:
            self.pool = pool

        def submit(self, fn: Any, *args: Any) -> Any:
            with lock:
                queued[0] += 1
                total[0] += 1
                most[0] = max(most[0], queued[0])

            def run() -> Any:
                time.sleep(0.02)
                try:
                    return fn(*args)
                finally:
                    with lock:
                        queued[0] -= 1

            return self.pool.submit(run)

    monkeypatch.setattr(_sink, "_writer_pool", lambda table: Slow(real(table)))
    rep = rolloutlab.ingest([src], tmp_path / "s", name="r").sources[0]
    assert rep.parts_read == 24 and len(open_store(tmp_path / "s").files("trajectories")) == 24
    per_batch = total[0] / 24  # the writes of a batch's tables, and the closings by the two writer threads
    if ahead == 1:  # the batch being read, and the one before it
        assert most[0] <= (ahead + 1) * per_batch
    else:
        assert most[0] > 4 * per_batch
