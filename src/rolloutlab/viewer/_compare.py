"""Runs side by side: the compare page's curves, its table of differences, one step of each.

The table is exactly what ``rolloutlab analyze A --vs B`` prints, from the same functions
(no statistic of its own): :func:`rolloutlab.analysis.compare_runs`'s pooled windows
(each run − the first, paired by task when the tasks match, with a bootstrap interval)
when every run has trajectories; :func:`rolloutlab.analysis.compare_metric_runs`
(last-window means of the logged scalars, Welch interval over steps) when one has only
metrics.  It is computed once per set of run versions and kept (a few recent sets).

The curves are each run's per-step mean reward (graded) and success rate: from the
viewer's step table (:func:`._queries.step_table`, the dashboard's numbers and success
rule) for a run with trajectories, from its logged scalars under the analysis' canonical
names (:func:`rolloutlab.analysis.metric_step_table`) for a metrics-only run.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rolloutlab.io import RolloutlabError, Store
from rolloutlab.viewer import _queries as Q
from rolloutlab.viewer._live import StoreView

MAX_RUNS = 8
"""Runs one compare page takes (the side-by-side step needs a column each)."""
CURVES = (("mean_reward", "mean reward (graded)"), ("success_rate", "success rate"))
_CACHED = 8


@dataclass
class Table:
    """The comparison table of :func:`comparison` (rows as ``analyze --vs`` computes them)."""

    kind: Literal["trajectories", "metrics", "none"]
    """``trajectories``: compare_runs' pooled windows; ``metrics``: compare_metric_runs."""
    rows: list[dict[str, Any]] = field(default_factory=list)
    baseline: str = ""
    interval: str = ""
    """How the interval was computed (shown under the table)."""
    notes: list[str] = field(default_factory=list)
    mismatch: list[str] = field(default_factory=list)
    """Why these runs are not like for like (another environment, another task set): said
    at the top of the page; then no difference is paired by task."""


class Comparisons:
    """The comparison table per (runs, split, their versions), computed on first view."""

    def __init__(self, view: StoreView) -> None:
        self.view = view
        self._lock = threading.Lock()
        self._done: OrderedDict[tuple[Any, ...], tuple[Table, dict[str, dict[str, list[Any]]]]] = OrderedDict()

    def get(self, run_ids: Sequence[str], split: str) -> tuple[Table, dict[str, dict[str, list[Any]]]]:
        """(the table, canonical per-step curves of the metrics-only runs by run id)."""
        key = (tuple(run_ids), split, tuple(self.view.run_versions.get(r) for r in run_ids))
        with self._lock:
            if key in self._done:
                self._done.move_to_end(key)
                return self._done[key]
        envs = [self.view.entry(r)["run"].get("env") for r in run_ids]
        out = comparison(Store(self.view.path), run_ids, split, envs=envs)
        with self._lock:
            self._done[key] = out
            while len(self._done) > _CACHED:
                self._done.popitem(last=False)
        return out


TASK_OVERLAP = 0.5
"""Below this share of common task ids (of the smaller set), two runs are on different
task sets: their task ids name different things, and pairing them would be wrong."""


def mismatches(run_ids: Sequence[str], envs: Sequence[str | None],
               tasks: Sequence[set[str]]) -> list[str]:
    """Why each run is not like for like with the baseline (``run_ids[0]``): another
    environment (both named, and different), or another task set (fewer than
    ``TASK_OVERLAP`` of the smaller set's task ids in common).  Empty when they match."""
    out = []
    base, base_env, base_tasks = run_ids[0], envs[0], tasks[0]
    for rid, env, ts in zip(run_ids[1:], envs[1:], tasks[1:], strict=True):
        if base_env and env and env != base_env:
            out.append(f"{rid} runs environment {env!r}, the baseline {base} runs {base_env!r}")
            continue
        if base_tasks and ts:
            common = len(base_tasks & ts)
            if common < TASK_OVERLAP * min(len(base_tasks), len(ts)):
                out.append(f"{rid} and the baseline {base} share {common} of their task ids ({len(ts)} and "
                           f"{len(base_tasks)}): different task sets")
    return out


def comparison(store: Store, run_ids: Sequence[str], split: str, *,
               envs: Sequence[str | None] | None = None) -> tuple[Table, dict[str, dict[str, list[Any]]]]:
    """The table ``rolloutlab analyze run_ids[0] --vs run_ids[1:] --split split`` shows,
    and the canonical curves of runs that have only metrics.  Runs on different
    environments or task sets (:func:`mismatches`) are compared unpaired: each run's task
    ids are made its own (prefixed by its position), so no task of one is paired with a
    task of another that merely shares its id."""
    from rolloutlab.analysis import (
        compare_metric_runs,
        compare_runs,
        load_run,
        metric_step_table,
        plain,
    )

    names = list(run_ids)
    try:
        frames = [load_run(store, rid, split=split) for rid in run_ids]
    except RolloutlabError as e:
        return Table("none", notes=[str(e)]), {}
    curves: dict[str, dict[str, list[Any]]] = {}
    for rid, f in zip(run_ids, frames, strict=True):
        if f.traj.empty:
            t = metric_step_table(f.metrics)
            curves[rid] = {"step": [int(s) for s in t.index]}
            for key, _ in CURVES:
                curves[rid][key] = plain(t[key].tolist()) if key in t.columns else []
    tasks = [set() if f.traj.empty else {str(t) for t in f.traj["task_id"].dropna().unique()} for f in frames]
    mismatch = mismatches(run_ids, list(envs) if envs is not None else [None] * len(run_ids), tasks)
    if mismatch:
        for i, f in enumerate(frames):
            if not f.traj.empty:
                ids = f.traj["task_id"]
                f.traj = f.traj.assign(task_id=ids.where(ids.isna(), f"{i}:" + ids.astype(str)))
    if any(f.traj.empty for f in frames):
        m = compare_metric_runs(frames, names=names)
        d = m.to_dict()
        return Table("metrics", d["table"], m.baseline, f"95% {d['interval']}, last {m.window} steps",
                     list(m.notes), mismatch), curves
    try:
        c = compare_runs(frames, names=names)
    except ValueError as e:  # no common step
        return Table("none", notes=[str(e)], mismatch=mismatch), curves
    rows = plain(c.overall.to_dict(orient="records"))
    how = ("never paired by task (the runs are not on the same tasks, see the top of the page): resampling whole "
           "groups" if mismatch else "paired by task when the tasks match, else resampling whole groups")
    return Table("trajectories", rows, c.names[0],
                 f"{100 * c.level:g}% expanded percentile bootstrap ({c.n_boot} resamples): {how}",
                 mismatch=mismatch), curves


def main_curves(view: StoreView, run_ids: Sequence[str], split: str,
                metric_curves: dict[str, dict[str, list[Any]]]) -> list[dict[str, Any]]:
    """Per run: steps, mean reward and success rate, and where they came from."""
    out = []
    for rid in run_ids:
        run = view.entry(rid)["run"]
        name = str(run.get("name") or rid)
        rows = Q.step_table(view, rid, split)
        if rows:
            out.append({"run": rid, "name": name, "source": "trajectories", "step": [r["step"] for r in rows],
                        **{k: [r[k] for r in rows] for k, _ in CURVES}})
        elif rid in metric_curves:
            out.append({"run": rid, "name": name, "source": "logged metrics", **metric_curves[rid]})
        else:
            out.append({"run": rid, "name": name, "source": "none", "step": [], **{k: [] for k, _ in CURVES}})
    return out


def common_steps(view: StoreView, run_ids: Sequence[str], split: str) -> list[int]:
    """Steps every run has trajectories at."""
    steps = [set(Q.step_list(view, rid, split)) for rid in run_ids]
    return sorted(set.intersection(*steps)) if steps else []


def step_columns(view: StoreView, run_ids: Sequence[str], split: str, step: int,
                 groups: int) -> list[dict[str, Any]]:
    """One column per run at ``step``: its summary row and its first ``groups`` groups."""
    cols = []
    for rid in run_ids:
        summary = Q.step_table(view, rid, split, step)
        total, items = Q.step_groups_page(view, rid, split, step, Q.Filters(), sort="group", desc=False, page=1,
                                          per_page=groups)
        run = view.entry(rid)["run"]
        cols.append({"run": rid, "name": str(run.get("name") or rid), "row": summary[0] if summary else None,
                     "groups_total": total, "groups": items})
    return cols
