"""Every logged scalar of a run: the index the scalar panel lists, and the series it draws.

The ``metrics`` table (long format: run, split, step, name, value) holds every scalar a
run logged — its own trainer's, or TensorBoard's, W&B's, verl's.  The panel lists them
grouped as TensorBoard and W&B group them: by the prefix before the first ``/``
(``actor/entropy`` is in ``actor``; a name without ``/`` is in no group, shown as
``(ungrouped)``).  The charts of a group are drawn only when it is opened, from one
JSON endpoint (:func:`series`) answering one group for several runs at once.

Values are read per request from the run's metric files (the manifest's list, never a
glob), like the analysis reads them: a name logged twice at one step (a restarted run)
counts once, with the mean of its values (:mod:`rolloutlab.analysis._data` does the
same); a NaN or infinite value is stored as null and stays a gap.

X axes: ``step`` always.  ``time`` is the run's wall-clock time, the cumulative sum of
its logged step duration (the first of ``HEALTH_SCALARS["step_time"]`` the run has — the
store keeps no timestamps); ``tokens`` the cumulative tokens processed: a counter that is
already cumulative when logged (TRL's ``num_tokens``, the HF Trainer's
``num_input_tokens_seen``, with or without W&B's ``train/`` prefix), else the running sum
of verl's per-step ``perf/total_num_tokens``, else of the prompt and response tokens of
the run's trajectories.  Both are cumulative over the steps that have them: a step that logged no
duration (or no tokens) has no x there and its points are left out, which the payload
says.  A run without the source of an axis is left out of that axis, with the reason.

Smoothing is TensorBoard's debiased exponential moving average (:func:`debiased_ema`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from rolloutlab.analysis import HEALTH_SCALARS
from rolloutlab.viewer._live import StoreView, table_files
from rolloutlab.viewer._queries import BadRequest

XAxis = Literal["step", "time", "tokens"]
X_AXES: tuple[XAxis, ...] = ("step", "time", "tokens")
TIME_METRICS: tuple[str, ...] = HEALTH_SCALARS["step_time"]
"""Per-step durations (seconds) whose running sum is the ``time`` axis, first found wins."""
TOKEN_COUNTERS: tuple[str, ...] = ("num_tokens", "train/num_tokens", "num_input_tokens_seen",
                                   "train/num_input_tokens_seen")
"""Cumulative token counters (TRL, the HF Trainer; ``train/`` as W&B exports them): the
``tokens`` axis as logged, first found wins."""
TOKEN_METRICS: tuple[str, ...] = ("perf/total_num_tokens",)
"""Per-step token counts (verl) whose running sum is the ``tokens`` axis."""
MAX_SMOOTHING = 0.999
"""TensorBoard's slider stops here too: at 1 the average never moves off its start."""
UNGROUPED = ""
"""The group of names without a ``/`` (the panel shows it as "(ungrouped)")."""
METRICS_IN = "read_parquet(?, union_by_name = true)"


def group_of(name: str) -> str:
    """TensorBoard's and W&B's section: the prefix before the first ``/``."""
    return name.split("/", 1)[0] if "/" in name else UNGROUPED


def debiased_ema(values: Sequence[float | None], weight: float) -> list[float | None]:
    """TensorBoard's smoothing: an exponential moving average started at 0 and divided by
    ``1 − weight^n`` (n = values averaged so far), so the first points are not pulled to 0.

    As in TensorBoard (``classicSmoothing``, tensorboard/webapp/widgets/line_chart_v2/lib/
    data_transformer.ts): a missing value stays missing and is not averaged in, and a
    constant series is returned as it is."""
    if not 0 <= weight <= MAX_SMOOTHING:
        raise BadRequest(f"smoothing must be between 0 and {MAX_SMOOTHING}, got {weight}")
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if weight == 0 or not finite or all(v == finite[0] for v in finite):
        return list(values)
    last, n, out = 0.0, 0, []
    for v in values:
        if v is None or not math.isfinite(v):
            out.append(v)
            continue
        last = last * weight + (1 - weight) * v
        n += 1
        out.append(last / (1 - weight**n))
    return out


@dataclass
class Axis:
    """One x axis for one run: where its values come from, or why it has none."""

    available: bool
    source: str
    """``step``; the metric summed (``cumulative timing/step_s``); or why there is none."""
    values: dict[int, float] = field(default_factory=dict, repr=False)
    """step → x (empty for ``step``: x is the step)."""


@dataclass
class RunScalars:
    """What the panel knows of one run's scalars in one split."""

    run: str
    name: str
    names: list[str]
    axes: dict[str, Axis]


def metric_files(view: StoreView, run_id: str) -> list[str]:
    """The run's committed ``metrics`` files (the manifest's list, inside the store)."""
    parts = view.entry(run_id)["parts"].values()
    return [path for _, path, _ in table_files(view.path, parts, "metrics") if path]


def metric_splits(view: StoreView, run_id: str) -> dict[str, int]:
    """split → number of distinct metric names the run logged in it."""
    files = metric_files(view, run_id)
    if not files:
        return {}
    rows = view.query(f"SELECT split, count(DISTINCT name) AS n FROM {METRICS_IN} WHERE run_id = ? "
                      "GROUP BY split ORDER BY split", [files, run_id])
    return {r["split"]: r["n"] for r in rows}


def _names(view: StoreView, run_id: str, split: str, files: list[str]) -> list[str]:
    if not files:
        return []
    rows = view.query(f"SELECT DISTINCT name FROM {METRICS_IN} WHERE run_id = ? AND split = ? ORDER BY name",
                      [files, run_id, split])
    return [r["name"] for r in rows]


def _cumulative(rows: list[dict[str, Any]]) -> dict[int, float]:
    total, out = 0.0, {}
    for r in rows:
        v = r["value"]
        if v is None or not math.isfinite(v):
            continue
        total += v
        out[int(r["step"])] = total
    return out


def _as_logged(rows: list[dict[str, Any]]) -> dict[int, float]:
    return {int(r["step"]): float(r["value"]) for r in rows if r["value"] is not None and math.isfinite(r["value"])}


def _metric_axis(view: StoreView, run_id: str, split: str, files: list[str], names: list[str],
                 candidates: tuple[str, ...], what: str, *, cumulative: bool = False) -> Axis | None:
    """The axis from the first of ``candidates`` the run logged: its running sum, or its
    values as logged when ``cumulative`` (the metric is a counter already)."""
    found = next((c for c in candidates if c in names), None)
    if found is None:
        return None
    rows = view.query(f"SELECT step, avg(value) AS value FROM {METRICS_IN} WHERE run_id = ? AND split = ? "
                      "AND name = ? GROUP BY step ORDER BY step", [files, run_id, split, found])
    values = _as_logged(rows) if cumulative else _cumulative(rows)
    if not values:
        return None
    return Axis(True, f"{found} as logged ({what})" if cumulative else f"cumulative {found} ({what})", values)


def _time_axis(view: StoreView, run_id: str, split: str, files: list[str], names: list[str]) -> Axis:
    a = _metric_axis(view, run_id, split, files, names, TIME_METRICS, "seconds")
    return a or Axis(False, "no step duration logged (" + ", ".join(TIME_METRICS) + "); the store keeps no "
                     "timestamps")


def _token_axis(view: StoreView, run_id: str, split: str, files: list[str], names: list[str]) -> Axis:
    a = (_metric_axis(view, run_id, split, files, names, TOKEN_COUNTERS, "tokens", cumulative=True)
         or _metric_axis(view, run_id, split, files, names, TOKEN_METRICS, "tokens"))
    if a is not None:
        return a
    rows = view.query(
        "SELECT step, sum(coalesce(prompt_tokens, 0) + coalesce(response_tokens, 0)) AS value FROM trajectories "
        "WHERE run_id = ? AND split = 'train' GROUP BY step "
        "HAVING count(prompt_tokens) + count(response_tokens) > 0 ORDER BY step", [run_id])
    values = _cumulative(rows)
    if values:
        return Axis(True, "cumulative prompt + response tokens of the run's train trajectories", values)
    return Axis(False, "no token counts: none of " + ", ".join(TOKEN_COUNTERS + TOKEN_METRICS)
                + " nor token counts in its trajectories")


def run_scalars(view: StoreView, run_id: str, split: str, axes: Sequence[XAxis] = X_AXES) -> RunScalars:
    """The run's metric names in ``split`` and its ``axes`` (only those asked: each costs a query)."""
    files = metric_files(view, run_id)
    names = _names(view, run_id, split, files)
    run = view.entry(run_id)["run"]
    make = {"step": lambda: Axis(True, "step"), "time": lambda: _time_axis(view, run_id, split, files, names),
            "tokens": lambda: _token_axis(view, run_id, split, files, names)}
    return RunScalars(run_id, str(run.get("name") or run_id), names, {a: make[a]() for a in axes})


def index(view: StoreView, run_ids: Sequence[str], split: str) -> dict[str, Any]:
    """What the panel lists before any chart is drawn: the groups (sorted, names sorted
    within), each name with the runs that logged it, and which x axes each run has."""
    runs = [run_scalars(view, rid, split) for rid in run_ids]
    by_name: dict[str, list[str]] = {}
    for r in runs:
        for n in r.names:
            by_name.setdefault(n, []).append(r.run)
    groups: dict[str, list[dict[str, Any]]] = {}
    for n in sorted(by_name):
        groups.setdefault(group_of(n), []).append({"name": n, "runs": by_name[n]})
    order = sorted(groups, key=lambda g: (g == UNGROUPED, g))
    return {
        "split": split,
        "runs": [{"run": r.run, "name": r.name, "metrics": len(r.names),
                  "axes": {k: {"available": a.available, "source": a.source} for k, a in r.axes.items()}}
                 for r in runs],
        "groups": [{"group": g, "metrics": groups[g]} for g in order],
    }


@dataclass
class Series:
    """One metric of one run, over the chosen x axis."""

    run: str
    step: list[int]
    x: list[float]
    y: list[float | None]
    smoothed: list[float | None]


def series(view: StoreView, run_ids: Sequence[str], split: str, group: str, *, x: XAxis = "step",
           smoothing: float = 0.0, names: Sequence[str] | None = None) -> dict[str, Any]:
    """Every metric of ``group`` (or only ``names`` in it) for each run: raw values,
    TensorBoard-smoothed values, on the ``x`` axis; runs without that axis are left out
    and named in ``notes``; points at steps the axis has no value for are counted there."""
    if x not in X_AXES:
        raise BadRequest(f"x must be one of {', '.join(X_AXES)}, got {str(x)[:40]!r}")
    debiased_ema([], smoothing)  # checks the weight before any query
    out: dict[str, dict[str, Series]] = {}
    notes: list[str] = []
    for rid in run_ids:
        r = run_scalars(view, rid, split, (x,))
        axis = r.axes[x]
        if not axis.available:
            notes.append(f"{r.name}: no {x} axis — {axis.source}")
            continue
        wanted = [n for n in r.names if group_of(n) == group and (names is None or n in names)]
        if not wanted:
            continue
        rows = view.query(
            f"SELECT name, step, avg(value) AS value FROM {METRICS_IN} WHERE run_id = ? AND split = ? "
            "AND list_contains(?, name) GROUP BY name, step ORDER BY name, step",
            [metric_files(view, rid), rid, split, wanted])
        dropped = 0
        for row in rows:
            step = int(row["step"])
            if x == "step":
                xv: float = step
            elif step in axis.values:
                xv = axis.values[step]
            else:
                dropped += 1
                continue
            s = out.setdefault(row["name"], {}).setdefault(rid, Series(rid, [], [], [], []))
            s.step.append(step)
            s.x.append(xv)
            s.y.append(row["value"])
        if dropped:
            notes.append(f"{r.name}: {dropped} point(s) at steps without a {x} value left out")
    for per_run in out.values():
        for s in per_run.values():
            s.smoothed = debiased_ema(s.y, smoothing)
    return {
        "split": split, "group": group, "x": x, "smoothing": smoothing, "notes": notes,
        "metrics": [{"name": n, "series": [asdict(s) for s in out[n].values()]} for n in sorted(out)],
    }
