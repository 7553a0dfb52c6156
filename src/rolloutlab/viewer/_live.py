"""The store as the viewer reads it: numbers in memory, texts on disk, both kept current.

A page runs several small queries, and a DuckDB view over a run's hundreds of Parquet
files costs tens of milliseconds per query just to open them.  So the viewer keeps the
number tables (``trajectories``, ``turns``; no text) in one in-memory DuckDB database, a
``_file`` column saying which Parquet file each row came from.  When ``_manifest.json``
changes, only the difference is applied: rows of files no longer listed are deleted, rows
of newly listed files are inserted — a growing run costs one step's files per refresh.

Texts stay on disk and are read per query from exactly the files that can hold the
asked step (:meth:`StoreView.text_files`, from the parts' step lists in the manifest),
so a page reads one step's text, never the run's.

DuckDB connections are not safe to share between threads and requests are served from a
thread pool, so every query runs under one lock (queries take a millisecond or two).
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

import duckdb
import orjson

from rolloutlab.io import RolloutlabError, Store
from rolloutlab.io._store import MANIFEST, runs_table
from rolloutlab.schema import TABLES

MEMORY_TABLES = ("trajectories", "turns")
_UNSET = object()


class NotFound(RolloutlabError):
    """A run, step or trajectory the store does not hold; the message says what it holds."""


def version_of(obj: Any) -> str:
    """A short stable hash (of a run's manifest entry: its version)."""
    return hashlib.blake2b(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS, default=str), digest_size=8).hexdigest()


class StoreView:
    """The store at ``path``, reopened whenever its manifest changes (it may not exist)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._stamp: object = _UNSET
        self.store: Store | None = None
        self.error: str | None = None
        self.version = ""
        self.run_versions: dict[str, str] = {}
        self._con = duckdb.connect(":memory:")
        self._loaded: dict[str, set[str]] = {t: set() for t in MEMORY_TABLES}
        for t in MEMORY_TABLES:
            self._con.register("_empty", TABLES[t].empty_table())
            self._con.execute(f"CREATE TABLE {t} AS SELECT *, ''::VARCHAR AS _file FROM _empty")
            self._con.unregister("_empty")

    # -- keeping current ---------------------------------------------------------------
    def refresh(self, *, force: bool = False) -> None:
        """Reload when the manifest changed since the last look (one ``stat`` otherwise)."""
        try:
            s = (self.path / MANIFEST).stat()
            stamp: object = (s.st_mtime_ns, s.st_size, s.st_ino)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            if stamp == self._stamp and not force:
                return
            self._stamp = stamp
            self.store, self.error, self.version, self.run_versions = None, None, "", {}
            st: Store | None = None
            if stamp is not None:
                try:
                    st = Store(self.path)
                except (RolloutlabError, orjson.JSONDecodeError, OSError) as e:
                    self.error = f"cannot read the store at {self.path}: {e}"
            self._sync(st)
            if st is not None:
                self.store = st
                self.run_versions = {rid: version_of(e) for rid, e in st.manifest["runs"].items()}
                self.version = version_of(self.run_versions)

    def _sync(self, st: Store | None) -> None:
        """Make the in-memory tables hold exactly the rows of the manifest's files."""
        self._con.register("runs", runs_table(st.manifest if st is not None else {"runs": {}}))
        for t in MEMORY_TABLES:
            want = {str(f) for f in st.files(t)} if st is not None else set()
            have = self._loaded[t]
            gone, new = sorted(have - want), sorted(want - have)
            if gone:
                self._con.execute(f"DELETE FROM {t} WHERE list_contains(?, _file)", [gone])
            if new:
                self._con.execute(
                    f"INSERT INTO {t} BY NAME SELECT * EXCLUDE (filename), filename AS _file "
                    "FROM read_parquet(?, union_by_name = true, filename = true)",
                    [new],
                )
            self._loaded[t] = want

    # -- reading -----------------------------------------------------------------------
    def require(self) -> Store:
        self.refresh()
        if self.store is None:
            raise NotFound(self.error or f"no store at {self.path}")
        return self.store

    def query(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        """Rows as dicts.  A query over text files that an ingest has just replaced is
        run once more against the new manifest."""
        with self._lock:
            for attempt in (0, 1):
                self.require()
                try:
                    cur = self._con.execute(sql, params)
                    cols = [d[0] for d in cur.description or ()]
                    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
                except duckdb.IOException:
                    if attempt:
                        raise
                    self.refresh(force=True)
        raise AssertionError("unreachable")

    def text_files(self, run_id: str, split: str, step: int | None) -> list[str]:
        """The ``texts`` files of ``run_id`` that can hold rows of (split, step): parts
        that list their steps are kept only when they list it; others always."""
        st = self.require()
        entry = st.manifest["runs"].get(run_id)
        if entry is None:
            return []
        out = []
        for part in entry["parts"].values():
            rel = part["files"].get("texts")
            if not rel:
                continue
            if part.get("max_step") and split not in part["max_step"]:
                continue  # the part has no trajectories of this split
            if step is not None:
                if part.get("steps") and [split, step] not in part["steps"]:
                    continue
                top = (part.get("max_step") or {}).get(split)
                if top is not None and step > top:
                    continue
            out.append(str(self.path / rel))
        return out

    def resolve(self, run: str) -> str:
        st = self.require()
        try:
            return st.resolve_run(run)
        except RolloutlabError as e:
            raise NotFound(str(e)) from None

    def entry(self, run_id: str) -> dict[str, Any]:
        entry: dict[str, Any] = self.require().manifest["runs"][run_id]
        return entry
