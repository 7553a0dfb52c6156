"""Turning rows into pages: the Jinja environment, number formats, and structured texts.

Every string from the store is model output or comes from foreign artifacts, and is
treated as hostile.  It reaches a page only through Jinja's autoescape (``autoescape=True``
for every template; no template marks data ``|safe``), and it never reaches an ``href``
except URL-encoded into a query string (:func:`url`).  Control characters and bidi
overrides are made visible (:func:`visible`), so a text cannot hide or reorder what is
shown around it.  Figure JSON travels in a ``data-`` attribute, escaped like any other
attribute value, and is read by ``viewer.js`` with ``JSON.parse``.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import orjson
from jinja2 import Environment, FileSystemLoader, StrictUndefined

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(s: object) -> str:
    """Text with control characters and bidi overrides shown as ``\\xNN`` / ``\\uNNNN``."""
    if s is None:
        return ""
    text = str(s).replace("\r\n", "\n")

    def esc(m: re.Match[str]) -> str:
        c = ord(m.group())
        return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"

    return _CONTROL.sub(esc, text)


def num(x: Any, digits: int = 3) -> str:
    """A number for a table cell: ``—`` for missing or NaN, ints as ints."""
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    try:
        f = float(x)
    except (TypeError, ValueError):
        return "—"
    if not math.isfinite(f):
        return "—"
    return f"{f:.{digits}f}"


def pct(x: Any) -> str:
    if x is None:
        return "—"
    f = float(x)
    return "—" if not math.isfinite(f) else f"{100 * f:.1f}%"


def chars(n: Any) -> str:
    """A text length: ``812 chars``, ``12.3 kB``, ``10.0 MB``."""
    if n is None:
        return ""
    n = int(n)
    if n < 10_000:
        return f"{n:,} chars"
    if n < 1_000_000:
        return f"{n / 1000:.1f}k chars"
    return f"{n / 1e6:.1f}M chars"


def when(s: Any) -> str:
    if not s:
        return ""
    try:
        return datetime.fromisoformat(str(s)).strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return str(s)[:32]


def url(path: str, **params: Any) -> str:
    """``path?k=v…`` with every value URL-encoded (empty and None values dropped)."""
    q = {k: v for k, v in params.items() if v is not None and v != ""}
    return path + ("?" + urlencode(q) if q else "")


def seg(s: object) -> str:
    """One URL path segment, encoded (run ids are slugs, but never trust a path)."""
    return quote(str(s), safe="")


def messages(prompt: str | None, full_len: int | None) -> list[dict[str, str]] | None:
    """Chat messages when the prompt is a complete JSON list of ``{role, content}``."""
    if not prompt or not prompt.lstrip().startswith("[") or (full_len or 0) > len(prompt):
        return None
    try:
        obj = orjson.loads(prompt)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, list) or not all(isinstance(m, dict) and "role" in m for m in obj):
        return None
    out = []
    for m in obj:
        content = m.get("content")
        if isinstance(content, list):  # content parts: keep the text ones, show the rest as JSON
            content = "\n".join(p.get("text", "") if isinstance(p, dict) and p.get("type") == "text"
                                else orjson.dumps(p).decode() for p in content)
        elif not isinstance(content, str):
            content = "" if content is None else orjson.dumps(content).decode()
        out.append({"role": str(m.get("role")), "content": content})
    return out


def tool_calls(raw: str | None, full_len: int | None) -> list[dict[str, str]] | None:
    """Tool calls (``[{name, arguments, id, result}]``) when the JSON is complete and well formed."""
    if not raw or (full_len or 0) > len(raw):
        return None
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, list) or not all(isinstance(c, dict) for c in obj):
        return None

    def s(v: Any) -> str:
        return "" if v is None else v if isinstance(v, str) else orjson.dumps(v).decode()

    return [{"name": s(c.get("name")), "arguments": s(c.get("arguments")), "id": s(c.get("id")),
             "result": s(c.get("result"))} for c in obj]


def pretty_json(raw: str | None) -> str:
    if not raw:
        return ""
    try:
        return orjson.dumps(orjson.loads(raw), option=orjson.OPT_INDENT_2).decode()
    except orjson.JSONDecodeError:
        return raw


def figure_attr(spec: dict[str, Any]) -> str:
    """A plotly figure as JSON for a ``data-fig`` attribute (autoescape makes it safe there)."""
    return orjson.dumps(spec, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS).decode()


# -- a small SVG chart, for when the report's plotly figures are not installed -------------

CHART_W, CHART_H, PAD_L, PAD_R, PAD_T, PAD_B = 420, 170, 46, 10, 10, 24


def svg_chart(steps: list[int], values: list[float | None]) -> dict[str, Any] | None:
    """Pixel coordinates of one series over steps (each point becomes a link to its step)."""
    pts = [(s, float(v)) for s, v in zip(steps, values, strict=True) if v is not None and math.isfinite(float(v))]
    if not pts:
        return None
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if y1 - y0 <= 1e-12 * max(1.0, abs(y1)):  # flat: an axis around the value (as static/charts.js)
        half = 0.5 if y0 == 0 else abs(y0) * 0.25
        y0, y1 = y0 - half, y1 + half
    w, h = CHART_W - PAD_L - PAD_R, CHART_H - PAD_T - PAD_B

    def px(x: float) -> float:
        return PAD_L + (0.5 * w if x1 == x0 else (x - x0) / (x1 - x0) * w)

    def py(y: float) -> float:
        return PAD_T + (1 - (y - y0) / (y1 - y0)) * h

    points = [{"step": s, "value": v, "x": round(px(s), 1), "y": round(py(v), 1)} for s, v in pts]
    return {
        "w": CHART_W, "h": CHART_H, "left": PAD_L, "right": CHART_W - PAD_R, "top": PAD_T,
        "bottom": CHART_H - PAD_B, "points": points,
        "path": " ".join(f"{p['x']},{p['y']}" for p in points),
        "yticks": [{"y": round(py(v), 1), "label": f"{v:.3g}"} for v in (y0, (y0 + y1) / 2, y1)],
        "xticks": [{"x": round(px(v), 1), "label": str(v)} for v in sorted({x0, x1})],
    }


MIXED_MODELS = ("the run's trajectories name N different models (a trained run's evaluations name each "
                "checkpoint; a folder of logs may hold several models); each trajectory keeps its own")
"""What a run model ``mixed (N)`` (``rolloutlab.io._ingest``) means, said where it is shown."""


def environment(templates: Path) -> Environment:
    env = Environment(loader=FileSystemLoader(str(templates)), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(num=num, pct=pct, chars=chars, visible=visible, when=when, seg=seg, pretty_json=pretty_json)
    env.globals.update(url=url, messages=messages, tool_calls=tool_calls, figure_attr=figure_attr,
                       mixed_models=MIXED_MODELS)
    return env
