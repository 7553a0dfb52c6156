"""An evaluation of a set-valued environment (one step) analyses: F1 levels without the
early → late cardinality check, which needs two steps."""

from __future__ import annotations

from pathlib import Path

import orjson

from rolloutlab.cli._app import main


def test_code_search_eval_analyses(tmp_path: Path, capsys: object) -> None:
    out, store = tmp_path / "cs", tmp_path / "store"
    rc = main(
        ["eval", "--env", "code-search-v0", "--policy", "scripted:rolloutlab.envs.builtin.scripts:code_search",
         "--parser", "hermes", "--episodes", "4", "--out", str(out)]
    )
    assert rc == 0
    assert main(["ingest", str(out), "--store", str(store), "--name", "cs"]) == 0
    capsys.readouterr()  # type: ignore[attr-defined]
    assert main(["analyze", "cs", "--store", str(store), "--split", "eval", "--json"]) == 0
    a = orjson.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
    assert "one step" in a["skipped"]["cardinality"]
    assert {r["level"] for r in a["sets"]["table"]} == {"file", "module", "entity"}
