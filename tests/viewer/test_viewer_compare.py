"""The scalar panel's endpoints, the compare page and the runs page, at the server.

Against a hand-built store (:mod:`tests.viewer.compare_store`) whose values are known:
the index groups names by prefix, the series carry the logged values per run, the
smoothing is TensorBoard's debiased EMA (checked against numbers worked by hand), the x
axes are the cumulative step time and tokens (or say why not), and the comparison table
is exactly what the analysis functions compute.  Hostile run and metric names stay data.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip("fastapi")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

import rolloutlab
from rolloutlab.analysis import compare_metric_runs, compare_runs, load_run
from rolloutlab.analysis._json import plain
from rolloutlab.viewer._queries import BadRequest
from rolloutlab.viewer._scalars import debiased_ema, group_of
from tests.viewer.compare_store import (
    HOSTILE_METRIC,
    HOSTILE_RUN_NAME,
    METRICS_ONLY,
    A,
    make_compare_store,
    tokens_per_step,
)
from tests.viewer.test_viewer import assert_escaped, client_for

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx`:DeprecationWarning")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return make_compare_store(tmp_path_factory.mktemp("compare"))


@pytest.fixture(scope="module")
def client(built: tuple[Path, str]) -> Iterator[TestClient]:
    with client_for(built[0]) as c:
        yield c


def get_json(client: TestClient, path: str, params: list[tuple[str, Any]]) -> Any:
    r = client.get(path, params=params)
    assert r.status_code == 200, r.text[:500]
    return r.json()


def series_of(payload: dict[str, Any], name: str) -> dict[str, dict[str, Any]]:
    """run id → series of metric ``name`` in a /api/scalars answer."""
    (m,) = [m for m in payload["metrics"] if m["name"] == name]
    return {s["run"]: s for s in m["series"]}


# -- the scalar panel ------------------------------------------------------------------


def test_groups_are_the_prefix_before_the_first_slash() -> None:
    assert group_of("actor/pg/clipfrac") == "actor"
    assert group_of("lr") == ""
    assert group_of(HOSTILE_METRIC) == "<script>window.__xss=1<"


def test_index_lists_every_metric_grouped_with_the_runs_that_logged_it(client: TestClient, built: tuple[Path, str]) -> None:
    b = built[1]
    idx = get_json(client, "/api/scalars/index", [("run", A), ("run", b)])
    assert idx["split"] == "train" and idx["splits"] == ["train"]
    groups = {g["group"]: {m["name"]: m["runs"] for m in g["metrics"]} for g in idx["groups"]}
    assert groups == {
        "<script>window.__xss=1<": {HOSTILE_METRIC: [A]},
        "loss": {"loss/policy": [A, b], "loss/value": [A]},
        "perf": {"perf/total_num_tokens": [b]},
        "timing": {"timing/step_s": [A]},
        "": {"lr": [A]},
    }
    assert [g["group"] for g in idx["groups"]][-1] == ""  # names without a prefix come last
    runs = {r["run"]: r for r in idx["runs"]}
    assert runs[b]["name"] == HOSTILE_RUN_NAME
    assert runs[A]["metrics"] == 5 and runs[b]["metrics"] == 2


def test_series_of_several_runs_overlaid(client: TestClient, built: tuple[Path, str]) -> None:
    b = built[1]
    d = get_json(client, "/api/scalars", [("run", A), ("run", b), ("group", "loss")])
    assert [m["name"] for m in d["metrics"]] == ["loss/policy", "loss/value"]
    pol = series_of(d, "loss/policy")
    assert pol[A]["step"] == [1, 2, 4] and pol[A]["y"] == [1.0, 0.5, 0.25]  # step 3 logged no value
    assert pol[b]["step"] == [1, 2, 3, 4] and pol[b]["y"] == [2.0, 1.0, 0.5, 0.25]
    assert pol[b]["x"] == pol[b]["step"]
    assert list(series_of(d, "loss/value")) == [A]
    assert pol[A]["smoothed"] == pol[A]["y"]  # no smoothing asked
    ungrouped = get_json(client, "/api/scalars", [("run", A), ("group", "")])
    assert [m["name"] for m in ungrouped["metrics"]] == ["lr"]
    one = get_json(client, "/api/scalars", [("run", A), ("group", "loss"), ("name", "loss/value")])
    assert [m["name"] for m in one["metrics"]] == ["loss/value"]


def test_smoothing_is_tensorboards_debiased_ema(client: TestClient, built: tuple[Path, str]) -> None:
    b = built[1]
    d = get_json(client, "/api/scalars", [("run", A), ("run", b), ("group", "loss"), ("smooth", "0.5")])
    pol = series_of(d, "loss/policy")
    # By hand, weight 0.5: m_n = 0.5 m_{n-1} + 0.5 y_n from m_0 = 0, shown as m_n / (1 - 0.5^n).
    # b: 2, 1, 0.5, 0.25 → m = 1, 1, 0.75, 0.5 → 2, 1.3333, 0.857143, 0.533333
    assert pol[b]["smoothed"] == pytest.approx([2.0, 4 / 3, 0.75 / 0.875, 0.5 / 0.9375])
    # a: 1, 0.5, 0.25 → m = 0.5, 0.5, 0.375 → 1, 0.666667, 0.428571
    assert pol[A]["smoothed"] == pytest.approx([1.0, 0.5 / 0.75, 0.375 / 0.875])
    assert pol[b]["y"] == [2.0, 1.0, 0.5, 0.25]  # the raw values come along unchanged


def test_ema_edge_cases() -> None:
    assert debiased_ema([3.0, 3.0, 3.0], 0.9) == [3.0, 3.0, 3.0]  # constant: as TensorBoard, unsmoothed
    assert debiased_ema([1.0, None, 3.0], 0.5) == pytest.approx([1.0, None, (0.25 + 1.5) / 0.75])  # a gap is skipped
    assert debiased_ema([1.0, 2.0], 0.0) == [1.0, 2.0]
    with pytest.raises(BadRequest, match="smoothing"):
        debiased_ema([1.0], 1.0)


def test_x_axis_wall_time_is_the_cumulative_step_time(client: TestClient, built: tuple[Path, str]) -> None:
    b = built[1]
    d = get_json(client, "/api/scalars", [("run", A), ("run", b), ("group", "loss"), ("x", "time")])
    val = series_of(d, "loss/value")[A]
    assert val["step"] == [1, 2, 4] and val["x"] == [2.0, 5.0, 10.0]  # step 3 has no duration: left out
    assert b not in series_of(d, "loss/policy")  # b logged no step time
    assert any(n.startswith(HOSTILE_RUN_NAME + ": no time axis") for n in d["notes"]), d["notes"]
    assert any(n.startswith("arm-a: 1 point(s)") for n in d["notes"]), d["notes"]


def test_x_axis_tokens_from_the_trainer_or_the_trajectories(client: TestClient, built: tuple[Path, str]) -> None:
    b = built[1]
    d = get_json(client, "/api/scalars", [("run", A), ("run", b), ("group", "loss"), ("x", "tokens")])
    pol = series_of(d, "loss/policy")
    assert pol[b]["x"] == [100.0, 200.0, 300.0, 400.0]  # verl's perf/total_num_tokens, summed
    per = tokens_per_step()
    assert pol[A]["x"] == [per, 2 * per, 4 * per]  # prompt + response tokens of its trajectories
    idx = get_json(client, "/api/scalars/index", [("run", A), ("run", b)])
    axes = {r["run"]: r["axes"] for r in idx["runs"]}
    assert axes[A]["time"] == {"available": True, "source": "cumulative timing/step_s (seconds)"}
    assert axes[b]["time"]["available"] is False and "timing/step_s" in axes[b]["time"]["source"]
    assert "perf/total_num_tokens" in axes[b]["tokens"]["source"]
    assert "trajectories" in axes[A]["tokens"]["source"]


@pytest.mark.parametrize(("query", "status", "says"), [
    ([("group", "loss")], 400, "at least 1 run"),
    ([("run", A), ("x", "epoch")], 400, "x must be one of step, time, tokens"),
    ([("run", A), ("smooth", "1.5")], 400, "smoothing must be between 0 and 0.999"),
    ([("run", A), ("smooth", "nan")], 400, "smooth"),
    ([("run", A), ("split", "val")], 400, "split must be one of train"),
    ([("run", "no-such-run")], 404, "no-such-run"),
])
def test_bad_scalar_requests_say_what_is_allowed(client: TestClient, query: list[tuple[str, str]], status: int,
                                                 says: str) -> None:
    r = client.get("/api/scalars", params=query)
    assert r.status_code == status, r.text[:300]
    assert says in r.text


def test_dashboard_carries_the_scalar_panel(client: TestClient) -> None:
    r = client.get(f"/runs/{A}")
    assert r.status_code == 200
    assert """<section class="scalars" id="scalars" data-runs='["arm-a"]' data-split="train" data-plotly="yes">""" in r.text
    assert '<script src="/static/scalars.js"></script>' in r.text
    assert_escaped(r.text)
    only = client.get(f"/runs/{METRICS_ONLY}")  # no trajectories: the panel is all there is
    assert only.status_code == 200 and 'id="scalars"' in only.text


# -- the compare page --------------------------------------------------------------------


def test_comparison_table_is_the_analysis_functions(client: TestClient, built: tuple[Path, str]) -> None:
    store, b = built
    st = rolloutlab.open_store(store)
    want = compare_runs([load_run(st, A, split="train"), load_run(st, b, split="train")], names=[A, b])
    got = get_json(client, "/api/compare", [("run", A), ("run", b)])
    assert got["kind"] == "trajectories" and got["baseline"] == A
    assert got["rows"] == plain(want.overall.to_dict(orient="records"))
    html = client.get("/compare", params=[("run", A), ("run", b)]).text
    table = html.split('id="compare-table"')[1].split("</table>")[0]
    for r in want.overall.itertuples():
        assert f"{r.estimate:+.4f}" in table and f"[{r.low:+.4f}, {r.high:+.4f}]" in table


def test_a_metrics_only_run_is_compared_on_its_logged_scalars(client: TestClient, built: tuple[Path, str]) -> None:
    store, _ = built
    st = rolloutlab.open_store(store)
    want = compare_metric_runs([load_run(st, METRICS_ONLY, split="train"), load_run(st, A, split="train")],
                               names=[METRICS_ONLY, A])
    got = get_json(client, "/api/compare", [("run", METRICS_ONLY), ("run", A)])
    assert got["kind"] == "metrics" and got["rows"] == want.to_dict()["table"]
    assert got["notes"] == want.notes


def test_compare_page_overlays_curves_and_shows_one_step_side_by_side(client: TestClient, built: tuple[Path, str]) -> None:
    b = built[1]
    r = client.get("/compare", params=[("run", A), ("run", b)])
    assert r.status_code == 200
    html = r.text
    assert_escaped(html)
    assert "&lt;img src=x onerror=&#34;window.__xss=1&#34;&gt; arm b" in html
    curves = orjson.loads(re.search(r'data-curves="([^"]*)"', html).group(1).replace("&#34;", '"')  # type: ignore[union-attr]
                          .replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").replace("&#39;", "'"))
    by_run = {c["run"]: c for c in curves["curves"]}
    steps = client.app.state.viewer.view  # type: ignore[attr-defined]
    from rolloutlab.viewer import _queries as Q

    for rid in (A, b):
        rows = Q.step_table(steps, rid, "train")
        assert by_run[rid]["step"] == [1, 2, 3, 4]
        assert by_run[rid]["mean_reward"] == [x["mean_reward"] for x in rows]
        assert by_run[rid]["success_rate"] == [x["success_rate"] for x in rows]
    assert by_run[b]["name"] == HOSTILE_RUN_NAME
    # The last shared step by default, one column per run, with its groups and cards.
    assert '<option selected>4</option>' in html
    cols = html.split('id="side-cols"')[1]
    assert cols.count('class="side-col"') == 2
    assert cols.count('href="/runs/arm-a/traj?id=s4-g0-') == 4
    two = client.get("/compare", params=[("run", A), ("run", b), ("step", "2")]).text
    assert "s2-g1-3" in two.split('id="side-cols"')[1] and "s4-g" not in two.split('id="side-cols"')[1]
    assert 'data-runs=\'["arm-a", "img-src-x-onerror-window.__xss-1-arm-b"]\'' in html  # the scalar panel, overlaid


@pytest.mark.parametrize(("query", "status", "says"), [
    ([("run", A)], 400, "at least 2 run"),
    ([("run", A), ("run", A)], 400, "at least 2 different runs"),
    ([("run", A), ("run", "nope")], 404, "nope"),
    ([("run", A), ("run", METRICS_ONLY), ("step", "2")], 400, "not every run has step 2"),
])
def test_bad_compare_requests(client: TestClient, query: list[tuple[str, str]], status: int, says: str) -> None:
    r = client.get("/compare", params=query)
    assert r.status_code == status, r.text[:300]
    assert says in r.text
    assert_escaped(r.text)


def test_compare_with_a_metrics_only_run_has_no_common_step(client: TestClient) -> None:
    r = client.get("/compare", params=[("run", A), ("run", METRICS_ONLY)])
    assert r.status_code == 200
    assert 'id="no-common-step"' in r.text and 'data-kind="metrics"' in r.text
    curves = r.text.split('data-curves="')[1].split('"')[0]
    assert "logged metrics" in curves  # its curve comes from its logged reward/mean


# -- the runs page -------------------------------------------------------------------------


def test_runs_page_picks_sorts_and_keeps_names_whole(client: TestClient, built: tuple[Path, str]) -> None:
    b = built[1]
    html = client.get("/").text
    assert_escaped(html)
    for rid in (A, b, METRICS_ONLY):
        assert f'<input type="checkbox" class="pick" name="run" value="{rid}" form="compare-form"' in html
    name_cell = '<td class="l ell name" title="&lt;img src=x onerror=&#34;window.__xss=1&#34;&gt; arm b">'
    assert name_cell in html
    assert html.count('data-sort="num"') == 5 and 'id="runs-filter"' in html
    assert '<script src="/static/runs.js"></script>' in html
    assert re.search(r'<input type="checkbox" id="live" checked>', html)  # arm-a is running


@pytest.mark.parametrize(("status", "live"), [("finished", False), ("aborted", False), ("unknown", False),
                                              ("running", True)])
def test_live_is_on_by_default_only_when_a_reload_can_bring_steps(tmp_path: Path, status: str, live: bool) -> None:
    """Ticked for a running run; not for an import of unknown status that nothing re-reads
    (issue 22 § 4: the box is ticked only when the viewer can actually reload)."""
    store, b = make_compare_store(tmp_path, status_a=status, status_b="finished")
    with client_for(store) as c:
        dash = c.get(f"/runs/{A}").text
        other = c.get(f"/runs/{b}").text
    assert ('id="live" checked' in dash) is live
    assert 'id="live" checked' not in other  # finished



def test_x_axis_tokens_from_a_cumulative_counter_is_not_summed_again(tmp_path: Path) -> None:
    """TRL logs ``num_tokens`` already cumulative: the axis takes it as logged (summing it
    again would give 100, 300, 600 instead of 100, 200, 300)."""
    csv = tmp_path / "trl.csv"
    csv.write_text("step,reward/mean,train/num_tokens,perf/total_num_tokens\n"
                   "1,0.1,100,7\n2,0.2,200,7\n3,0.3,300,7\n")
    store = tmp_path / "store"
    rolloutlab.ingest([csv], store, name="trl-run")
    (rid,) = rolloutlab.open_store(store).run_ids()
    with client_for(store) as c:
        d = get_json(c, "/api/scalars", [("run", rid), ("group", "reward"), ("x", "tokens")])
        (axes,) = [r["axes"] for r in get_json(c, "/api/scalars/index", [("run", rid)])["runs"]]
    assert series_of(d, "reward/mean")[rid]["x"] == [100.0, 200.0, 300.0]
    assert axes["tokens"]["source"] == "train/num_tokens as logged (tokens)"
