"""The token view of a turn: what the trainer saw, token by token (``Turn.token_data``).

Each token is shown as its text piece, coloured by one quantity chosen with ``?color=``:

- ``advantage``: the advantage the token was trained with — green above 0, red below,
  the intensity ``|A| / max |A|`` over the trajectory's shown tokens;
- ``logprob``: the sampler's log-probability — the less likely the token (``1 - p``,
  ``p = exp(logprob)``), the deeper the orange;
- ``entropy``: the trainer's entropy at the token, over the trajectory's largest;
- ``gap``: ``|trainer - sampler|`` log-prob, over the trajectory's largest (only where
  both are recorded: the off-policy gap the importance weights correct).

Tokens with loss mask 0 (template and environment tokens: nothing was sampled or trained
there) are greyed and never coloured.  A turn shows at most :data:`TOKEN_PREVIEW` tokens;
the token page pages through the rest :data:`TOKEN_PAGE` at a time.  Every piece reaches
the page through autoescape (a token is text the model wrote: hostile).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

COLORS: tuple[str, ...] = ("advantage", "logprob", "entropy", "gap")
"""What ``?color=`` accepts."""

TOKEN_PREVIEW = 800
"""Tokens of a turn shown on the trajectory page (the rest: the token page)."""

TOKEN_PAGE = 4000
"""Tokens per token page."""

_ARRAYS = ("ids", "text", "loss_mask", "logprobs", "trainer_logprobs", "advantages", "entropies")


@dataclass
class Tok:
    """One token as the page shows it."""

    piece: str
    special: bool
    """The piece is empty (a special token whose text the tokenizer drops): shown as its id."""
    masked: bool
    style: str
    """Inline background colour, or ""."""
    title: str
    """The token's numbers, for the tooltip."""


@dataclass
class TurnView:
    """A turn's tokens from ``start`` (at most a page), with the turn's summary figures."""

    total: int
    start: int
    tokens: list[Tok]
    trained: int
    """Tokens with loss mask 1 (all, when no mask is recorded)."""
    has: set[str] = field(default_factory=set)
    """Which quantities are recorded: ``advantage``, ``logprob``, ``entropy``, ``gap``."""
    mean_logprob: float | None = None
    """Mean sampler log-prob over the trained tokens."""
    gap_mean: float | None = None
    """Mean ``|trainer - sampler|`` over the trained tokens, where both are known."""
    gap_max: float | None = None
    advantage: float | None = None
    """The advantage of the trained tokens when they share one value (else None)."""

    @property
    def end(self) -> int:
        return self.start + len(self.tokens)


def parse(data: Any) -> dict[str, list[Any]] | None:
    """The arrays of a stored ``token_data`` object, or None when it is not one (a store
    written by another tool): aligned lists, at least the ids or the text."""
    if not isinstance(data, dict):
        return None
    arrays = {k: data[k] for k in _ARRAYS if isinstance(data.get(k), list)}
    if "ids" not in arrays and "text" not in arrays:
        return None
    if len({len(v) for v in arrays.values()}) != 1:
        return None
    return arrays


def recorded(turns: Iterable[dict[str, list[Any]]]) -> set[str]:
    """Which of :data:`COLORS` the arrays of ``turns`` can colour by."""
    has: set[str] = set()
    for d in turns:
        has.update(k for k, arr in (("advantage", "advantages"), ("logprob", "logprobs"), ("entropy", "entropies"))
                   if d.get(arr) is not None)
        if d.get("logprobs") is not None and d.get("trainer_logprobs") is not None:
            has.add("gap")
    return has


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


def _gap(d: dict[str, list[Any]], i: int) -> float | None:
    a, b = d.get("logprobs"), d.get("trainer_logprobs")
    if a is None or b is None:
        return None
    x, y = _num(a[i]), _num(b[i])
    return abs(y - x) if x is not None and y is not None else None


def scales(turns: list[dict[str, list[Any]]]) -> dict[str, float]:
    """The largest ``|advantage|``, entropy and gap over the trained tokens of ``turns``
    (the colour scales of one trajectory, so that turns compare); 0 where none."""
    out = {"advantage": 0.0, "entropy": 0.0, "gap": 0.0}
    for d in turns:
        mask = d.get("loss_mask")
        n = len(d.get("ids") or d.get("text") or [])
        for i in range(n):
            if mask is not None and mask[i] != 1:
                continue
            for key, arr in (("advantage", d.get("advantages")), ("entropy", d.get("entropies"))):
                if arr is not None and (v := _num(arr[i])) is not None:
                    out[key] = max(out[key], abs(v))
            if (g := _gap(d, i)) is not None:
                out["gap"] = max(out["gap"], g)
    return out


def _colour(color: str, d: dict[str, list[Any]], i: int, sc: dict[str, float]) -> str:
    if color == "advantage" and (arr := d.get("advantages")) is not None:
        v = _num(arr[i])
        if v is None or v == 0 or sc["advantage"] <= 0:
            return ""
        a = min(1.0, abs(v) / sc["advantage"])
        return f"background: rgba({'22, 163, 74' if v > 0 else '220, 38, 38'}, {0.12 + 0.6 * a:.2f})"
    if color == "logprob" and (arr := d.get("logprobs")) is not None:
        v = _num(arr[i])
        if v is None:
            return ""
        a = 1.0 - math.exp(min(0.0, v))
        return f"background: rgba(234, 88, 12, {0.05 + 0.7 * a:.2f})"
    if color == "entropy" and (arr := d.get("entropies")) is not None:
        v = _num(arr[i])
        if v is None or sc["entropy"] <= 0:
            return ""
        return f"background: rgba(37, 99, 235, {0.05 + 0.65 * min(1.0, v / sc['entropy']):.2f})"
    if color == "gap":
        g = _gap(d, i)
        if g is None or sc["gap"] <= 0:
            return ""
        return f"background: rgba(147, 51, 234, {0.05 + 0.7 * min(1.0, g / sc['gap']):.2f})"
    return ""


def _title(d: dict[str, list[Any]], i: int, masked: bool) -> str:
    parts = [f"#{i}"]
    if (ids := d.get("ids")) is not None:
        parts.append(f"id {ids[i]}")
    if masked:
        parts.append("not trained (mask 0)")
    for key, label in (("logprobs", "sampler log-prob"), ("trainer_logprobs", "trainer log-prob"),
                       ("advantages", "advantage"), ("entropies", "entropy")):
        if not masked and (arr := d.get(key)) is not None and (v := _num(arr[i])) is not None:
            parts.append(f"{label} {v:.4f}")
    if not masked and (g := _gap(d, i)) is not None:
        parts.append(f"gap {g:.4f}")
    return " · ".join(parts)


def turn_view(d: dict[str, list[Any]], color: str, sc: dict[str, float], *, start: int = 0,
              limit: int = TOKEN_PREVIEW) -> TurnView:
    """The tokens ``start .. start + limit`` of one turn's arrays ``d`` (from :func:`parse`),
    coloured by ``color`` (one of :data:`COLORS`) on the scales ``sc`` (:func:`scales`)."""
    text, ids, mask = d.get("text"), d.get("ids"), d.get("loss_mask")
    n = len(ids if ids is not None else text or [])
    trained = [i for i in range(n) if mask is None or mask[i] == 1]
    has = recorded([d])
    view = TurnView(total=n, start=min(start, n), tokens=[], trained=len(trained), has=has)
    lp_arr, adv_arr = d.get("logprobs"), d.get("advantages")
    lps = [v for i in trained if (v := _num(lp_arr[i])) is not None] if lp_arr is not None else []
    view.mean_logprob = sum(lps) / len(lps) if lps else None
    gaps = [g for i in trained if (g := _gap(d, i)) is not None]
    if gaps:
        view.gap_mean, view.gap_max = sum(gaps) / len(gaps), max(gaps)
    advs = {v for i in trained if (v := _num(adv_arr[i])) is not None} if adv_arr is not None else set()
    view.advantage = advs.pop() if len(advs) == 1 else None
    for i in range(view.start, min(n, view.start + limit)):
        masked = mask is not None and mask[i] != 1
        piece = str(text[i]) if text is not None and text[i] is not None else ""
        special = piece == ""
        view.tokens.append(Tok(
            piece=f"⟨{ids[i]}⟩" if special and ids is not None else piece, special=special, masked=masked,
            style="" if masked else _colour(color, d, i, sc), title=_title(d, i, masked),
        ))
    return view
