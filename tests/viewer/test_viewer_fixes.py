"""Defects found reading real artifacts with the viewer (issue 7, items 9–13), one test each.

- an evaluation (no train split: Inspect, NeMo Gym) gets its own layout, not a 500;
- one success rule for the dashboard, the step pages, the cards and the filter;
- an unreadable Parquet file is named, the rest of the store is shown, and the store
  recovers on the next request;
- request numbers beyond 64 bits, bidi/ANSI characters in names and labels, manifest
  paths outside the store, a corrupt texts file, and loopback addresses other than
  127.0.0.1.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import orjson
import pytest

pytest.importorskip("fastapi")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

import pyarrow as pa
import pyarrow.parquet as pq

import rolloutlab
from rolloutlab.analysis import analyze_run
from rolloutlab.io import open_store
from rolloutlab.viewer import create_app
from rolloutlab.viewer._app import allowed_hosts_for, is_loopback
from tests._verl import verl_line
from tests.viewer.test_viewer import client_for

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx`:DeprecationWarning")
SAMPLES = Path(__file__).parents[1] / "fixtures" / "samples"
BASE = "http://127.0.0.1:8000"


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


# -- 9: evaluation-only runs ------------------------------------------------------------


@pytest.fixture(scope="module")
def eval_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("eval") / "store"
    rolloutlab.ingest([SAMPLES / "inspect" / "popularity.json"], store)
    rolloutlab.ingest([SAMPLES / "nemo_gym" / "grl_sokoban.rollouts.jsonl"], store)
    return store


def test_eval_only_run_gets_a_score_table_not_a_500(eval_store: Path) -> None:
    with client_for(eval_store) as c:
        rid = next(r for r in open_store(eval_store).run_ids() if r.startswith("popularity"))
        r = c.get(f"/runs/{rid}")
        assert r.status_code == 200, r.text
        html = r.text
        assert 'id="checkpoints"' in html and 'id="scores"' in html
        text = _text(html)
        # one row per task at the one checkpoint, with the grader's value and explanation
        for task, said in (("popularity/1", "match = C: Yes"), ("popularity/2", "match = C: No"),
                           ("popularity/3", "match = I: No")):
            assert task in text and said in text
        assert "3 task × checkpoint rows" in text
        # no one-point training curves
        assert 'id="figures"' not in html and 'id="charts"' not in html and "plotly.min.js" not in html


def test_eval_run_without_grader_text_and_its_step_page(eval_store: Path) -> None:
    with client_for(eval_store) as c:
        r = c.get("/runs/grl_sokoban.rollouts")
        assert r.status_code == 200, r.text
        assert 'id="scores"' in r.text and "5 task × checkpoint rows" in _text(r.text)
        assert c.get("/runs/grl_sokoban.rollouts/steps/0").status_code == 200


def test_eval_with_several_checkpoints_draws_them(tmp_path: Path) -> None:
    from rolloutlab.io import RunWriter
    from rolloutlab.schema import Run, Trajectory

    w = RunWriter(tmp_path / "ev", Run(run_id="ev", name="ev"))
    for step in (100, 200, 300):
        w.write_step(step, [Trajectory(traj_id=f"{step}-{t}", step=step, split="eval", task_id=f"t{t}", reward=float(t < step // 100),
                                       success=t < step // 100) for t in range(4)])
    w.write_run()
    store = tmp_path / "store"
    rolloutlab.ingest([tmp_path / "ev"], store)
    with client_for(store) as c:
        html = c.get("/runs/ev").text
        assert 'id="charts"' in html and html.count('<svg class="chart"') == 2
        assert "12 task × checkpoint rows" in _text(html)
        assert 'href="/runs/ev/steps/200?split=eval"' in html


# -- 11: one success rule ----------------------------------------------------------------


@pytest.fixture(scope="module")
def no_acc_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A verl dump with no ``acc`` key: success must come from the reward."""
    root = tmp_path_factory.mktemp("noacc")
    dump = root / "dump"
    dump.mkdir()
    scores = {1: [1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1], 2: [1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 1, 1]}
    for step, ss in scores.items():
        lines = [verl_line(step, f"system\nq\nuser\nquestion {i // 4}\nassistant\n", float(s)) for i, s in enumerate(ss)]
        (dump / f"{step}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    store = root / "store"
    rolloutlab.ingest([dump], store, name="noacc")
    return store


def test_success_is_one_rule_everywhere(no_acc_store: Path) -> None:
    st = open_store(no_acc_store)
    assert st.sql("SELECT count(*) FROM trajectories WHERE success IS NOT NULL").fetchall()[0][0] == 0
    a = analyze_run(st, "noacc", replay=False)
    assert a.success_rule == "reward == 1 (rewards lie in [0, 1])"
    with client_for(no_acc_store) as c:
        dash = c.get("/runs/noacc").text
        assert "reward == 1 (rewards lie in [0, 1])" in dash
        rows = re.findall(r'steps/(\d)\?split=train">\d</a></td>.*?</tr>', dash, flags=re.S)
        assert rows
        for step in (1, 2):
            want = float(a.steps.loc[step, "success_rate"])
            row = re.search(rf'steps/{step}\?split=train">{step}</a></td>(.*?)</tr>', dash, flags=re.S)
            assert row is not None
            assert f"{100 * want:.1f}%" in row.group(1)
        page = c.get("/runs/noacc/steps/1?view=table&per_page=25").text
        assert "reward == 1" in page and "50.0%" in page
        assert page.count("<td>yes</td>") == 6 and page.count("<td>no</td>") == 6  # success column, never "—"
        found = c.get("/runs/noacc/steps/1?view=table&success=true").text
        assert "6 matching trajectories" in _text(found)
        assert "6 matching trajectories" in _text(c.get("/runs/noacc/steps/1?view=table&success=false").text)
        groups = c.get("/runs/noacc/steps/2").text
        classes = re.findall(r'<a class="card ([a-z]*)"', groups)
        assert sorted(classes) == sorted(["ok"] * 9 + ["fail"] * 3)


def test_success_rule_follows_a_growing_run(tmp_path: Path) -> None:
    """Rows that arrive later are decided by the rule too (and the rule is recomputed)."""
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "1.jsonl").write_bytes(b"\n".join(verl_line(1, "q", float(s)) for s in (1, 0)) + b"\n")
    store = tmp_path / "store"
    rolloutlab.ingest([dump], store, name="grow")
    with client_for(store) as c:
        assert "1 matching" in _text(c.get("/runs/grow/steps/1?view=table&success=true").text)
        (dump / "2.jsonl").write_bytes(b"\n".join(verl_line(2, "q", float(s)) for s in (1, 1, 0)) + b"\n")
        rolloutlab.ingest([dump], store, name="grow")
        assert "2 matching" in _text(c.get("/runs/grow/steps/2?view=table&success=true").text)
        # rewards outside [0, 1] now: the rule becomes reward > 0, for every step
        (dump / "3.jsonl").write_bytes(b"\n".join(verl_line(3, "q", float(s)) for s in (0.5, 2.0, -1.0)) + b"\n")
        rolloutlab.ingest([dump], store, name="grow")
        page = c.get("/runs/grow/steps/3?view=table&success=true").text
        assert "reward &gt; 0" in page and "2 matching" in _text(page)


# -- 10: an unreadable file does not hide the store ---------------------------------------


@pytest.fixture
def two_runs(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    for name, scores in (("a", (1, 0, 1, 1)), ("b", (0, 0, 1, 0))):
        d = tmp_path / name
        d.mkdir()
        for step in (1, 2):
            (d / f"{step}.jsonl").write_bytes(b"\n".join(verl_line(step, "q", float(s)) for s in scores) + b"\n")
        rolloutlab.ingest([d], store, name=name)
    return store


@pytest.mark.parametrize("damage", ["corrupt", "missing"])
def test_one_unreadable_file_is_named_and_the_store_recovers(two_runs: Path, damage: str) -> None:
    st = open_store(two_runs)
    bad = next(p for p in st.files("trajectories") if "run_id=a" in str(p))
    good = bad.read_bytes()
    with client_for(two_runs) as c:
        if damage == "corrupt":
            bad.write_bytes(b"not parquet at all")
        else:
            bad.unlink()
        for _ in range(2):  # not only the first request: every one until it is fixed
            r = c.get("/")
            assert r.status_code == 200, r.text
            assert 'href="/runs/a"' in r.text and 'href="/runs/b"' in r.text and "No store yet" not in r.text
            assert 'id="broken-files"' in r.text and bad.name in r.text
            d = c.get("/runs/b")
            assert d.status_code == 200 and bad.name in d.text
        bad.write_bytes(good)  # repaired, manifest unchanged: the next request has it all again
        r = c.get("/")
        assert r.status_code == 200 and 'id="broken-files"' not in r.text
        page = c.get("/runs/a/steps/1?view=table").text
        assert "4 matching trajectories" in _text(page)


def test_corrupt_texts_file_is_named(two_runs: Path) -> None:
    st = open_store(two_runs)
    bad = next(p for p in st.files("texts") if "run_id=a" in str(p))
    bad.write_bytes(b"PAR1 garbage PAR1")
    with client_for(two_runs) as c:
        r = c.get("/runs/a/steps/1?view=table")
        assert r.status_code == 500
        assert bad.name in r.text and "cannot read" in r.text
        assert "Traceback" not in r.text
        assert c.get("/runs/b/steps/1?view=table").status_code == 200  # the other run still reads


# -- 13: small ones ------------------------------------------------------------------------


@pytest.mark.parametrize("page", ["99999999999999999999", "9223372036854775807", "1" + "0" * 5000])
@pytest.mark.parametrize("path", ["/runs/a/steps/1?", "/runs/a/steps/1?view=table&", "/runs/a?"])
def test_huge_page_numbers_are_a_400(two_runs: Path, path: str, page: str) -> None:
    with client_for(two_runs) as c:
        r = c.get(f"{path}page={page}")
        assert r.status_code == 400, r.status_code
        assert "page must" in r.text and "Traceback" not in r.text


def test_huge_step_number_is_a_400(two_runs: Path) -> None:
    with client_for(two_runs) as c:
        r = c.get("/runs/a/steps/99999999999999999999999")
        assert r.status_code == 400 and "step must lie in" in r.text


def test_bidi_and_ansi_in_names_and_labels_are_made_visible(tmp_path: Path) -> None:
    d = tmp_path / "dump"
    d.mkdir()
    (d / "1.jsonl").write_bytes(verl_line(1, "q", 1.0) + b"\n")
    store = tmp_path / "store"
    rolloutlab.ingest([d], store, name="evil\u202eeman\x1b[31m", labels={"arm\u202e": "x\x1b[2Jy"})
    with client_for(store) as c:
        for path in ("/", f"/runs/{open_store(store).run_ids()[0]}"):
            html = c.get(path).text
            assert "\u202e" not in html and "\x1b" not in html, path
            assert "\\u202e" in html and "\\x1b" in html, path


def test_manifest_paths_outside_the_store_are_refused(two_runs: Path) -> None:
    secret = two_runs.parent / "secret.parquet"
    st = open_store(two_runs)
    pq.write_table(st.sql("SELECT * FROM trajectories WHERE run_id = 'b'").arrow().read_all()
                   .set_column(0, "run_id", pa.array(["a"] * 8)), secret)
    m = orjson.loads((two_runs / "_manifest.json").read_bytes())
    for part in m["runs"]["a"]["parts"].values():  # (a batch's parts share one file)
        part["files"]["trajectories"] = "../secret.parquet"
    (two_runs / "_manifest.json").write_bytes(orjson.dumps(m))
    with pytest.raises(rolloutlab.RolloutlabError, match="outside the store"):
        open_store(two_runs).files("trajectories")
    with client_for(two_runs) as c:
        r = c.get("/")
        assert r.status_code == 200 and "outside the store" in r.text and "../secret.parquet" in r.text
        page = c.get("/runs/a/steps/1?view=table")  # the secret file's rows are not read
        assert page.status_code == 404 and "has no train step 1" in page.text


def test_every_loopback_address_keeps_the_host_check() -> None:
    assert is_loopback("127.0.0.2") and is_loopback("127.255.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2") and not is_loopback("example.com")
    hosts = allowed_hosts_for("127.0.0.2")
    assert hosts is not None and "127.0.0.2" in hosts and "evil.example" not in hosts
    assert allowed_hosts_for("0.0.0.0") is None
    assert allowed_hosts_for("::1") is not None


def test_host_check_answers_the_bound_loopback_address_only(two_runs: Path) -> None:
    app = create_app(two_runs, allowed_hosts=allowed_hosts_for("127.0.0.2"))
    with TestClient(app, base_url="http://127.0.0.2:8000", client=("127.0.0.2", 5000)) as c:
        assert c.get("/").status_code == 200
        assert c.get("/", headers={"host": "evil.example:8000"}).status_code == 400
        assert c.get("/", headers={"host": "127.0.0.3:8000"}).status_code == 200  # a loopback literal is no rebinding


def test_viewer_never_writes_to_a_damaged_store(two_runs: Path) -> None:
    """The viewer reads a damaged store without writing to it (nothing is 'repaired' behind the user's back)."""
    bad = next(p for p in open_store(two_runs).files("trajectories"))
    bad.write_bytes(b"junk")
    before = {p: p.read_bytes() for p in two_runs.rglob("*") if p.is_file()}
    with client_for(two_runs) as c:
        c.get("/")
        c.get("/runs/a")
    after = {p: p.read_bytes() for p in two_runs.rglob("*") if p.is_file()}
    assert before == after


# -- 13: re-ingest reads only the sources the user named --------------------------------


def test_reingest_reads_only_named_sources(two_runs: Path, tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere"
    secret.mkdir()
    (secret / "1.jsonl").write_bytes(verl_line(1, "the secret prompt", 1.0, output="SECRET-TEXT") + b"\n")
    m = orjson.loads((two_runs / "_manifest.json").read_bytes())
    m["runs"]["a"]["sources"] = [str(secret)]  # a manifest from elsewhere names another folder
    (two_runs / "_manifest.json").write_bytes(orjson.dumps(m))
    named = tmp_path / "a"  # what the user named when starting the viewer: run a's real source
    app = create_app(two_runs, sources=[named])
    with TestClient(app, base_url=BASE, client=("127.0.0.1", 5000)) as c:
        token = re.search(r'name="token" value="([^"]+)"', c.get("/runs/a").text)
        assert token is not None
        r = c.post("/runs/a/reingest", data={"token": token.group(1)})
        assert r.status_code == 409 and "not among those this viewer may read" in r.text and str(secret) in r.text
    st = open_store(two_runs)
    assert st.sql("SELECT count(*) FROM texts WHERE contains(response, 'SECRET')").fetchall()[0][0] == 0


def test_without_named_sources_there_is_no_reingest(two_runs: Path) -> None:
    with client_for(two_runs) as c:
        page = c.get("/runs/a").text
        assert 'id="no-reingest"' in page and 'id="reingest"' not in page
        r = c.post("/runs/a/reingest", data={"token": "x"})
        assert r.status_code == 403 and "--source PATH" in r.text


def test_serve_watch_needs_named_sources(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rolloutlab.cli import main

    assert main(["serve", str(tmp_path), "--watch", "5"]) == 1
    assert "--source" in capsys.readouterr().err
    assert main(["serve", str(tmp_path), "--source", str(tmp_path / "nope")]) == 1
    assert "no such file or folder" in capsys.readouterr().err


def test_a_one_step_training_run_draws_no_one_point_curves(tmp_path: Path) -> None:
    d = tmp_path / "dump"
    d.mkdir()
    (d / "1.jsonl").write_bytes(b"\n".join(verl_line(1, "q", float(s)) for s in (1, 0)) + b"\n")
    store = tmp_path / "store"
    rolloutlab.ingest([d], store, name="one")
    with client_for(store) as c:
        html = c.get("/runs/one").text
        assert 'id="no-curves"' in html and 'id="figures"' not in html and 'id="charts"' not in html
        assert 'href="/runs/one/steps/1?split=train"' in html


def test_a_runs_file_outside_the_store_is_refused(two_runs: Path) -> None:
    m = orjson.loads((two_runs / "_manifest.json").read_bytes())
    if "runs_file" not in m:
        pytest.skip("this store format keeps runs/runs.parquet at a fixed path")
    m["runs_file"] = "../../elsewhere/runs.parquet"
    (two_runs / "_manifest.json").write_bytes(orjson.dumps(m))
    with pytest.raises(rolloutlab.RolloutlabError, match="outside the store"):
        open_store(two_runs).files("runs")


def test_what_was_not_computed_is_folded_one_line_per_analysis(no_acc_store: Path) -> None:
    """The analyses the run's data cannot support are listed in a closed <details>, one
    item each with its reason — not a paragraph of run-on text above the curves."""
    a = analyze_run(open_store(no_acc_store), "noacc", replay=False)
    assert a.skipped  # a verl dump without entropy or trainer metrics skips several
    with client_for(no_acc_store) as c:
        dash = c.get("/runs/noacc").text
    block = re.search(r'<details class="meta" id="not-computed">(.*?)</details>', dash, flags=re.S)
    assert block is not None and " open" not in block.group(0)[:40]
    assert f"{len(a.skipped)} analys" in block.group(1)
    items = re.findall(r"<li><b>(.*?)</b>: ", block.group(1))
    assert items == list(a.skipped)
    assert "not computed — " not in dash
