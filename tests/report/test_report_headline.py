"""The report's headline and its findings in plain words (issue 10 § 3).

A 30-step demo run named with an XSS payload, plus a second run: the headline of each is
at the top, names the run as text, equals :func:`headline` of the run's analysis; the
findings come most severe first with their statistics folded; no sentence of the summary
appears twice (the pass@k verdict line is not repeated when it is already a finding).
"""

from __future__ import annotations

import html as htmllib
import re
from pathlib import Path
from typing import Any

import pytest

import rolloutlab
from rolloutlab.analysis._headline import SEVERITY_ORDER, headline
from rolloutlab.demo_data import write_demo
from rolloutlab.report import ReportConfig, build_report, load_report_run

pytest.importorskip("jinja2")
pytest.importorskip("plotly")

NAME = "<script>alert('name')</script> demo"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLOUTLAB_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("headline")
    rolloutlab.ingest([write_demo(tmp / "a")], tmp / "store", name=NAME)
    rolloutlab.ingest([write_demo(tmp / "b", steps=12, seed=3)], tmp / "store", name="short")
    st = rolloutlab.open_store(tmp / "store")
    runs = [load_report_run(st, NAME, ReportConfig(), name=NAME), load_report_run(st, "short", ReportConfig())]
    return {"html": build_report(runs).html, "runs": runs, "single": build_report(runs[:1]).html}


def summary_text(html: str) -> str:
    """The visible text of the headline and findings sections, details opened."""
    part = html[html.index('<section id="headline">'):html.index('<section id="runs">')]
    part = re.sub(r"<summary>[^<]*</summary>", " ", part)
    part = re.sub(r"<h[23]>.*?</h[23]>", " ", part)
    return htmllib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", part)))


def test_the_headline_is_at_the_top_and_is_the_analysis(report: dict[str, Any]) -> None:
    html = report["html"]
    assert html.index('<section id="headline">') < html.index('<section id="findings">') < html.index('id="metrics"')
    for i, r in enumerate(report["runs"]):
        block = html[html.index(f'id="headline-{i}"'):]
        block = block[:block.index("</div>")]
        h = headline(r.analysis, name=r.name)
        assert [htmllib.unescape(p) for p in re.findall(r"<p>(.*?)</p>", block)] == list(h.sentences)
    first = headline(report["runs"][0].analysis).sentences[0]
    assert first.startswith("Reward ") and " over 30 steps; success rose" in first


def test_the_run_name_in_the_headline_is_text(report: dict[str, Any]) -> None:
    html = report["html"]
    assert "<script>alert('name')" not in html
    assert "&lt;script&gt;alert(&#39;name&#39;)&lt;/script&gt; demo: Reward" in html


def test_findings_most_severe_first_with_statistics_folded(report: dict[str, Any]) -> None:
    html = report["html"]
    section = html[html.index('<section id="findings">'):html.index('<section id="runs">')]
    for r, block in zip(report["runs"], section.split('<ol class="findings">')[1:], strict=True):
        h = headline(r.analysis, name=r.name)
        sev = re.findall(r'<span class="sev sev-([a-z]+)">', block)
        assert sev == [f.severity for f in h.findings]
        assert [SEVERITY_ORDER.index(s) for s in sev] == sorted(SEVERITY_ORDER.index(s) for s in sev)
        for f in h.findings:
            if f.stats:  # folded, never open
                assert f"<details class=\"stats\"><summary>statistics</summary><p>{htmllib.escape(f.stats)}</p>" in \
                    block.replace("&#39;", "&#x27;")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.strip()) > 3]


def test_no_sentence_appears_twice(report: dict[str, Any]) -> None:
    said = sentences(summary_text(report["single"]))
    assert len(said) > 5
    assert len(said) == len(set(said)), [s for s in said if said.count(s) > 1]
    # two runs: the same words may be true of both, but never twice of one
    html = report["html"]
    heads = html[html.index('<section id="headline">'):html.index('<section id="findings">')].split('class="headline"')[1:]
    lists = html[html.index('<section id="findings">'):html.index('<section id="runs">')].split('<ol class="findings">')[1:]
    for head, found in zip(heads, lists, strict=True):
        said = sentences(summary_text('<section id="headline">' + head + found + '<section id="runs">'))
        assert len(said) == len(set(said)), [s for s in said if said.count(s) > 1]
    for r in report["runs"]:  # the verdict is a finding here: its line is not printed a second time
        v = r.analysis.verdict
        if any(f.kind == v.verdict for f in r.analysis.findings):
            assert report["html"].count(htmllib.escape(v.explanation, quote=False)) <= 1
