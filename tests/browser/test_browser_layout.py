"""Layout in a real headless Chromium at 800 and 1400 px (issue 22 §§ 2–4).

Every page of the viewer that this part owns is opened at both widths: the page never
scrolls sideways (``document.documentElement.scrollWidth <= innerWidth``; wide tables
scroll inside their own box), the header spans the page, a group of 8 cards wraps onto
rows with every card inside its group's box; the scalar panel folds constant metrics
into one line and draws the rest at their value; the compare page hides and shows a
run; an evaluation-only run's scalar panel has no toolbar that does nothing.  After
each: no JavaScript error, no request left the machine.  Screenshots go to
``$ROLLOUTLAB_SHOTS`` (default: the pytest tmp dir, ``screenshots``), to be looked at.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import rolloutlab
from rolloutlab.demo_data import write_demo
from tests.browser.conftest import serving
from tests.viewer.layout_store import NAT, OTHER, TWIN, make_layout_store

pytest.importorskip("fastapi")

INSPECT = Path(__file__).parents[1] / "fixtures" / "samples" / "inspect" / "browser.json"
WIDTHS = (800, 1400)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("browser-layout")
    store = make_layout_store(root)
    rolloutlab.ingest([write_demo(root / "demo", steps=6, prompts=4)], store, name="demo")
    rolloutlab.ingest([INSPECT], store, name="inspect")
    with serving(store) as url:
        yield url


@pytest.fixture(scope="module")
def shot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = Path(os.environ["ROLLOUTLAB_SHOTS"]) if os.environ.get("ROLLOUTLAB_SHOTS") else tmp_path_factory.mktemp("shots")
    d.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {d}")
    return d


def at_width(watched: Any, url: str, width: int) -> Any:
    w = watched(url)
    w.page.set_viewport_size({"width": width, "height": 900})
    return w


def no_sideways_scroll(page: Any) -> None:
    got = page.evaluate("""() => ({sw: document.documentElement.scrollWidth, iw: window.innerWidth,
        header: document.querySelector('header.top').getBoundingClientRect().width})""")
    assert got["sw"] <= got["iw"], f"the page scrolls sideways: {got}"
    assert got["header"] >= got["iw"] - 20, f"the header does not span the page: {got}"  # less a scroll bar


PAGES = {
    "runs": "/",
    "run": f"/runs/{NAT}",
    "run-eval": f"/runs/{NAT}?split=eval",
    "demo": "/runs/demo",
    "step-groups": "/runs/demo/steps/3",
    "step-table": f"/runs/{NAT}/steps/3?view=table",
    "compare": f"/compare?run={NAT}&run={OTHER}",
    "inspect": "/runs/inspect",
    "one-step": "/runs/one-step",
    "task": f"/runs/{NAT}/task?id=1",
    "search": "/search?q=answer",
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", list(PAGES))
def test_no_page_scrolls_sideways(server: str, watched: Any, shot_dir: Path, name: str, width: int) -> None:
    w = at_width(watched, server, width)
    w.page.goto(server + PAGES[name])
    w.page.wait_for_load_state("networkidle")
    no_sideways_scroll(w.page)
    w.page.screenshot(path=shot_dir / f"{name}-{width}.png", full_page=True)
    w.assert_clean()


@pytest.mark.parametrize("width", WIDTHS)
def test_group_cards_wrap_inside_their_group(server: str, watched: Any, shot_dir: Path, width: int) -> None:
    w = at_width(watched, server, width)
    w.page.goto(server + "/runs/demo/steps/3")
    boxes = w.page.evaluate("""() => Array.from(document.querySelectorAll('section.group')).map(g => {
        const r = g.getBoundingClientRect();
        const cards = Array.from(g.querySelectorAll('a.card')).map(c => c.getBoundingClientRect());
        return {left: r.left, right: r.right, n: cards.length, rows: new Set(cards.map(c => Math.round(c.top))).size,
                inside: cards.every(c => c.left >= r.left - 1 && c.right <= r.right + 1)};
    })""")
    assert boxes and all(b["n"] == 8 for b in boxes)
    assert all(b["inside"] for b in boxes), boxes  # every card visible in its box, none behind a scroll
    assert all(b["rows"] >= 2 for b in boxes), boxes  # 8 cards of ≥ 200 px do not fit one row at 1400 px
    no_sideways_scroll(w.page)
    w.assert_clean()


def test_runs_table_fits_at_1400(server: str, watched: Any) -> None:
    w = at_width(watched, server, 1400)
    w.page.goto(server + "/")
    got = w.page.evaluate("""() => { const b = document.querySelector('#runs').parentElement;
        return {sw: b.scrollWidth, cw: b.clientWidth}; }""")
    assert got["sw"] <= got["cw"], f"the runs table overflows its box at 1400 px: {got}"
    w.page.fill("#config-filter", "optim")
    shown = w.page.evaluate("""() => Array.from(document.querySelectorAll('#config tbody tr'))
        .filter(r => !r.hidden).map(r => r.cells[0].textContent)""")
    assert shown == ["optim.beta", "optim.name"]
    w.page.fill("#config-filter", "")
    w.page.check("#config-differs")
    differs = w.page.evaluate("""() => Array.from(document.querySelectorAll('#config tbody tr'))
        .filter(r => !r.hidden).map(r => r.cells[0].textContent)""")
    assert "lr" in differs and "optim.name" not in differs and "group_size" not in differs, differs
    w.assert_clean()


def test_scalar_constants_fold_into_one_line(server: str, watched: Any, shot_dir: Path) -> None:
    w = at_width(watched, server, 1400)
    page = w.page
    page.goto(server + f"/runs/{NAT}")
    page.wait_for_selector("#scalars[data-ready='1']")
    for group in ("", "tools"):
        page.evaluate("""(g) => { const d = Array.from(document.querySelectorAll('#scalars details.scalar-group'))
            .find(d => d.dataset.group === g); d.open = true; d.scrollIntoView(); }""", group)
        page.wait_for_function("""(g) => { const d = Array.from(document.querySelectorAll('#scalars details.scalar-group'))
            .find(d => d.dataset.group === g); return d.dataset.loaded === '1' &&
            Array.from(d.querySelectorAll('figure.scalar')).every(f => f.dataset.drawn === '1'); }""", arg=group)
    consts = page.evaluate("""() => Array.from(document.querySelectorAll('.scalar-constant')).map(s => s.textContent)""")
    assert "lr = 0.002" in consts and "tools/calls = 0" in consts
    drawn = page.evaluate("""() => Array.from(document.querySelectorAll('figure.scalar')).map(f => f.dataset.name)""")
    assert drawn == ["loss"]  # the one metric that changes is the one chart
    page.locator("#scalars").screenshot(path=shot_dir / "scalars-constants-1400.png")
    w.assert_clean()


def test_a_flat_curve_is_drawn_at_its_value(server: str, watched: Any, shot_dir: Path) -> None:
    """The compare page's success-rate curve of ``twin`` vs ``nat`` over steps 1–3 is not
    flat, but the one-step run's dashboard and a flat axis go through charts.js: check
    its range on a flat trace directly."""
    w = at_width(watched, server, 1400)
    page = w.page
    page.goto(server + "/")
    got = page.evaluate("""() => window.rolloutlabCharts.steady([{x: [1, 2, 3], y: [0.002, 0.002, 0.002]}], {})""")
    assert got["yaxis"]["range"] == pytest.approx([0.0015, 0.0025])
    one = page.evaluate("""() => window.rolloutlabCharts.steady([{x: [5], y: [0]}], {})""")
    assert one["yaxis"]["range"] == [-0.5, 0.5] and one["xaxis"]["range"] == [4, 6]
    w.assert_clean()


def test_compare_hides_and_shows_a_run(server: str, watched: Any, shot_dir: Path) -> None:
    w = at_width(watched, server, 1400)
    page = w.page
    page.goto(server + f"/compare?run={NAT}&run={TWIN}")
    page.wait_for_selector("#compare-curves[data-ready='1']")
    assert page.is_visible(f"section.side-col[data-run='{TWIN}']")
    page.uncheck(f"#compare-runs input.show-run[value='{TWIN}']")
    assert not page.is_visible(f"section.side-col[data-run='{TWIN}']")
    vis = page.evaluate("""() => document.querySelector('#cmp-mean_reward .fig').data.map(t => t.visible)""")
    assert vis == [True, "legendonly"]
    page.screenshot(path=shot_dir / "compare-hidden-1400.png", full_page=True)
    page.check(f"#compare-runs input.show-run[value='{TWIN}']")
    assert page.is_visible(f"section.side-col[data-run='{TWIN}']")
    page.select_option("#compare-split", "eval")
    page.wait_for_url("**split=eval**")
    assert "split eval" in page.inner_text("#compare-title")
    w.assert_clean()


def test_eval_only_run_scalar_panel(server: str, watched: Any, shot_dir: Path) -> None:
    w = at_width(watched, server, 1400)
    page = w.page
    page.goto(server + "/runs/inspect")
    page.wait_for_selector("#scalars[data-ready='1']")
    text = page.inner_text("#scalars")
    assert "split train" not in text
    assert not page.is_checked("#live")
    page.locator("#scalars").screenshot(path=shot_dir / "inspect-scalars-1400.png")
    w.assert_clean()


def test_dashboard_folds_constant_figures(server: str, watched: Any, shot_dir: Path) -> None:
    """``nat`` has one turn per trajectory and 3.5 response tokens at every step: those
    figures become one line of constants; the reward figure is drawn."""
    w = at_width(watched, server, 1400)
    page = w.page
    page.goto(server + f"/runs/{NAT}")
    page.wait_for_selector("#figures[data-ready='1']")
    line = page.inner_text("#fig-constants")
    assert "= 1" in line and "= 3.5" in line, line
    shown = page.evaluate("""() => Array.from(document.querySelectorAll('#figures figure'))
        .filter(f => !f.hidden).map(f => f.id)""")
    assert "fig-reward" in shown or any("reward" in s for s in shown), shown
    page.locator("#fig-constants").screenshot(path=shot_dir / "fig-constants-1400.png")
    w.assert_clean()
