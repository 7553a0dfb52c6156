"""Search in a real headless Chromium: the top bar's box → results → the trajectory, at its turn.

Types into the search box of a step page and submits with Enter; narrows the results with
the search page's own form; searches for an XSS payload (it must show, highlighted, as
text).  After each: no JavaScript error, no request left the machine, no payload ran.
Screenshots go to the pytest tmp dir (``screenshots``), to be looked at.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import Server
from tests.browser.test_browser import assert_nothing_injected
from tests.viewer import HOSTILE_TRAJ, PAYLOADS, RUN

pytest.importorskip("fastapi")


def marks(page: Any) -> list[str]:
    return page.eval_on_selector_all("#results li.hit mark", "ms => ms.map(m => m.textContent)")


def test_nav_box_to_results_to_the_trajectory(viewer: Server, watched: Any, shots: Path) -> None:
    w = watched(viewer.url + "/")
    page = w.page
    page.goto(f"{viewer.url}/runs/{RUN}/steps/2")
    page.fill("#nav-q", "ROOM 2:")
    page.press("#nav-q", "Enter")
    page.wait_for_url(f"{viewer.url}/search?q=ROOM+2%3A")
    hits = page.locator("#results li.hit")
    # every agent trajectory with three turns or more reaches room 2 (in its observation)
    assert hits.count() > 0 and "trajectories match" in page.inner_text("#search-count")
    assert set(marks(page)) == {"room 2:"}  # highlighted as the text has it
    assert page.input_value("#search-q") == "ROOM 2:"
    background = page.eval_on_selector("#results mark", "m => getComputedStyle(m).backgroundColor")
    assert background not in ("rgba(0, 0, 0, 0)", "transparent")
    page.screenshot(path=shots / "search-results.png", full_page=False)

    first = page.locator("#results li.hit").first
    where = first.locator(".where").inner_text()
    assert where == "in observation, turn 2"
    page.set_viewport_size({"width": 1400, "height": 500})  # turn 2 lies below the fold
    first.locator("a.hit-link").click()
    page.wait_for_url("**/runs/agent/traj?id=*#turn-2")
    turn = page.locator("#turn-2")
    assert "room 2:" in turn.inner_text()
    box = turn.bounding_box()
    assert box is not None and 0 <= box["y"] < 100, box  # the page opened at that turn
    assert page.evaluate("window.scrollY") > 0
    page.screenshot(path=shots / "search-to-turn.png", full_page=False)
    w.assert_clean()
    assert_nothing_injected(page)


def test_search_form_narrows_and_pages(viewer: Server, watched: Any, shots: Path) -> None:
    w = watched(viewer.url + "/")
    page = w.page
    page.goto(f"{viewer.url}/search?q=answer")
    assert page.locator("#results li.hit").count() == 50 and "page 1 of 2" in page.inner_text("nav.pager")
    page.click("nav.pager >> text=next ›")
    page.wait_for_url("**page=2")
    assert page.locator("#results li.hit").count() > 0
    page.select_option("#search-field", "response")
    page.select_option("#search-runs", [RUN])
    page.fill("input[name=step_min]", "3")
    page.fill("input[name=step_max]", "3")
    page.click("#search-form button[type=submit]")
    page.wait_for_url("**step_max=3*")
    heads = page.eval_on_selector_all("#results a.hit-link", "as => as.map(a => a.textContent)")
    assert heads and all(f"{RUN} · train step 3" in " ".join(h.split()) for h in heads)
    assert set(page.eval_on_selector_all("#results .where b", "bs => bs.map(b => b.textContent)")) == {"response"}
    page.screenshot(path=shots / "search-narrowed.png", full_page=True)
    w.assert_clean()


def test_hostile_matches_show_as_text(viewer: Server, watched: Any, shots: Path) -> None:
    w = watched(viewer.url + "/")
    page = w.page
    page.set_viewport_size({"width": 900, "height": 900})  # the top bar at a narrow width, too
    page.goto(viewer.url + "/")
    page.fill("#nav-q", PAYLOADS[0])
    page.press("#nav-q", "Enter")
    page.wait_for_selector("#results")
    assert set(marks(page)) == {PAYLOADS[0]}
    links = page.eval_on_selector_all("#results a.hit-link", "as => as.map(a => a.href)")
    assert links and all(f"id={HOSTILE_TRAJ}" in u for u in links)
    assert PAYLOADS[0] in page.inner_text("#search-title")
    page.screenshot(path=shots / "search-hostile.png", full_page=True)
    w.assert_clean()
    assert_nothing_injected(page)
