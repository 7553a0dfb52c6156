"""Issue 22 §§ 2–4 over HTTP: groups you can read, comparisons that cannot mislead, charts,
layout and labels that agree.  Numbers are checked against values worked out by hand in
:mod:`tests.viewer.layout_store`; layout itself (no sideways scroll) is checked in a real
browser by ``tests/browser/test_browser_layout.py``."""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from fastapi.testclient import TestClient

import rolloutlab
from rolloutlab.viewer._queries import natural_key, natural_sql, user_turn
from rolloutlab.viewer._render import svg_chart
from tests.viewer.layout_store import (
    CONFIG,
    FINAL_EVAL,
    FIRST_WINDOW,
    GROUPS,
    LAST_WINDOW,
    NAT,
    ONE,
    OTHER,
    TWIN,
    USER,
    make_layout_store,
)
from tests.viewer.test_viewer import client_for

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx`:DeprecationWarning")
INSPECT = Path(__file__).parents[1] / "fixtures" / "samples" / "inspect" / "browser.json"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_layout_store(tmp_path_factory.mktemp("layout"))


@pytest.fixture(scope="module")
def client(store: Path) -> Iterator[TestClient]:
    with client_for(store) as c:
        yield c


def text_of(fragment: str) -> str:
    return html_lib.unescape(re.sub(r"<[^>]+>", "", fragment))


# -- § 2 groups ------------------------------------------------------------------------

IDS = ["g10", "g2", "g1", "test/101", "test/13", "test/9", "a", "", "g02", "10", "9", "0", "007", "x1y10", "x1y9",
       "x10y1", "v1.10", "v1.9"]


def test_natural_key_orders_numbers_by_value() -> None:
    assert sorted(["g10", "g2", "g1"], key=natural_key) == ["g1", "g2", "g10"]
    assert sorted(["test/101", "test/13", "test/9"], key=natural_key) == ["test/9", "test/13", "test/101"]
    assert sorted(["v1.10", "v1.9", "x10y1", "x1y10", "x1y9"], key=natural_key) == [
        "v1.9", "v1.10", "x1y9", "x1y10", "x10y1"]
    assert natural_key("g02") == natural_key("g2")  # leading zeros do not count (ties broken elsewhere)
    assert natural_key(None) is None


def test_natural_sql_computes_the_same_key_as_python() -> None:
    con = duckdb.connect()
    rows = con.execute(f"SELECT k, {natural_sql('k')} AS nk FROM (SELECT unnest(?) AS k)", [IDS]).fetchall()
    assert {k: nk for k, nk in rows} == {k: natural_key(k) for k in IDS}


def test_groups_are_listed_in_natural_order(client: TestClient) -> None:
    page = client.get(f"/runs/{NAT}/steps/3?per_page=20").text
    gids = re.findall(r'<span class="gid">([^<]*)</span>', page)
    assert gids == [f"g{i}" for i in range(1, GROUPS + 1)]
    table = client.get(f"/runs/{NAT}/steps/3?view=table&per_page=50").text
    firsts = re.findall(r'<span class="mono">(g\d+)</span> #0', table)
    assert firsts == [f"g{i}" for i in range(1, GROUPS + 1)]
    desc = client.get(f"/runs/{NAT}/steps/3?sort=group&order=desc&per_page=20").text
    assert re.findall(r'<span class="gid">([^<]*)</span>', desc)[:3] == ["g12", "g11", "g10"]


def test_eval_scores_list_tasks_in_natural_order(client: TestClient) -> None:
    page = client.get(f"/runs/{NAT}?split=eval").text
    scores = page.split('id="scores"')[1].split("</table>")[0]
    tasks = [int(t) for t in re.findall(r'task\?id=test%2F(\d+)', scores)]
    assert tasks == [2, 9, 13, 101] * 2  # per checkpoint (steps 5 and 11)


def test_a_json_chat_prompt_shows_its_user_message_as_text(client: TestClient) -> None:
    assert user_turn('[{"role": "user", "content": "a\\nb"}]') == "a\nb"
    assert user_turn('..."}, {"content": "cut \\"q\\"", "role": "user"}]') == 'cut "q"'  # the end of a long one
    page = client.get(f"/runs/{NAT}/steps/3").text
    texts = re.findall(r'<p class="task-text"[^>]*>(.*?)</p>', page, flags=re.S)
    assert texts and all(text_of(t).endswith(USER) and "user:" in text_of(t) for t in texts)
    assert "\\n" not in "".join(texts) and '"role"' not in html_lib.unescape("".join(texts))


def test_group_cards_wrap_in_a_grid() -> None:
    css = (Path(rolloutlab.__file__).parent / "viewer" / "static" / "viewer.css").read_text()
    rule = re.search(r"\.samples \{([^}]*)\}", css)
    assert rule is not None and "grid-template-columns: repeat(auto-fill" in rule.group(1)
    assert "grid-auto-flow: column" not in rule.group(1) and "overflow-x" not in rule.group(1)


def test_inspect_transcript_shows_each_text_once(tmp_path: Path) -> None:
    store = tmp_path / "store"
    rolloutlab.ingest([INSPECT], store, name="inspect")
    with client_for(store) as c:
        run = c.get("/runs/inspect").text
        link = re.search(r'href="(/runs/inspect/traj\?[^"]+)"', run)
        assert link is not None
        page = c.get(html_lib.unescape(link.group(1))).text
    body = text_of(page.split("extras (")[0])  # the raw log kept in extras aside
    # every tool result once (under its call), not again as the next turn's observation
    for marker in ("[132] link", "[793] link", "[2033] link"):
        assert marker in body
    assert body.count('[132] link "We are now the AI Security Institute"') == 1
    assert 'id="turn-1"' in page and "observation" not in text_of(page.split('id="turn-1"')[1].split("</section>")[0])
    # the final answer once: in the last turn, not repeated as the response after it
    assert body.count("The AI Security Institute (AISI) is the premier") == 1
    assert 'id="response"' in page and "response (" not in text_of(page.split('id="response"')[1][:300])


# -- § 3 compare ---------------------------------------------------------------------------

def test_runs_on_different_environments_are_said_so_and_never_paired(client: TestClient) -> None:
    page = client.get(f"/compare?run={NAT}&run={OTHER}").text
    box = re.search(r'<div class="error mismatch" id="mismatch">(.*?)</div>', page, flags=re.S)
    assert box is not None
    said = text_of(box.group(1))
    assert "gymnasium-mt" in said and "sokoban" in said and "never paired by task" in said
    assert page.index('id="mismatch"') < page.index('id="compare-curves"')  # at the top
    table = page.split('id="compare-table"')[1].split("</table>")[0]
    assert "by task" not in table and "no (not the same tasks)" in table
    assert "never paired by task" in page.split("</table>")[-2] or "never paired by task" in page
    api = client.get(f"/api/compare?run={NAT}&run={OTHER}").json()
    assert api["mismatch"] and not any(r["paired"] for r in api["rows"])


def test_runs_on_the_same_tasks_are_paired_and_not_warned(client: TestClient) -> None:
    page = client.get(f"/compare?run={NAT}&run={TWIN}").text
    assert 'id="mismatch"' not in page
    api = client.get(f"/api/compare?run={NAT}&run={TWIN}").json()
    assert api["mismatch"] == [] and any(r["paired"] for r in api["rows"])


def test_compare_has_a_split_selector_and_hide_show(client: TestClient) -> None:
    page = client.get(f"/compare?run={NAT}&run={TWIN}").text
    sel = re.search(r'<select name="split" id="compare-split">(.*?)</select>', page, flags=re.S)
    assert sel is not None
    assert re.findall(r'<option value="([^"]+)"', sel.group(1)) == ["eval", "train"]
    assert 'value="train" selected' in sel.group(1)
    assert page.count('class="show-run"') == 2
    ev = client.get(f"/compare?run={NAT}&run={TWIN}&split=eval").text
    assert 'value="eval" selected' in ev and 'data-split="eval"' in ev


# -- § 4 charts, layout, labels ----------------------------------------------------------

def test_a_flat_series_is_drawn_at_its_value() -> None:
    c = svg_chart([1, 2, 3], [0.002, 0.002, 0.002])
    assert c is not None
    assert [t["label"] for t in c["yticks"]] == ["0.0015", "0.002", "0.0025"]
    mid = (c["top"] + c["bottom"]) / 2
    assert all(abs(p["y"] - mid) < 0.6 for p in c["points"])
    zero = svg_chart([1, 2], [0.0, 0.0])
    assert zero is not None and [t["label"] for t in zero["yticks"]] == ["-0.5", "0", "0.5"]
    one = svg_chart([7], [0.25])
    assert one is not None and one["points"][0]["x"] == (one["left"] + one["right"]) / 2
    assert [t["label"] for t in one["xticks"]] == ["7"]


def test_charts_js_steadies_flat_axes_and_scalars_fold_constants() -> None:
    static = Path(rolloutlab.__file__).parent / "viewer" / "static"
    charts = (static / "charts.js").read_text()
    assert "steady" in charts and "autorange = false" in charts
    scalars = (static / "scalars.js").read_text()
    assert "scalar-constants" in scalars and "constantOf" in scalars
    assert "rolloutlabCharts.steady" in (static / "compare.js").read_text()


def test_tables_scroll_in_their_own_box(client: TestClient) -> None:
    for path, ids in ((f"/runs/{NAT}", ("steps",)), ("/", ("runs", "config")),
                      (f"/compare?run={NAT}&run={TWIN}", ("compare-runs", "compare-table")),
                      (f"/runs/{NAT}/steps/3?view=table", ("trajectories",))):
        page = client.get(path).text
        for tid in ids:
            assert re.search(rf'<div class="table-box"><table class="data[^"]*" id="{tid}"', page), (path, tid)


def test_steps_count_agrees_between_the_runs_table_and_the_run_page(client: TestClient) -> None:
    runs = client.get("/").text
    row = runs.split(f'href="/runs/{NAT}"')[1].split("</tr>")[0]
    cell = re.search(r'<td class="steps" data-v="(\d+)"[^>]*>(.*?)</td>', row, flags=re.S)
    assert cell is not None and cell.group(1) == "11" and "train 1–11" in text_of(cell.group(2))
    page = client.get(f"/runs/{NAT}").text
    said = re.search(r'<span id="step-count">(.*?)</span>', page, flags=re.S)
    assert said is not None and text_of(said.group(1)).split() == ["train", "steps", "11", "(1–11)"]
    assert len(client.get(f"/api/runs/{NAT}/steps").json()["steps"]) == 11


def test_runs_table_shows_reward_first_to_last_and_the_final_evaluation(client: TestClient) -> None:
    runs = client.get("/").text
    row = runs.split(f'href="/runs/{NAT}"')[1].split("</tr>")[0]
    reward = re.search(r'<td class="reward" data-v="([^"]+)"[^>]*>(.*?)</td>', row, flags=re.S)
    assert reward is not None
    assert float(reward.group(1)) == pytest.approx(LAST_WINDOW)
    assert text_of(reward.group(2)).startswith(f"{FIRST_WINDOW:.3f}→{LAST_WINDOW:.3f}")
    assert "2-step windows" in reward.group(2)
    final = re.search(r'<td class="final" data-v="([^"]+)">(.*?)</td>', row, flags=re.S)
    assert final is not None and float(final.group(1)) == pytest.approx(FINAL_EVAL)
    assert text_of(final.group(2)) == f"{FINAL_EVAL:.3f}eval @ 11 · 75.0% ok"
    one = runs.split(f'href="/runs/{ONE}"')[1].split("</tr>")[0]
    assert "one step" in one and "→" not in one
    other = runs.split(f'href="/runs/{OTHER}"')[1].split("</tr>")[0]
    assert re.search(r'<td class="final" data-v="">—</td>', other)


def test_reward_windows_follow_the_analysis_edge_rule() -> None:
    from rolloutlab.analysis._windows import edge_count
    from rolloutlab.viewer._queries import edge_steps, reward_windows

    assert [edge_steps(n) for n in range(1, 201)] == [edge_count(n) for n in range(1, 201)]
    cells = [{"graded": g, "reward_sum": r} for g, r in ((2, 1.0), (4, 4.0), (1, 0.0), (3, 3.0))]
    assert reward_windows(cells) == {"reward_first": 0.5, "reward_last": 1.0, "window": 1}
    assert reward_windows([{"graded": 0, "reward_sum": None}]) == {"reward_first": None, "reward_last": None, "window": 1}
    assert reward_windows([]) == {"reward_first": None, "reward_last": None, "window": None}


def test_runs_page_has_a_filterable_configuration_table(client: TestClient) -> None:
    page = client.get("/").text
    table = page.split('id="config"')[1].split("</table>")[0]
    rows = {text_of(k): v for k, v in re.findall(r'<tr data-differs="[^"]*"><td class="l mono">(.*?)</td>(.*?)</tr>',
                                                 table, flags=re.S)}
    assert list(rows)[:3] == ["model", "algorithm", "env"]
    assert {"lr", "optim.beta", "optim.name", "group_size"} <= set(rows)
    lr = re.findall(r'<td class="cfg-val[^"]*" title="([^"]*)"', rows["lr"])
    header = re.findall(r'<th class="l ell" data-run="([^"]+)"', table)
    assert dict(zip(header, lr, strict=True))[NAT] == str(CONFIG["lr"]) and dict(zip(header, lr, strict=True))[TWIN] == "0.001"
    assert '<tr data-differs="1"><td class="l mono">lr</td>' in table
    assert 'id="config-filter"' in page and 'id="config-differs"' in page


def test_eval_split_scalar_panel_and_live_box(client: TestClient) -> None:
    page = client.get(f"/runs/{NAT}?split=eval").text
    assert 'data-split="eval"' in page
    assert 'id="live" checked' not in page  # finished
    one = client.get(f"/runs/{ONE}").text
    assert 'id="live" checked' not in one  # unknown status, nothing re-reads it
    idx = client.get(f"/api/scalars/index?run={ONE}&split=train").json()
    assert idx["splits"] == [] and idx["groups"] == []  # no metrics: the panel hides its toolbar


def test_labels_agree(client: TestClient) -> None:
    page = client.get(f"/runs/{NAT}").text
    head = page.split('id="steps"')[1].split("</thead>")[0]
    assert "tokens (all turns)" in head and "chars (final response)" in head
    assert "response tokens" not in head and "response chars" not in head


def test_task_across_training_only_with_more_than_one_step(client: TestClient) -> None:
    assert "this task across training" not in client.get(f"/runs/{ONE}/steps/1").text
    assert "this task across training" in client.get(f"/runs/{NAT}/steps/3").text


def test_mixed_models_are_explained(tmp_path: Path) -> None:
    from rolloutlab.io import RunWriter
    from rolloutlab.schema import Run, Trajectory

    store = tmp_path / "store"
    w = RunWriter(tmp_path / "m", Run(run_id="m", name="m", status="finished"))  # type: ignore[arg-type]
    w.write_step(1, [Trajectory(traj_id=f"t{i}", step=1, group_id="g", sample_idx=i, reward=1.0, model=f"ckpt-{i}",
                                response="x", num_turns=1) for i in range(3)])
    w.write_run()
    rolloutlab.ingest([tmp_path / "m"], store)
    with client_for(store) as c:
        runs = c.get("/").text
        page = c.get("/runs/m").text
    if "mixed (" not in runs:
        pytest.skip("this store does not derive a mixed model from trajectories")
    assert 'id="mixed-note"' in runs and 'id="mixed-note"' in page
