"""The step page's advantages and the dashboard's headline in a real headless Chromium.

Opens a step with ``?adv=rloo`` and reads each card's advantage from the DOM (checked
against ``rolloutlab.algos`` on the same rewards), switches the estimator with the form;
opens dashboards (a 30-step run whose name is an XSS payload, a metrics-only run) and
reads the headline and the findings, opening one finding's statistics.  After each: no
JavaScript error, no request left the machine, no payload ran.  Screenshots go to the
pytest tmp dir (``screenshots``), to be looked at.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import rolloutlab
from rolloutlab.algos import dr_grpo_advantages, rloo_advantages
from rolloutlab.analysis import analyze_run
from rolloutlab.analysis._headline import SEVERITY_ORDER, headline
from rolloutlab.demo_data import write_demo
from tests.browser.conftest import Server, serving
from tests.browser.test_browser import assert_nothing_injected
from tests.viewer import RUN, VERL_NAME

pytest.importorskip("fastapi")

DEMO = '<img src=x onerror="window.__xss=1"> demo'

_CARDS = """() => Array.from(document.querySelectorAll('section.group')).map(g => ({
  head: g.querySelector('header').innerText,
  cards: Array.from(g.querySelectorAll('a.card')).map(c => ({
    reward: (c.querySelector('.badge') || {}).innerText,
    adv: c.querySelector('.adv').dataset.adv,
    text: c.querySelector('.adv').innerText,
  })),
}))"""


def test_step_page_shows_each_samples_advantage(viewer: Server, watched: Any, shots: Path) -> None:
    verl = rolloutlab.open_store(viewer.store).resolve_run(VERL_NAME)
    w = watched(viewer.url + "/")
    page = w.page
    page.goto(f"{viewer.url}/runs/{verl}/steps/1?adv=rloo")
    assert page.input_value("#adv") == "rloo"
    assert "Advantage rloo" in page.inner_text("#adv-note")
    mixed = [g for g in page.evaluate(_CARDS) if "no signal" not in g["head"]]
    assert len(mixed) == 1  # the dump's [1, 0, 0, 1] group
    rewards = [float(c["reward"]) for c in mixed[0]["cards"]]
    assert sorted(rewards) == [0, 0, 1, 1]
    want = rloo_advantages(rewards, [0] * 4)
    for c, x in zip(mixed[0]["cards"], want, strict=True):
        assert float(c["adv"]) == pytest.approx(x, abs=1e-12) and abs(x) == pytest.approx(2 / 3)
        assert c["text"] == f"adv {x:+.3f}"
    page.locator("section.group").filter(has_text="adv +0.667").first.screenshot(path=shots / "v1-step-rloo.png")

    page.select_option("#adv", "dr_grpo")
    page.click("#filters button[type=submit]")
    page.wait_for_url("**adv=dr_grpo**")
    mixed = [g for g in page.evaluate(_CARDS) if "no signal" not in g["head"]]
    want = dr_grpo_advantages([float(c["reward"]) for c in mixed[0]["cards"]], [0] * 4)
    assert [float(c["adv"]) for c in mixed[0]["cards"]] == pytest.approx(list(want))
    assert {c["text"] for c in mixed[0]["cards"]} == {"adv +0.500", "adv -0.500"}

    page.goto(f"{viewer.url}/runs/{RUN}/steps/2?adv=rloo")
    ungraded = page.locator("a.card.ungraded .adv")
    assert ungraded.count() == 1 and ungraded.inner_text() == "adv: ungraded"
    assert "1 ungraded: left out of the group's statistics" in page.inner_text("section.group:has(a.card.ungraded)")
    page.screenshot(path=shots / "v2-step-ungraded.png", full_page=True)
    assert_nothing_injected(page)
    w.assert_clean()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(URL, store) of a viewer over a 30-step demo run named with a payload and a metrics-only run."""
    root = tmp_path_factory.mktemp("browser-headline")
    store = root / "store"
    rolloutlab.ingest([write_demo(root / "demo")], store, name=DEMO)
    csv = root / "metrics" / "scalars-only.csv"
    csv.parent.mkdir()
    csv.write_text("step,reward/mean,success/rate\n" + "".join(
        f"{s},{0.2 + 0.5 * min(s, 12) / 12 + 0.01 * (s % 3):.3f},{0.02 * s:.2f}\n" for s in range(1, 25)))
    rolloutlab.ingest([csv], store, name="scalars-only")
    with serving(store) as url:
        yield url, store


def test_dashboard_headline_and_findings(demo: tuple[str, Path], watched: Any, shots: Path) -> None:
    url, store = demo
    st = rolloutlab.open_store(store)
    rid = st.resolve_run(DEMO)
    h = headline(analyze_run(st, rid))
    w = watched(url + "/")
    page = w.page
    page.goto(f"{url}/runs/{rid}")
    page.wait_for_selector("#headline")
    assert page.locator("#headline > p").all_inner_texts() == list(h.sentences)
    assert " over 30 steps; success rose " in h.sentences[0]
    assert DEMO in page.inner_text("#run-title")  # the name, as text
    sev = page.locator("#findings li.finding .sev").all_inner_texts()
    assert [s.lower() for s in sev] == [f.severity for f in h.findings]
    assert [SEVERITY_ORDER.index(s.lower()) for s in sev] == sorted(SEVERITY_ORDER.index(s.lower()) for s in sev)
    stats = page.locator("#findings details.stats")
    assert stats.count() >= 1 and not stats.first.evaluate("d => d.open")  # one click away, not open
    first = next(f for f in h.findings if f.stats)
    assert not page.get_by_text(first.stats).is_visible()
    page.screenshot(path=shots / "v3-dashboard-headline.png", clip={"x": 0, "y": 0, "width": 1400, "height": 700})
    stats.first.locator("summary").click()
    assert page.get_by_text(first.stats).is_visible()
    page.locator("#headline details summary").click()
    assert "pass@k verdict" in page.inner_text("#headline-basis")
    page.locator("#findings").screenshot(path=shots / "v4-findings-open.png")
    assert_nothing_injected(page)
    w.assert_clean()


def test_metrics_only_dashboard_has_its_own_headline(demo: tuple[str, Path], watched: Any, shots: Path) -> None:
    url, _ = demo
    w = watched(url + "/")
    page = w.page
    page.goto(f"{url}/runs/scalars-only")
    text = page.inner_text("#headline")
    assert text.startswith("From logged scalars only (no rollouts recorded): reward ")
    assert "over 24 steps; success rose" in text
    assert "read from the scalars it logged" in page.inner_text("#no-trajectories")
    page.screenshot(path=shots / "v5-metrics-only.png", clip={"x": 0, "y": 0, "width": 1400, "height": 600})
    w.assert_clean()
