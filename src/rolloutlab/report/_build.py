"""From runs in a store to one self-contained HTML file (and PNGs): the report's spine.

``load_report_run`` loads a run once (its :class:`RunFrame`), analyses it and samples its
trajectories; ``build_report`` overlays the runs' figures, compares them when there are
several, and renders the page; ``write_report`` writes it.  Several runs are compared
with ``compare_runs`` (first run = baseline, on the steps they share); when they share
no step the page says so instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from rolloutlab.analysis import analyze, compare_runs, load_heldout, load_run
from rolloutlab.report._figures import Spec, comparison_specs, figure_specs
from rolloutlab.report._html import render_html
from rolloutlab.report._run import ReportRun
from rolloutlab.report._samples import sample_trajectories, visible

if TYPE_CHECKING:
    from rolloutlab.analysis import Comparison
    from rolloutlab.io import Store


@dataclass(frozen=True)
class ReportConfig:
    """Options of ``rolloutlab report`` (every field is a CLI flag)."""

    split: str | None = None
    """train, val or eval; default: train if the run has it, else its largest split."""
    success_threshold: float | None = None
    """Success = reward >= this (default: the source's success, else reward == 1 for
    rewards in [0, 1], else reward > 0)."""
    split_at: float | None = None
    """Fix the saturation breakpoint at this step instead of searching it."""
    fit: Literal["hinge", "segments"] = "hinge"
    """Saturation fit: the continuous hinge, or a separate OLS line per segment
    (see ``rolloutlab.analysis._segments`` for when each is right)."""
    groups_per_step: int = 3
    """Groups sampled per step (their best, median and worst members are shown)."""
    max_chars: int = 2000
    """Cut every shown text at this many characters (a note says how much was cut)."""
    max_turns: int = 12
    """Turns shown per trajectory: the first and last halves; a note counts the rest."""
    max_sample_chars: int = 20_000_000
    """Text budget of the sampled trajectories of one run; above it every k-th step is
    sampled (the page says so), so that long multi-turn runs still open quickly."""
    title: str | None = None
    """Page title (default: the run names)."""
    metric: Mapping[str, str] | None = None
    """Health-check quantity → the logged column to read for it (``--metric
    QUANTITY=COLUMN``, as ``analyze`` takes it; quantities in docs/analysis.md)."""

    def __post_init__(self) -> None:
        for name in ("groups_per_step", "max_chars", "max_turns", "max_sample_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


@dataclass
class Report:
    """A rendered report and what it holds."""

    html: str
    figures: list[tuple[str, Spec]]
    """Every figure on the page (metric grid, then comparison), as plotly specs."""
    missing: dict[str, str]
    """Metric-grid figures left out, and why."""
    comparison: Comparison | None = None
    comparison_note: str = ""


def load_report_run(store: Store, run: str, config: ReportConfig = ReportConfig(), *,
                    name: str | None = None) -> ReportRun:
    """Load, analyse and sample one run of ``store``."""
    frame = load_run(store, run, split=config.split, success_threshold=config.success_threshold)
    if frame.traj.empty:  # the report's sections and samples are built on trajectories
        from rolloutlab.io import RolloutlabError

        raise RolloutlabError(f"run {frame.run_id!r} has per-step metrics only: the report needs trajectories; "
                              f"`rolloutlab analyze {frame.run_id}` analyses its metrics")
    # a training run's evaluations lead its page and weigh its health verdict
    held = load_heldout(store, frame.run_id, success_threshold=config.success_threshold) if frame.split == "train" else None
    a = analyze(frame, split_at=config.split_at, fit=config.fit, heldout=held, metric=config.metric or None)
    samples = sample_trajectories(frame, groups_per_step=config.groups_per_step, max_chars=config.max_chars,
                                  max_turns=config.max_turns, max_total_chars=config.max_sample_chars)
    entry = store.manifest["runs"].get(frame.run_id, {}).get("run", {})
    own = entry.get("name")
    return ReportRun(name or frame.run_id, a, frame, samples, entry.get("source"),
                     own if own and own != (name or frame.run_id) else None, dict(entry.get("labels") or {}))


def unique_names(names: Sequence[str]) -> list[str]:
    """``a, a, b`` → ``a, a#2, b``: runs of one id from two stores stay apart."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n}#{seen[n]}")
    return out


def build_report(runs: Sequence[ReportRun], config: ReportConfig = ReportConfig()) -> Report:
    """Figures (overlaid), the comparison (several runs) and the rendered page."""
    if not runs:
        raise ValueError("a report needs at least one run")
    # Names reach figure legends and titles too: control and bidi characters made visible.
    names = unique_names([visible(r.name) for r in runs])
    runs = [dataclasses.replace(r, name=n) for r, n in zip(runs, names, strict=True)]
    figures, missing = figure_specs([r.analysis for r in runs], names)
    comparison, note = None, ""
    if len(runs) > 1:
        try:
            comparison = compare_runs([r.frame for r in runs], names=names)
        except ValueError as e:  # no common step: the page says why instead of a table
            note = str(e)
        if comparison is not None:
            figures += comparison_specs(comparison)
    html = render_html(runs, figures, missing, comparison=comparison, comparison_note=note, title=config.title,
                       groups_per_step=config.groups_per_step, max_chars=config.max_chars)
    return Report(html, figures, missing, comparison, note)


def write_report(report: Report, output: Path, *, png_dir: Path | None = None) -> list[Path]:
    """Write the page to ``output`` and, with ``png_dir``, each figure as a PNG; returns the PNGs."""
    if not output.parent.is_dir():
        from rolloutlab.io import RolloutlabError

        raise RolloutlabError(f"cannot write {output}: the folder {output.parent} does not exist (create it first)")
    output.write_text(report.html, encoding="utf-8", errors="replace")
    if png_dir is None:
        return []
    from rolloutlab.report._png import write_pngs

    return write_pngs(report.figures, png_dir)
