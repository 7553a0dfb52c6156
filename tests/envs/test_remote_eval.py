"""``rolloutlab eval`` over AgentGym- and OpenEnv-protocol servers running as real processes;
the output ingests and analyses."""

from __future__ import annotations

from pathlib import Path

import orjson

from rolloutlab.cli._app import main
from tests.envs._procs import free_port, server


def _summary(out: Path) -> dict[str, object]:
    [path] = list((out / "eval").glob("*/summary.json"))
    return dict(orjson.loads(path.read_bytes()))


def _episodes(out: Path) -> list[dict[str, object]]:
    [path] = list((out / "eval").glob("*/episodes.jsonl"))
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def test_eval_through_agentgym_server(tmp_path: Path) -> None:
    port = free_port()
    with server(["tests/envs/_agentgym_server.py", str(port), "webshop"], port=port, ready="/stats") as url:
        out = tmp_path / "ag"
        rc = main(
            ["eval", "--env", f"agentgym:webshop@{url}?tasks=4", "--policy", "scripted:tests.envs._remote_fakes:say_up",
             "--episodes", "4", "--samples", "2", "--out", str(out), "--concurrency", "4"]
        )
        assert rc == 0
        s = _summary(out)
        assert s["episodes"] == 8 and s["graded"] == 8 and s["success_rate"] == 1.0
        eps = _episodes(out)
        assert {e["num_turns"] for e in eps} >= {3, 4} and all(e["termination"] == "done" for e in eps)
        # an AgentGym {"error"} mid-episode: the episode is ungraded with the reason, not a zero
        bad = tmp_path / "bad"
        rc = main(
            ["eval", "--env", f"agentgym:webshop@{url}?tasks=2", "--policy", "scripted:tests.envs._remote_fakes:say_crash",
             "--episodes", "2", "--samples", "1", "--out", str(bad)]
        )
        assert rc == 0
        eps = _episodes(bad)
        assert all(e["graded"] is False and e.get("reward") is None and e["termination"] == "error" for e in eps)
        assert all("simulated failure" in str(e["error"]) for e in eps)
    store = tmp_path / "store"
    assert main(["ingest", str(out), "--store", str(store), "--name", "ag"]) == 0
    assert main(["analyze", "ag", "--store", str(store), "--json"]) == 0


def test_eval_through_openenv_server(tmp_path: Path) -> None:
    port = free_port()
    with server(["tests/envs/_openenv_server.py", str(port)], port=port) as url:
        out = tmp_path / "oe"
        rc = main(
            ["eval", "--env", f"openenv@{url}?max_turns=10&tasks=3", "--policy", "scripted:tests.envs._remote_fakes:say_up",
             "--episodes", "3", "--samples", "2", "--out", str(out)]
        )
        assert rc == 0
        s = _summary(out)
        assert s["episodes"] == 6 and s["success_rate"] == 1.0
    store = tmp_path / "store"
    assert main(["ingest", str(out), "--store", str(store), "--name", "oe"]) == 0
    assert main(["analyze", "oe", "--store", str(store)]) == 0
