"""``rolloutlab report`` defects of issue 7, item 13: control and bidi characters in run
names and labels, an output folder that does not exist, a damaged store."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import rolloutlab
from rolloutlab.cli import main
from rolloutlab.io import RolloutlabError
from rolloutlab.report import ReportConfig, build_report, load_report_run, write_report
from tests._verl import write_verl

pytest.importorskip("plotly")
EVIL = "evil\u202eeman\x1b[31m"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLOUTLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ROLLOUTLAB_STORE", str(tmp_path / "no-store"))


@pytest.fixture
def store(tmp_path: Path) -> Path:
    dump = write_verl(tmp_path / "dump", {s: [[1, 0, 0, 1], [0, 1, 1, 1]] for s in (1, 2, 3)})
    st = tmp_path / "store"
    rolloutlab.ingest([dump], st, name=EVIL, labels={"arm\u202e": "x\x1b[2Jy\u2066"})
    return st


def test_run_table_and_figures_show_bidi_and_ansi_as_escapes(store: Path, tmp_path: Path) -> None:
    st = rolloutlab.open_store(store)
    rid = st.run_ids()[0]
    rep = build_report([load_report_run(st, rid, ReportConfig(), name=EVIL)])
    out = tmp_path / "r.html"
    write_report(rep, out)
    html = out.read_text(encoding="utf-8")
    for raw in ("\u202e", "\x1b", "\u2066"):
        assert raw not in html, repr(raw)
    assert "<tr><td>evil\\u202eeman\\x1b[31m" in html  # the run table
    assert '<span class="meta">arm\\u202e=x\\x1b[2Jy\\u2066</span>' in html  # its label
    m = re.search(r'<script type="application/json" id="report-figures">(.*?)</script>', html, re.S)
    assert m is not None
    figures = json.loads(m.group(1))  # what plotly draws, once JSON-decoded
    assert not any(c in json.dumps(figures, ensure_ascii=False) for c in ("\u202e", "\x1b", "\u2066"))


def test_output_folder_must_exist(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing" / "dir"
    rid = rolloutlab.open_store(store).run_ids()[0]
    assert main(["report", rid, "--store", str(store), "-o", str(missing / "x.html")]) == 1
    err = capsys.readouterr().err
    assert "does not exist" in err and "dir" in err and "Traceback" not in err
    assert not (tmp_path / "missing").exists()  # nothing created behind the user's back
    st = rolloutlab.open_store(store)
    rep = build_report([load_report_run(st, rid, ReportConfig())])
    with pytest.raises(RolloutlabError, match="does not exist"):
        write_report(rep, missing / "x.html")


@pytest.mark.parametrize("damage", ["manifest", "parquet"])
def test_a_damaged_store_is_one_clear_line(store: Path, damage: str, capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    st = rolloutlab.open_store(store)
    rid = st.run_ids()[0]
    if damage == "manifest":
        (store / "_manifest.json").write_text("{garbage")
    else:
        for f in st.files("trajectories"):
            f.write_bytes(b"not parquet")
    code = main(["report", rid, "--store", str(store), "-o", str(tmp_path / "x.html")])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if damage == "manifest":
        assert code == 1 and "_manifest.json" in err and str(store) in err.replace("\n", "")
        assert len([ln for ln in err.splitlines() if ln.strip()]) <= 3  # one message (soft-wrapped at most)
    else:  # the store reader leaves damaged files out, each named, or the command fails naming one
        assert ".parquet" in err and ("damaged" in err or "cannot read" in err)
