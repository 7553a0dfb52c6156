"""Every real sample ingests and shows: steps, a step, a group and a trajectory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rolloutlab.cli import main
from tests.conftest import SAMPLES

ALL = sorted(str(p.relative_to(SAMPLES)) for p in SAMPLES.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl", ".eval"))


def test_samples_are_all_covered() -> None:
    assert len(ALL) == 8


@pytest.mark.parametrize("sample", ALL)
def test_sample_ingests_and_shows(sample: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "s")
    assert main(["ingest", str(SAMPLES / sample), "--store", store, "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    rid = rep["sources"][0]["run_id"]
    assert rep["sources"][0]["counts"]["trajectories"] > 0
    assert main(["show", rid, "--store", store, "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)
    assert steps and sum(s["trajectories"] for s in steps) == rep["sources"][0]["counts"]["trajectories"]
    step = steps[0]["step"]
    assert main(["show", rid, "--store", store, "--step", str(step), "--json"]) == 0
    trajs = json.loads(capsys.readouterr().out)
    assert len(trajs) == steps[0]["trajectories"]
    if trajs[0]["group_id"] is not None:
        assert main(["show", rid, "--store", store, "--group", trajs[0]["group_id"], "--json"]) == 0
        assert all(t["group_id"] == trajs[0]["group_id"] for t in json.loads(capsys.readouterr().out))
    # the rich rendering of a whole trajectory works and prints its id and turns
    assert main(["show", rid, "--store", store, "--traj", trajs[-1]["traj_id"]]) == 0
    out = capsys.readouterr().out
    assert trajs[-1]["traj_id"].split("/")[-1] in out
    assert any(w in out for w in ("turn 0", "response", "prompt", "error"))
