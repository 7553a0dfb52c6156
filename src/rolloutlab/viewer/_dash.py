"""The dashboard's analysis: computed once per run version, in the background when a run grows.

:func:`rolloutlab.analysis.analyze_run` of a 100-step × 512-trajectory run takes about half
a second, too slow for every page view, and a live run changes version with every step.
So each (run, split) keeps its last result: a page view of an unchanged run reads it; a
view of a grown run gets it too (marked stale) while one worker thread computes the new
one; only the very first view of a run waits.  The figures are the report's
(:func:`rolloutlab.report.figure_specs`), serialised once.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rolloutlab.io import RolloutlabError, Store
from rolloutlab.viewer._live import version_of
from rolloutlab.viewer._render import figure_attr

log = logging.getLogger("rolloutlab.viewer")


@dataclass
class Dash:
    """What the dashboard shows from the analysis, computed once per run version."""

    version: str
    headline: Any = None
    """:func:`rolloutlab.analysis._headline.headline` of the analysis: the sentences at the
    top of the dashboard and the findings, most severe first, in plain words."""
    figures: list[tuple[str, str]] = field(default_factory=list)
    """(name, figure JSON) from :func:`rolloutlab.report.figure_specs`."""
    missing: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    not_computed: list[tuple[str, str]] = field(default_factory=list)
    """(analysis, why) for what the analysis could not compute: shown folded, not as a wall."""
    error: str | None = None


def plotly_js() -> Path | None:
    try:
        import plotly
    except ImportError:
        return None
    p = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    return p if p.is_file() else None


class Analyses:
    """The dashboard's analysis per (run, split), keyed by run version; one worker computes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._done: dict[tuple[str, str], Dash] = {}
        self._running: dict[tuple[str, str], Future[Dash]] = {}
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rolloutlab-analysis")

    def get(self, run_id: str, split: str, version: str) -> tuple[Dash, bool]:
        """(the dashboard data, whether it is current).  The first call for a run waits;
        later calls for a grown run get the previous result while the new one computes."""
        key = (run_id, split)
        with self._lock:
            d = self._done.get(key)
            if d is not None and d.version == version and d.error is None:
                return d, True
            fut = self._running.get(key)
            if fut is None:
                fut = self._pool.submit(self._compute, key)
                self._running[key] = fut
        if d is not None and d.version != version:
            return d, False
        d = fut.result()
        return d, d.version == version

    def shown(self, run_id: str, split: str) -> str | None:
        with self._lock:
            d = self._done.get((run_id, split))
        return None if d is None else d.version

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _compute(self, key: tuple[str, str]) -> Dash:
        run_id, split = key
        try:
            d = self._analyse(run_id, split)
        finally:
            with self._lock:
                self._running.pop(key, None)
        with self._lock:
            self._done[key] = d
        return d

    def _analyse(self, run_id: str, split: str) -> Dash:
        from rolloutlab.analysis import analyze_run, headline

        try:
            st = Store(self.path)  # its own connection: the analysis runs beside the page queries
        except (RolloutlabError, OSError, ValueError) as e:
            return Dash(version="", error=f"cannot read the store: {e}")
        entry = st.manifest["runs"].get(run_id)
        if entry is None:
            return Dash(version="", error=f"run {run_id!r} is no longer in the store")
        d = Dash(version=version_of(entry))
        try:
            a = analyze_run(st, run_id, split=split)
        except RolloutlabError as e:
            d.error = str(e)
            return d
        except Exception as e:
            log.exception("analysis of %s (%s) failed", run_id, split)
            d.error = f"the analysis failed: {type(e).__name__}: {e}"
            return d
        d.headline = headline(a)
        # The success rule is the page's own (the same rule, shown once); these say what
        # the analysis could not compute and why.
        d.not_computed = list(a.skipped.items())
        try:
            from rolloutlab.report import figure_specs
        except ImportError:
            d.notes.append("the figure grid needs the report module (rolloutlab.report); showing simple charts")
            return d
        if plotly_js() is None:
            d.notes.append("the figure grid needs plotly (pip install 'rolloutlab[viewer]'); showing simple charts")
            return d
        name = entry["run"].get("name") or run_id
        try:
            specs, d.missing = figure_specs([a], [name])
        except Exception as e:
            log.exception("figures of %s (%s) failed", run_id, split)
            d.notes.append(f"the figure grid failed ({type(e).__name__}: {e}); showing simple charts")
            return d
        d.figures = [(n, figure_attr(spec)) for n, spec in specs]
        return d
