"""``analyze --fit hinge|segments``: the terminal and the JSON say which fit was used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rolloutlab.cli import main
from rolloutlab.demo_data import write_demo


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLOUTLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ROLLOUTLAB_STORE", str(tmp_path / "no-store"))


def test_fit_segments_in_json_and_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_demo(tmp_path / "src", steps=20)
    assert main(["analyze", str(src), "--json", "--fit", "segments", "--split-at", "10"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["saturation_fit"] == "segments"
    sat = d["saturation"]["mean_reward"]
    assert sat["fit"]["model"] == "segments" and sat["fit"]["breakpoint"] == 10
    assert {r["segment"] for r in sat["segments"]} == {"early", "late"}
    assert sat["trials"]["segments"][0]["se_kind"] == "cluster"
    assert main(["analyze", str(src), "--fit", "segments"]) == 0
    out = capsys.readouterr().out
    assert "separate line per segment" in out and "clustered by" in out
    assert main(["analyze", str(src)]) == 0
    assert "two-segment hinge fit" in capsys.readouterr().out


def test_fit_rejects_unknown_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_demo(tmp_path / "src", steps=8)
    assert main(["analyze", str(src), "--fit", "spline"]) != 0
    err = capsys.readouterr().err
    assert "spline" in err and "hinge" in err


def test_report_figures_draw_each_fit_and_name_it() -> None:
    import numpy as np

    from rolloutlab.analysis import analyze, frame_from_records
    from rolloutlab.report import figure_specs

    rng = np.random.default_rng(0)
    recs = [{"step": s, "group_id": f"{s}:{g}", "task_id": f"t{g}", "sample_idx": i,
             "reward": float(rng.random() < min(0.9, 0.2 + 0.05 * s))}
            for s in range(1, 31) for g in range(6) for i in range(4)]  # fmt: skip
    for model in ("hinge", "segments"):
        a = analyze(frame_from_records(recs), replay=False, fit=model, split_at=14)
        fit = a.saturation["mean_reward"]["fit"]
        specs, _ = figure_specs([a])
        traces = [t for t in dict(specs)["reward"]["data"] if f"{model} fit" in str(t.get("name"))]
        assert len(traces) == 1
        # the drawn polyline is the fit itself: at τ the early line, after it the late one
        assert traces[0]["x"] == list(fit.knots)
        assert traces[0]["y"] == pytest.approx(list(fit.predict(np.array(fit.knots))))


def test_report_fit_segments_names_the_fit(tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    pytest.importorskip("jinja2")
    src = write_demo(tmp_path / "src", steps=20)
    for model in ("segments", "hinge"):
        out = tmp_path / f"{model}.html"
        assert main(["report", str(src), "-o", str(out), "--fit", model]) == 0
        html = out.read_text(encoding="utf-8")
        assert f"reward {model} fit" in html and f"success {model} fit" in html
