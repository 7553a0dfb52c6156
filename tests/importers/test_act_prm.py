"""Act-PRM think_act_policy rows: detection, one trajectory per sample with its steps in
timestep order, and the round trip ``rolloutlab export`` → ingest (issue 23 §2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rolloutlab.io import ExportOptions, InputError, RunWriter, export_run
from rolloutlab.io.importers import REGISTRY, detect_format
from rolloutlab.schema import Run, Trajectory, Turn

PROMPT = [{"role": "system", "content": "find the number"}, {"role": "user", "content": "0 to 7"}]


def _traj(tid: str, step: int, actions: list[str], obs: list[str], rewards: list[float], termination: str) -> Trajectory:
    turns = [Turn(turn_idx=i, observation=o, action=a, reward=r, done=i == len(actions) - 1)
             for i, (a, o, r) in enumerate(zip(actions, obs, rewards, strict=True))]
    return Trajectory(traj_id=tid, step=step, sample_idx=0, prompt=list(PROMPT), reward=sum(rewards),
                      termination=termination, num_turns=len(turns), turns=turns)  # type: ignore[arg-type]


def _run(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    with RunWriter(d, Run(run_id="r", name="r", env="guess-number-v0")) as w:
        w.write_step(1, [_traj("a", 1, ["<think>mid</think>4", "6", "5"], ["0 to 7", "higher", "lower"], [0.0, 0.25, 1.0], "done"),
                         _traj("b", 1, ["3", "1"], ["0 to 7", "lower"], [0.5, 0.0], "max_turns")])
        w.write_step(2, [_traj("c", 2, ["2"], ["0 to 7"], [1.0], "done")])
    return d


def test_round_trip_export_then_ingest_keeps_steps_and_rewards(tmp_path: Path, ingest_one: Any) -> None:
    ex = tmp_path / "ex"
    export_run(_run(tmp_path), ex, ExportOptions(gamma=0.9, center=True))
    assert detect_format(ex).name == "act_prm" and detect_format(ex / "data.parquet").name == "act_prm"
    _, st = ingest_one(ex)
    trajs = st.sql("SELECT traj_id, step, split, reward, num_turns, termination FROM trajectories ORDER BY traj_id").fetchall()
    assert trajs == [("a", 1, "train", 1.25, 3, "done"), ("b", 1, "train", 0.5, 2, "truncated"), ("c", 2, "train", 1.0, 1, "done")]
    turns = st.sql("SELECT t.traj_id, t.turn_idx, t.reward, x.action, x.observation FROM turns t JOIN texts x "
                   "USING (run_id, traj_id, turn_idx) ORDER BY t.traj_id, t.turn_idx").fetchall()
    assert turns == [
        ("a", 0, 0.0, "<think>mid</think>4", "0 to 7"), ("a", 1, 0.25, "6", "higher"), ("a", 2, 1.0, "5", "lower"),
        ("b", 0, 0.5, "3", "0 to 7"), ("b", 1, 0.0, "1", "lower"), ("c", 0, 1.0, "2", "0 to 7"),
    ]


def test_jsonl_rows_out_of_order(tmp_path: Path, ingest_one: Any) -> None:
    def row(ts: int, r: float, **kw: Any) -> dict[str, Any]:
        return {"state": [{"role": "user", "content": f"obs {ts}"}], "action": f"act {ts}", "next_obs": "", "reward": r,
                "return_": r, "advantage": 0.0, "done": kw.get("done", False), "truncated": False, "timestep": ts,
                "batch_id": 3, "unique_data_sample_id": "s1", "generation_id": 0, "split": "test", "tools": "[]"}

    src = tmp_path / "rows.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in [row(1, 1.0, done=True), row(0, 0.0)]) + "\n")
    assert REGISTRY["act_prm"].detect(src) == 85
    _, st = ingest_one(src)
    assert st.sql("SELECT step, split, reward, termination FROM trajectories").fetchall() == [(3, "eval", 1.0, "done")]
    assert st.sql("SELECT turn_idx, action FROM texts WHERE turn_idx >= 0 ORDER BY turn_idx").fetchall() == [
        (0, "act 0"), (1, "act 1")]


def test_a_missing_column_is_named(tmp_path: Path, ingest_one: Any) -> None:
    src = tmp_path / "rows.jsonl"
    src.write_text(json.dumps({"state": [], "action": "x", "reward": 1.0, "timestep": 0, "unique_data_sample_id": "s",
                               "split": "nowhere"}) + "\n")
    with pytest.raises(InputError, match=r"split.*nowhere"):
        ingest_one(src, format="act_prm")
