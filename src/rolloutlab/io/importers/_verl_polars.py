"""verl step files through polars (:mod:`rolloutlab.io._ndjson`), when it is installed.

Gives, row for row, what :meth:`VerlImporter._read_dump` gives line by line (the tests
ingest the same files both ways and compare every table): the same trajectory ids,
group and task hashes, reward components in record order, ``extras`` texts, success,
turn rows and turn texts.  polars parses and checks each file (in the prefetch thread
when the files are read ahead); then the files of a batch with the same columns are one
frame (:func:`read_dumps_polars`: one pass, not one per file, whose fixed costs were
a third of an ingest of 100 small files), whose long texts one query scans (which input
each row has, lengths, the outputs that may hold several turns or Hermes tool calls);
one more builds the ids and the ``extras`` JSON (orjson's escapes, by
``str.replace_many``, only for columns that need them), and numpy the numbers, group
ranks (within each file, as the line path groups) and reward components.  No
pyarrow.compute: its import costs a tenth of a second.  Python loops run only over the
distinct inputs (their blake2b hash) and over the outputs split into turns.

Refused (False, nothing written), so that the line reader reads the file and names the
line at fault: anything :func:`read_ndjson` or :func:`layout_holds` refuses (so records
whose keys differ, in set or order, or repeat); a column with nulls (missing and null
cannot be told apart); ``input``/``output`` not text, ``score`` not a number, ``step``
not a whole number >= 0; extras that are not text, booleans or whole numbers (nested
values, or doubles in ``gts``); ``acc`` of a type the line path does not map; a key
``final_observation`` (the line path writes the environment's last reply over it).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pyarrow as pa

from rolloutlab.io._fastpath import rank_in_group
from rolloutlab.io._ndjson import layout_holds, prefetch, prefetched, read_ndjson, remember
from rolloutlab.io._sink import PartSink
from rolloutlab.io.importers._base import PartRows
from rolloutlab.io.importers._verl_turns import split_outputs, write_rows
from rolloutlab.schema import TEXTS, TRAJECTORIES, TURNS

_CORE = ("input", "output", "gts", "score", "step", "reward")
_NUMBER = (pl.Int64, pl.Float64)
_TEXTS_VIEWS = pa.schema([f.with_type(pa.string_view()) if f.name in ("prompt", "response", "action") else f
                          for f in TEXTS])
"""The texts table with the prompt and response (and a one-turn row's action, the
response) as polars holds them."""


def _parse(path: Path) -> pl.DataFrame | None:
    """A step file as polars reads it, checked to be the line reader's rows; None when polars' result could differ from the line
    reader's or the file is not a dump this path reads.  Runs in the prefetch threads when
    the file is read ahead (polars and numpy leave the GIL to the reading thread)."""
    got = read_ndjson(path)
    if got is None:
        return None
    data, df = got
    n, names, schema = df.height, df.columns, df.schema
    if n == 0 or not {"input", "output", "score"} <= set(names) or "final_observation" in names:
        return None  # (the line path would write the environment's last reply over that key)
    if schema["input"] != pl.String or schema["output"] != pl.String or schema["score"] not in _NUMBER:
        return None
    if any(df.null_count().row(0)):  # a null reads like a missing key
        return None
    if "step" in names and (schema["step"] != pl.Int64 or df["step"].min() < 0):  # type: ignore[operator]
        return None
    for c in names:  # the other keys: numbers (reward components) or scalars written as JSON
        if c != "gts" and (c in _CORE or schema[c] in _NUMBER):
            continue
        if schema[c] not in _JSON_SCALARS:
            return None  # nested values, or doubles in gts: their JSON text could differ
    if "acc" in names and schema["acc"] not in _ACC_TYPES:
        return None  # a type the line path maps otherwise
    if not layout_holds(data, n, names, {c for c in names if schema[c] == pl.String}):
        return None
    return df


def prefetch_dump(path: Path, ahead: int = 2) -> None:
    """Parse ``path`` in the background; :func:`read_dumps_polars` of it takes the result
    (``ahead``: how many parsed files may wait to be taken, see :func:`prefetch`)."""
    prefetch(path, _parse, ahead=ahead)


def read_dump_polars(path: Path, file_step: int, split: str, sink: PartSink) -> bool:
    """Read a well-formed verl step file into ``sink``; False (nothing written) when
    polars' result could differ from the line reader's."""
    return read_dumps_polars([(path, file_step, split)], sink)[0] is not None


def read_dumps_polars(files: list[tuple[Path, int, str]], sink: PartSink) -> list[PartRows | None]:
    """Read well-formed verl step files ``(path, step of its name, split)`` into one
    ``sink``, in one pass over each run of consecutive files with the same columns and
    split; per file, what it gave, or None (nothing of it written) when polars' result
    could differ from the line reader's: that file is for the line reader."""
    parsed = [prefetched(path, _parse) for path, _, _ in files]
    out: list[PartRows | None] = [None] * len(files)
    group: list[int] = []

    def read(group: list[int]) -> None:
        frames = [parsed[g] for g in group]
        rows = _read_group([files[g] for g in group], frames, sink)  # type: ignore[arg-type]
        for g, r in zip(group, rows, strict=True):
            out[g] = r

    for i, df in enumerate(parsed):
        if df is None:
            remember(files[i][0], _parse, None)  # read alone next: not parsed again
            continue
        first = parsed[group[0]] if group else None
        if first is not None and (df.schema != first.schema or files[i][2] != files[group[0]][2]):
            read(group)
            group = []
        group.append(i)
    if group:
        read(group)
    return out


def _read_group(files: list[tuple[Path, int, str]], dfs: list[pl.DataFrame], sink: PartSink) -> list[PartRows]:
    """Step files of one split with the same columns, checked by :func:`_parse`, as one
    frame: their rows written into ``sink``, in file order; what each gave."""
    split = files[0][2]
    heights = np.array([d.height for d in dfs], np.int64)
    df = pl.concat(dfs, rechunk=False) if len(dfs) > 1 else dfs[0]
    n, names, schema = df.height, df.columns, df.schema
    which = np.repeat(np.arange(len(dfs)), heights)  # each row's file
    starts = np.concatenate([[0], np.cumsum(heights)])
    line = np.arange(n, dtype=np.int64) - starts[which] + 1  # its line in its file
    steps_np = df["step"].to_numpy() if "step" in names else np.repeat([f[1] for f in files], heights).astype(np.int64)

    out = pl.col("output")
    inp = pl.col("input")
    scan = df.select(  # the long texts, scanned once, by polars' threads
        prompt=inp.rank("dense").cast(pl.Int64) - 1,  # which distinct input, and where each first is
        first_of_prompt=inp.is_first_distinct(),
        prompt_chars=inp.str.len_chars().cast(pl.Int64),
        response_chars=out.str.len_chars().cast(pl.Int64),
        may_split=out.str.contains("\nassistant\n", literal=True) | out.str.contains("<tool_", literal=True),
        **{f"escape {c}": pl.col(c).str.contains(_NEEDS_ESCAPE).any()
           for c in names if schema[c] == pl.String and c not in ("input", "output")},
    )

    # The text/number split of the other keys, as the line path does per record
    # (polars reads no NaN nor infinity: the numbers are finite).
    comp_names: list[str] = []
    comp_cols: list[np.ndarray] = []
    extra_names: list[str] = []
    extra_texts: list[pl.Expr] = []
    for c in names:
        if c in _CORE and c != "gts":
            continue
        if c != "gts" and schema[c] in _NUMBER:
            comp_names.append(c)
            comp_cols.append(df[c].to_numpy().astype(np.float64))
            continue
        extra_names.append(c)
        extra_texts.append(_json_value(c, schema[c], escape=schema[c] == pl.String and bool(scan[f"escape {c}"][0])))
    success = _success(df["acc"] if "acc" in names else None, n)
    data_source = _plain(df["data_source"]) if schema.get("data_source") == pl.String else pa.nulls(n, pa.string())

    # Groups: one step's trajectories of one file with the same input (the line path: the
    # same group_id); the task is the input's hash, computed once per distinct input.
    prompt = scan["prompt"].to_numpy()
    firsts = np.flatnonzero(scan["first_of_prompt"].to_numpy())
    digest_of = np.empty(len(firsts), object)
    inputs = df["input"].gather(firsts.tolist()).to_list()
    digest_of[prompt[firsts]] = [_task_hash(x) for x in inputs]
    # grouped by digest, as the line path groups by group_id (two inputs of one hash: one group)
    _, codes = np.unique(digest_of, return_inverse=True)
    sample_idx = rank_in_group(which, steps_np, codes[prompt])
    step = pl.lit(_series(steps_np)).cast(pl.String)
    task_id = pl.lit(pl.Series(digest_of.tolist(), dtype=pl.String)).gather(pl.lit(scan["prompt"]))
    ids = df.select(
        task_id=task_id,
        group_id=pl.concat_str(step, pl.lit(":"), task_id),
        traj_id=pl.concat_str(pl.lit(f"{split}/"), step, pl.lit("/"), pl.lit(_series(line)).cast(pl.String)),
        extras=_json_object(extra_names, extra_texts),
    )
    traj_id = _plain(ids["traj_id"])
    extras = _plain(ids["extras"])

    # Turns: only outputs that may hold several turns or tool calls are split (in Python).
    candidates = np.flatnonzero(scan["may_split"].to_numpy())
    texts_of = dict(zip(candidates.tolist(), df["output"].gather(candidates.tolist()).to_list(), strict=True))
    num_turns, tool_calls, invalid, split_rows, extras = split_outputs(n, texts_of, texts_of.__getitem__, extras)

    tab = df.select("input", "output").to_arrow(compat_level=pl.CompatLevel.newest())
    run = pa.repeat(pa.scalar(sink.run_id, pa.string()), n)
    splits = pa.repeat(pa.scalar(split, pa.string()), n)
    steps = pa.array(steps_np, pa.int64())
    nulls_s, nulls_i = pa.nulls(n, pa.string()), pa.nulls(n, pa.int64())
    k = len(comp_names)
    reward_components = pa.MapArray.from_arrays(
        pa.array(np.arange(0, n * k + 1, k, dtype=np.int32) if k else np.zeros(n + 1, np.int32)),
        pa.array(comp_names * n, pa.string()),
        pa.array(np.column_stack(comp_cols).ravel() if k else np.zeros(0), pa.float64()),
    )
    traj = pa.Table.from_arrays([
        run, splits, steps, _plain(ids["group_id"]), pa.array(sample_idx), traj_id, _plain(ids["task_id"]), data_source, nulls_s, pa.array(df["score"].to_numpy().astype(np.float64)),
        reward_components, success, pa.repeat(pa.scalar(True), n), nulls_s, pa.array(num_turns), nulls_i, nulls_i,
        pa.array(tool_calls), pa.array(invalid, pa.int64()), scan["prompt_chars"].to_arrow(),
        scan["response_chars"].to_arrow(),
    ], schema=TRAJECTORIES)

    # Texts at turn_idx -1 for every trajectory; turn 0 rows for the one-turn ones (their
    # action is the response, as a split row's is its segment); multi-turn rows through
    # the sink, as the line path writes them.
    texts = pa.Table.from_arrays([
        run, splits, steps, traj_id, pa.repeat(pa.scalar(-1, pa.int64()), n), tab["input"], tab["output"], nulls_s,
        extras, *[pa.nulls(n, t) for t in _TEXTS_VIEWS.types[9:]],
    ], schema=_TEXTS_VIEWS)
    one = np.ones(n, bool)
    one[list(split_rows)] = False
    k1 = int(one.sum())
    ids1 = traj_id if k1 == n else _plain(ids["traj_id"].filter(_series(one)))
    run1, splits1, steps1 = run[:k1], splits[:k1], pa.array(steps_np[one], pa.int64())
    zeros = pa.repeat(pa.scalar(0, pa.int64()), k1)
    one_f, one_b, one_i = pa.nulls(k1, pa.float64()), pa.nulls(k1, pa.bool_()), pa.nulls(k1, pa.int64())
    turns = pa.Table.from_arrays([run1, splits1, steps1, ids1, zeros, one_f, one_b, one_b, one_i, zeros, one_f, one_i,
                                  pa.nulls(k1, pa.string())],
                                 schema=TURNS)
    action = _TEXTS_VIEWS.get_field_index("action")
    action1 = tab["output"] if k1 == n else df["output"].filter(_series(one)).to_arrow(compat_level=pl.CompatLevel.newest())
    texts0 = pa.Table.from_arrays([run1, splits1, steps1, ids1, zeros,
                                   *[pa.nulls(k1, t) for t in _TEXTS_VIEWS.types[5:action]], action1,
                                   *[pa.nulls(k1, t) for t in _TEXTS_VIEWS.types[action + 1:]]], schema=_TEXTS_VIEWS)

    write_rows(sink, split, traj, texts, turns, texts0, split_rows, steps_np,
               ids["traj_id"].to_list() if split_rows else [])
    # sink.traj_ids (its duplicate check) is left alone: each file's ids are its own.

    turn_rows = one.astype(np.int64)  # per trajectory: its turn rows
    for i, ts in split_rows.items():
        turn_rows[i] = len(ts)
    got = []
    for f in range(len(dfs)):
        a, b = int(starts[f]), int(starts[f + 1])
        t = int(turn_rows[a:b].sum())
        got.append(PartRows(counts={"trajectories": b - a, "turns": t, "texts": b - a + t, "metrics": 0},
                            steps={(split, int(s)) for s in np.unique(steps_np[a:b])}))
    return got


def _series(values: np.ndarray) -> pl.Series:
    """A numpy column as polars, through Arrow (zero-copy; polars' own conversion from
    numpy imports ``numpy.ma``, a thirtieth of a second at start)."""
    return pl.Series(pa.array(values))


def _task_hash(prompt: str) -> str:
    return hashlib.blake2b(prompt.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def _plain(col: pl.Series) -> pa.Array:
    """A polars column of short strings as an Arrow ``string`` array (large-string
    offsets narrowed by numpy: ``Array.cast`` would import pyarrow.compute, a tenth of
    a second at start)."""
    big = col.to_arrow(compat_level=pl.CompatLevel.oldest())
    validity, offsets, data = big.buffers()
    narrow = np.frombuffer(offsets, np.int64, len(big) + 1, big.offset * 8).astype(np.int32)
    return pa.Array.from_buffers(pa.string(), len(big), [validity, pa.py_buffer(narrow), data], big.null_count)


_NEEDS_ESCAPE = r'[\x00-\x1f"\\]'
"""The characters JSON escapes inside a string; orjson writes every other one as it is."""
_ESCAPED = [chr(c) for c in range(0x20)] + ['"', "\\"]
_ESCAPES = [orjson.dumps(c).decode()[1:-1] for c in _ESCAPED]
"""How orjson writes each of them (``\\n``, ``\\u001f``...)."""


_JSON_SCALARS = (pl.String, pl.Boolean, pl.Int64)
"""The types of extras whose JSON text polars writes as orjson does (doubles: the
shortest round-trip forms of the two differ; nested values are refused)."""


def _json_value(name: str, dtype: pl.DataType, *, escape: bool) -> pl.Expr:
    """Each value of a null-free column of one of :data:`_JSON_SCALARS` as orjson writes
    it (``escape``: some value of the text column holds a character to escape)."""
    if dtype == pl.String:
        col = pl.col(name).str.replace_many(_ESCAPED, _ESCAPES) if escape else pl.col(name)
        return pl.concat_str(pl.lit('"'), col, pl.lit('"'))
    return pl.col(name).cast(pl.String)  # true / false, and decimal digits, as JSON writes them


def _json_object(names: list[str], values: list[pl.Expr]) -> pl.Expr:
    """``{"name": value, ...}`` per row, compact as orjson writes it, from JSON texts."""
    if not names:
        return pl.lit(None, pl.String)
    parts: list[pl.Expr] = []
    for i, (k, v) in enumerate(zip(names, values, strict=True)):
        parts += [pl.lit(("{" if i == 0 else ",") + orjson.dumps(k).decode() + ":"), v]
    return pl.concat_str(*parts, pl.lit("}"))


_ACC_TYPES = (pl.String, pl.Boolean, *_NUMBER)
"""The types of ``acc`` the line path maps as :func:`_success` does."""


def _success(acc: pl.Series | None, n: int) -> pa.Array:
    """``acc`` (one of :data:`_ACC_TYPES`) as the line path reads it: a boolean, or 0 / 1;
    anything else unknown."""
    if acc is None or acc.dtype == pl.String:
        return pa.nulls(n, pa.bool_())
    if acc.dtype == pl.Boolean:
        return acc.to_arrow()
    a = acc.to_numpy()
    return pa.array(a == 1, mask=(a != 1) & (a != 0))
