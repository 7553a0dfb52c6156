"""PNG figures for papers: the report's plotly specs redrawn with matplotlib.

One source of truth: the same spec dicts the HTML embeds are drawn here, so a PNG shows
what the page shows.  Only what :mod:`._figures` produces is supported — scatter traces
(lines, markers, ``stackgroup`` stacks, ``fill="tonexty"`` bands, ``error_x`` bars),
stacked y-axes given by ``domain``, a log x-axis, and horizontal reference lines.  Text
from the data is made literal for matplotlib (``$`` would start mathtext; a label
starting with ``_`` would be dropped from the legend).  No pyplot: each figure is a
``matplotlib.figure.Figure`` with its own Agg canvas, so nothing global changes.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import numpy as np

from rolloutlab.report._figures import Spec

_DASH = {"solid": "-", "dash": "--", "dot": ":", "dashdot": "-.", "longdash": (0, (8, 3))}
_RGBA = re.compile(r"rgba\((\d+),(\d+),(\d+),([\d.]+)\)")


def mpl_text(s: object) -> str:
    """Plotly text (HTML-escaped) as literal matplotlib text."""
    t = html.unescape(str(s)).replace("$", r"\$")
    return " " + t if t.startswith("_") else t


def _colour(c: str | None) -> Any:
    if c is None:
        return None
    m = _RGBA.fullmatch(c.replace(" ", ""))
    if m:
        r, g, b, a = m.groups()
        return (int(r) / 255, int(g) / 255, int(b) / 255, float(a))
    return c


def _y(values: list[Any]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def _axes_order(spec: Spec) -> list[str]:
    """y-axis refs ("y", "y2", …) from top to bottom."""
    refs = sorted({tr.get("yaxis", "y") for tr in spec["data"]}, key=lambda r: int(r[1:] or 1))
    layout = spec["layout"]

    def top(ref: str) -> float:
        dom = layout.get("yaxis" + ref[1:], {}).get("domain", [0, 1])
        return -float(dom[1])

    return sorted(refs, key=top)


def write_png(spec: Spec, path: Path, *, width: float = 7.0, height: float = 3.4, dpi: int = 150) -> Path:
    """Draw one figure spec into ``path`` (PNG)."""
    from rolloutlab.report._deps import require

    require("matplotlib")
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    layout = spec["layout"]
    refs = _axes_order(spec)
    fig = Figure(figsize=(width, height + 1.6 * (len(refs) - 1)), dpi=dpi, layout="constrained")
    axes = fig.subplots(len(refs), 1, sharex=True, squeeze=False)[:, 0]
    ax_of = dict(zip(refs, axes, strict=True))
    stacks: dict[tuple[str, str], np.ndarray] = {}
    prev: dict[str, np.ndarray] = {}
    for tr in spec["data"]:
        if tr.get("visible") == "legendonly":
            continue
        ref = tr.get("yaxis", "y")
        ax = ax_of[ref]
        x = np.asarray(tr["x"], dtype=np.float64)
        y = _y(tr["y"])
        line = tr.get("line", {})
        colour = _colour(line.get("color") or tr.get("marker", {}).get("color"))
        label = mpl_text(tr.get("name", "")) if tr.get("showlegend", True) else "_nolegend_"
        alpha = float(tr.get("opacity", 1.0))
        if "stackgroup" in tr:
            key = (ref, str(tr["stackgroup"]))
            base = stacks.get(key, np.zeros_like(y))
            top = base + np.nan_to_num(y)
            ax.fill_between(x, base, top, color=_colour(tr.get("fillcolor")) or colour, linewidth=0, label=label)
            stacks[key] = top
        elif tr.get("fill") == "tonexty" and ref in prev:
            ax.fill_between(x, prev[ref], y, color=_colour(tr.get("fillcolor")), linewidth=0, label=label)
        elif line.get("width", 2) > 0:
            mode = tr.get("mode", "lines")
            ls = _DASH.get(line.get("dash", "solid"), "-") if "lines" in mode else "None"
            marker = "o" if "markers" in mode else None
            size = float(tr.get("marker", {}).get("size", 4))
            if tr.get("marker", {}).get("symbol") == "diamond":
                marker, size = "D", size * 0.7
            elif tr.get("marker", {}).get("symbol") == "x":
                marker = "x"
            ax.plot(x, y, linestyle=ls, marker=marker, markersize=size * 0.6 if marker == "o" else size * 0.8,
                    color=colour, linewidth=float(line.get("width", 2)) * 0.75, alpha=alpha, label=label)
            err = tr.get("error_x")
            if err:
                ax.errorbar(x, y, xerr=[err["arrayminus"], err["array"]], fmt="none", ecolor=colour, capsize=3,
                            label="_nolegend_")
        prev[ref] = y
    for ref, ax in ax_of.items():
        ya = layout.get("yaxis" + ref[1:], {})
        ax.set_ylabel(mpl_text(ya.get("title", {}).get("text", "")), fontsize=8)
        if "range" in ya:
            ax.set_ylim(*ya["range"])
        ax.grid(True, color="#e8e8e8", linewidth=0.6)
        ax.tick_params(labelsize=8)
        for shape in layout.get("shapes", []):
            if shape.get("type") == "line" and shape.get("y0") == shape.get("y1"):
                ax.axhline(shape["y0"], color="#555555", linewidth=0.8)
    xa = layout.get("xaxis", {})
    axes[-1].set_xlabel(mpl_text(xa.get("title", {}).get("text", "")), fontsize=8)
    if xa.get("type") == "log":  # k = 1, 2, 4, …: label the ks drawn, as integers
        ks = sorted({float(v) for tr in spec["data"] for v in tr["x"]})
        ks = [k for k in ks if k == ks[-1] or (k.is_integer() and int(k) & (int(k) - 1) == 0)]
        axes[-1].set_xscale("log", base=2)
        axes[-1].set_xticks(ks, [f"{k:g}" for k in ks])
    else:
        axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0].set_title(mpl_text(layout.get("title", {}).get("text", "")), fontsize=10, loc="left")
    labels = [lab for ax in axes for lab in ax.get_legend_handles_labels()[1]]
    if labels:
        longest = max(len(lab) for lab in labels)
        cols = 3 if longest <= 28 else (2 if longest <= 48 else 1)  # ~110 characters fit across 7 inches at 7 pt
        fig.legend(loc="outside lower center", ncols=min(cols, len(labels)), fontsize=7, frameon=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


def write_pngs(figures: list[tuple[str, Spec]], directory: Path) -> list[Path]:
    """Every figure as ``directory/<name>.png``."""
    directory.mkdir(parents=True, exist_ok=True)
    return [write_png(spec, directory / f"{name}.png") for name, spec in figures]
