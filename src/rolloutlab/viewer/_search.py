"""Search the text of every trajectory — prompts, responses, observations — across steps and runs.

A search is a case-insensitive substring (``match case`` makes it exact), with no
wildcards: the user's ``%``, ``_`` and ``\\`` are the characters themselves, because the
statement compares with ``instr`` and binds the text as a parameter (never LIKE, never
pasted into SQL).  Lower-casing is DuckDB's ``lower`` on both sides; it maps one code
point to one, so a position found in the lowered text is the position in the original,
and the snippet is cut from the original at it.

One result per trajectory, in the order run, step, split, group, sample, trajectory.  Its
*place* is the first match in reading order — the prompt, then each turn (observation,
thought, action, tool calls), then the response and the error — and ``places`` counts
every (row, field) that matches.

The work is bounded:

- the ``texts`` files are read straight from the manifest's list, run by run and, within a
  run, part by part in step order, on a DuckDB connection of the search's own (the
  viewer's shared one stays free for the other pages while a scan runs), one scan at a
  time;
- the scan stops once more than :data:`CAP` trajectories matched and every part left
  starts after the step of the ``CAP + 1``-th match: the first ``CAP`` are then exact and
  the count reads ``10,000+``;
- a search is kept per store version (:data:`CACHED` of them), so paging never scans again;
- a page reads its snippets only from the files its 50 results came from.

A texts file that cannot be read (missing, truncated, not Parquet, a corrupt page) is left
out and named, with the repair command; the other files still answer.  A file an ingest
replaced while the scan ran (the manifest changed) starts the search again, once.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from rolloutlab.io import RolloutlabError
from rolloutlab.viewer._live import StoreView, table_files

MIN_CHARS = 2
"""Shorter queries (spaces aside) ask for more instead of scanning."""
MAX_CHARS = 200
"""Longer queries are refused (400)."""
PAGE_SIZE = 50
CAP = 10_000
"""Matching trajectories counted before the scan stops; past it the count reads ``10,000+``."""
BATCH_FILES = (4, 64)
"""Texts files read by one statement: 4 at first, twice as many each time, at most 64.  The
scan may stop between two statements, so small batches first stop a common word early,
and larger ones later keep a long scan from paying a statement per file."""
CACHED = 32
"""Searches kept (per store version) so that paging does not scan again."""
BEFORE, AFTER = 80, 240
"""Characters of a snippet before and after the match."""

READING_ORDER = ("prompt", "observation", "thought", "action", "tool_calls", "response", "error")
"""Where a trajectory's text is met when read top to bottom (``turn_idx = -1`` holds the
prompt, response and error; each turn row the others)."""
FIELDS: dict[str, tuple[str, ...]] = {
    "any": READING_ORDER,
    "prompt": ("prompt",),
    "response": ("response",),
    "observation": ("observation",),
}
"""``field=`` → the texts columns searched.  ``any`` is every text the step page's filter
searches (errors, thoughts, actions and tool calls too)."""
LABELS = {"tool_calls": "tool calls"}
LAST = 2**63 - 1


@dataclass(frozen=True)
class Spec:
    """One search, as the request gave it (runs resolved to run ids; none: every run)."""

    q: str
    runs: tuple[str, ...] = ()
    field: str = "any"
    step_min: int | None = None
    step_max: int | None = None
    match_case: bool = False

    @property
    def too_short(self) -> bool:
        return len(self.q.strip()) < MIN_CHARS


@dataclass(slots=True)
class Hit:
    """A matching trajectory and its first match (``turn_idx`` -1: the trajectory's own texts)."""

    run_id: str
    split: str
    step: int
    traj_id: str
    file: str
    turn_idx: int
    field: str
    pos: int
    """1-based position (in code points) of the first match in that field."""
    places: int
    group_id: str | None = None
    sample_idx: int | None = None

    @property
    def order(self) -> tuple[Any, ...]:
        return (self.run_id, self.step, self.split, self.group_id is None, self.group_id or "",
                self.sample_idx is None, self.sample_idx or 0, self.traj_id)


@dataclass
class Found:
    """What a search found: the first :data:`CAP` hits in order, and how many matched."""

    hits: list[Hit]
    total: int
    """Matching trajectories counted (more than CAP: the scan stopped there)."""
    files: int
    """Texts files read."""
    seconds: float
    unreadable: dict[str, str] = field(default_factory=dict)
    """Texts file → why it was left out."""

    @property
    def capped(self) -> bool:
        return self.total > CAP


class _StoreChanged(Exception):
    """A file vanished because an ingest committed meanwhile: search the new store."""


def _reason(e: Exception) -> str:
    return str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__


@dataclass
class _Part:
    file: str
    first: float  # its lowest step (-inf when the manifest does not list them)


class Searcher:
    """Runs searches over a :class:`StoreView`'s store, one scan at a time, and keeps them."""

    def __init__(self, view: StoreView) -> None:
        self.view = view
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, Spec], Found] = OrderedDict()

    def find(self, spec: Spec) -> Found:
        """The search's hits (from the cache when this store version already ran it)."""
        with self._lock:
            for attempt in (0, 1):
                st = self.view.require()
                key = (self.view.version, spec)
                if key in self._cache:
                    self._cache.move_to_end(key)
                    return self._cache[key]
                try:
                    found = self._scan(spec, st.manifest, key[0])
                except _StoreChanged:
                    if attempt:
                        raise RolloutlabError("the store kept changing during the search; try again") from None
                    continue
                self._cache[key] = found
                while len(self._cache) > CACHED:
                    self._cache.popitem(last=False)
                return found
        raise AssertionError("unreachable")

    # -- the scan ---------------------------------------------------------------------
    def _parts(self, spec: Spec, manifest: dict[str, Any], unreadable: dict[str, str]) -> dict[str, list[_Part]]:
        """Run id → its texts files that can hold steps in the range, lowest step first."""
        runs = spec.runs or tuple(sorted(manifest["runs"]))
        out: dict[str, list[_Part]] = {}

        def keep(part: dict[str, Any]) -> bool:
            steps = [s for _, s in part.get("steps") or []]
            top = max((part.get("max_step") or {}).values(), default=None)
            if steps and not any(_in_range(s, spec) for s in steps):
                return False
            return top is None or spec.step_min is None or top >= spec.step_min

        for rid in sorted(runs):
            parts = []
            found = manifest["runs"].get(rid, {}).get("parts", {})  # gone: nothing
            for sharing, path, why in table_files(self.view.path, found.values(), "texts", keep):
                if path is None:
                    unreadable[sharing[0]["files"]["texts"]] = why
                    continue
                steps = [s for part in sharing for _, s in part.get("steps") or []]
                first = min(steps) if steps and all(part.get("steps") for part in sharing) else float("-inf")
                parts.append(_Part(path, first))
            out[rid] = sorted(parts, key=lambda p: (p.first, p.file))
        return out

    def _scan(self, spec: Spec, manifest: dict[str, Any], version: str) -> Found:
        t0 = time.perf_counter()
        unreadable: dict[str, str] = {}
        found: list[Hit] = []
        total = files = 0
        con = duckdb.connect(":memory:")
        try:
            needle = spec.q if spec.match_case else _one(con, "SELECT lower(?)", [spec.q])
            for rid, parts in self._parts(spec, manifest, unreadable).items():
                for batch in _batches(parts):
                    if len(found) > CAP and batch[0].first > found[CAP].step:
                        break  # every part left starts after the CAP+1-th match
                    rows, n = self._batch(con, spec, needle, rid, [p.file for p in batch], unreadable, version)
                    files += len(batch)
                    total += n
                    found += rows
                    if len(found) > CAP:  # keep whole steps up to the CAP+1-th match's
                        found.sort(key=lambda h: (h.run_id, h.step))
                        edge = (found[CAP].run_id, found[CAP].step)
                        found = [h for h in found if (h.run_id, h.step) <= edge]
                if len(found) > CAP:
                    break  # later runs sort after it
        finally:
            con.close()
        found = sorted(self._with_groups(found), key=lambda h: h.order)[:CAP]
        return Found(found, total, files, time.perf_counter() - t0, unreadable)

    def _batch(self, con: duckdb.DuckDBPyConnection, spec: Spec, needle: str, run_id: str, files: list[str],
               unreadable: dict[str, str], version: str) -> tuple[list[Hit], int]:
        """(hits, matching trajectories) of ``files``; when the statement fails, the files
        are read one by one and those that cannot be read are left out, named in
        ``unreadable``."""
        try:
            return self._query(con, spec, needle, run_id, files)
        except duckdb.Error as e:
            if len(files) == 1:
                if not Path(files[0]).exists():  # replaced by an ingest that committed meanwhile?
                    self.view.refresh()
                    if self.view.version != version:
                        raise _StoreChanged from None
                unreadable[self._rel(files[0])] = _reason(e)
                return [], 0
        hits: list[Hit] = []
        total = 0
        for f in files:
            h, n = self._batch(con, spec, needle, run_id, [f], unreadable, version)
            hits += h
            total += n
        return hits, total

    def _rel(self, file: str) -> str:
        """A store file as the manifest names it (relative to the store)."""
        p = Path(file)
        return str(p.relative_to(self.view.path)) if p.is_relative_to(self.view.path) else file

    def _query(self, con: duckdb.DuckDBPyConnection, spec: Spec, needle: str, run_id: str,
               files: list[str]) -> tuple[list[Hit], int]:
        cols = FIELDS[spec.field]
        order = [c for c in READING_ORDER if c in cols]
        hay = (lambda c: c) if spec.match_case else (lambda c: f"lower({c})")
        where = ["run_id = ?"]
        params: list[Any] = [needle] * len(cols) + [files, run_id]
        for op, bound in ((">=", spec.step_min), ("<=", spec.step_max)):
            if bound is not None:
                where.append(f"step {op} ?")
                params.append(bound)
        matched = [f"coalesce(p_{c}, 0) > 0" for c in order]
        # Column names come from the fixed FIELDS table only; the text is bound.
        sql = f"""
            WITH r AS (
                SELECT run_id, split, step, traj_id, turn_idx, filename AS file,
                       {", ".join(f"instr({hay(c)}, ?) AS p_{c}" for c in cols)}
                FROM read_parquet(?, union_by_name = true, filename = true)
                WHERE {" AND ".join(where)}
            ), m AS MATERIALIZED (
                SELECT run_id, split, step, traj_id, any_value(file) AS file,
                       sum({" + ".join(f"CAST({x} AS INTEGER)" for x in matched)}) AS places,
                       arg_min({{'turn': turn_idx,
                                 'field': CASE {" ".join(f"WHEN {x} THEN '{c}'" for x, c in zip(matched, order, strict=True))} END,
                                 'pos': CASE {" ".join(f"WHEN {x} THEN p_{c}" for x, c in zip(matched, order, strict=True))} END}},
                               CASE WHEN turn_idx >= 0 THEN turn_idx
                                    WHEN {"coalesce(p_prompt, 0) > 0" if "prompt" in cols else "FALSE"} THEN -1
                                    ELSE {LAST} END) AS first
                FROM r WHERE {" OR ".join(matched)}
                GROUP BY run_id, split, step, traj_id
            )
            SELECT run_id, split, step, traj_id, file, places, first, (SELECT count(*) FROM m) AS n
            FROM m WHERE step <= coalesce((SELECT step FROM m ORDER BY step LIMIT 1 OFFSET ?), {LAST})
        """
        rows = con.execute(sql, [*params, CAP]).fetchall()
        hits = [Hit(run_id=r[0], split=r[1], step=r[2], traj_id=r[3], file=r[4], places=int(r[5]),
                    turn_idx=r[6]["turn"], field=r[6]["field"], pos=r[6]["pos"]) for r in rows]
        return hits, (rows[0][7] if rows else 0)

    def _with_groups(self, hits: list[Hit]) -> list[Hit]:
        """The hits with their group and sample (from the viewer's numbers), for the order."""
        if not hits:
            return hits
        # Four plain lists, zipped by unnest: binding them is far cheaper than a list of structs.
        rows = self.view.query(
            "SELECT k.i, t.group_id, t.sample_idx FROM (SELECT unnest(range(len(?::VARCHAR[]))) AS i, "
            "unnest(?::VARCHAR[]) AS run_id, unnest(?::VARCHAR[]) AS split, unnest(?::BIGINT[]) AS step, "
            "unnest(?::VARCHAR[]) AS traj_id) k JOIN trajectories t ON t.run_id = k.run_id AND t.split = k.split "
            "AND t.step = k.step AND t.traj_id = k.traj_id",
            [[h.traj_id for h in hits], [h.run_id for h in hits], [h.split for h in hits], [h.step for h in hits],
             [h.traj_id for h in hits]])
        for r in rows:
            hits[r["i"]].group_id, hits[r["i"]].sample_idx = r["group_id"], r["sample_idx"]
        return hits

    # -- one page ---------------------------------------------------------------------
    def page(self, found: Found, spec: Spec, page: int) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """(one page of results with their numbers and snippets, texts files that could
        not be read for it)."""
        hits = found.hits[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
        if not hits:
            return [], {}
        keys = _keys(hits)
        nums = {r["i"]: r for r in self.view.query(
            "SELECT k.i, t.task_id, t.reward, t.success, t.graded, t.termination, t.num_turns "
            "FROM (SELECT unnest(?, recursive := true)) k JOIN trajectories t ON t.run_id = k.run_id "
            "AND t.split = k.split AND t.step = k.step AND t.traj_id = k.traj_id", [keys])}
        snippets, unreadable = self._snippets(hits, spec)
        rows = []
        for i, h in enumerate(hits):
            n = nums.get(i, {})
            rows.append({**asdict(h), **{k: n.get(k) for k in ("task_id", "reward", "success", "termination",
                                                                   "num_turns")},
                         "graded": n.get("graded", True), "known": bool(n),
                         "label": LABELS.get(h.field, h.field), "snippet": snippets.get(i)})
        return rows, unreadable

    def _snippets(self, hits: list[Hit], spec: Spec) -> tuple[dict[int, dict[str, Any]], dict[str, str]]:
        """Index → the text around each hit's first match (``before``, ``hit``, ``after``,
        whether each side was cut, the field's length), read from the hits' own files."""
        files = sorted({h.file for h in hits})
        pick = " ".join(f"WHEN '{c}' THEN x.{c}" for c in READING_ORDER)
        sql = f"""
            WITH j AS (
                SELECT k.i, k.pos, CASE k.field {pick} END AS txt
                FROM (SELECT unnest(?, recursive := true)) k
                JOIN read_parquet(?, union_by_name = true, filename = true) x
                  ON x.filename = k.file AND x.run_id = k.run_id AND x.split = k.split AND x.step = k.step
                 AND x.traj_id = k.traj_id AND x.turn_idx = k.turn_idx
            )
            SELECT i, substr(txt, greatest(pos - {BEFORE}, 1), pos - greatest(pos - {BEFORE}, 1)) AS before,
                   substr(txt, pos, ?) AS hit, substr(txt, pos + ?, {AFTER}) AS after,
                   pos - {BEFORE} > 1 AS cut_before, length(txt) AS text_len
            FROM j
        """
        keys = [{**k, "file": h.file, "turn_idx": h.turn_idx, "field": h.field, "pos": h.pos}
                for k, h in zip(_keys(hits), hits, strict=True)]
        n = len(spec.q)  # code points, as DuckDB's substr counts them (lower keeps the count)
        unreadable: dict[str, str] = {}
        con = duckdb.connect(":memory:")

        def read(fs: list[str]) -> list[tuple[Any, ...]]:
            return con.execute(sql, [[k for k in keys if k["file"] in fs], fs, n, n]).fetchall()

        try:
            try:
                rows = read(files)
            except duckdb.Error:  # one by one, naming the files that cannot be read
                rows = []
                for f in files:
                    try:
                        rows += read([f])
                    except duckdb.Error as e:
                        unreadable[self._rel(f)] = _reason(e)
        finally:
            con.close()
        out = {}
        for i, before, hit, after, cut_before, text_len in rows:
            out[i] = {"before": before, "hit": hit, "after": after, "cut_before": cut_before,
                      "cut_after": hits[i].pos + n - 1 + AFTER < text_len, "text_len": text_len}
        return out, unreadable


def _batches(parts: list[_Part]) -> Iterator[list[_Part]]:
    size, top = BATCH_FILES
    i = 0
    while i < len(parts):
        yield parts[i:i + size]
        i += size
        size = min(2 * size, top)


def _in_range(step: int, spec: Spec) -> bool:
    return (spec.step_min is None or step >= spec.step_min) and (spec.step_max is None or step <= spec.step_max)


def _keys(hits: list[Hit]) -> list[dict[str, Any]]:
    return [{"i": i, "run_id": h.run_id, "split": h.split, "step": h.step, "traj_id": h.traj_id}
            for i, h in enumerate(hits)]


def _one(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> Any:
    row = con.execute(sql, params).fetchone()
    assert row is not None
    return row[0]
