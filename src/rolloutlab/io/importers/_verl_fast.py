"""verl step files through pyarrow's JSON reader (:mod:`rolloutlab.io._fastpath`).

Used when polars (:mod:`._verl_polars`, faster) is not installed.

Gives, row for row, what :meth:`VerlImporter._read_dump` gives line by line (the tests
ingest the same files both ways and compare every table): the same trajectory ids,
group and task hashes, reward components in record order, ``extras`` texts, success,
turn rows and turn texts.  Numbers, hashes, ids and the text/number split are Arrow
compute over whole columns; only outputs that may hold several turns or Hermes tool
calls (a substring test) go through :func:`split_turns` in Python.

Refused (False, nothing written), so that the line reader reads the file and names the
line at fault: anything :func:`read_ndjson` refuses; rows that are not the file's lines
(blank lines, two records on a line); a column with nulls (missing and null cannot be
told apart); ``input``/``output`` not text, ``score`` not a number or not finite,
``step`` not a whole number >= 0; extras that are not text, booleans or whole numbers
(nested values, or doubles in ``gts``); records whose keys are not in one order;
``acc``/``data_source`` of other types than the line path maps the same way; a key
``final_observation`` (the line path writes the environment's last reply over it).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa

from rolloutlab.io._fastpath import (
    json_objects,
    json_values,
    lines_hold,
    rank_in_group,
    read_ndjson,
    rows_containing,
)
from rolloutlab.io._ndjson import polars_module
from rolloutlab.io._sink import PartSink
from rolloutlab.io.importers._verl_turns import split_outputs, write_rows
from rolloutlab.schema import TEXTS, TRAJECTORIES, TURNS

_CORE = ("input", "output", "gts", "score", "step", "reward")
_NUMBER = (pa.int64(), pa.float64())


def read_dump_native(path: Path, file_step: int, split: str, sink: PartSink) -> bool:
    """Read a well-formed verl step file into ``sink``; False (nothing written) when the
    native reader cannot be sure to give the line reader's result.  Through polars when
    it is installed (the ``fast`` extra: :mod:`._verl_polars`), else pyarrow's reader."""
    if polars_module() is not None:
        from rolloutlab.io.importers._verl_polars import read_dump_polars

        return read_dump_polars(path, file_step, split, sink)
    return read_dump_pyarrow(path, file_step, split, sink)


def read_dump_pyarrow(path: Path, file_step: int, split: str, sink: PartSink) -> bool:
    """:func:`read_dump_native` through pyarrow's JSON reader."""
    import pyarrow.compute as pc


    got = read_ndjson(path)
    if got is None:
        return False
    data, table = got
    n = table.num_rows
    names = table.column_names
    if n == 0 or not {"input", "output", "score"} <= set(names) or "final_observation" in names:
        return False  # (the line path would write the environment's last reply over that key)
    if any(table.column(c).null_count for c in names):
        return False
    inp, out, score = table.column("input"), table.column("output"), table.column("score")
    if inp.type != pa.string() or out.type != pa.string() or score.type not in _NUMBER:
        return False
    reward = pc.cast(score, pa.float64(), safe=False).combine_chunks()
    if not pc.all(pc.is_finite(reward)).as_py():
        return False
    if "step" in names:
        if table.column("step").type != pa.int64():
            return False
        steps = table.column("step").combine_chunks()
        if pc.min(steps).as_py() < 0:
            return False
    else:
        steps = pa.array(np.full(n, file_step, np.int64))
    steps_np = steps.to_numpy()

    # The text/number split of the other keys, as the line path does per record.
    comp_names: list[str] = []
    comp_cols: list[pa.Array] = []
    extra_names: list[str] = []
    extra_vals: list[pa.Array] = []
    for c in names:
        col = table.column(c)
        if c in _CORE and c != "gts":
            continue
        if c != "gts" and col.type in _NUMBER:
            vals = pc.cast(col, pa.float64(), safe=False).combine_chunks()
            if not pc.all(pc.is_finite(vals)).as_py():
                return False
            comp_names.append(c)
            comp_cols.append(vals)
            continue
        text = json_values(col)
        if text is None:
            return False
        extra_names.append(c)
        extra_vals.append(text)
    if not lines_hold(data, n, [comp_names, extra_names]):
        return False

    success = _success(table.column("acc").combine_chunks() if "acc" in names else None, n)
    if success is None:
        return False
    ds_col = table.column("data_source") if "data_source" in names else None
    data_source = ds_col.combine_chunks() if ds_col is not None and ds_col.type == pa.string() else pa.nulls(n, pa.string())

    # Groups: one step's trajectories with the same input; the task is the input's hash.
    enc = pc.dictionary_encode(inp).combine_chunks()
    digests = [hashlib.blake2b(p.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
               for p in enc.dictionary.to_pylist()]
    codes = enc.indices.to_numpy(zero_copy_only=False)
    task_id = pa.array(digests, pa.string()).take(enc.indices)
    prompt_chars = pc.utf8_length(enc.dictionary).cast(pa.int64()).take(enc.indices)  # each distinct input once
    step_str = pc.cast(steps, pa.string())
    group_id = pc.binary_join_element_wise(step_str, task_id, ":")
    sample_idx = pa.array(rank_in_group(steps_np, codes))
    line_no = pa.array(np.arange(1, n + 1, dtype=np.int64))
    traj_id = pc.binary_join_element_wise(split, step_str, pc.cast(line_no, pa.string()), "/")
    extras = json_objects(extra_names, extra_vals, n)

    # Turns: only outputs that may hold several turns or tool calls are split (in Python).
    out_arr = out.combine_chunks()
    num_turns, tool_calls, invalid, split_rows, extras = split_outputs(
        n, rows_containing(out_arr, ("\nassistant\n", "<tool_")), lambda i: out_arr[i].as_py(), extras)

    run = pa.array([sink.run_id] * n, pa.string()) if n else pa.nulls(0, pa.string())
    splits = pa.array([split] * n, pa.string())
    nulls_s, nulls_i = pa.nulls(n, pa.string()), pa.nulls(n, pa.int64())
    if comp_names:
        k = len(comp_names)
        comps = pa.MapArray.from_arrays(
            pa.array(np.arange(0, n * k + 1, k, dtype=np.int32)),
            pa.array(comp_names * n, pa.string()),
            pa.array(np.column_stack([c.to_numpy() for c in comp_cols]).ravel(), pa.float64()),
        )
    else:
        comps = pa.MapArray.from_arrays(pa.array(np.zeros(n + 1, np.int32)), pa.array([], pa.string()),
                                        pa.array([], pa.float64()))
    traj = pa.Table.from_arrays([
        run, splits, steps, group_id, sample_idx, traj_id, task_id, data_source, nulls_s, reward,
        comps, success, pa.array(np.ones(n, bool)), nulls_s, pa.array(num_turns), nulls_i, nulls_i,
        pa.array(tool_calls), pa.array(invalid, pa.int64()), prompt_chars,
        pc.utf8_length(out).cast(pa.int64()).combine_chunks(),
    ], schema=TRAJECTORIES)

    # Texts at turn_idx -1 for every trajectory; turn 0 rows for the one-turn ones (their
    # action is the response, as a split row's is its segment); multi-turn rows through
    # the sink, as the line path writes them.
    minus1 = pa.array(np.full(n, -1, np.int64))
    texts = pa.Table.from_arrays([
        run, splits, steps, traj_id, minus1, inp.combine_chunks(), out.combine_chunks(), nulls_s, extras,
        *[nulls_s] * (len(TEXTS) - 9),
    ], schema=TEXTS)
    single = np.ones(n, bool)
    single[list(split_rows)] = False
    sel = pa.array(single)
    k1 = int(single.sum())
    one_s, one_i, one_f, one_b = pa.nulls(k1, pa.string()), pa.nulls(k1, pa.int64()), pa.nulls(k1, pa.float64()), pa.nulls(k1, pa.bool_())
    zeros = pa.array(np.zeros(k1, np.int64))
    ids1, steps1, splits1, run1 = traj_id.filter(sel), steps.filter(sel), splits.filter(sel), run.filter(sel)
    turns = pa.Table.from_arrays([run1, splits1, steps1, ids1, zeros, one_f, one_b, one_b, one_i, zeros, one_f, one_i,
                                  pa.nulls(k1, pa.string())],
                                 schema=TURNS)
    action = TEXTS.get_field_index("action")
    texts0 = pa.Table.from_arrays([run1, splits1, steps1, ids1, zeros, *[one_s] * (action - 5), out_arr.filter(sel),
                                   *[one_s] * (len(TEXTS) - action - 1)], schema=TEXTS)

    write_rows(sink, split, traj, texts, turns, texts0, split_rows, steps_np, traj_id.to_pylist() if split_rows else [])
    # sink.traj_ids (its duplicate check) is left alone: this part is this file alone.
    return True



def _success(acc: pa.Array | None, n: int) -> pa.Array | None:
    """``acc`` as the line path reads it: a boolean, or 0 / 1; anything else unknown."""
    import pyarrow.compute as pc

    if acc is None or acc.type == pa.string():
        return pa.nulls(n, pa.bool_())
    if acc.type == pa.bool_():
        return acc
    if acc.type in _NUMBER:
        one, zero = pc.equal(acc, 1), pc.equal(acc, 0)
        return pc.if_else(one, True, pc.if_else(zero, False, pa.scalar(None, pa.bool_())))
    return None
