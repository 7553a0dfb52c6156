"""What the model was trained on: the trajectory page's token view, the token page, and the
diff of two samples of one group (added to the app by :func:`add_routes`)::

    /runs/{run}/tokens?id=&turn=&start=&color=   one turn's tokens, a page at a time
    /runs/{run}/diff?id=&a=&b=&color=            two samples of id's group, turn by turn, side by side

The token view's colours and bounds are :mod:`._tokens`'.  The diff pairs turn ``i`` of one
sample with turn ``i`` of the other; by default it shows the group's best graded sample
(highest reward) against its worst (lowest reward), ties to the lower sample index.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response

from rolloutlab.viewer import _queries as Q
from rolloutlab.viewer import _tokens as T
from rolloutlab.viewer._advantages import (
    ESTIMATORS,
    FORMULA,
    annotate,
    default_estimator,
    step_advantages,
)
from rolloutlab.viewer._live import NotFound

if TYPE_CHECKING:
    from rolloutlab.viewer._state import Viewer


def _arrays(raw: dict[int, str]) -> dict[int, dict[str, list[Any]]]:
    out = {}
    for turn, text in raw.items():
        try:
            d = T.parse(orjson.loads(text))
        except orjson.JSONDecodeError:
            d = None
        if d is not None:
            out[turn] = d
    return out


def token_arrays(v: Viewer, rid: str, t: dict[str, Any]) -> dict[int, dict[str, list[Any]]]:
    """turn_idx → the token arrays of each turn of trajectory row ``t`` that recorded tokens."""
    return _arrays(Q.token_data(v.view, rid, t["split"], t["step"], t["traj_id"]))


def token_views(arrays: dict[int, dict[str, list[Any]]], color: str, sc: dict[str, float]) -> dict[int, T.TurnView]:
    """turn_idx → the token view of each turn (the first :data:`~._tokens.TOKEN_PREVIEW` tokens)."""
    return {turn: T.turn_view(d, color, sc) for turn, d in arrays.items()}


def sample_advantage(v: Viewer, rid: str, run: dict[str, Any], t: dict[str, Any], raw: str | None
                     ) -> dict[str, Any]:
    """The sample's advantage under the run's estimator (``?adv=`` another), as the step
    page computes it over the whole step; nothing on a split no update is made from."""
    default, why = default_estimator(run.get("algorithm"))
    est = Q.choice_arg("adv", raw, ESTIMATORS, default)
    if t["split"] != "train":
        return {"adv": None, "adv_default": default}
    annotate([t], step_advantages(v.view, rid, t["split"], t["step"], est), groups=False)
    return {"adv": est, "adv_default": default, "adv_why": why, "adv_formula": FORMULA[est], "estimators": ESTIMATORS}


def traj_context(v: Viewer, rid: str, run: dict[str, Any], t: dict[str, Any], a: dict[str, str]) -> dict[str, Any]:
    """What traj.html needs besides the trajectory: the token views, the colour switch and
    the sample's advantage."""
    arrays = token_arrays(v, rid, t)
    sc = T.scales(list(arrays.values()))
    has = T.recorded(arrays.values())
    # an evaluation's tokens carry no advantages: colour by what they carry
    color = Q.choice_arg("color", a.get("color"), T.COLORS, "advantage" if "advantage" in has or not has else "logprob")
    views = token_views(arrays, color, sc)
    return {"color": color, "colors": T.COLORS, "token_views": views, "token_has": has,
            "token_preview": T.TOKEN_PREVIEW, **sample_advantage(v, rid, run, t, a.get("adv"))}


def _pick(siblings: list[dict[str, Any]], raw: str | None, name: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    for s in siblings:
        if s["traj_id"] == raw:
            return s
    raise Q.BadRequest(f"{name} must be a sample of this group; got {raw[:200]!r} "
                       f"(its samples: {', '.join(s['traj_id'] for s in siblings[:20])})")


def best_and_worst(siblings: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The graded sample with the highest reward and the one with the lowest (ties: the lower
    sample index, then id); without two graded samples, the first two samples."""
    graded = [s for s in siblings if s["graded"] and s["reward"] is not None and not math.isnan(s["reward"])]
    if len(graded) < 2:
        return siblings[0], siblings[1]

    def order(s: dict[str, Any]) -> tuple[int, str]:
        return (s["sample_idx"] if s["sample_idx"] is not None else 1 << 62, s["traj_id"])

    best = min(graded, key=lambda s: (-s["reward"], order(s)))
    worst = min((s for s in graded if s is not best), key=lambda s: (s["reward"], order(s)))
    return best, worst


def add_routes(app: FastAPI, v: Viewer, run_info: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Add the token page and the diff page; ``run_info`` is the app's reading of a run's
    manifest record."""

    def args(request: Request) -> dict[str, str]:
        return {k: val for k, val in request.query_params.items()}

    @app.get("/runs/{run_id}/tokens", response_class=HTMLResponse)
    def tokens_page(request: Request, run_id: str) -> Response:
        a = args(request)
        rid = v.view.resolve(run_id)
        traj_id = a.get("id") or ""
        turn = Q.int_arg("turn", a.get("turn"), lo=0) or 0
        start = Q.int_arg("start", a.get("start"), lo=0) or 0
        color = Q.choice_arg("color", a.get("color"), T.COLORS, "advantage")
        t = Q.locate(v.view, rid, traj_id, a.get("split") or None, Q.int_arg("step", a.get("step")),
                     columns="traj_id, split, step")
        if t is None:
            raise NotFound(f"no trajectory {traj_id[:200]!r} in run {rid!r}")
        every = _arrays(Q.token_data(v.view, rid, t["split"], t["step"], traj_id))
        if turn not in every:
            raise NotFound(f"trajectory {traj_id[:200]!r} recorded no tokens for turn {turn}"
                           + (f"; turns with tokens: {', '.join(map(str, sorted(every)))}" if every else ""))
        view = T.turn_view(every[turn], color, T.scales(list(every.values())), start=start, limit=T.TOKEN_PAGE)
        return v.render("tokens.html", rid=rid, run=run_info(v.view.entry(rid)), t=t, turn=turn, view=view,
                        color=color, colors=T.COLORS, page=T.TOKEN_PAGE)

    @app.get("/runs/{run_id}/diff", response_class=HTMLResponse)
    def diff_page(request: Request, run_id: str) -> Response:
        a = args(request)
        rid = v.view.resolve(run_id)
        traj_id = a.get("id") or ""
        split, step = a.get("split") or None, Q.int_arg("step", a.get("step"))
        t = Q.trajectory(v.view, rid, traj_id, split, step)
        if t is None:
            raise NotFound(f"no trajectory {traj_id[:200]!r} in run {rid!r}")
        siblings = t["siblings"]
        if len(siblings) < 2:
            raise NotFound(f"trajectory {traj_id[:200]!r} has no other sample in its group "
                           f"({'no group id recorded' if t['group_id'] is None else 'a group of one'}): nothing to diff")
        best, worst = best_and_worst(siblings)
        left = _pick(siblings, a.get("a"), "a") or best
        right = _pick(siblings, a.get("b"), "b") or (worst if left is not worst else best)
        color = Q.choice_arg("color", a.get("color"), T.COLORS, "advantage")
        run = run_info(v.view.entry(rid))
        sides, arrays = [], []
        for s in (left, right):
            x = Q.trajectory(v.view, rid, s["traj_id"], t["split"], t["step"])
            assert x is not None  # a sibling row of the same step
            sides.append(x)
            arrays.append(token_arrays(v, rid, x))
        sc = T.scales([d for arr in arrays for d in arr.values()])  # one scale: the two sides compare
        for x, arr in zip(sides, arrays, strict=True):
            x["token_views"] = token_views(arr, color, sc)
        n = max(len(x["turns"]) for x in sides)
        rows = [[next((u for u in x["turns"] if u["turn_idx"] == i), None) for x in sides] for i in range(n)]
        has = T.recorded([d for arr in arrays for d in arr.values()])
        return v.render("diff.html", rid=rid, run=run, t=t, sides=sides, rows=rows, siblings=siblings, token_has=has,
                        best=best, worst=worst, color=color, colors=T.COLORS, preview=Q.TEXT_PREVIEW)
