"""``rolloutlab show`` decides success by the run's one rule, as the viewer and
``analyze`` do (issue 7, item 11): a verl dump without ``acc`` has success from its reward."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rolloutlab
from rolloutlab.cli import main
from tests._verl import verl_line


def test_show_uses_the_success_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "dump"
    d.mkdir()
    (d / "1.jsonl").write_bytes(b"\n".join(verl_line(1, "q", float(s)) for s in (1, 0, 1)) + b"\n")
    store = tmp_path / "store"
    rolloutlab.ingest([d], store, name="noacc")
    assert main(["show", "noacc", "--store", str(store), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["success_rate"] == pytest.approx(2 / 3) and row["success_rule"] == "reward == 1 (rewards lie in [0, 1])"
    assert main(["show", "noacc", "--store", str(store), "--step", "1", "--json"]) == 0
    assert [r["success"] for r in json.loads(capsys.readouterr().out)] == [True, False, True]
    assert main(["show", "noacc", "--store", str(store)]) == 0
    assert "reward == 1" in capsys.readouterr().out
