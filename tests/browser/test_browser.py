"""The viewer and the report in a real headless Chromium.

Clicks from a curve to a step to a trajectory; filters a step; watches a live run grow;
opens hostile trajectories and a 10 MB observation; opens a report written by
``rolloutlab report`` and clicks its curves.  After each: no JavaScript error was
logged, no request left the machine, no XSS payload ran.  Screenshots are saved under a
pytest tmp dir (``screenshots``), to be looked at.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

import rolloutlab
from tests.browser.conftest import Server, start_viewer
from tests.viewer import (
    BIG_OBS,
    BIG_TRAJ,
    HOSTILE_ID,
    HOSTILE_TRAJ,
    PAYLOADS,
    RUN,
    VERL_NAME,
    add_step_to,
)

pytest.importorskip("fastapi")

_POINT = """([sel, step]) => {
  const gd = document.querySelector(sel);
  gd.scrollIntoView({block: "center"});
  const fl = gd._fullLayout, xa = fl.xaxis, ya = fl.yaxis;
  const tr = gd._fullData.find(t => Array.isArray(t.x) && t.x.indexOf(step) >= 0);
  const i = tr.x.indexOf(step), box = gd.getBoundingClientRect();
  return {x: box.left + xa._offset + xa.l2p(tr.x[i]), y: box.top + ya._offset + ya.l2p(tr.y[i])};
}"""

_INJECTED = """() => ({
  handlers: document.querySelectorAll("[onerror], [onload], [onclick], [onmouseover]").length,
  js_links: document.querySelectorAll("a[href^='javascript:'], [src^='javascript:'], form[action^='javascript:']").length,
  elements: document.querySelectorAll("img, iframe, object, embed, svg:not(.chart):not(.js-plotly-plot svg):not(#js-plotly-tester)").length,
  inline_scripts: document.querySelectorAll("script:not([src])").length,
})"""


def click_point(page: Any, selector: str, step: int) -> None:
    """A real mouse click on the plotly point of ``step`` (the first trace that has it)."""
    page.wait_for_selector(f"{selector} .main-svg")
    xy = page.evaluate(_POINT, [selector, step])
    page.mouse.click(xy["x"], xy["y"])


def open_all_details(page: Any) -> None:
    page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")


def assert_nothing_injected(page: Any, *, inline_scripts: int = 0) -> None:
    found = page.evaluate(_INJECTED)
    assert found == {"handlers": 0, "js_links": 0, "elements": 0, "inline_scripts": inline_scripts}, found
    assert page.evaluate("typeof window.__xss") == "undefined"


def test_curve_to_step_to_trajectory(viewer: Server, watched: Any, shots: Path) -> None:
    w = watched(viewer.url + "/")
    page = w.page
    page.goto(viewer.url + "/")
    page.click(f"a.run-link >> text={RUN}")
    page.wait_for_url(f"{viewer.url}/runs/{RUN}")
    page.wait_for_selector("#figures[data-ready='1']")
    assert page.locator("#findings li").count() >= 1
    page.screenshot(path=shots / "1-dashboard.png", full_page=True)

    click_point(page, "#fig-reward .fig", 2)
    page.wait_for_url(f"{viewer.url}/runs/{RUN}/steps/2?split=train")
    assert "train step 2" in page.inner_text("#step-title")
    assert page.locator("section.group").count() == 3
    assert page.locator("a.card").count() == 12
    page.screenshot(path=shots / "2-step.png", full_page=True)

    page.click("a.card[href*='s2-g1-0']")
    page.wait_for_url("**/traj?id=s2-g1-0&*")
    assert "s2-g1-0" in page.inner_text("#traj-title")
    turns = page.locator("section.turn")
    assert turns.count() >= 2
    first = turns.nth(0).inner_text()
    for what in ("turn 0", "OBSERVATION", "THOUGHT", "ACTION", "TOOL CALL", "search", "found 0 results", "valid"):
        assert what in first, what
    page.screenshot(path=shots / "3-trajectory.png", full_page=True)

    page.click("#task-link")
    page.wait_for_url("**/task?**")
    assert page.locator("#col-1 .card").count() >= 1 and page.locator("#col-2 .card").count() >= 1
    page.screenshot(path=shots / "4-task.png", full_page=True)
    w.assert_clean()


def test_filter_sort_and_search_a_step(viewer: Server, watched: Any, shots: Path) -> None:
    w = watched(viewer.url + "/")
    page = w.page
    page.goto(f"{viewer.url}/runs/{RUN}/steps/3")
    page.select_option("select[name=success]", "false")
    page.click("#filters button[type=submit]")
    page.wait_for_url("**success=false**")
    classes = page.eval_on_selector_all("a.card", "els => els.map(e => e.className)")
    assert classes and all("fail" in c for c in classes)
    page.fill("#filters input[name=q]", "task-4: correct")
    page.select_option("select[name=success]", "any")
    page.select_option("select[name=view]", "table")
    page.click("#filters button[type=submit]")
    page.wait_for_url("**view=table**")
    rows = page.locator("#trajectories tbody tr")
    assert rows.count() >= 1
    assert all("task-4: correct" in rows.nth(i).inner_text() for i in range(rows.count()))
    page.fill("#filters input[name=q]", "")
    page.click("#filters button[type=submit]")
    page.click("#trajectories th a >> text=reward")
    page.wait_for_url("**sort=reward**")
    page.screenshot(path=shots / "5-table-sorted.png", full_page=True)
    w.assert_clean()


def test_payloads_do_not_execute(viewer: Server, watched: Any, shots: Path) -> None:
    w = watched(viewer.url + "/")
    page = w.page
    verl = rolloutlab.open_store(viewer.store).resolve_run(VERL_NAME)
    pages = [("/", "runs"), (f"/runs/{RUN}", "dashboard"), (f"/runs/{verl}", "hostile-name"),
             (f"/runs/{RUN}/steps/2", "step"), (f"/runs/{RUN}/steps/4?view=table", "step-table"),
             (f"/runs/{RUN}/traj?id={HOSTILE_TRAJ}", "hostile-traj"), (f"/runs/{RUN}/task?id=task-2", "task")]
    for path, name in pages:
        page.goto(viewer.url + path)
        if "figures" in page.content():
            page.wait_for_selector("#figures[data-ready='1']")
        open_all_details(page)
        assert_nothing_injected(page)
        page.screenshot(path=shots / f"6-xss-{name}.png", full_page=name != "dashboard")
    text = page.inner_text("body")  # the task page shows the hostile response as text
    assert "<script>window.__xss=1</script>" in text
    page.goto(viewer.url + f"/runs/{RUN}/traj?id={HOSTILE_TRAJ}")
    open_all_details(page)
    body = page.inner_text("body")
    for p in PAYLOADS[:6]:
        assert p in body, p
    # the hostile trajectory id, reached through the link the step page makes
    page.goto(viewer.url + f"/runs/{RUN}/steps/4?view=table")
    page.click("a[href*='traj?id=%3Cimg']")
    page.wait_for_selector("#traj-title")
    assert HOSTILE_ID in page.inner_text("#traj-title")
    assert_nothing_injected(page)
    w.assert_clean()


def test_ten_megabyte_observation(viewer: Server, watched: Any, shots: Path) -> None:
    w = watched(viewer.url + "/")
    page = w.page
    page.goto(f"{viewer.url}/runs/{RUN}/traj?id={BIG_TRAJ}")
    # the page carries a cut of the observation, not 10 MB (speed is for benchmarks/)
    assert len(page.content()) < 300_000
    obs = page.locator("#turn-0 details.field").first
    assert obs.get_attribute("open") is None  # long observations start collapsed
    obs.locator("summary").click()
    assert obs.get_attribute("open") is not None
    assert "x" * 99 in obs.inner_text()
    href = obs.locator("a >> text=the whole text").get_attribute("href")
    size = page.evaluate("(h) => fetch(h).then(r => r.text()).then(t => t.length)", href)
    assert size == BIG_OBS // 100 * 100
    page.screenshot(path=shots / "7-big-observation.png")
    w.assert_clean()


def test_live_dashboard_follows_a_growing_run(tmp_path: Path, watched: Any, shots: Path) -> None:
    for srv in start_viewer(tmp_path):
        w = watched(srv.url + "/")
        page = w.page
        page.goto(f"{srv.url}/runs/{RUN}")
        page.wait_for_selector("#figures[data-ready='1']")
        assert page.is_checked("#live")  # the run says it is running
        assert page.locator("#steps a[href$='/steps/5?split=train']").count() == 0
        add_step_to(srv.run_dir, 5)
        rolloutlab.ingest([srv.run_dir], srv.store)  # as `rolloutlab ingest` next to the training run
        page.wait_for_selector("#steps a[href$='/steps/5?split=train']", timeout=20_000)
        page.wait_for_selector("#figures[data-ready='1']")
        page.screenshot(path=shots / "8-live.png")
        w.assert_clean()


@pytest.mark.skipif(importlib.util.find_spec("rolloutlab.cli.report") is None, reason="no `rolloutlab report` yet")
def test_report_file_in_the_browser(viewer: Server, watched: Any, shots: Path, tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    import rolloutlab.cli.report  # registers the command (until the lead adds it to _register)
    from rolloutlab.cli import main

    out = tmp_path / "report.html"
    verl = rolloutlab.open_store(viewer.store).resolve_run(VERL_NAME)
    assert main(["report", RUN, verl, "--store", str(viewer.store), "-o", str(out)]) == 0
    w = watched(out.as_uri())
    page = w.page
    page.goto(out.as_uri())
    page.wait_for_selector("html[data-report-ready='1']")
    page.screenshot(path=shots / "9-report.png")
    click_point(page, "#fig-reward .plot", 2)
    # "x unified" hover: the click carries every run's point at step 2; the report opens
    # the step of the run whose point comes first
    page.locator(".step[data-step='2']:not([hidden])").first.wait_for(state="visible")
    for run in ("0", "1"):
        assert page.locator(f".step[data-run='{run}']:not([hidden])").count() == 1
    page.locator(".step:not([hidden])").first.screenshot(path=shots / "10-report-step.png")
    open_all_details(page)
    assert_nothing_injected(page, inline_scripts=page.evaluate("document.querySelectorAll('script:not([src])').length"))
    assert page.evaluate("document.querySelectorAll('script:not([src]):not([type])').length") <= 2
    w.assert_clean()
    assert set(w.requests) == {out.as_uri()}


def test_evaluation_dashboard_scores_and_grader_text(tmp_path: Path, watched: Any, shots: Path) -> None:
    """An Inspect log (no train split) shows its score table; a sample opens from it."""
    from tests.conftest import SAMPLES

    for server in start_viewer(tmp_path):
        rolloutlab.ingest([SAMPLES / "inspect" / "popularity.json"], server.store)
        rid = next(r for r in rolloutlab.open_store(server.store).run_ids() if r.startswith("popularity"))
        w = watched(server.url + "/")
        page = w.page
        page.goto(f"{server.url}/runs/{rid}")
        page.wait_for_selector("#scores")
        assert page.locator("#scores tbody tr").count() == 3
        assert "match = I: No" in page.locator("#scores").inner_text()
        assert page.locator("#figures").count() == 0 and page.locator("#charts").count() == 0
        page.screenshot(path=shots / "8-eval-scores.png", full_page=True)
        page.locator("#scores tbody tr").first.locator("a >> text=#0").click()
        page.wait_for_url("**/traj?**")
        w.assert_clean()
