"""The viewer at the server: pages, filters, paging, hostile text, bad input, live updates.

Most tests drive the app in-process (Starlette's TestClient, as if from 127.0.0.1); one
runs a real uvicorn server on a free loopback port.  Shared stores are read-only; tests
that change a store build their own.
"""

from __future__ import annotations

import re
import socket
import threading
import time
import warnings
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import orjson
import pytest

pytest.importorskip("fastapi")
with warnings.catch_warnings():  # starlette suggests httpx2, which is not needed here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

import rolloutlab
from rolloutlab.schema import FORMAT_VERSION
from rolloutlab.viewer import create_app
from tests.viewer import (
    BIG_OBS,
    BIG_TRAJ,
    HOSTILE_ID,
    HOSTILE_TRAJ,
    PAYLOADS,
    RUN,
    VERL_NAME,
    add_step_to,
    make_store,
)

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx`:DeprecationWarning")
BASE = "http://127.0.0.1:8000"


def client_for(store: Path, **kw: object) -> TestClient:
    return TestClient(create_app(store, **kw), base_url=BASE, client=("127.0.0.1", 50000))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_store(tmp_path_factory.mktemp("viewer"))


@pytest.fixture(scope="module")
def client(built: tuple[Path, Path]) -> Iterator[TestClient]:
    with client_for(built[0]) as c:
        yield c


@pytest.fixture
def own(tmp_path: Path) -> tuple[Path, Path]:
    return make_store(tmp_path)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def assert_escaped(html: str) -> None:
    """No payload survives as markup: no event-handler attribute, no javascript: URL, no
    inline script, no element a payload would create."""
    for p in PAYLOADS:
        if "<" in p:
            assert p not in html, p
    parser = _Tags()
    parser.feed(html)
    for tag, attrs in parser.tags:
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name, value)
            if name in ("href", "src", "action", "formaction"):
                assert not (value or "").strip().lower().startswith("javascript:"), (tag, name, value)
        assert tag not in ("img", "svg", "iframe", "object", "embed") or (tag == "svg" and ("class", "chart") in attrs), tag
        if tag == "script":
            assert dict(attrs).get("src", "").startswith("/static/"), attrs


def cards(html: str) -> list[str]:
    """The class of each sample card (ok / fail / ungraded) on a step page."""
    return re.findall(r'<a class="card ([a-z]*)"', html)


def traj_ids(html: str) -> list[str]:
    return [parse_qs(urlsplit(h.replace("&amp;", "&")).query)["id"][0]
            for h in re.findall(r'href="(/runs/[^"]+/traj\?id=[^"]+)"', html)]


# -- pages ------------------------------------------------------------------------------


def test_runs_page_lists_runs_and_escapes_names(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200
    assert 'href="/runs/agent"' in r.text
    assert "&lt;img src=x onerror=&#34;window.__xss=1&#34;&gt; verl" in r.text  # the hostile run name, as text
    assert_escaped(r.text)


def test_dashboard_shows_findings_figures_and_steps(client: TestClient) -> None:
    r = client.get(f"/runs/{RUN}")
    assert r.status_code == 200
    html = r.text
    assert 'id="findings"' in html
    try:
        import plotly  # noqa: F401

        import rolloutlab.report  # noqa: F401
    except ImportError:
        assert 'id="charts"' in html and "/runs/agent/steps/2?split=train" in html
    else:
        assert 'id="figures"' in html and 'data-name="reward"' in html
        assert '<script src="/static/plotly.min.js">' in html
    for s in (1, 2, 3, 4):
        assert f'href="/runs/agent/steps/{s}?split=train"' in html
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in html  # the hostile label, as text
    assert_escaped(html)


def test_hostile_run_name_reaches_figures_escaped(client: TestClient) -> None:
    rid = rolloutlab.open_store(client.app.state.viewer.path).resolve_run(VERL_NAME)  # type: ignore[attr-defined]
    r = client.get(f"/runs/{rid}")
    assert r.status_code == 200
    assert_escaped(r.text)
    assert "&lt;img src=x onerror=&#34;window.__xss=1&#34;&gt; verl" in r.text


def test_step_shows_groups_side_by_side(client: TestClient) -> None:
    r = client.get(f"/runs/{RUN}/steps/2")
    assert r.status_code == 200
    assert r.text.count('<section class="group">') == 3
    assert len(cards(r.text)) == 12
    assert cards(r.text).count("ungraded") == 1
    assert "3 matching groups" in r.text
    assert 'id="prev-step"' in r.text and 'id="next-step"' in r.text
    assert f"/runs/{RUN}/task?id=task-2" in r.text
    assert_escaped(r.text)


@pytest.mark.parametrize(
    ("query", "expect"),
    [
        ("success=true", lambda c: c and set(c) == {"ok"}),
        ("success=false", lambda c: c and set(c) == {"fail"}),
        ("graded=ungraded", lambda c: c == ["ungraded"]),
        ("reward_min=1&reward_max=1", lambda c: c and set(c) == {"ok"}),
        ("termination=error", lambda c: c == ["ungraded"]),
        ("turns_min=4&turns_max=4", lambda c: 0 < len(c) < 12),
    ],
)
def test_step_filters(client: TestClient, query: str, expect: object) -> None:
    r = client.get(f"/runs/{RUN}/steps/2?{query}")
    assert r.status_code == 200, r.text
    assert expect(cards(r.text)), (query, cards(r.text))  # type: ignore[operator]


def test_step_text_search(client: TestClient) -> None:
    r = client.get(f"/runs/{RUN}/steps/2", params={"q": "ONERROR"})
    assert traj_ids(r.text) == [HOSTILE_TRAJ]
    r = client.get(f"/runs/{RUN}/steps/2", params={"q": "task-3: correct", "view": "table"})
    assert traj_ids(r.text) and all(t.startswith("s2-g1-") for t in traj_ids(r.text))
    r = client.get(f"/runs/{RUN}/steps/2", params={"q": "'); DROP TABLE trajectories; --"})
    assert r.status_code == 200 and "0 matching groups" in r.text
    assert client.get(f"/runs/{RUN}/steps/2").text.count('<section class="group">') == 3


def test_step_table_sorts_and_pages(client: TestClient) -> None:
    r = client.get(f"/runs/{RUN}/steps/3?view=table&sort=reward&order=desc")
    rewards = [float(x) for x in re.findall(r'<span class="badge (?:ok|fail|)">([0-9.]+)</span>', r.text)]
    assert len(rewards) == 12 and rewards == sorted(rewards, reverse=True)
    seen: list[str] = []
    for page in (1, 2, 3):
        r = client.get(f"/runs/{RUN}/steps/3?view=table&per_page=5&page={page}")
        assert r.status_code == 200
        seen += traj_ids(r.text)
    assert len(seen) == 12 and len(set(seen)) == 12
    assert "page 3 of 3" in r.text
    r = client.get(f"/runs/{RUN}/steps/3?sort=std&order=desc&per_page=1&page=2")
    assert r.text.count('<section class="group">') == 1 and "page 2 of 3" in r.text


def test_trajectory_turn_by_turn(client: TestClient) -> None:
    r = client.get(f"/runs/{RUN}/traj", params={"id": "s1-g0-1"})
    assert r.status_code == 200
    html = r.text
    n = len(re.findall(r'<section class="turn"', html))
    assert n >= 2
    for field in ("observation", "thought", "action", "parsed action"):
        assert f"<summary>{field} <span" in html
    assert "<summary>result (15 chars)</summary>" in html
    assert "<b class=\"mono\">search</b>" in html  # the tool call's name
    assert "reward <b>0.1000</b>" in html  # a per-turn reward
    assert '<span class="badge ok">yes</span>' in html  # validity
    assert '<div class="role">system</div>' in html and '<div class="role">user</div>' in html
    assert "group samples:" in html and "this task across training" in html


def test_ungraded_trajectory_shows_its_error(client: TestClient) -> None:
    r = client.get(f"/runs/{RUN}/traj", params={"id": "s2-g2-3"})
    assert '<span class="badge ungraded">ungraded</span>' in r.text
    assert "grader timed out" in r.text


def test_hostile_trajectory_is_escaped(client: TestClient) -> None:
    r = client.get(f"/runs/{RUN}/traj", params={"id": HOSTILE_TRAJ})
    assert r.status_code == 200
    assert_escaped(r.text)
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in r.text
    assert "{{ 7 * 7 }} {% raw %}" in r.text  # no template evaluation
    assert "\\x1b[31mred" in r.text and "\\u202e" in r.text  # control and bidi characters made visible
    assert "\x1b" not in r.text and "\u202e" not in r.text


def test_hostile_ids_survive_urls(client: TestClient) -> None:
    r = client.get(f"/runs/{RUN}/steps/4")
    assert HOSTILE_ID in traj_ids(r.text)
    assert_escaped(r.text)
    t = client.get(f"/runs/{RUN}/traj", params={"id": HOSTILE_ID})
    assert t.status_code == 200 and "trajectory <span" in t.text
    assert_escaped(t.text)
    task = client.get(f"/runs/{RUN}/task", params={"id": HOSTILE_ID})
    assert task.status_code == 200
    assert_escaped(task.text)


def test_big_observation_is_cut_and_served_whole_as_plain_text(client: TestClient) -> None:
    r = client.get(f"/runs/{RUN}/traj", params={"id": BIG_TRAJ})
    assert r.status_code == 200 and len(r.content) < 200_000
    assert "the whole text" in r.text
    full = re.search(r'href="(/runs/agent/text\?[^"]+)"', r.text)
    assert full is not None
    whole = client.get(full.group(1).replace("&amp;", "&"))
    assert whole.status_code == 200
    assert len(whole.text) == BIG_OBS // 100 * 100
    assert whole.headers["content-type"].startswith("text/plain")
    assert whole.headers["x-content-type-options"] == "nosniff"
    assert whole.headers["content-security-policy"].startswith("sandbox")


def test_same_task_at_two_steps(client: TestClient) -> None:
    r = client.get(f"/runs/{RUN}/task", params={"id": "task-3"})
    assert r.status_code == 200
    assert 'id="col-1"' in r.text and 'id="col-2"' in r.text
    assert re.search(r"A: step <a [^>]+>1</a>", r.text) and re.search(r"B: step <a [^>]+>3</a>", r.text)
    r = client.get(f"/runs/{RUN}/task", params={"id": "task-3", "a": "2", "b": "3"})
    assert re.search(r"A: step <a [^>]+>2</a>", r.text)
    r = client.get(f"/runs/{RUN}/task", params={"id": "task-3", "a": "4"})
    assert r.status_code == 404 and "was not sampled at step 4" in r.text


# -- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("/runs/nope", 404, "not in the store"),
        ("/runs/agent/steps/99", 404, "nearest: 1, 2, 3, 4"),
        ("/runs/agent/steps/abc", 400, "step"),
        ("/runs/agent/steps/2?reward_min=abc", 400, "reward_min must be a number"),
        ("/runs/agent/steps/2?sort=reward%3B%20DROP%20TABLE%20trajectories", 400, "sort must be one of"),
        ("/runs/agent/steps/2?success=maybe", 400, "success must be one of"),
        ("/runs/agent/steps/2?per_page=100000", 400, "per_page must lie in"),
        ("/runs/agent/steps/2?split=eval", 404, "has no"),
        ("/runs/agent/traj?id=nope", 404, "no trajectory"),
        ("/runs/agent/text?id=s1-g0-0&turn=0&field=observation%20FROM%20runs", 400, "field must be one of"),
        ("/runs/agent/task?id=nope", 404, "task"),
        ("/nowhere", 404, "Not Found"),
    ],
)
def test_bad_requests_get_clear_pages(client: TestClient, path: str, status: int, says: str) -> None:
    r = client.get(path)
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("text/html")
    assert says in r.text
    assert "Traceback" not in r.text
    assert "Content-Security-Policy" in r.headers


def test_missing_empty_and_broken_stores_give_clear_pages(tmp_path: Path) -> None:
    missing = tmp_path / "nothing"
    with client_for(missing) as c:
        r = c.get("/")
        assert r.status_code == 200 and "No store yet" in r.text and f"--store {missing}" in r.text
        r = c.get("/runs/x")
        assert r.status_code == 404 and "no store at" in r.text
        assert c.get("/api/version").json() == {"version": "", "exists": False}
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "_manifest.json").write_bytes(orjson.dumps({"format_version": FORMAT_VERSION, "runs": {}}))
    with client_for(empty) as c:
        r = c.get("/")
        assert r.status_code == 200 and "no runs yet" in r.text
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "_manifest.json").write_text('{"format_version": "99.0", "runs": {}}')
    with client_for(broken) as c:
        r = c.get("/")
        assert r.status_code == 200 and "Cannot read the store" in r.text and "99.0" in r.text
        assert "Traceback" not in r.text
    (broken / "_manifest.json").write_text("{not json")
    with client_for(broken) as c:
        r = c.get("/runs/agent")
        assert r.status_code == 404 and "cannot read the store" in r.text


# -- security ---------------------------------------------------------------------------


def test_headers_hosts_methods_and_static(client: TestClient) -> None:
    r = client.get("/")
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "connect-src 'self'" in csp
    assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff"
    assert client.get("/", headers={"host": "evil.example:8000"}).status_code == 400  # DNS rebinding
    assert client.get("/", headers={"host": "localhost:8000"}).status_code == 200
    assert client.put("/").status_code == 405 and client.delete(f"/runs/{RUN}").status_code == 405
    js = client.get("/static/viewer.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    for path in ("/static/../_manifest.json", "/static/..%2F_app.py", "/static/%2e%2e%2f%2e%2e%2fpyproject.toml",
                 "/static/_app.py", "/runs/..%2F..%2Fetc%2Fpasswd", "/runs/agent/text?id=../../_manifest.json&field=prompt"):
        r = client.get(path)
        assert r.status_code in (400, 404), path
        assert "format_version" not in r.text and "import" not in r.text


def snapshot(store: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(store)): (p.stat().st_size, p.stat().st_mtime_ns) for p in store.rglob("*")}


def test_pages_never_write_to_the_store(own: tuple[Path, Path]) -> None:
    store, _ = own
    before = snapshot(store)
    with client_for(store) as c:
        html = c.get(f"/runs/{RUN}").text
        for link in sorted(set(re.findall(r'href="(/runs/[^"]+)"', html)))[:40]:
            assert c.get(link.replace("&amp;", "&")).status_code == 200, link
        for p in ("/", f"/runs/{RUN}/steps/2?view=table", f"/runs/{RUN}/traj?id={BIG_TRAJ}", "/api/version"):
            c.get(p)
    assert snapshot(store) == before


def test_reingest_needs_local_client_and_the_page_token(own: tuple[Path, Path]) -> None:
    store, run_dir = own
    with client_for(store, sources=[run_dir]) as c:
        html = c.get(f"/runs/{RUN}").text
        token = re.search(r'name="token" value="([^"]+)"', html)
        assert token is not None
        add_step_to(run_dir, 5)
        assert c.post(f"/runs/{RUN}/reingest", data={"token": "wrong"}).status_code == 403
        assert c.post(f"/runs/{RUN}/reingest", data={"token": token.group(1)},
                      headers={"origin": "http://evil.example"}).status_code == 403
        assert 'href="/runs/agent/steps/5' not in c.get(f"/runs/{RUN}").text  # nothing happened
        v1 = c.get(f"/api/runs/{RUN}/version").json()["version"]
        r = c.post(f"/runs/{RUN}/reingest", data={"token": token.group(1), "split": "train"},
                   headers={"origin": BASE}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/runs/agent?split=train"
        page = c.get(r.headers["location"]).text
        assert 'id="flash"' in page and "2 new or changed part(s)" in page  # the step file and metrics.jsonl
        assert 'href="/runs/agent/steps/5?split=train"' in page
        assert c.get(f"/api/runs/{RUN}/version").json()["version"] != v1
        import shutil

        shutil.rmtree(run_dir)
        r = c.post(f"/runs/{RUN}/reingest", data={"token": token.group(1)})
        assert r.status_code == 409 and "none of the run&#39;s sources exist any more" in r.text
        assert 'href="/runs/agent"' in r.text and c.get(f"/runs/{RUN}/steps/5").status_code == 200
    remote = TestClient(create_app(store, sources=[run_dir.parent]), base_url=BASE, client=("10.1.2.3", 5555))
    with remote:
        html = remote.get(f"/runs/{RUN}").text
        token = re.search(r'name="token" value="([^"]+)"', html)
        assert token is not None
        r = remote.post(f"/runs/{RUN}/reingest", data={"token": token.group(1)})
        assert r.status_code == 403 and "this machine only" in r.text


def test_live_pickup_of_external_ingest_and_replaced_parts(own: tuple[Path, Path]) -> None:
    store, run_dir = own
    with client_for(store) as c:
        assert c.get(f"/runs/{RUN}/steps/5").status_code == 404
        v1 = c.get(f"/api/runs/{RUN}/version").json()["version"]
        add_step_to(run_dir, 5)
        rolloutlab.ingest([run_dir], store)
        assert c.get(f"/api/runs/{RUN}/version").json()["version"] != v1
        assert c.get(f"/runs/{RUN}/steps/5").status_code == 200
        # a changed step file replaces its old rows (in the viewer's memory too)
        step1 = run_dir / "rollouts" / "step_000001.jsonl"
        step1.write_bytes(b"\n".join(step1.read_bytes().splitlines()[:4]) + b"\n")
        rolloutlab.ingest([run_dir], store)
        r = c.get(f"/runs/{RUN}/steps/1?view=table")
        assert r.status_code == 200 and len(traj_ids(r.text)) == 4
        assert re.search(r"<b>4</b> trajectories in <b>1</b> groups", r.text)
        # the dashboard shows the previous analysis while the new one is computed, then the new one
        deadline = time.monotonic() + 20
        while 'id="stale"' in (page := c.get(f"/runs/{RUN}").text) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert 'id="stale"' not in page
        assert c.app.state.viewer.analyses.shown(RUN, "train") == c.get(f"/api/runs/{RUN}/version").json()["version"]  # type: ignore[attr-defined]


def test_watch_reingests_unfinished_runs_on_a_timer(own: tuple[Path, Path]) -> None:
    store, run_dir = own
    with client_for(store, watch=0.2, sources=[run_dir]) as c:
        v1 = c.get(f"/api/runs/{RUN}/version").json()["version"]
        add_step_to(run_dir, 5)
        deadline = time.monotonic() + 15
        while c.get(f"/api/runs/{RUN}/version").json()["version"] == v1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert c.get(f"/runs/{RUN}/steps/5").status_code == 200


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_real_uvicorn_server_on_loopback(built: tuple[Path, Path]) -> None:
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(built[0]), host="127.0.0.1", port=port, log_level="warning"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.started
        r = httpx.get(f"http://127.0.0.1:{port}/runs/{RUN}/steps/1", timeout=10)
        assert r.status_code == 200 and "Content-Security-Policy" in r.headers
        assert httpx.get(f"http://127.0.0.1:{port}/", headers={"host": "attacker.example"}, timeout=10).status_code == 400
    finally:
        server.should_exit = True
        t.join(timeout=10)
    assert not t.is_alive()


def test_cli_serve_is_a_command() -> None:
    import rolloutlab.cli.serve  # noqa: F401  (registers the command until the lead adds it to _register)
    from rolloutlab.cli import main

    assert main(["serve", "--help"]) == 0
    assert main(["serve", "--watch", "0"]) == 1


def test_trajectory_links_carry_split_and_step(tmp_path: Path) -> None:
    from rolloutlab.io import RunWriter
    from rolloutlab.schema import EvalSummary, Run, Trajectory

    def traj(response: str) -> Trajectory:
        return Trajectory(traj_id="ep-0", step=2, group_id="g", sample_idx=0, response=response, reward=1.0)

    with RunWriter(tmp_path / "r", Run(run_id="r", name="r")) as w:
        w.write_step(2, [traj("in training")])
        w.write_eval("step_2", [traj("in evaluation")],
                     EvalSummary(checkpoint="step_2", step=2, episodes=1, graded=1, mean_reward=1.0))
    rolloutlab.ingest([tmp_path / "r"], tmp_path / "s")
    with client_for(tmp_path / "s") as c:
        assert "in training" in c.get("/runs/r/traj?id=ep-0&split=train&step=2").text
        assert c.get("/runs/r/traj?id=ep-0&split=eval&step=2").status_code == 404
        step = c.get("/runs/r/steps/2?split=eval&view=table").text
        (link,) = re.findall(r'href="(/runs/r/traj\?[^"]+)"', step)
        assert link == "/runs/r/traj?id=eval%2Fstep_2%2Fep-0&amp;split=eval&amp;step=2"
        page = c.get(link.replace("&amp;", "&")).text
        assert "in evaluation" in page and "in training" not in page
        whole = c.get("/runs/r/text?id=eval/step_2/ep-0&split=eval&step=2&field=response")
        assert whole.text == "in evaluation"
