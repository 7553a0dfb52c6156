"""The viewer's web application: :func:`create_app` builds it, :func:`serve` runs it.

Routes (GET unless marked)::

    /                                  runs in the store
    /runs/{run}                        dashboard: findings, the report's figure grid, per-step table
    /runs/{run}/steps/{step}           a step's groups side by side, or one table (filters, sort, pages),
                                       each sample's advantage (``?adv=``, :mod:`._advantages`)
    /runs/{run}/traj?id=&color=&adv=   one trajectory, turn by turn, with each turn's tokens
    /runs/{run}/tokens, /runs/{run}/diff   one turn's tokens; two samples of a group: :mod:`._token_routes`
    /runs/{run}/text?id=&turn=&field=  one whole text field as text/plain (for very long ones)
    /runs/{run}/task?id=&a=&b=         one task's trajectories at two steps, side by side
    POST /runs/{run}/reingest          re-read the run's recorded sources into the store
    /api/version, /api/runs/{run}/version   what the live pages poll
    /static/{name}                     the viewer's CSS and JS, and plotly.js (a fixed list)
    /api/runs/{id}/steps?split=    the run page's step rows as JSON (outcomes.StepOutcome per step)
    /compare, /api/scalars, /api/scalars/index, /api/compare   see :mod:`._compare_routes`
    /search?q=&run=&field=&step_min=&step_max=&case=&page=   text across steps and runs: see :mod:`._search_routes`

Read-only but for one action: ``POST /runs/{run}/reingest`` (and ``watch``, its timer)
runs :func:`rolloutlab.ingest` on the sources the manifest records for that run, which
writes only inside the store — and only on those the user named when starting the
viewer (``sources``, ``serve --source``): a manifest is data, and a store from elsewhere
must not make the viewer read other files of the machine.  It answers only clients on the loopback interface, and
only with the page's token (so another web page cannot make the browser post it).
Everything else reads, through the fixed SQL of :mod:`._queries`.  No route takes a file
path: static files are a fixed list, texts come from the store's tables.

The store is reopened when its manifest changes (another ``rolloutlab ingest``, a
re-ingest, the timer), so a growing run shows its new steps on the next request.  The
dashboard's analysis is computed once per run version (a hash of the run's manifest
entry) and cached; when a run grows, the previous analysis is shown while the new one is
computed in the background.
"""

from __future__ import annotations

import contextlib
import logging
import math
import secrets
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from rolloutlab.io import RolloutlabError
from rolloutlab.viewer import _queries as Q
from rolloutlab.viewer._advantages import (
    ESTIMATORS,
    FORMULA,
    annotate,
    default_estimator,
    step_advantages,
)
from rolloutlab.viewer._compare_routes import add_routes
from rolloutlab.viewer._live import NotFound
from rolloutlab.viewer._render import seg, svg_chart, url
from rolloutlab.viewer._search_routes import add_routes as add_search_routes
from rolloutlab.viewer._state import Viewer
from rolloutlab.viewer._token_routes import add_routes as add_token_routes
from rolloutlab.viewer._token_routes import traj_context

log = logging.getLogger("rolloutlab.viewer")

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
       "font-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'; "
       "object-src 'none'")
"""Scripts only from the viewer itself (no inline script at all, so an injected handler
cannot run even if escaping failed); plotly needs inline styles; nothing remote."""
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
STEPS_PER_PAGE = 200
SCORES_PER_PAGE = 50
MAX_PAGE = 10**9
"""Pages beyond this are refused (400) before a page number reaches SQL's 64-bit OFFSET."""
PER_PAGE = {"groups": (10, 20, 50, 100), "table": (25, 50, 100, 200)}


RUN_KEYS = ("name", "source", "model", "algorithm", "env", "status", "last_step", "labels", "created_at")


def run_info(entry: dict[str, Any]) -> dict[str, Any]:
    """A run's manifest record with every key the templates read (absent ones None): an
    evaluation log has no ``last_step``, an old store no ``labels``."""
    run = entry.get("run") or {}
    return {**{k: None for k in RUN_KEYS}, **run, "labels": run.get("labels") or {}}


def live_default(status: str | None, *, watching: bool = False) -> bool:
    """Whether a page of a run starts live (the box ticked): only when a reload can bring
    something new — the run says it is running (its writer or an ``ingest`` adds steps),
    or its status is unknown and this viewer re-ingests it on a timer (``--watch`` with
    its sources named).  A finished run, or an import of unknown status nobody re-reads,
    starts unticked (the banner still says when the store changes)."""
    return status == "running" or (watching and status not in ("finished", "aborted"))


CONFIG_KEYS = 300
"""Configuration keys shown in the runs page's table (the rest are counted)."""
CONFIG_VALUE = 120
"""Characters of one configuration value shown (the whole value in its title)."""


def _flatten(obj: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(obj, dict) and obj:
        for k, val in obj.items():
            _flatten(val, f"{prefix}.{k}" if prefix else str(k), out)
    else:
        out[prefix] = obj


def config_table(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The runs page's configuration table: one row per key of ``run.json`` (``model``,
    ``algorithm``, ``env`` and every ``config`` key, nested keys joined with ``.``), one
    value per run (``None`` where a run lacks the key), ``differs`` when two runs that have
    the key give it different values (a key only some runs have is not, by itself, a
    difference: it would mark every key of a run from another framework).  Rows in natural order of their keys, at most ``CONFIG_KEYS``."""
    flat: list[dict[str, Any]] = []
    for r in runs:
        f: dict[str, Any] = {k: r.get(k) for k in ("model", "algorithm", "env") if r.get(k) is not None}
        raw = r.get("config")
        try:
            cfg = orjson.loads(raw) if isinstance(raw, str) and raw else (raw or {})
        except orjson.JSONDecodeError:
            cfg = {"config": raw}
        _flatten(cfg if isinstance(cfg, dict) else {"config": cfg}, "", f)
        flat.append({k: val for k, val in f.items() if k})
    top = ["model", "algorithm", "env"]
    keys = [k for k in top if any(k in f for f in flat)]
    keys += sorted({k for f in flat for k in f} - set(top), key=lambda k: Q.natural_key(k) or "")

    def text(val: Any) -> str | None:
        if val is None:
            return None
        return val if isinstance(val, str) else orjson.dumps(val, default=str).decode()

    rows = []
    for k in keys[:CONFIG_KEYS]:
        vals = [text(f.get(k)) for f in flat]
        rows.append({"key": k, "values": vals, "differs": len({x for x in vals if x is not None}) > 1})
    return {"rows": rows, "more": max(0, len(keys) - CONFIG_KEYS), "value_chars": CONFIG_VALUE}


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only: ``localhost``, 127.0.0.0/8 or ::1."""
    import ipaddress

    h = host.strip("[]").lower()
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def allowed_hosts_for(host: str) -> frozenset[str] | None:
    """The Host headers a server bound to ``host`` answers: for a loopback address, the
    loopback names and that address (so DNS-rebinding pages stay blocked); for any other,
    ``None`` — every name (the user chose to expose the viewer)."""
    if not is_loopback(host):
        return None
    return LOOPBACK_HOSTS | {host, f"[{host.strip('[]')}]" if ":" in host else host}


def _hostname(host_header: str) -> str:
    if host_header.startswith("["):
        return host_header.split("]")[0] + "]"
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


def create_app(store: str | Path, *, watch: float | None = None, allowed_hosts: set[str] | frozenset[str] | None = None,
               reingest: bool = True, sources: Sequence[str | Path] = ()) -> FastAPI:
    """The viewer of ``store`` (which may not exist yet: its pages say so).

    ``watch``: re-ingest unfinished runs every this many seconds.  ``allowed_hosts``: the
    Host headers answered (default: the loopback names, which blocks DNS-rebinding
    pages; ``{"*"}`` answers any).  ``reingest``: offer the re-ingest button.
    ``sources``: the files and folders re-ingest may read — a run's recorded sources
    outside them are never read (the manifest is data, not an instruction); with none
    named there is no re-ingest."""
    v = Viewer(Path(store), watch=watch, reingest=reingest, sources=sources)
    hosts = LOOPBACK_HOSTS if allowed_hosts is None else frozenset(allowed_hosts)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        stop = threading.Event()
        t = None
        if watch:
            t = threading.Thread(target=v.watch_loop, args=(watch, stop), daemon=True, name="rolloutlab-watch")
            t.start()
        try:
            yield
        finally:
            stop.set()
            if t is not None:
                t.join(timeout=5)
            v.analyses.close()

    app = FastAPI(title="rolloutlab viewer", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.viewer = v

    @app.middleware("http")
    async def guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        resp: Response
        name = _hostname(request.headers.get("host", ""))
        # A loopback address literal cannot be a rebinding page's name: answer it too.
        if "*" not in hosts and name not in hosts and not is_loopback(name):
            resp = PlainTextResponse("unknown Host header (the viewer answers its own address only)", 400)
        elif request.method not in ("GET", "HEAD", "POST"):
            resp = PlainTextResponse("method not allowed", 405)
        else:
            try:
                resp = await call_next(request)
            except Exception:
                log.exception("error serving %s", request.url.path)
                resp = v.message("Internal error", "The viewer hit an error it did not expect; the server log has "
                                 "the details.", status=500)
        for k, val in SECURITY_HEADERS.items():
            resp.headers.setdefault(k, val)
        return resp

    async def on_error(request: Request, exc: Exception) -> Response:
        if isinstance(exc, HTTPException):
            return v.message("Not found" if exc.status_code == 404 else "Error", str(exc.detail), status=exc.status_code)
        if isinstance(exc, RequestValidationError):
            errs = "; ".join(f"{'.'.join(str(x) for x in e.get('loc', ()))}: {e.get('msg')}" for e in exc.errors())
            return v.message("Bad request", errs, status=400)
        if isinstance(exc, NotFound):
            return v.message("Not found", str(exc), status=404)
        if isinstance(exc, Q.BadRequest):
            return v.message("Bad request", str(exc), status=400)
        return v.message("Error", str(exc), status=500)

    for exc_class in (HTTPException, RequestValidationError, RolloutlabError):
        app.add_exception_handler(exc_class, on_error)

    def args(request: Request) -> dict[str, str]:
        return {k: val for k, val in request.query_params.items()}

    def watching(rid: str) -> bool:
        """Whether this viewer's timer re-ingests the run (``--watch``, its sources named)."""
        if not (v.watch and v.can_reingest):
            return False
        return any(v.named(str(src)) for src in v.view.entry(rid).get("sources", []))

    def pick_split(rid: str, raw: str | None) -> tuple[str, dict[str, int]]:
        counts = Q.splits(v.view, rid)
        split = raw or Q.default_split(counts)
        if counts and split not in counts:
            raise NotFound(f"run {rid!r} has no {split[:20]!r} trajectories; it has: {', '.join(counts)}")
        return split, counts

    # -- pages ------------------------------------------------------------------------
    @app.get("/", response_class=HTMLResponse)
    def runs_page() -> Response:
        v.view.refresh()
        if v.view.store is None:
            title = "Cannot read the store" if v.view.error else "No store yet"
            return v.message(title, v.view.error or f"There is no store at {v.path} yet.", status=200,
                             hint=f"rolloutlab ingest SRC --store {v.path}", live_url="/api/version",
                             live_version="", live_on=True)
        runs = Q.runs_overview(v.view)
        mixed = any(str(r.get("model") or "").startswith("mixed (") for r in runs)
        return v.render("runs.html", runs=runs, config=config_table(runs), mixed=mixed, live_url="/api/version",
                        live_version=v.view.version, live_on=any(live_default(r["status"], watching=watching(r["run_id"]))
                                                                 for r in runs))

    @app.get("/runs/{run_id}", response_class=HTMLResponse)
    def dashboard(request: Request, run_id: str) -> Response:
        a = args(request)
        rid = v.view.resolve(run_id)
        entry = v.view.entry(rid)
        version = v.view.run_versions[rid]
        split, counts = pick_split(rid, a.get("split"))
        common = {"rid": rid, "run": run_info(entry), "sources": entry.get("sources", []), "split": split,
                  "splits": counts, "token": v.token, "can_reingest": v.can_reingest,
                  "flash": v.flash.pop(rid, None), "live_url": url(f"/api/runs/{seg(rid)}/version", split=split),
                  "live_version": version, "live_on": live_default(entry["run"].get("status"), watching=watching(rid))}
        rule = v.view.success_rule(rid, split)
        common["success_rule"] = rule.text if rule is not None else None
        if not counts:  # metrics only (or nothing yet): the analysis of its scalars, if it logged any
            has_metrics = any(p["files"].get("metrics") for p in entry["parts"].values())
            dash, fresh = v.analyses.get(rid, split, version) if has_metrics else (None, True)
            return v.render("run.html", layout="train", steps=[], dash=dash, fresh=fresh, charts=[], page=1, pages=1,
                            step_rows=[], live_analysis=dash.version if dash else "", **common)
        steps = Q.step_table(v.view, rid, split)
        dash, fresh = v.analyses.get(rid, split, version)
        page = Q.int_arg("page", a.get("page"), lo=1, hi=MAX_PAGE) or 1
        if split != "train":
            return eval_dashboard(rid, split, steps, dash, fresh, page, common)
        pages = max(1, math.ceil(len(steps) / STEPS_PER_PAGE))
        charts = []
        if not dash.figures:
            xs = [r["step"] for r in steps]
            for key, title in (("mean_reward", "mean reward (graded)"), ("success_rate", "success rate"),
                               ("zero_var_groups", "groups with zero reward variance"),
                               ("mean_response_tokens", "tokens per trajectory (all turns)"),
                               ("mean_response_chars", "chars of the final response"),
                               ("mean_turns", "turns"), ("ungraded_rate", "ungraded rate")):
                c = svg_chart(xs, [r[key] for r in steps])
                if c is not None:
                    charts.append((title, c))
        return v.render("run.html", layout="train", steps=steps,
                        step_rows=steps[(page - 1) * STEPS_PER_PAGE: page * STEPS_PER_PAGE],
                        dash=dash, fresh=fresh, charts=charts, page=page, pages=pages,
                        step_list=orjson.dumps([r["step"] for r in steps]).decode(),
                        live_analysis=dash.version, **common)

    def eval_dashboard(rid: str, split: str, steps: list[dict[str, Any]], dash: Any, fresh: bool, page: int,
                       common: dict[str, Any]) -> Response:
        """An evaluation's layout: scores by checkpoint, then by checkpoint and task with what
        the grader said; curves only over two or more checkpoints (never a one-point line)."""
        total, rows = Q.eval_scores_page(v.view, rid, split, page=page, per_page=SCORES_PER_PAGE)
        charts = []
        if len(steps) >= 2:
            xs = [r["step"] for r in steps]
            for key, title in (("mean_reward", "mean score (graded)"), ("success_rate", "success rate")):
                c = svg_chart(xs, [r[key] for r in steps])
                if c is not None:
                    charts.append((title, c))
        return v.render("run.html", layout="eval", steps=steps, step_rows=steps, dash=dash, fresh=fresh,
                        charts=charts, scores=rows, page=page, pages=max(1, math.ceil(total / SCORES_PER_PAGE)),
                        scores_total=total, live_analysis=dash.version, **common)

    @app.get("/runs/{run_id}/steps/{step}", response_class=HTMLResponse)
    def step_page(request: Request, run_id: str, step: int) -> Response:
        a = args(request)
        Q.check_int("step", step, lo=0)
        rid = v.view.resolve(run_id)
        split, counts = pick_split(rid, a.get("split"))
        all_steps = Q.step_list(v.view, rid, split)
        summary = Q.step_table(v.view, rid, split, step)
        row = summary[0] if summary else None
        if row is None:
            near = sorted(all_steps, key=lambda s: abs(s - step))[:5]
            raise NotFound(f"run {rid!r} has no {split} step {step}; nearest: {', '.join(map(str, sorted(near))) or 'none'}")
        has_groups = bool(row["groups"])
        view = Q.choice_arg("view", a.get("view"), ("groups", "table"), "groups" if has_groups else "table")
        sorts = Q.GROUP_SORTS if view == "groups" else Q.TRAJ_SORTS
        other = Q.TRAJ_SORTS if view == "groups" else Q.GROUP_SORTS
        raw_sort = a.get("sort")
        if raw_sort in other and raw_sort not in sorts:  # the view was just switched: its default sort
            raw_sort = None
        sort = Q.choice_arg("sort", raw_sort, list(sorts), "group" if view == "groups" else "sample")
        order = Q.choice_arg("order", a.get("order"), ("asc", "desc"), "asc")
        per_page = Q.int_arg("per_page", a.get("per_page"), lo=1, hi=max(PER_PAGE[view])) or PER_PAGE[view][1]
        page = Q.int_arg("page", a.get("page"), lo=1, hi=MAX_PAGE) or 1
        f = Q.Filters.parse(a)
        run = run_info(v.view.entry(rid))
        adv_default, adv_why = default_estimator(run.get("algorithm"))
        adv = Q.choice_arg("adv", a.get("adv"), ESTIMATORS, adv_default)
        fetch = Q.step_groups_page if view == "groups" else Q.step_table_page
        total, items = fetch(v.view, rid, split, step, f, sort=sort, desc=order == "desc", page=page, per_page=per_page)
        # advantages are what an update gives samples: an evaluation's samples get none
        step_adv = step_advantages(v.view, rid, split, step, adv) if split == "train" else None
        if step_adv is not None:
            annotate(items, step_adv, groups=view == "groups")
        i = all_steps.index(step)
        keep = {"split": split, "view": view, "sort": sort, "order": order, "per_page": per_page, **f.args()}
        if adv != adv_default:
            keep["adv"] = adv
        return v.render("step.html", rid=rid, run=run, split=split, splits=counts, step=step,
                        adv=adv if step_adv is not None else None, adv_default=adv_default, adv_why=adv_why,
                        estimators=ESTIMATORS, adv_formula=FORMULA[adv],
                        adv_caveat=step_adv.note if step_adv is not None else None,
                        n_steps=len(all_steps), row=row, view=view, sort=sort, order=order, sorts=list(sorts), per_page=per_page,
                        per_page_choices=PER_PAGE[view], page=page, pages=max(1, math.ceil(total / per_page)),
                        total=total, items=items, f=f, keep=keep, terminations=Q.terminations(v.view, rid, split, step),
                        success_rule=rule.text if (rule := v.view.success_rule(rid, split)) is not None else None,
                        prev_step=all_steps[i - 1] if i > 0 else None,
                        next_step=all_steps[i + 1] if i + 1 < len(all_steps) else None)

    @app.get("/runs/{run_id}/traj", response_class=HTMLResponse)
    def traj_page(request: Request, run_id: str) -> Response:
        a = args(request)
        rid = v.view.resolve(run_id)
        traj_id = a.get("id") or ""
        t = Q.trajectory(v.view, rid, traj_id, a.get("split") or None, Q.int_arg("step", a.get("step")))
        if t is None:
            raise NotFound(f"no trajectory {traj_id[:200]!r} in run {rid!r}")
        run = run_info(v.view.entry(rid))
        n_steps = len(Q.step_list(v.view, rid, t["split"]))
        return v.render("traj.html", rid=rid, run=run, t=t, preview=Q.TEXT_PREVIEW, n_steps=n_steps,
                        **traj_context(v, rid, run, t, a))

    @app.get("/runs/{run_id}/text")
    def text_page(request: Request, run_id: str) -> Response:
        a = args(request)
        rid = v.view.resolve(run_id)
        traj_id = a.get("id") or ""
        turn = Q.int_arg("turn", a.get("turn"), lo=-1)
        turn = -1 if turn is None else turn
        text = Q.full_text(v.view, rid, traj_id, turn, a.get("field") or "", a.get("split") or None,
                           Q.int_arg("step", a.get("step")))
        if text is None:
            raise NotFound(f"no such text in run {rid!r}")
        # text/plain, never sniffed, sandboxed: a browser shows it and runs nothing.
        return PlainTextResponse(text, headers={"Content-Security-Policy": "sandbox; default-src 'none'",
                                                "Cache-Control": "no-store"})

    @app.get("/runs/{run_id}/task", response_class=HTMLResponse)
    def task_page(request: Request, run_id: str) -> Response:
        a = args(request)
        rid = v.view.resolve(run_id)
        split, _ = pick_split(rid, a.get("split"))
        task_id = a.get("id") or ""
        hist = Q.task_history(v.view, rid, split, task_id)
        if not hist:
            raise NotFound(f"task {task_id[:200]!r} has no {split} trajectories in run {rid!r}")
        steps = [h["step"] for h in hist]
        sa = Q.int_arg("a", a.get("a"))
        sb = Q.int_arg("b", a.get("b"))
        sa = steps[0] if sa is None else sa
        sb = steps[-1] if sb is None else sb
        for s in (sa, sb):
            if s not in steps:
                raise NotFound(f"task {task_id[:200]!r} was not sampled at step {s}; it was at: "
                               + ", ".join(map(str, steps[:50])) + (" …" if len(steps) > 50 else ""))
        cols = [(s, Q.task_at_step(v.view, rid, split, task_id, s)) for s in (sa, sb)]
        return v.render("task.html", rid=rid, run=run_info(v.view.entry(rid)), split=split, task_id=task_id, hist=hist,
                        a=sa, b=sb, cols=cols)

    @app.post("/runs/{run_id}/reingest")
    async def reingest_post(request: Request, run_id: str) -> Response:
        client = request.client.host if request.client else ""
        if not v.can_reingest:
            return v.message("Re-ingest is off", "This viewer was started without re-ingest, or without naming "
                             "the sources it may read.", status=403,
                             hint=f"rolloutlab serve {v.path} --source PATH  (the run's source file or folder)")
        if client not in ("127.0.0.1", "::1") and not client.startswith("127."):
            return v.message("Forbidden", "Re-ingest is accepted from this machine only.", status=403)
        origin = request.headers.get("origin")
        if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
            return v.message("Forbidden", "Re-ingest is accepted from the viewer's own pages only.", status=403)
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        if not secrets.compare_digest((form.get("token") or [""])[0], v.token):
            return v.message("Forbidden", "The page's token is missing or stale: reload the page and try again.",
                             status=403)
        rid = await run_in_threadpool(v.view.resolve, run_id)
        split = (form.get("split") or [""])[0]
        back = url(f"/runs/{seg(rid)}", split=split or None)
        try:
            v.flash[rid] = await run_in_threadpool(v.reingest, rid)
        except RolloutlabError as e:  # a source gone, a file now unreadable: say so, the store is unchanged
            return v.message("Re-ingest failed", str(e), status=409, back=back,
                             hint="fix the source, or re-ingest it from the command line")
        return RedirectResponse(back, status_code=303)

    # -- what live pages poll ------------------------------------------------------------
    @app.get("/api/version")
    def store_version() -> JSONResponse:
        v.view.refresh()
        return JSONResponse({"version": v.view.version, "exists": v.view.store is not None},
                            headers={"Cache-Control": "no-store"})

    @app.get("/api/runs/{run_id}/version")
    def run_version(request: Request, run_id: str) -> JSONResponse:
        rid = v.view.resolve(run_id)
        run = v.view.entry(rid)["run"]
        split = request.query_params.get("split") or "train"
        return JSONResponse({"version": v.view.run_versions[rid], "analysis": v.analyses.shown(rid, split),
                             "status": run.get("status"), "last_step": run.get("last_step")},
                            headers={"Cache-Control": "no-store"})

    @app.get("/api/runs/{run_id}/steps")
    def run_steps(request: Request, run_id: str) -> JSONResponse:
        """The run's step rows as JSON (:class:`rolloutlab.outcomes.StepOutcome` per step, the
        numbers the run page shows), for scripts and tests."""
        v.view.refresh()
        rid = v.view.resolve(run_id)
        split = request.query_params.get("split") or Q.default_split(Q.splits(v.view, rid))
        return JSONResponse({"run_id": rid, "split": split, "success_rule": getattr(v.view.success_rule(rid, split), "text", None),
                             "steps": Q.step_table(v.view, rid, split)}, headers={"Cache-Control": "no-store"})

    @app.get("/static/{name}")
    def static(name: str) -> Response:
        p = v.static.get(name)
        if p is None:
            raise HTTPException(404, f"no static file {name[:80]!r}")
        media = {"css": "text/css", "js": "text/javascript"}.get(p.suffix.lstrip("."), "application/octet-stream")
        return FileResponse(p, media_type=media, headers={"Cache-Control": "public, max-age=3600"})

    add_routes(app, v)
    add_search_routes(app, v)
    add_token_routes(app, v, run_info)
    return app


def serve(store: str | Path, *, host: str = "127.0.0.1", port: int = 8000, watch: float | None = None,
          log_level: str = "info", sources: Sequence[str | Path] = ()) -> None:
    """Run the viewer with uvicorn until interrupted (``sources``: see :func:`create_app`)."""
    import uvicorn

    allowed = allowed_hosts_for(host)
    hosts = frozenset({"*"}) if allowed is None else allowed
    uvicorn.run(create_app(store, watch=watch, allowed_hosts=hosts, sources=sources), host=host, port=port,
                log_level=log_level)
