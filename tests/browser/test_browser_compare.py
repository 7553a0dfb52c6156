"""The scalar panel, the compare page and the runs page in a real headless Chromium.

Picks two runs on the runs page and compares them (overlaid curves, the table, a step of
each side by side); searches, opens, smooths and re-axes the scalar panel; sorts and
filters the runs page.  After each: no JavaScript error, no request left the machine, no
XSS payload ran (a run name and a metric name carry them) and both show literally.
Screenshots go to the pytest tmp dir (``screenshots``), to be looked at.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import serving
from tests.browser.test_browser import assert_nothing_injected, click_point
from tests.viewer.compare_store import HOSTILE_METRIC, HOSTILE_RUN_NAME, A, make_compare_store

pytest.importorskip("fastapi")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(the viewer's URL, the hostile run's id) over the compare store."""
    store, b = make_compare_store(tmp_path_factory.mktemp("browser-compare"))
    with serving(store) as url:
        yield url, b


def visible_groups(page: Any) -> list[str]:
    return page.evaluate("""() => Array.from(document.querySelectorAll('#scalars details.scalar-group'))
        .filter(d => !d.hidden).map(d => d.querySelector('.group-name').textContent)""")


def traces(page: Any, fig: str) -> list[dict[str, Any]]:
    """x, y and name of each trace of the chart in ``figure.scalar[data-name=fig]``."""
    return page.evaluate("""(name) => {
        const f = Array.from(document.querySelectorAll('figure.scalar')).find(e => e.dataset.name === name);
        return f.querySelector('.scalar-plot').data.map(t => ({x: t.x, y: t.y, name: t.name}));
    }""", fig)


def open_group(page: Any, group: str) -> None:
    page.evaluate("""(g) => { const d = Array.from(document.querySelectorAll('#scalars details.scalar-group'))
        .find(d => d.dataset.group === g); d.open = true; d.scrollIntoView(); }""", group)
    page.wait_for_function("""(g) => { const d = Array.from(document.querySelectorAll('#scalars details.scalar-group'))
        .find(d => d.dataset.group === g); return d.dataset.loaded === '1' &&
        Array.from(d.querySelectorAll('figure.scalar')).filter(f => !f.hidden).every(f => f.dataset.drawn === '1'); }""",
                           arg=group)


def test_pick_two_runs_and_compare_them(server: tuple[str, str], watched: Any, shots: Path) -> None:
    url, b = server
    w = watched(url + "/")
    page = w.page
    page.goto(url + "/")
    assert page.is_disabled("#compare-selected")
    page.check(f"input.pick[value='{A}']")
    page.check(f"input.pick[value='{b}']")
    page.click("#compare-selected")
    page.wait_for_url(f"{url}/compare?run={A}&run=*")
    page.wait_for_selector("#compare-curves[data-ready='1']")
    for fig in ("#cmp-mean_reward .fig", "#cmp-success_rate .fig"):
        assert page.evaluate(f"document.querySelector('{fig}').data.length") == 2
    legend = page.evaluate("Array.from(document.querySelectorAll('#cmp-mean_reward .legendtext')).map(e => e.textContent)")
    assert HOSTILE_RUN_NAME in legend and A in legend  # the payload, shown as text
    assert page.locator("#compare-table tbody tr").count() == 6  # 2 windows × 3 metrics
    assert page.inner_text("#compare-title").startswith("Compare 2 runs")
    assert page.locator("#side-cols section.side-col").count() == 2
    assert page.input_value("#side-step") == "4"
    page.screenshot(path=shots / "compare.png", full_page=True)

    click_point(page, "#cmp-mean_reward .fig", 2)  # a point opens that step of both runs
    page.wait_for_url("**step=2#side")
    assert page.input_value("#side-step") == "2"
    assert page.locator("#side-cols section.side-col").first.locator("a.card").count() == 8
    assert_nothing_injected(page)
    w.assert_clean()


def test_scalar_panel_search_open_smooth_logy_and_x(server: tuple[str, str], watched: Any, shots: Path) -> None:
    url, _ = server
    w = watched(url + "/")
    page = w.page
    page.goto(f"{url}/runs/{A}")
    page.wait_for_selector("#scalars[data-ready='1']")
    assert visible_groups(page) == ["<script>window.__xss=1<", "loss", "timing", "(ungrouped)"]
    assert page.inner_text("#scalars .scalar-count") == "5 metrics"
    assert page.locator("#scalars figure.scalar").count() == 0  # nothing drawn before a group opens

    page.fill("#scalars .scalar-search", "value")
    assert visible_groups(page) == ["loss"]
    assert page.inner_text("#scalars .scalar-count") == "1 of 5 metrics match"
    open_group(page, "loss")
    shown = page.evaluate("Array.from(document.querySelectorAll('figure.scalar')).filter(f => !f.hidden).map(f => f.dataset.name)")
    assert shown == ["loss/value"]
    raw, smooth = traces(page, "loss/value")  # smoothing 0.6 by default: raw (faint) and smoothed
    assert raw["y"] == [4.0, 3.0, 2.0, 1.0] and raw["x"] == [1, 2, 3, 4]
    assert smooth["y"][0] == pytest.approx(4.0) and smooth["y"][1] == pytest.approx((0.4 * 0.6 * 4 + 0.4 * 3) / 0.64)

    page.fill("#scalars .scalar-search", "")
    open_group(page, "<script>window.__xss=1<")
    caps = page.evaluate("Array.from(document.querySelectorAll('figure.scalar figcaption')).map(e => e.textContent)")
    assert HOSTILE_METRIC in caps

    page.check("#scalars .scalar-logy")
    page.wait_for_function("() => Array.from(document.querySelectorAll('.scalar-plot')).filter(d => d.layout)"
                           ".every(d => d.layout.yaxis.type === 'log')")

    page.select_option("#scalars .scalar-x", "time")
    page.locator("details[data-group='loss']").scroll_into_view_if_needed()
    page.wait_for_function("() => { const f = Array.from(document.querySelectorAll('figure.scalar'))"
                           ".find(e => e.dataset.name === 'loss/value'); return f && f.dataset.drawn === '1' && "
                           "f.querySelector('.scalar-plot').data[0].x.length === 3; }")
    assert traces(page, "loss/value")[0]["x"] == [2.0, 5.0, 10.0]  # cumulative timing/step_s; step 3 has none
    assert "1 point(s) at steps without a time value" in page.inner_text("details[data-group='loss'] .group-notes")
    assert "wall time: cumulative timing/step_s" in page.inner_text("#scalars .scalar-notes")

    page.evaluate("() => { const s = document.querySelector('#scalars .scalar-smooth'); s.value = '0';"
                  " s.dispatchEvent(new Event('input')); }")
    page.locator("details[data-group='loss']").scroll_into_view_if_needed()
    page.wait_for_function("() => { const f = Array.from(document.querySelectorAll('figure.scalar'))"
                           ".find(e => e.dataset.name === 'loss/value'); return f && f.dataset.drawn === '1' && "
                           "f.querySelector('.scalar-plot').data.length === 1; }")
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=shots / "scalars-dashboard.png", full_page=True)

    page.reload()  # a live reload keeps what the reader set: open groups, smoothing, log y, x axis
    page.wait_for_selector("#scalars[data-ready='1']")
    page.wait_for_selector("details[data-group='loss'][data-loaded='1']")
    assert page.evaluate("document.querySelector(\"details[data-group='loss']\").open") is True
    assert page.input_value("#scalars .scalar-x") == "time" and page.is_checked("#scalars .scalar-logy")
    assert page.input_value("#scalars .scalar-smooth") == "0"
    assert_nothing_injected(page)
    w.assert_clean()


def test_scalar_panel_overlays_the_compared_runs(server: tuple[str, str], watched: Any, shots: Path) -> None:
    url, b = server
    w = watched(url + "/")
    page = w.page
    page.goto(f"{url}/compare?run={A}&run={b}")
    page.wait_for_selector("#scalars[data-ready='1']")
    assert visible_groups(page) == ["<script>window.__xss=1<", "loss", "perf", "timing", "(ungrouped)"]
    open_group(page, "loss")
    t = traces(page, "loss/policy")
    assert len(t) == 4  # raw and smoothed for each run
    assert t[2]["y"] == [2.0, 1.0, 0.5, 0.25] and t[3]["name"] == HOSTILE_RUN_NAME.replace("<", "&lt;").replace(">", "&gt;")
    keys = page.evaluate("Array.from(document.querySelectorAll('#scalars .run-key')).map(e => e.textContent.trim())")
    assert keys == [A, HOSTILE_RUN_NAME]  # the panel's one legend, the payload as text
    notes = page.inner_text("#scalars .scalar-notes")
    assert f"{HOSTILE_RUN_NAME}\nwall time: not available" in notes
    assert page.evaluate("document.querySelector(\"#scalars .scalar-x option[value='time']\").disabled") is False
    page.evaluate("window.scrollTo(0, 0)")  # sticky table headers land mid-page in a scrolled full-page shot
    page.screenshot(path=shots / "compare-scalars.png", full_page=True)
    assert_nothing_injected(page)
    w.assert_clean()


def test_runs_page_sorts_filters_and_starts_live(server: tuple[str, str], watched: Any, shots: Path) -> None:
    url, b = server
    w = watched(url + "/")
    page = w.page
    page.goto(url + "/")
    assert page.is_checked("#live")  # arm-a is running
    ids = "Array.from(document.querySelectorAll('#runs tbody tr')).filter(r => !r.hidden).map(r => r.querySelector('input.pick').value)"
    page.click("#runs th:has-text('run')")  # by run id, ascending
    assert page.evaluate(ids) == [A, b, "metrics-only"]
    page.click("#runs th:has-text('run')")
    assert page.evaluate(ids) == ["metrics-only", b, A]
    page.click("#runs th:has-text('trajectories')")  # numbers: missing last
    assert page.evaluate(ids)[-1] == "metrics-only"
    page.fill("#runs-filter", "arm")
    assert page.evaluate(ids) == [A, b] or page.evaluate(ids) == [b, A]
    assert page.inner_text("#runs-shown") == "2 of 3 shown"
    page.fill("#runs-filter", "onerror")  # matches the hostile name (and nothing else)
    assert page.evaluate(ids) == [b]
    page.fill("#runs-filter", "")
    cell = page.locator("#runs td.name").filter(has_text="arm b")
    assert cell.get_attribute("title") == HOSTILE_RUN_NAME and cell.inner_text() == HOSTILE_RUN_NAME
    style = cell.evaluate("e => [getComputedStyle(e).whiteSpace, getComputedStyle(e).textOverflow]")
    assert style == ["nowrap", "ellipsis"]
    page.screenshot(path=shots / "runs.png", full_page=True)
    page.reload()  # the sort survives a (live) reload
    assert page.evaluate(ids)[-1] == "metrics-only"
    assert_nothing_injected(page)
    w.assert_clean()
