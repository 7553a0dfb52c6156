"""The routes of the scalar panel and the compare page (added to the app by :func:`add_routes`)::

    /compare?run=&run=&split=&step=          runs side by side: curves, the comparison table, one step of each
    /api/scalars/index?run=&split=&prefer=   the metric names of runs, grouped by prefix, and their x axes
    /api/scalars?run=&group=&x=&smooth=&split=   one group's series for each run (the scalar panel's charts)
    /api/compare?run=&run=&split=            the comparison table as JSON

``run`` repeats (one per run, the first is the baseline); every value is checked before
it reaches a query, and every name goes back as data (JSON, or autoescaped HTML).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any, cast

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from rolloutlab.viewer import _compare as C
from rolloutlab.viewer import _queries as Q
from rolloutlab.viewer import _scalars as S

if TYPE_CHECKING:
    from rolloutlab.viewer._state import Viewer

SIDE_GROUPS = 6
"""Groups of each run shown at the side-by-side step (the step page has the rest)."""
NO_STORE_CACHE = {"Cache-Control": "no-store"}


def _runs(v: Viewer, request: Request, *, least: int) -> list[str]:
    """The ``run`` parameters resolved to run ids, in order, each once."""
    raw = request.query_params.getlist("run")
    if len(raw) < least:
        raise Q.BadRequest(f"give at least {least} run(s) as ?run=ID&run=ID (got {len(raw)}); pick them with the "
                           "checkboxes on the runs page")
    if len(raw) > C.MAX_RUNS:
        raise Q.BadRequest(f"at most {C.MAX_RUNS} runs at once, got {len(raw)}")
    out: list[str] = []
    for r in raw:
        rid = v.view.resolve(r)
        if rid not in out:
            out.append(rid)
    if len(out) < least:
        raise Q.BadRequest(f"give at least {least} different runs; got {', '.join(out)}")
    return out


def _scalar_split(v: Viewer, rids: list[str], raw: str | None, prefer: str | None = None) -> tuple[str, list[str]]:
    """(the split the panel shows, every split the runs logged metrics in).  ``raw`` is
    asked for (an error when no run logged it); ``prefer`` (the page's split) is taken
    when some run logged it, else the default — train when logged, else the first."""
    found = sorted({s for rid in rids for s in S.metric_splits(v.view, rid)})
    if not raw and prefer:
        raw = prefer if prefer in found or not found else None
    if raw and not found:  # nothing logged in any split: the page's split, said so by the panel
        return raw, found
    if raw:
        if found and raw not in found:
            raise Q.BadRequest(f"split must be one of {', '.join(found)}; got {raw[:40]!r}")
        return raw, found
    return ("train" if "train" in found or not found else found[0]), found


def _compare_split(v: Viewer, rids: list[str], raw: str | None) -> str:
    """The split asked for, else the baseline's default (train when it has it, as analyze)."""
    return raw or Q.default_split(Q.splits(v.view, rids[0]))


def add_routes(app: FastAPI, v: Viewer) -> None:
    comparisons = C.Comparisons(v.view)

    @app.get("/api/scalars/index")
    def scalars_index(request: Request) -> JSONResponse:
        rids = _runs(v, request, least=1)
        split, splits = _scalar_split(v, rids, request.query_params.get("split"), request.query_params.get("prefer"))
        return JSONResponse({**S.index(v.view, rids, split), "splits": splits}, headers=NO_STORE_CACHE)

    @app.get("/api/scalars")
    def scalars(request: Request) -> Response:
        a = request.query_params
        rids = _runs(v, request, least=1)
        split, _ = _scalar_split(v, rids, a.get("split"))
        x = Q.choice_arg("x", a.get("x"), S.X_AXES, "step")
        smooth = Q.float_arg("smooth", a.get("smooth")) or 0.0
        names = a.getlist("name") or None
        body = S.series(v.view, rids, split, a.get("group") or "", x=cast(S.XAxis, x), smoothing=smooth, names=names)
        return Response(orjson.dumps(body), media_type="application/json", headers=NO_STORE_CACHE)

    @app.get("/api/compare")
    def compare_json(request: Request) -> Response:
        rids = _runs(v, request, least=2)
        split = _compare_split(v, rids, request.query_params.get("split"))
        table, _ = comparisons.get(rids, split)
        return Response(orjson.dumps(asdict(table)), media_type="application/json", headers=NO_STORE_CACHE)

    @app.get("/compare", response_class=HTMLResponse)
    def compare_page(request: Request) -> Response:
        a = request.query_params
        rids = _runs(v, request, least=2)
        split = _compare_split(v, rids, a.get("split"))
        table, metric_curves = comparisons.get(rids, split)
        curves = C.main_curves(v.view, rids, split, metric_curves)
        common = C.common_steps(v.view, rids, split)
        step = Q.int_arg("step", a.get("step"), lo=0)
        if step is None and common:
            step = common[-1]
        if step is not None and step not in common:
            near = sorted(sorted(common, key=lambda s: abs(s - step))[:5])
            raise Q.BadRequest(f"not every run has step {step}; steps they share nearby: "
                               f"{', '.join(map(str, near)) or 'none'}")
        cols = C.step_columns(v.view, rids, split, step, SIDE_GROUPS) if step is not None else []
        runs = [{"run": rid, **_run(v, rid)} for rid in rids]
        all_splits: dict[str, int] = {}
        for rid in rids:
            for s, n in Q.splits(v.view, rid).items():
                all_splits[s] = all_splits.get(s, 0) + n
        return v.render("compare.html", rids=rids, runs=runs, split=split, splits=all_splits, table=table,
                        curves=orjson.dumps({"curves": curves, "titles": dict(C.CURVES)}).decode(),
                        common=common, step=step, cols=cols, side_groups=SIDE_GROUPS,
                        run_params=orjson.dumps(rids).decode())


def _run(v: Viewer, rid: str) -> dict[str, Any]:
    run = v.view.entry(rid)["run"]
    return {"name": run.get("name") or rid, "status": run.get("status"), "source": run.get("source"),
            "env": run.get("env")}
