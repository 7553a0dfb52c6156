"""The polars fast path: a well-formed JSONL file read by polars' NDJSON reader.

polars parses a whole file into columns about as fast as orjson parses it into Python
objects, and several times faster than pyarrow's JSON reader; its columns need no
conversion back from Python.  It is lenient where the line reader
(:func:`rolloutlab.io._files.iter_jsonl`, orjson) is strict or differs, so its result is
used only when the raw bytes show that it is the line reader's:

- a duplicate key keeps its first value (orjson: the last), and a key first seen past the
  rows polars infers its schema from is dropped; a number, boolean, list or object in a
  column of strings is turned into text;
- blank lines are skipped (the line reader numbers them; trajectory ids hold line
  numbers), and the order of keys is not kept per record (the line path keeps it in
  ``extras`` and ``reward_components``);
- a lone high surrogate (``\\ud800``) is read as U+0000, where orjson refuses it.

:func:`layout_holds` answers the first two from the raw bytes in one vectorised pass (the
structural quotes of every line: its keys, their order, the first byte of each string
value, the line's boundaries); :func:`read_ndjson` refuses the third, and everything
polars refuses itself (invalid UTF-8, raw control characters, ``NaN``, ``1e400``, two
objects on a line).  Whatever is refused is read by the line reader, which names the line
at fault.

polars is optional (the ``fast`` extra): :func:`polars_module` answers None without it,
and the importers fall back to pyarrow's JSON reader (:mod:`rolloutlab.io._fastpath`).

polars parses without holding the GIL, so :func:`prefetch` parses the next file in a
background thread while the current one is checked and written (one file ahead).
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import orjson

from rolloutlab.io._fastpath import MAX_BYTES
from rolloutlab.io._files import logical_name, read_bytes

if TYPE_CHECKING:
    import polars as pl


def polars_module() -> ModuleType | None:
    """``polars`` when it is installed (imported here, on first use), else None."""
    try:
        import polars
    except ImportError:
        return None
    return polars


def read_ndjson(path: Path) -> tuple[bytes | mmap.mmap, pl.DataFrame] | None:
    """``(raw bytes, frame)`` of a JSONL file of objects, one per line; None when polars
    is not installed, refuses the file, or the file is not plainly well-formed (too large,
    no final newline, a carriage return, a U+0000 in a string, which is also what polars
    makes of a lone surrogate).  Whether the frame is the line reader's the caller checks
    with :func:`layout_holds`."""
    pl = polars_module()
    if pl is None or path.stat().st_size > MAX_BYTES:
        return None
    data = _mapped(path)
    if len(data) > MAX_BYTES or data[-2:] != b"}\n" or data.find(b"\r") >= 0:
        return None
    try:
        df = pl.read_ndjson(data)
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException, ValueError):
        return None  # the line reader reads the file and names what is wrong with it
    texts = [c for c, t in df.schema.items() if t == pl.String]
    # (Scanning the raw bytes for the \u escape a U+0000 needs is slower: JSON texts hold
    # many backslashes, and bytes.find stops at each.)
    if texts and df.select(pl.any_horizontal(pl.col(texts).str.contains("\x00", literal=True).any())).item():
        return None
    return data, df


def _mapped(path: Path) -> bytes | mmap.mmap:
    """The file's bytes: mapped, when it is not compressed (no copy, and no fresh memory
    to fault in: a twentieth of an ingest), else read.  A file that grows meanwhile (a live
    run's step being written) is read as it was; one truncated while mapped would end the
    process (SIGBUS), as it would any reader that maps files, polars' own included."""
    if logical_name(path) != path.name:
        return read_bytes(path)
    with open(path, "rb") as f:
        try:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            return b""


_QUOTE, _BACKSLASH, _COLON, _SPACE, _NEWLINE, _OPEN, _CLOSE = b'"\\: \n{}'


def layout_holds(data: bytes | mmap.mmap, n_rows: int, names: list[str], strings: set[str]) -> bool:
    """Whether ``data`` is exactly ``n_rows`` lines ``{"key": value, ...}\\n``, each with
    the keys ``names`` in this order, each once, each written as orjson writes it, and
    the value of each key in ``strings`` a JSON string.

    Only for values that are strings, numbers or booleans (the caller refuses nested
    columns): then the unescaped quotes of a line are two per key and two per string
    value, and a key is the quoted text right before a ``:``.  A duplicate key, a key
    polars dropped, or a number polars turned into text all show here; so does a blank
    line (a line must follow ``}\\n`` directly), which polars skips but the line reader
    numbers."""
    keys = [orjson.dumps(k)[1:-1] for k in names]
    if not keys or any(b"\\" in k or b'"' in k for k in keys):
        return False
    if not (data[:2] == b'{"' and data[-2:] == b"}\n"):
        return False
    arr = np.frombuffer(data, np.uint8)
    q = np.flatnonzero(arr == _QUOTE)
    # A quote after an odd run of backslashes is inside a string (\" or \\\").
    esc = np.flatnonzero(arr[q - 1] == _BACKSLASH)  # q >= 1: data starts with "{"
    if len(esc):
        run = np.ones(len(esc), np.int64)
        live = np.ones(len(esc), bool)
        k = 2
        while live.any():
            live &= arr[np.maximum(q[esc] - k, 0)] == _BACKSLASH
            run += live
            k += 1
        q = np.delete(q, esc[run % 2 == 1])
    if len(q) % 2:
        return False
    opens, closes = q[0::2], q[1::2]
    is_key = arr[closes + 1] == _COLON  # closes + 1 < len(data): data ends with "}\n"
    n_keys = len(names)
    if int(is_key.sum()) != n_rows * n_keys:
        return False
    k_open = opens[is_key].reshape(n_rows, n_keys)
    k_close = closes[is_key].reshape(n_rows, n_keys)
    starts = k_open[:, 0] - 1  # each line's "{"
    if starts[0] != 0 or not (arr[starts] == _OPEN).all():
        return False
    if n_rows > 1 and not ((arr[starts[1:] - 1] == _NEWLINE).all() and (arr[starts[1:] - 2] == _CLOSE).all()):
        return False
    lens = np.array([len(k) for k in keys])
    if not (k_close - k_open - 1 == lens).all():
        return False
    # every byte of every key, for all lines at once: line i's key j byte b at k_open[i, j] + 1 + b
    which = np.repeat(np.arange(n_keys), lens)
    offset = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    if not (arr[k_open[:, which] + 1 + offset] == np.frombuffer(b"".join(keys), np.uint8)).all():
        return False
    text = [j for j, name in enumerate(names) if name in strings]
    v = k_close[:, text] + 2
    v += arr[v] == _SPACE  # "key": "value" (json.dumps) or "key":"value" (orjson)
    return bool((arr[v] == _QUOTE).all())


T = TypeVar("T")
_AHEAD: dict[tuple[str, int, int, int], tuple[Callable[[Path], Any], Future[Any]]] = {}
"""Loads started ahead, by the file's identity when they started: the load, its result."""

_POOL: ThreadPoolExecutor | None = None


def _identity(path: Path) -> tuple[str, int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return str(path), st.st_ino, st.st_size, st.st_mtime_ns


def prefetch(path: Path, load: Callable[[Path], T], *, ahead: int = 2) -> None:
    """Start ``load(path)`` in a background thread; :func:`prefetched` takes its result.
    ``ahead`` loads not taken at most (the file being read may still be among them when
    the next one is started; a batch of files is read ahead whole): the oldest beyond
    is dropped (an error in it too: the reader meets it again when it loads the file
    itself)."""
    global _POOL
    ident = _identity(path)
    if ident is None:
        return
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="rolloutlab-prefetch")
    while len(_AHEAD) >= max(1, ahead):
        del _AHEAD[next(iter(_AHEAD))]
    _AHEAD[ident] = (load, _POOL.submit(load, path))


def remember(path: Path, load: Callable[[Path], T], result: T) -> None:
    """Keep ``result`` as ``load(path)``'s for the next :func:`prefetched` of this file
    (unchanged since): a batch reader that refused a file hands it to a reader of one
    file, which would otherwise parse it again."""
    ident = _identity(path)
    if ident is not None:
        done: Future[T] = Future()
        done.set_result(result)
        _AHEAD[ident] = (load, done)


def prefetched(path: Path, load: Callable[[Path], T]) -> T:
    """``load(path)``: the result :func:`prefetch` started, when it started for this same
    load of this file, unchanged since (inode, size, modification time); else loaded now."""
    ident = _identity(path)
    ahead = _AHEAD.pop(ident, None) if ident is not None else None
    if ahead is not None and ahead[0] is load:
        result: T = ahead[1].result()
        return result
    return load(path)
