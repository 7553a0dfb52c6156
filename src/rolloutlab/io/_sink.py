"""Column builders: what importers write into, flushed to Parquet in bounded batches.

Importers call :meth:`PartSink.add_trajectory` once per episode with plain values; the
sink checks each value (type, finiteness, graded/reward consistency), appends it to
column lists, and writes a record batch every ``batch_rows`` trajectories, so memory is
bounded by the batch, not by the input.  Building pydantic objects per trajectory would
cost more than parsing the JSON (see ``benchmarks/bench_ingest.py``), so the checks here
mirror :class:`rolloutlab.schema.Trajectory` field by field instead.  ``add_trajectory``'s
keywords are the fields of ``Trajectory`` and :class:`TurnData`'s those of ``Turn`` (but
``turn_idx``, a turn's position): ``tests/test_record_shapes.py`` fails when one side gains a
field the other lacks, or a type the other does not take.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Concatenate, ParamSpec

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from rolloutlab.errors import RecordError
from rolloutlab.schema import (
    FINISH_REASONS,
    METRICS,
    SPLITS,
    TERMINATIONS,
    TEXTS,
    TRAJECTORIES,
    TURNS,
)

_TRAJ_NUM = [f.name for f in TRAJECTORIES]
_TURN_NUM = [f.name for f in TURNS]
_TEXT = [f.name for f in TEXTS]


@dataclass(slots=True)
class TurnData:
    """One turn as importers hand it over (see :class:`rolloutlab.schema.Turn`)."""

    observation: str | None = None
    anchor_obs: str | None = None
    thought: str | None = None
    action: str | None = None
    parsed_action: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    action_valid: bool | None = None
    reward: float | None = None
    done: bool | None = None
    tokens: int | None = None
    entropy: float | None = None
    finish_reason: str | None = None
    token_data: dict[str, Any] | None = None


def as_float(value: Any, name: str) -> float | None:
    """A finite float or None; strings, NaN and inf are refused with the value named."""
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if not isinstance(value, int | float):
        raise RecordError(f"{name} must be a number, got {type(value).__name__} {_short(value)}")
    try:
        x = float(value)
    except OverflowError:  # an integer beyond the range of a double
        raise RecordError(f"{name} is out of range, got {_short(value)}") from None
    if not math.isfinite(x):
        raise RecordError(f"{name} must be finite, got {value!r}")
    return x


def as_int(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or (
        isinstance(value, float) and (not math.isfinite(value) or not value.is_integer())
    ):
        raise RecordError(f"{name} must be a whole number, got {_short(value)}")
    if value < 0:
        raise RecordError(f"{name} must be >= 0, got {_short(value)}")
    if value > _INT64_MAX:  # Arrow's int64 columns would refuse it at the flush, far from the record
        raise RecordError(f"{name} is out of range (over 2**63 - 1), got {_short(value)}")
    return int(value)


_INT64_MAX = 2**63 - 1


def _short(value: Any) -> str:
    r = repr(value)
    return r if len(r) <= 60 else r[:57] + "..."


def to_text(value: Any) -> str | None:
    """Text as stored: strings as they are, anything structured as JSON."""
    if value is None or isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str).decode()
    except TypeError:
        # orjson refuses integers beyond 64 bits, lone surrogates and nesting past 255;
        # the standard library writes the first two (surrogates as \u escapes).
        import json

        try:
            return json.dumps(value, default=str)
        except (RecursionError, ValueError, TypeError) as e:
            raise RecordError(f"value cannot be stored as JSON ({type(e).__name__}: nested too deeply?)") from None


MAX_EMPTY_TURNS = 100_000
"""The most turn rows a bare ``num_turns`` (without the turns) may ask for."""


def _check_empty_turns(n: int) -> int:
    if n > MAX_EMPTY_TURNS:
        raise RecordError(f"num_turns is {n} without any turn data; more than {MAX_EMPTY_TURNS} is not plausible")
    return n


def storable(value: Any) -> Any:
    """``value`` as orjson can write it into the manifest: integers past 64 bits become
    doubles, lone surrogates ``?``; nesting orjson cannot write (past 255 levels) is a
    :class:`RecordError`."""
    try:
        orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str)
        return value
    except TypeError:
        pass
    import json

    try:
        out = orjson.loads(json.dumps(value, default=str, ensure_ascii=False).encode("utf-8", "replace"))
        orjson.dumps(out)
    except (RecursionError, ValueError, TypeError) as e:
        raise RecordError(f"value cannot be stored as JSON ({type(e).__name__}: nested too deeply?)") from None
    return out


def anchor_hash(text: str | None) -> int | None:
    if text is None:
        return None
    import hashlib

    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little", signed=True)


_P = ParamSpec("_P")


def _all_or_nothing(method: Callable[Concatenate[PartSink, _P], None]) -> Callable[Concatenate[PartSink, _P], None]:
    """A record is appended whole or not at all (a bad turn value is found after the
    trajectory's own columns were appended)."""

    @functools.wraps(method)
    def wrapper(self: PartSink, /, *args: _P.args, **kwargs: _P.kwargs) -> None:
        mark = self._mark()
        try:
            method(self, *args, **kwargs)
        except BaseException:
            self._rollback(mark)
            raise

    return wrapper


class PartSink:
    """Collects one part's rows and writes them as Parquet files under ``out_dir``."""

    def __init__(self, run_id: str, out_dir: Path, stem: str, *, batch_rows: int = 2048) -> None:
        self.run_id = run_id
        self.out_dir = out_dir
        self.stem = stem
        self.batch_rows = batch_rows
        self.counts: dict[str, int] = {"trajectories": 0, "turns": 0, "texts": 0, "metrics": 0}
        self.steps: set[tuple[str, int]] = set()
        self.traj_ids: set[str] = set()
        self.models: set[str] = set()
        """The distinct models of the trajectories written (the run's model is derived from them)."""
        self._cols: dict[str, dict[str, list[Any]]] = {
            "trajectories": {c: [] for c in _TRAJ_NUM},
            "turns": {c: [] for c in _TURN_NUM},
            "texts": {c: [] for c in _TEXT},
            "metrics": {c.name: [] for c in METRICS},
        }
        self._schemas = {"trajectories": TRAJECTORIES, "turns": TURNS, "texts": TEXTS, "metrics": METRICS}
        self._writers: dict[str, pq.ParquetWriter] = {}
        """Set up and used in the writer thread only."""
        self._outs: dict[str, pa.NativeFile] = {}
        """Each table's file, created as its first rows are handed over."""
        self._pending: list[tuple[str, Future[None]]] = []
        """Writes handed to the writer threads and not yet seen done: (table, future)."""
        self.files: dict[str, str] = {}

    # -- trajectories --------------------------------------------------------------
    def _mark(self) -> tuple[dict[str, int], dict[str, int]]:
        return {t: len(next(iter(c.values()))) for t, c in self._cols.items()}, dict(self.counts)

    def _rollback(self, mark: tuple[dict[str, int], dict[str, int]]) -> None:
        """Drop the rows a failed record had half appended, so that the columns stay the
        same length and ``on_error="skip"`` can go on with the next record."""
        lengths, counts = mark
        for table, cols in self._cols.items():
            n = lengths[table]
            if len(next(iter(cols.values()))) < n:  # flushed meanwhile: nothing to undo
                return
            for col in cols.values():
                del col[n:]
        self.counts = counts

    @_all_or_nothing
    def add_trajectory(
        self,
        *,
        traj_id: str,
        step: int,
        split: str = "train",
        group_id: str | None = None,
        sample_idx: int | None = None,
        task_id: str | None = None,
        data_source: str | None = None,
        model: str | None = None,
        prompt: str | Sequence[Any] | None = None,
        response: str | None = None,
        reward: Any = None,
        reward_components: Mapping[str, Any] | None = None,
        success: bool | None = None,
        graded: bool | None = None,
        termination: str | None = None,
        error: str | None = None,
        num_turns: int | None = None,
        prompt_tokens: int | None = None,
        response_tokens: int | None = None,
        tool_calls: int | None = None,
        invalid_actions: int | None = None,
        extras: Mapping[str, Any] | None = None,
        turns: Sequence[TurnData] | None = None,
    ) -> None:
        """Append one trajectory; raises :class:`RecordError` naming the bad field.

        ``graded`` defaults to "a reward is present"; an explicit ``graded=False`` with a
        reward keeps the reward out (it is not a real grade) and records it in extras.
        """
        if split not in SPLITS:
            raise RecordError(f"split must be one of {', '.join(SPLITS)}; got {split!r}")
        if termination is not None and termination not in TERMINATIONS:
            raise RecordError(f"termination must be one of {', '.join(TERMINATIONS)}; got {termination!r}")
        if traj_id in self.traj_ids:
            raise RecordError(f"duplicate trajectory id {traj_id!r}")
        step_i = as_int(step, "step")
        assert step_i is not None
        r = as_float(reward, "reward")
        if graded is None:
            graded = r is not None
        if not graded and r is not None:
            extras = {**(extras or {}), "reward_when_ungraded": r}
            r = None
        if graded and r is None:
            raise RecordError("reward is missing (a trajectory without a grade must be marked ungraded)")
        comps: list[tuple[str, float]] = []
        for k, v in (reward_components or {}).items():
            x = as_float(v, f"reward component {k!r}")
            if x is not None:
                comps.append((str(k), x))
        turns = turns or []
        n_turns = as_int(num_turns, "num_turns")
        if n_turns is None and turns:
            n_turns = len(turns)
        elif n_turns is not None and turns and n_turns != len(turns):
            raise RecordError(f"num_turns is {n_turns} but {len(turns)} turns were given")
        # num_turns = n means n turn rows (docs/store.md § Turn rows): a count without the
        # turns' content gives n empty rows.
        rows = turns if turns or not n_turns else [TurnData() for _ in range(_check_empty_turns(n_turns))]
        n_tools = as_int(tool_calls, "tool_calls")
        if n_tools is None and turns:
            n_tools = sum(len(t.tool_calls) for t in turns)
        n_invalid = as_int(invalid_actions, "invalid_actions")
        if n_invalid is None and turns and any(t.action_valid is not None for t in turns):
            n_invalid = sum(1 for t in turns if t.action_valid is False)
        resp_tokens = as_int(response_tokens, "response_tokens")
        if resp_tokens is None and turns and all(t.tokens is not None for t in turns):
            resp_tokens = sum(t.tokens or 0 for t in turns)
        prompt_text = to_text(prompt)

        c = self._cols["trajectories"]
        c["run_id"].append(self.run_id)
        c["split"].append(split)
        c["step"].append(step_i)
        c["group_id"].append(group_id)
        c["sample_idx"].append(sample_idx)
        c["traj_id"].append(traj_id)
        c["task_id"].append(task_id)
        c["data_source"].append(data_source)
        c["model"].append(model)
        if model is not None:
            self.models.add(model)
        c["reward"].append(r)
        c["reward_components"].append(comps)
        c["success"].append(success)
        c["graded"].append(bool(graded))
        c["termination"].append(termination)
        c["num_turns"].append(n_turns)
        c["prompt_tokens"].append(as_int(prompt_tokens, "prompt_tokens"))
        c["response_tokens"].append(resp_tokens)
        c["tool_calls"].append(n_tools)
        c["invalid_actions"].append(n_invalid)
        c["prompt_chars"].append(len(prompt_text) if prompt_text is not None else None)
        c["response_chars"].append(len(response) if response is not None else None)
        self._text(split, step_i, traj_id, -1, prompt=prompt_text, response=response, error=error,
                   extras=to_text(dict(extras)) if extras else None)
        for i, t in enumerate(rows):
            self._turn(split, step_i, traj_id, i, t)
        self.traj_ids.add(traj_id)
        self.steps.add((split, step_i))
        self.counts["trajectories"] += 1
        if len(c["traj_id"]) >= self.batch_rows:
            self.flush()

    BATCH_COLUMNS = frozenset({"traj_id", "step", "split", "group_id", "sample_idx", "task_id", "data_source",
                               "model", "prompt", "response", "reward", "success", "reward_components", "extras"})
    """The fields :meth:`add_trajectories` takes as columns (each a field of ``Trajectory``)."""

    @_all_or_nothing
    def add_trajectories(self, lines: Sequence[int], columns: Mapping[str, Sequence[Any]],
                         turns: Mapping[int, Sequence[TurnData]] | None = None) -> None:
        """Append many trajectories at once, column by column.

        The fast path for dump formats with one trajectory per line (verl): the same
        checks as :meth:`add_trajectory`, done per column.  ``columns`` holds any of
        :attr:`BATCH_COLUMNS` (``traj_id`` and ``step`` required; ``reward_components`` and
        ``extras`` one dict per row), a name outside them is refused (it would be dropped);
        ``lines`` the source line of each row, so that an error still names its line.  ``turns`` maps a row index to its turns; a row without an entry is one
        turn whose action is the whole response (docs/store.md § Turn rows).  ``num_turns`` is counted
        here, never taken from the caller.
        """
        if not columns.keys() <= self.BATCH_COLUMNS:
            raise ValueError(f"add_trajectories takes no column {sorted(columns.keys() - self.BATCH_COLUMNS)}; "
                             f"it takes {sorted(self.BATCH_COLUMNS)}")
        n = len(lines)
        rewards = list(columns.get("reward", [None] * n))
        kinds = set(map(type, rewards))
        if not kinds <= {float, int, type(None)}:
            for i, v in enumerate(rewards):
                try:
                    as_float(v, "reward")
                except RecordError as e:
                    raise RecordError(e.message, line=lines[i]) from None
        arr = np.array([np.nan if v is None else v for v in rewards], dtype=np.float64)
        bad = ~np.isfinite(arr) & np.array([v is not None for v in rewards])
        if bad.any():
            i = int(np.argmax(bad))
            raise RecordError(f"reward must be finite, got {rewards[i]!r}", line=lines[i])
        if bool in kinds or int in kinds:  # Arrow refuses ints past 2**53 in a double column
            rewards = [float(v) if isinstance(v, int) else v for v in rewards]
        steps = list(columns["step"])
        if set(map(type, steps)) != {int} or min(steps) < 0:
            for i, v in enumerate(steps):
                try:
                    as_int(v, "step")
                except RecordError as e:
                    raise RecordError(e.message, line=lines[i]) from None
        splits = list(columns.get("split", ["train"] * n))
        for sp in set(splits) - set(SPLITS):
            raise RecordError(f"split must be one of {', '.join(SPLITS)}; got {sp!r}", line=lines[splits.index(sp)])
        ids = list(columns["traj_id"])
        fresh = set(ids)
        if len(fresh) != n or not fresh.isdisjoint(self.traj_ids):
            seen: set[str] = set(self.traj_ids)
            for i, t in enumerate(ids):
                if t in seen:
                    raise RecordError(f"duplicate trajectory id {t!r}", line=lines[i])
                seen.add(t)
        comps_in = columns.get("reward_components")
        comps: list[list[tuple[str, float]]] = []
        for i, d in enumerate(comps_in or [None] * n):
            row: list[tuple[str, float]] = []
            for k, v in (d or {}).items():
                try:
                    x = as_float(v, f"reward component {k!r}")
                except RecordError as e:
                    raise RecordError(e.message, line=lines[i]) from None
                if x is not None:
                    row.append((str(k), x))
            comps.append(row)
        prompts = [to_text(p) for p in columns.get("prompt", [None] * n)]
        responses = list(columns.get("response", [None] * n))
        none = [None] * n
        c = self._cols["trajectories"]
        c["run_id"].extend([self.run_id] * n)
        c["split"].extend(splits)
        c["step"].extend(steps)
        turns = turns or {}
        for name in ("group_id", "sample_idx", "task_id", "data_source", "model", "success"):
            c[name].extend(columns.get(name, none))
        self.models.update(m for m in columns.get("model", ()) if m is not None)
        c["num_turns"].extend([len(turns[i]) if i in turns else 1 for i in range(n)])
        c["traj_id"].extend(ids)
        c["reward"].extend(rewards)
        c["reward_components"].extend(comps)
        c["graded"].extend([v is not None for v in rewards])
        for name in ("termination", "prompt_tokens", "response_tokens"):
            c[name].extend(none)
        # The calls the turns hold, as add_trajectory counts them (a single turn: none).
        n_calls = {i: sum(len(t.tool_calls) for t in ts) for i, ts in turns.items()}
        c["tool_calls"].extend([n_calls.get(i, 0) for i in range(n)])
        c["invalid_actions"].extend([sum(t.action_valid is False for t in turns[i])
                                     if i in turns and any(t.action_valid is not None for t in turns[i]) else None
                                     for i in range(n)])
        c["prompt_chars"].extend([None if p is None else len(p) for p in prompts])
        c["response_chars"].extend([None if r is None else len(r) for r in responses])
        tx = self._cols["texts"]
        tx["run_id"].extend([self.run_id] * n)
        tx["split"].extend(splits)
        tx["step"].extend(steps)
        tx["traj_id"].extend(ids)
        tx["turn_idx"].extend([-1] * n)
        tx["prompt"].extend(prompts)
        tx["response"].extend(responses)
        tx["extras"].extend([to_text(e) if e else None for e in columns.get("extras", none)])
        for name in ("error", "observation", "anchor_obs", "thought", "action", "parsed_action", "tool_calls",
                     "token_data"):
            tx[name].extend(none)
        self.counts["texts"] += n
        for i, ts in turns.items():
            for j, t in enumerate(ts):
                self._turn(splits[i], steps[i], ids[i], j, t)
        one = [i for i in range(n) if i not in turns] if turns else range(n)
        self._single_turns([splits[i] for i in one], [steps[i] for i in one], [ids[i] for i in one],
                           [responses[i] for i in one])
        self.traj_ids.update(ids)
        self.steps.update(zip(splits, steps, strict=True))
        self.counts["trajectories"] += n
        if len(c["traj_id"]) >= self.batch_rows:
            self.flush()

    def _single_turns(self, splits: list[str], steps: list[int], ids: list[str], actions: list[Any]) -> None:
        """Turn 0 of single-turn trajectories whose action is their response: numbers
        unknown, no tool calls, the action text the response (as a multi-turn row holds
        its segment), the other texts null."""
        k = len(ids)
        if not k:
            return
        none = [None] * k
        c = self._cols["turns"]
        for name, values in (("run_id", [self.run_id] * k), ("split", splits), ("step", steps), ("traj_id", ids),
                             ("turn_idx", [0] * k), ("num_tool_calls", [0] * k)):
            c[name].extend(values)
        for name in ("reward", "action_valid", "done", "tokens", "entropy", "anchor_hash", "finish_reason"):
            c[name].extend(none)
        tx = self._cols["texts"]
        for name, values in (("run_id", [self.run_id] * k), ("split", splits), ("step", steps), ("traj_id", ids),
                             ("turn_idx", [0] * k)):
            tx[name].extend(values)
        for name in _TEXT[5:]:
            tx[name].extend(actions if name == "action" else none)
        self.counts["turns"] += k
        self.counts["texts"] += k

    def _turn(self, split: str, step: int, traj_id: str, idx: int, t: TurnData) -> None:
        c = self._cols["turns"]
        c["run_id"].append(self.run_id)
        c["split"].append(split)
        c["step"].append(step)
        c["traj_id"].append(traj_id)
        c["turn_idx"].append(idx)
        c["reward"].append(as_float(t.reward, f"turn {idx} reward"))
        c["action_valid"].append(t.action_valid)
        c["done"].append(t.done)
        c["tokens"].append(as_int(t.tokens, f"turn {idx} tokens"))
        c["num_tool_calls"].append(len(t.tool_calls))
        c["entropy"].append(as_float(t.entropy, f"turn {idx} entropy"))
        c["anchor_hash"].append(anchor_hash(t.anchor_obs))
        if t.finish_reason is not None and t.finish_reason not in FINISH_REASONS:
            raise RecordError(f"turn {idx} finish_reason must be one of {', '.join(FINISH_REASONS)}; "
                              f"got {_short(t.finish_reason)}")
        c["finish_reason"].append(t.finish_reason)
        self._text(split, step, traj_id, idx, observation=t.observation, anchor_obs=t.anchor_obs,
                   thought=t.thought, action=t.action, parsed_action=t.parsed_action,
                   tool_calls=to_text(t.tool_calls) if t.tool_calls else None,
                   token_data=to_text(t.token_data) if t.token_data else None)
        self.counts["turns"] += 1

    def _text(self, split: str, step: int, traj_id: str, turn_idx: int, **texts: str | None) -> None:
        c = self._cols["texts"]
        c["run_id"].append(self.run_id)
        c["split"].append(split)
        c["step"].append(step)
        c["traj_id"].append(traj_id)
        c["turn_idx"].append(turn_idx)
        for name in _TEXT[5:]:
            c[name].append(texts.get(name))
        self.counts["texts"] += 1

    # -- metrics -------------------------------------------------------------------
    def add_metric(self, step: int, name: str, value: Any, *, split: str = "train") -> None:
        """One trainer scalar; non-numeric values are refused, NaN/inf kept as null."""
        if value is None:
            return
        if isinstance(value, bool):
            value = float(value)
        if not isinstance(value, int | float):
            raise RecordError(f"metric {name!r} must be a number, got {_short(value)}")
        x = float(value)
        m = self._cols["metrics"]
        m["run_id"].append(self.run_id)
        m["split"].append(split)
        m["step"].append(as_int(step, "step"))
        m["name"].append(name)
        m["value"].append(x if math.isfinite(x) else None)
        self.counts["metrics"] += 1

    # -- output --------------------------------------------------------------------
    def flush(self) -> None:
        """Convert the buffered rows to Arrow and hand them to the writer thread.

        Parquet encoding and compression release the GIL, so they overlap with parsing
        the next lines; the single writer thread keeps batches in order.
        """
        for table, cols in self._cols.items():
            n = len(next(iter(cols.values())))
            if n == 0:
                continue
            batch = pa.Table.from_pydict(cols, schema=self._schemas[table])
            self._cols[table] = {k: [] for k in cols}
            self._write(table, batch)
        self._check_pending()

    def add_arrow(self, table: str, rows: pa.Table) -> None:
        """Append rows already built as Arrow (the native-reader fast paths,
        :mod:`rolloutlab.io._ndjson`, :mod:`rolloutlab.io._fastpath`): written to the same
        file as the rows added one by one.  ``rows`` must have the table's schema, but that
        the texts' columns may be polars' ``string_view`` (written as they are: the Parquet
        file is the same); counts are the caller's."""
        if not (_as_plain(rows.schema) if table == "texts" else rows.schema).equals(self._schemas[table]):
            raise ValueError(f"{table}: rows do not have the table's schema:\n{rows.schema}")
        if rows.num_rows:
            self._write(table, rows)
            self._check_pending()

    def _write(self, table: str, batch: pa.Table) -> None:
        """Hand ``batch`` to the writer thread.  The table's file is created here, the
        Parquet writer on it in the writer thread (setting one up costs about half a
        millisecond, and a part opens three)."""
        out = self._outs.get(table)
        if out is None:
            rel = f"{table}/{self.stem}.parquet"
            try:  # the folder exists but for the first part (a mkdir per file is slow on some file systems)
                out = pa.OSFile(str(self.out_dir / rel), "wb")
            except FileNotFoundError:
                (self.out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
                out = pa.OSFile(str(self.out_dir / rel), "wb")
            self._outs[table] = out
            self.files[table] = rel
        self._pending.append((table, _writer_pool(table).submit(self._write_batch, self._writers, table, out, batch)))

    @staticmethod
    def _write_batch(writers: dict[str, pq.ParquetWriter], table: str, out: pa.NativeFile, batch: pa.Table) -> None:
        """In the writer thread: set up the table's writer with the first batch's schema,
        cast later batches to it, write."""
        w = writers.get(table)
        if w is None:
            # lz4: half the cost of zstd at ingest (benchmarks/bench_ingest.py); statistics
            # and dictionaries only where they pay: min/max of long texts help no query, and
            # trying a dictionary on them costs about a tenth of the texts' writing time.
            # Texts are written without pyarrow's schema, so that polars' string_view reads
            # back as the plain string every texts file holds (the Parquet types are the same).
            w = writers[table] = pq.ParquetWriter(out, batch.schema, compression="lz4", write_statistics=_STATS[table],
                                                  use_dictionary=_DICT[table], store_schema=table != "texts")
        elif not batch.schema.equals(w.schema):
            batch = batch.cast(w.schema)  # rows added one by one after polars' (string -> string_view)
        w.write_table(batch)

    def _check_pending(self, *, wait: bool = False) -> None:
        keep = []
        for table, f in self._pending:
            if wait or f.done():
                f.result()  # re-raises a write error here, in the reading thread
            else:
                keep.append((table, f))
        self._pending = keep

    def close(self, *, wait: bool = True) -> Future[None] | None:
        """Write what is buffered and close the files.

        ``wait=False`` leaves the last writes and the closing to the writer threads and
        returns a future, so that the caller reads the next part meanwhile; the files
        are complete (and a write error is raised) once ``future.result()`` returns."""
        self.flush()
        writers, outs, pending = self._writers, self._outs, self._pending  # the writes pending fill `writers`
        self._writers, self._outs, self._pending = {}, {}, []

        def finish(tables: list[str]) -> None:  # in a writer thread, after its pending writes (in order)
            try:
                for table, f in pending:
                    if table in tables:
                        f.result()
            finally:
                for table in tables:
                    if table in writers:
                        writers[table].close()
                    outs[table].close()

        by_pool: dict[ThreadPoolExecutor, list[str]] = {}
        for table in outs:
            by_pool.setdefault(_writer_pool(table), []).append(table)
        closing = _all_of([pool.submit(finish, tables) for pool, tables in by_pool.items()])
        if wait:
            closing.result()
            return None
        return closing

    def abort(self) -> None:
        for _, f in self._pending:
            with contextlib.suppress(Exception):
                f.result()
        self._pending = []
        for w in self._writers.values():
            with contextlib.suppress(OSError):
                w.close()
        self._writers.clear()
        for out in self._outs.values():
            with contextlib.suppress(OSError):
                out.close()
        self._outs.clear()
        for rel in self.files.values():
            (self.out_dir / rel).unlink(missing_ok=True)
        self.files.clear()


def _as_plain(schema: pa.Schema) -> pa.Schema:
    """``schema`` with polars' ``string_view`` columns as ``string``."""
    return pa.schema([f.with_type(pa.string()) if f.type == pa.string_view() else f for f in schema])


_STATS: dict[str, bool | list[str]] = {
    "trajectories": True,
    "turns": True,
    "metrics": True,
    "texts": ["run_id", "split", "step", "traj_id", "turn_idx"],
}
_DICT: dict[str, bool | list[str]] = {
    "trajectories": True,
    "turns": True,
    "metrics": True,
    "texts": ["run_id", "split", "step", "turn_idx"],
}
_POOLS: dict[bool, ThreadPoolExecutor] = {}


def _writer_pool(table: str) -> ThreadPoolExecutor:
    """The writer thread of ``table``'s files: one for the texts (most of the bytes), one
    for the other tables; each writes its files' batches in order."""
    texts = table == "texts"
    pool = _POOLS.get(texts)
    if pool is None:
        pool = _POOLS[texts] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rolloutlab-parquet")
    return pool


def _all_of(futures: list[Future[None]]) -> Future[None]:
    """A future done when all of ``futures`` are, with the first one's error."""
    out: Future[None] = Future()
    left = [len(futures)]

    def one_done(_: Future[None]) -> None:
        left[0] -= 1
        if left[0] == 0:
            err = next((e for e in (f.exception() for f in futures) if e is not None), None)
            if err is not None:
                out.set_exception(err)
            else:
                out.set_result(None)

    if not futures:
        out.set_result(None)
    for f in futures:
        f.add_done_callback(one_done)
    return out


def drain_writes() -> None:
    """Wait until the writer threads have done every write handed to them so far (their
    errors are the parts' to report)."""
    for pool in list(_POOLS.values()):
        pool.submit(lambda: None).result()
