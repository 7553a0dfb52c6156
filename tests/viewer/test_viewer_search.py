"""``/search``: text across steps and runs, checked against a slow scan of the whole ``texts`` table.

The store is the viewer tests' own (:func:`tests.viewer.make_store`): a multi-turn agent run
(a hostile trajectory, a 10 MB observation, an ungraded one with an error) and a verl run.
:func:`slow_search` reads every text row into Python and finds the substring with
``str.lower`` and ``in``; every page of results is compared with it.
"""

from __future__ import annotations

import html as htmllib
import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

pytest.importorskip("fastapi")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from collections.abc import Iterator

import rolloutlab
from rolloutlab.io import RunWriter, read_run
from rolloutlab.schema import Run, Trajectory, Turn
from rolloutlab.viewer import _queries as Q
from rolloutlab.viewer import _search as S
from tests.viewer import HOSTILE_TRAJ, RUN, VERL_NAME, make_store, step_trajectories
from tests.viewer.test_viewer import assert_escaped, client_for

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx`:DeprecationWarning")

TURN_FIELDS = ("observation", "thought", "action", "tool_calls")
"""A turn's texts, in the order they are read."""


@dataclass(frozen=True)
class Place:
    run_id: str
    split: str
    step: int
    traj_id: str
    field: str
    turn: int  # -1: the trajectory's own text (prompt, response, error)


# -- the slow, obvious search -------------------------------------------------------------


def slow_search(store: Path, q: str, *, field: str = "any", runs: tuple[str, ...] = (), step_min: int | None = None,
                step_max: int | None = None, case: bool = False) -> list[tuple[Place, int]]:
    """(first place in reading order, how many (row, field) pairs match) of every matching
    trajectory, ordered by run, step, split, group, sample, trajectory."""
    st = rolloutlab.open_store(store)
    cols = {"any": ("prompt", "response", "error", *TURN_FIELDS)}.get(field, (field,))
    rel = st.sql("SELECT * FROM texts")
    names = rel.columns
    found: dict[tuple[str, str, int, str], list[tuple[tuple[float, int], Place]]] = {}
    for values in rel.fetchall():
        row = dict(zip(names, values, strict=True))
        if runs and row["run_id"] not in runs:
            continue
        if (step_min is not None and row["step"] < step_min) or (step_max is not None and row["step"] > step_max):
            continue
        for c in cols:
            text = row.get(c)
            if text is None or (q if case else q.lower()) not in (text if case else text.lower()):
                continue
            turn = row["turn_idx"]
            if turn >= 0:
                where: tuple[float, int] = (turn, TURN_FIELDS.index(c))
            else:  # the prompt comes before the turns, the response and the error after them
                where = {"prompt": (-1.0, 0), "response": (math.inf, 0), "error": (math.inf, 1)}[c]
            key = (row["run_id"], row["split"], row["step"], row["traj_id"])
            found.setdefault(key, []).append((where, Place(*key, field=c, turn=turn)))
    groups = {(r[0], r[1], r[2], r[3]): (r[4], r[5]) for r in
              st.sql("SELECT run_id, split, step, traj_id, group_id, sample_idx FROM trajectories").fetchall()}

    def order(k: tuple[str, str, int, str]) -> tuple[Any, ...]:
        g, s = groups[k]
        return (k[0], k[2], k[1], g is None, g or "", s is None, s or 0, k[3])

    return [(min(found[k], key=lambda p: p[0])[1], len(found[k])) for k in sorted(found, key=order)]


# -- reading the page -------------------------------------------------------------------

HIT = re.compile(r'<li class="hit">(.*?)</li>', re.S)


def hits(html: str) -> list[dict[str, Any]]:
    """Each result of a search page: its place, link, extra places and highlighted text."""
    out = []
    for block in HIT.findall(html):
        link = re.search(r'<a class="hit-link" href="([^"]+)"', block)
        where = re.search(r'<span class="where">in <b>([^<]+)</b>(?:, turn (\d+))?</span>', block)
        assert link is not None and where is not None, block
        href = htmllib.unescape(link.group(1))
        u = urlsplit(href)
        args = {k: v[0] for k, v in parse_qs(u.query).items()}
        more = re.search(r"\+(\d+) more place", block)
        mark = re.search(r"<mark>(.*?)</mark>", block, re.S)
        out.append({
            "place": Place(u.path.split("/")[2], args["split"], int(args["step"]), args["id"],
                           where.group(1).replace(" ", "_"), int(where.group(2)) if where.group(2) else -1),
            "href": href, "fragment": u.fragment, "places": 1 + (int(more.group(1)) if more else 0),
            "mark": htmllib.unescape(mark.group(1)) if mark else None, "block": block,
        })
    return out


def every_page(c: TestClient, params: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the results of every page, the pages' HTML) of one search."""
    pages, out = [], []
    page = 1
    while True:
        r = c.get("/search", params={**params, "page": page})
        assert r.status_code == 200, r.text
        pages.append(r.text)
        found = hits(r.text)
        if not found:
            return out, pages
        out += found
        page += 1


def text(html: str) -> str:
    return re.sub(r"\s+", " ", htmllib.unescape(re.sub(r"<[^>]+>", " ", html)))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_store(tmp_path_factory.mktemp("search"))[0]


@pytest.fixture(scope="module")
def client(store: Path) -> Iterator[TestClient]:
    with client_for(store) as c:
        yield c


@pytest.fixture(scope="module")
def verl_id(store: Path) -> str:
    return rolloutlab.open_store(store).resolve_run(VERL_NAME)


# -- what is found ------------------------------------------------------------------------


@pytest.mark.parametrize(("q", "field"), [
    ("room 1", "any"),                 # observations (and nothing before them)
    ("key 1", "any"),                  # first in an action, then in the same turn's tool call
    ("Solve task-3", "prompt"),        # the prompt (messages, stored as JSON)
    ("task-3: CORRECT", "response"),   # the response, in another case
    ("question 2", "any"),             # verl's prompts
    ("a key and a note", "observation"),
    ("timed out", "any"),              # an ungraded trajectory's error
    ("answer", "any"),                 # both runs, two pages
])
def test_search_finds_what_a_slow_scan_finds(client: TestClient, store: Path, q: str, field: str) -> None:
    want = slow_search(store, q, field=field)
    assert want, "the case must find something"
    got, pages = every_page(client, {"q": q, "field": field})
    assert [(h["place"], h["places"]) for h in got] == want
    n = len(want)
    assert f"{n} {'trajectory matches' if n == 1 else 'trajectories match'}" in text(pages[0])
    assert len(pages) - 1 == math.ceil(n / S.PAGE_SIZE)
    for h in got:  # the highlight is the query, as the text has it
        assert h["mark"] is not None and h["mark"].lower() == q.lower()


def test_results_link_to_the_trajectory_and_turn(client: TestClient, store: Path) -> None:
    for q, field, fragment in (("Solve task-3", "prompt", "prompt"), ("task-3: correct", "response", "response"),
                               ("room 2:", "observation", "turn-2")):
        got, _ = every_page(client, {"q": q, "field": field})
        assert got and all(h["fragment"] == fragment for h in got)
        for h in got[:3]:
            page = client.get(h["href"].split("#")[0])
            assert page.status_code == 200
            assert f'id="{fragment}"' in page.text
            assert f"trajectory <span class=\"mono\">{h['place'].traj_id}</span>" in page.text
            section = page.text.split(f'id="{fragment}"', 1)[1]
            if fragment.startswith("turn-"):
                section = section.split("</section>", 1)[0]  # this turn only
            assert q.lower() in section.lower()


def test_run_filter_and_step_range(client: TestClient, store: Path, verl_id: str) -> None:
    got, _ = every_page(client, {"q": "answer", "run": RUN, "step_min": 2, "step_max": 3})
    assert [(h["place"], h["places"]) for h in got] == slow_search(store, "answer", runs=(RUN,), step_min=2, step_max=3)
    assert got and {(h["place"].run_id, h["place"].step) for h in got} == {(RUN, 2), (RUN, 3)}
    got, _ = every_page(client, {"q": "answer", "run": [verl_id, RUN], "step_min": 3})
    assert {(h["place"].run_id, h["place"].step) for h in got} == {(RUN, 3), (RUN, 4), (verl_id, 3)}
    got, _ = every_page(client, {"q": "answer", "run": verl_id, "step_max": 1})
    assert got and {(h["place"].run_id, h["place"].step) for h in got} == {(verl_id, 1)}


def test_paging_covers_every_result_once_and_does_not_scan_again(client: TestClient, store: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    want = slow_search(store, "answer")
    assert len(want) > S.PAGE_SIZE  # two pages at least
    first = client.get("/search", params={"q": "answer"})
    scans: list[S.Spec] = []
    real = S.Searcher._scan
    monkeypatch.setattr(S.Searcher, "_scan", lambda self, spec, *a: scans.append(spec) or real(self, spec, *a))
    second = client.get("/search", params={"q": "answer", "page": 2})
    assert scans == []  # the first request's search was kept
    one, two = hits(first.text), hits(second.text)
    assert len(one) == S.PAGE_SIZE and len(two) == len(want) - S.PAGE_SIZE
    assert [h["place"] for h in one + two] == [p for p, _ in want]
    assert "page 1 of 2" in first.text and "page 2 of 2" in second.text
    assert 'start="51"' in second.text
    past = client.get("/search", params={"q": "answer", "page": 3})
    assert past.status_code == 200 and 'id="past-the-end"' in past.text and not hits(past.text)


def test_like_wildcards_and_backslashes_are_literal(client: TestClient, store: Path) -> None:
    def places(q: str) -> list[Place]:
        got, _ = every_page(client, {"q": q})
        assert [(h["place"], h["places"]) for h in got] == slow_search(store, q), q
        return [h["place"] for h in got]

    assert places("w_ndow") == [] and places("door%key") == [] and places("%%") == []
    assert places("__") == places("window.__xss") != []  # `_` matches only itself
    assert {p.traj_id for p in places("__")} == {HOSTILE_TRAJ}
    assert {p.traj_id for p in places("{% raw")} == {HOSTILE_TRAJ}
    quoted = places('{\\"q\\": \\"key 0')  # tool call arguments, JSON inside JSON: backslashes
    assert quoted and all(p.field == "tool_calls" for p in quoted)
    assert places("\\\\") == []  # two backslashes in a row appear nowhere


def test_search_ignores_case_unless_asked(client: TestClient, store: Path) -> None:
    lower, _ = every_page(client, {"q": "room 1"})
    upper, _ = every_page(client, {"q": "ROOM 1"})
    assert lower and [h["place"] for h in lower] == [h["place"] for h in upper]
    exact, pages = every_page(client, {"q": "ROOM 1", "case": "1"})
    assert exact == [] and 'id="no-results"' in pages[0]
    assert slow_search(store, "Solve", case=True)
    got, _ = every_page(client, {"q": "Solve", "case": "1", "field": "prompt"})
    assert [(h["place"], h["places"]) for h in got] == slow_search(store, "Solve", field="prompt", case=True)


def test_hostile_text_in_matches_is_escaped(client: TestClient) -> None:
    for q in ("<script>window.__xss=1</script>", "onerror", "31mred", "desrever", '"><svg onload'):
        r = client.get("/search", params={"q": q})
        assert r.status_code == 200, r.text
        found = hits(r.text)
        assert found and {h["place"].traj_id for h in found} == {HOSTILE_TRAJ}, q
        assert_escaped(r.text)
        assert "\x1b" not in r.text and "\u202e" not in r.text
    r = client.get("/search", params={"q": "<script>window.__xss=1</script>"})
    assert "<mark>&lt;script&gt;window.__xss=1&lt;/script&gt;</mark>" in r.text
    r = client.get("/search", params={"q": "31mred", "field": "response"})
    assert "\\x1b[<mark>31mred</mark>\\x1b[0m \\u202edesrever" in r.text  # control characters shown, not obeyed
    # In the query itself: echoed as visible text; the search box keeps it as typed (to edit it).
    r = client.get("/search", params={"q": "\u202edesrever\x1b"})
    assert r.status_code == 200 and 'value="\u202edesrever\x1b"' in r.text
    rest = r.text.replace('value="\u202edesrever\x1b"', "")
    assert "\u202e" not in rest and "\x1b" not in rest and "\\u202edesrever\\x1b" in rest


def test_a_match_past_the_trajectory_page_links_the_whole_text(tmp_path: Path) -> None:
    far = "y" * (Q.TEXT_PREVIEW + 10_000)
    turn = Turn(turn_idx=0, observation=far + "the NEEDLE at the end", action="look")
    t = Trajectory(traj_id="t0", step=1, group_id="g", sample_idx=0, prompt="p", response="r", reward=1.0,
                   num_turns=1, turns=[turn])
    w = RunWriter(tmp_path / "run", Run(run_id="far", name="far"))
    w.write_step(1, [t])
    w.write_run()
    rolloutlab.ingest([tmp_path / "run"], tmp_path / "store")
    with client_for(tmp_path / "store") as c:
        r = c.get("/search", params={"q": "needle"})
        (h,) = hits(r.text)
        assert h["place"] == Place("far", "train", 1, "t0", "observation", 0) and h["mark"] == "NEEDLE"
        assert f"at character {len(far) + 5:,} of {len(far) + 21:,}" in text(h["block"])
        # BEFORE characters before the match (cut: …), the rest of the text after it (not cut)
        assert "…" + "y" * (S.BEFORE - 4) + "the <mark>NEEDLE</mark> at the end</div>" in h["block"]
        whole = re.search(r'href="(/runs/far/text\?[^"]+)"', h["block"])
        assert whole is not None
        body = c.get(htmllib.unescape(whole.group(1)))
        assert body.status_code == 200 and body.text.endswith("the NEEDLE at the end")


# -- bounds, bad input, damage --------------------------------------------------------


@pytest.mark.parametrize(("cap", "batch", "files"), [
    (5, (1, 1), 1),    # 12 match at step 1 of the agent run: its other steps are never read
    (20, (1, 1), 2),
    (20, (4, 64), 4),  # the first statement reads 4 files
    (50, (1, 1), 5),   # the agent run's 4 steps hold 48: the verl run's first step too
])
def test_the_scan_stops_after_the_cap(store: Path, monkeypatch: pytest.MonkeyPatch, cap: int, batch: tuple[int, int],
                                      files: int) -> None:
    monkeypatch.setattr(S, "CAP", cap)
    monkeypatch.setattr(S, "BATCH_FILES", batch)
    want = slow_search(store, "answer")
    assert len(want) > cap
    with client_for(store) as c:  # an app of its own: no search kept from another test
        got, pages = every_page(c, {"q": "answer"})
    assert f"{cap}+ trajectories match; the first {cap} are listed" in text(pages[0])
    assert f"searched {files} text file{'s' if files > 1 else ''} " in text(pages[0])
    assert [(h["place"], h["places"]) for h in got] == want[:cap]


@pytest.mark.parametrize("q", ["", "a", " b ", "    "])
def test_short_queries_ask_for_more_without_scanning(client: TestClient, q: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(S.Searcher, "_scan", lambda *a: pytest.fail("scanned"))
    r = client.get("/search", params={"q": q})
    assert r.status_code == 200 and 'id="too-short"' in r.text and "at least 2 characters" in r.text
    assert not hits(r.text) and 'id="search-count"' not in r.text


def test_no_results_says_what_was_searched(client: TestClient) -> None:
    r = client.get("/search", params={"q": "nowhere to be found", "field": "prompt", "run": RUN, "step_min": 2})
    assert r.status_code == 200 and not hits(r.text)
    said = text(r.text[r.text.index('id="no-results"'):].split("</p>", 1)[0])
    assert "No trajectory's prompt contains nowhere to be found (in any case) in agent at steps ≥ 2." in said
    r = client.get("/search", params={"q": "nowhere", "step_min": 1, "step_max": 3, "case": "1"})
    said = text(r.text[r.text.index('id="no-results"'):].split("</p>", 1)[0])
    assert "No trajectory's text contains nowhere at steps 1–3." in said
    assert "0 trajectories match" in text(r.text)


@pytest.mark.parametrize(("query", "status", "says"), [
    ("q=answer&page=99999999999999999999", 400, "page must"),
    ("q=answer&page=" + "1" + "0" * 5000, 400, "page must"),
    ("q=answer&page=1000000001", 400, "page must lie in"),
    ("q=answer&page=0", 400, "page must lie in"),
    ("q=answer&field=thoughts", 400, "field must be one of any, prompt, response, observation"),
    ("q=answer&step_min=3&step_max=2", 400, "step_min (3) is above step_max (2)"),
    ("q=answer&step_min=-1", 400, "step_min must lie in"),
    ("q=answer&case=yes", 400, "case must be one of 0, 1"),
    ("q=" + "x" * 201, 400, "q must be at most 200 characters"),
    ("q=answer&run=nope", 404, "not in the store"),
])
def test_bad_search_requests_get_clear_pages(client: TestClient, query: str, status: int, says: str) -> None:
    r = client.get(f"/search?{query}")
    assert r.status_code == status, r.text[:300]
    assert says in htmllib.unescape(r.text) and "Traceback" not in r.text


def test_every_page_has_the_search_box(client: TestClient) -> None:
    for path in ("/", f"/runs/{RUN}", f"/runs/{RUN}/steps/2", f"/runs/{RUN}/traj?id=s1-g0-0", "/search"):
        html = client.get(path).text
        assert re.search(r'<form class="nav-search" method="get" action="/search" role="search">'
                         r'<input type="search" name="q"', html), path
    assert ".nav-search" in client.get("/static/viewer.css").text


@pytest.mark.parametrize("damage", ["corrupt", "missing"])
def test_an_unreadable_texts_file_is_named_and_the_others_answer(tmp_path: Path, damage: str) -> None:
    store, _ = make_store(tmp_path)
    st = rolloutlab.open_store(store)
    bad = next(p for p in st.files("texts") if "run_id=agent" in str(p) and "step_000002" in p.name)
    want = [(p, n) for p, n in slow_search(store, "answer") if (p.run_id, p.step) != (RUN, 2)]
    if damage == "corrupt":
        bad.write_bytes(b"PAR1 not parquet at all PAR1")
    else:
        bad.unlink()
    want = [(p, n) for p, n in slow_search(store, "answer") if (p.run_id, p.step) != (RUN, 2)]
    with client_for(store) as c:
        got, pages = every_page(c, {"q": "answer"})
        assert [(h["place"], h["places"]) for h in got] == want
        assert {h["place"].run_id for h in got} == {RUN, st.resolve_run(VERL_NAME)}
        assert 'id="unreadable-texts"' in pages[0] and bad.name in pages[0]
        assert "rolloutlab check-store --repair --store" in pages[0]


def test_the_pager_keeps_every_choice(client: TestClient, store: Path, verl_id: str) -> None:
    params = {"q": "ANSWER", "run": [RUN, verl_id], "field": "response", "step_min": "1", "step_max": "4"}
    want = slow_search(store, "answer", field="response", runs=(RUN, verl_id), step_min=1, step_max=4)
    assert len(want) > S.PAGE_SIZE
    first = client.get("/search", params=params)
    link = re.search(r'<a href="([^"]+)">next ›</a>', first.text)
    assert link is not None
    nxt = htmllib.unescape(link.group(1))
    assert parse_qs(urlsplit(nxt).query) == {**{k: v if isinstance(v, list) else [v] for k, v in params.items()},
                                             "page": ["2"]}
    second = client.get(nxt)
    assert [h["place"] for h in hits(first.text) + hits(second.text)] == [p for p, _ in want]


def test_a_file_replaced_during_the_scan_starts_the_search_again(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    store, run_dir = make_store(tmp_path)
    real = S.Searcher._query
    calls: list[list[str]] = []

    def query(self: S.Searcher, con: Any, spec: S.Spec, needle: str, run_id: str, files: list[str]) -> Any:
        if not calls:  # an ingest commits between the listing of the files and their reading
            w = RunWriter(run_dir, read_run(run_dir))
            w.write_step(1, [t.model_copy(update={"response": "brand new words"}) for t in step_trajectories(1)])
            rolloutlab.ingest([run_dir], store)
        calls.append(files)
        return real(self, con, spec, needle, run_id, files)

    monkeypatch.setattr(S.Searcher, "_query", query)
    with client_for(store) as c:
        got, pages = every_page(c, {"q": "brand new"})
    assert not all(Path(f).exists() for f in calls[0])  # the first statement met a replaced file
    assert [(h["place"], h["places"]) for h in got] == slow_search(store, "brand new")
    assert len(got) == 12 and {h["place"].step for h in got} == {1}
    assert 'id="unreadable-texts"' not in pages[0]
