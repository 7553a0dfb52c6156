"""The native-reader fast path: a well-formed JSONL file read by pyarrow's JSON reader.

The line reader (:func:`rolloutlab.io._files.iter_jsonl`) parses each line with orjson
into Python objects that are then converted back to Arrow: most of an ingest's time.
pyarrow's reader parses a whole file straight into Arrow columns (on all cores), and the
columns can be written as they are.  It is used only where it gives exactly what the line
reader gives; every helper here answers ``None`` (or False) when it cannot be sure, and
the importer then reads the file line by line, which locates any error.

What the reader cannot tell, and how it is made safe:

- a missing key and a ``null`` value both read as null: columns with nulls are refused;
- blank lines are skipped but still numbered by the line reader (trajectory ids hold line
  numbers): a file whose row count is not its line count is refused;
- the order of keys in a record (the line path keeps it in ``extras`` and in
  ``reward_components``): :func:`lines_hold` checks it in the raw bytes;
- invalid UTF-8 in a string the reader lets through: the table is validated in full;
- lone surrogates, ``1e400``, duplicate keys and values that change type
  down the file make the reader fail: refused.  ``NaN`` it accepts, so numbers are
  checked finite by the importer.

pyarrow is a required dependency; this reader is used when polars, which parses several
times faster (:mod:`rolloutlab.io._ndjson`, the ``fast`` extra), is not installed.  The
size limit and :func:`pyarrow_without_pandas` serve both.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa

from rolloutlab.io._files import read_bytes

# pyarrow.compute and pyarrow.json are imported where they are used: an ingest through
# polars (rolloutlab.io._ndjson) needs neither (start time).

MAX_BYTES = 1 << 30
"""Larger files are read by the line reader, whose memory does not grow with the file."""


def read_ndjson(path: Path) -> tuple[bytes, pa.Table] | None:
    """``(raw bytes, table)`` of a JSONL file of objects; None when the reader refuses it
    or it is not plainly well-formed.  Whether each row is one line (no blank line, no
    two objects on a line) the caller checks with :func:`lines_hold`, which walks the
    lines anyway when it checks the order of keys."""
    if path.stat().st_size > MAX_BYTES:
        return None
    data = read_bytes(path)
    if len(data) > MAX_BYTES or not data.endswith(b"\n") or b"\r" in data:
        return None
    import pyarrow.json as pj
    # Blocks of a quarter of the file (at least 1 MiB) parse on several threads; a line
    # longer than a block is refused by the reader, so retry with the file as one block.
    for block in (max(1 << 20, len(data) // 4 + 1), len(data) + 1):
        try:
            table = pj.read_json(pa.BufferReader(data), read_options=pj.ReadOptions(block_size=block))
        except (pa.ArrowException, ValueError) as e:
            if "straddl" in str(e) and block <= len(data):
                continue
            return None
        break
    else:  # pragma: no cover - the second block size holds the whole file
        return None
    try:  # the reader passes invalid UTF-8 inside strings through; the line reader refuses it
        table.validate(full=True)
    except pa.ArrowInvalid:
        return None
    return data, table


def lines_hold(data: bytes, n_rows: int, orders: list[list[str]]) -> bool:
    """Whether ``data`` (ending with a newline) is exactly ``n_rows`` lines, each holding
    the top-level keys of every list in ``orders`` in that order, each written ``"key":``.

    The line count tells a blank line (the reader skips it; the line reader numbers it)
    or two objects on one line (the reader reads both) from a file of one record a line.
    The order is only checked for files whose columns are all scalars (no nested object
    can hold a key then; inside a string a quote is always escaped, so ``"key":`` there
    cannot occur), and each key occurs once (the reader refuses duplicates).  Keys are
    searched backwards from the line's end, last key first: the keys that vary (a dump's
    extras) usually follow the long texts, so each line is scanned only over its last
    bytes."""
    pats = [[orjson.dumps(k) + b":" for k in reversed(keys)] for keys in orders if len(keys) > 1]
    if not pats:
        return data.count(b"\n") == n_rows
    if any(b"\\" in p for ps in pats for p in ps):
        return False
    find, rfind = data.find, data.rfind
    pos = 0
    for _ in range(n_rows):
        end = find(b"\n", pos)
        if end < 0:
            return False
        for ps in pats:
            p = end
            for pat in ps:
                p = rfind(pat, pos, p)
                if p < 0:
                    return False
        pos = end + 1
    return pos == len(data)


_NEEDS_ESCAPE = re.compile(rb'[\x00-\x1f"\\]')
"""The bytes JSON escapes inside a string (in UTF-8, no other byte can be one of them)."""


def json_values(col: pa.ChunkedArray | pa.Array) -> pa.Array | None:
    """Each value of a null-free scalar column as orjson writes it; None for a type whose
    text could differ (doubles: the shortest round-trip forms of the two differ)."""
    import pyarrow.compute as pc

    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    t = arr.type
    if pa.types.is_string(t):
        if _NEEDS_ESCAPE.search(_value_bytes(arr)):
            return pa.array([orjson.dumps(s).decode() for s in arr.to_pylist()], pa.string())
        return pc.binary_join_element_wise('"', arr, '"', "")
    if pa.types.is_boolean(t):
        return pc.if_else(arr, "true", "false")
    if pa.types.is_int64(t):
        return pc.cast(arr, pa.string())
    return None


def _value_bytes(arr: pa.Array) -> memoryview:
    """The bytes of a string array's values, all together (no copy)."""
    data = arr.buffers()[2]
    if data is None or len(arr) == 0:
        return memoryview(b"")
    offsets = np.frombuffer(arr.buffers()[1], np.int32, len(arr) + 1, arr.offset * 4)
    return memoryview(data)[int(offsets[0]):int(offsets[-1])]


def json_objects(names: list[str], values: list[pa.Array], n: int) -> pa.Array:
    """``{"name": value, ...}`` per row, compact as orjson writes it, from JSON texts."""
    import pyarrow.compute as pc

    if not names:
        return pa.nulls(n, pa.string())
    parts: list[pa.Array | str] = []
    for i, (k, v) in enumerate(zip(names, values, strict=True)):
        parts.append(("{" if i == 0 else ",") + orjson.dumps(k).decode() + ":")
        parts.append(v)
    parts.append("}")
    out = pc.binary_join_element_wise(*parts, "")
    return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out


def rank_in_group(*keys: np.ndarray) -> np.ndarray:
    """0, 1, 2… in file order within each group of equal ``keys`` (a cumulative count)."""
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, np.int64)
    order = np.lexsort((np.arange(n), *reversed(keys)))
    new = np.zeros(n, bool)
    new[0] = True
    for k in keys:
        s = k[order]
        new[1:] |= s[1:] != s[:-1]
    idx = np.arange(n)
    starts = np.maximum.accumulate(np.where(new, idx, 0))
    out = np.empty(n, np.int64)
    out[order] = idx - starts
    return out


class _NoPandas:
    """A meta-path finder that refuses ``pandas`` (used for one call, then removed)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is left out of pyarrow's type checks")


def pyarrow_without_pandas() -> None:
    """Spare a process that only ingests the import of pandas (about a third of a second,
    a third of a small ingest): pyarrow imports pandas the first time it converts any
    Python value, only to ask whether the value is a pandas object.  Asked once while
    pandas cannot be found, it remembers "no pandas" and no longer asks; ``import pandas``
    and ``Table.to_pandas()`` still work afterwards.  For the ``ingest`` command and its
    workers only: a library caller may hand pyarrow pandas objects."""
    import sys

    if "pandas" in sys.modules:
        return
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(finder)


def rows_containing(col: pa.ChunkedArray | pa.Array, needles: tuple[str, ...]) -> list[int]:
    """Rows of a string column whose value contains one of ``needles``, found by searching
    the column's data buffer (one C-speed scan per needle) instead of making a Python
    string of every value.  A match across two values is a false positive the caller's
    own test weeds out; no true match is missed."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if arr.type != pa.string() or len(arr) == 0:
        raise TypeError(f"expected a non-empty string column, got {arr.type}")
    offsets = np.frombuffer(arr.buffers()[1], np.int32, len(arr) + 1, arr.offset * 4)
    data = arr.buffers()[2].to_pybytes()
    lo, hi = int(offsets[0]), int(offsets[-1])
    hits: set[int] = set()
    for needle in needles:
        pat = needle.encode()
        p = _find(data, pat, lo, hi)
        while p >= 0:
            row = int(np.searchsorted(offsets, p, side="right")) - 1
            hits.add(row)
            p = _find(data, pat, int(offsets[row + 1]), hi)
    return sorted(hits)


_SPARSE = 4096
"""Bytes per occurrence of a needle's first byte below which :func:`_find` jumps between
those bytes instead of searching for the whole needle."""


def _find(data: bytes, pat: bytes, start: int, end: int) -> int:
    """``data.find(pat, start, end)``, faster when ``pat``'s first byte is rare in the
    data (a newline in one-line answers, ``<`` in prose): ``bytes.find`` of a needle skips
    ahead by a filter of the needle's bytes that common letters defeat, while a single
    byte is found with ``memchr``.  Falls back to the plain search as soon as the first
    byte turns out to be common."""
    first = pat[:1]
    p, misses = start, 0
    while True:
        p = data.find(first, p, end)
        if p < 0 or data.startswith(pat, p):
            return p if p < 0 or p + len(pat) <= end else -1
        misses += 1
        if misses * _SPARSE > p - start:
            return data.find(pat, p, end)
        p += 1
