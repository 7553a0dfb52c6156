"""The store: incremental, idempotent, all-or-nothing, queryable."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

import rolloutlab
from rolloutlab.io import InputError, RolloutlabError, open_store
from tests._verl import verl_line, write_verl


def _snapshot(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file() and p.name != ".lock"}


def test_reingest_changes_nothing(tmp_path: Path) -> None:
    src = write_verl(tmp_path / "r", {1: [[1, 0]], 2: [[0, 1]]})
    store = tmp_path / "s"
    rolloutlab.ingest([src], store)
    before = _snapshot(store)
    rep = rolloutlab.ingest([src], store)
    assert rep.sources[0].parts_read == 0 and rep.sources[0].parts_unchanged == 2
    after = _snapshot(store)
    assert before.keys() == after.keys()
    assert {k: v for k, v in before.items() if k.endswith(".parquet") and "runs/" not in k} == {
        k: v for k, v in after.items() if k.endswith(".parquet") and "runs/" not in k
    }
    assert open_store(store).sql("SELECT count(*) FROM trajectories").fetchall()[0] == (4,)


def test_growing_run_adds_only_new_steps(tmp_path: Path) -> None:
    src = write_verl(tmp_path / "r", {1: [[1, 0]]})
    store = tmp_path / "s"
    rolloutlab.ingest([src], store)
    write_verl(src, {2: [[1, 1]], 3: [[0, 0]]})
    rep = rolloutlab.ingest([src], store)
    assert rep.sources[0].parts_read == 2 and rep.sources[0].parts_unchanged == 1
    st = open_store(store)
    assert st.sql("SELECT count(*), count(DISTINCT step) FROM trajectories").fetchall()[0] == (6, 3)
    assert st.runs().to_pylist()[0]["last_step"] == 3


def test_rewritten_step_replaces_rows(tmp_path: Path) -> None:
    src = write_verl(tmp_path / "r", {1: [[1, 0]]})
    store = tmp_path / "s"
    rolloutlab.ingest([src], store)
    write_verl(src, {1: [[1, 1, 1]]})
    rolloutlab.ingest([src], store)
    st = open_store(store)
    assert st.sql("SELECT count(*), sum(reward) FROM trajectories").fetchall()[0] == (3, 3.0)
    # the replaced file is gone from disk, not just from the manifest
    assert len(list((store / "trajectories").rglob("*.parquet"))) == 1


def test_failed_ingest_leaves_store_unchanged(tmp_path: Path) -> None:
    good = write_verl(tmp_path / "good", {1: [[1, 0]]})
    store = tmp_path / "s"
    rolloutlab.ingest([good], store)
    before = _snapshot(store)
    bad = write_verl(tmp_path / "bad", {1: [[1]], 2: [[0]]})
    with open(bad / "2.jsonl", "ab") as f:
        f.write(b'{"input": "p", "output": "o", "score": 1.0, "step": 2\n')
    with pytest.raises(InputError) as e:
        rolloutlab.ingest([bad], store)
    assert e.value.path.endswith("2.jsonl") and e.value.line == 2
    assert _snapshot(store) == before
    assert not (store / "_staging").exists() or not any((store / "_staging").iterdir())


def test_runs_labels_and_names(tmp_path: Path) -> None:
    a = write_verl(tmp_path / "x" / "rollouts", {1: [[1, 0]]})
    b = write_verl(tmp_path / "y" / "rollouts", {1: [[0, 0]]})
    store = tmp_path / "s"
    rolloutlab.ingest([a], store, labels={"arm": "s85", "pool": "swe-gym"})
    rolloutlab.ingest([b], store)  # same folder name, other source: a new run
    st = open_store(store)
    runs = {r["run_id"]: r for r in st.runs().to_pylist()}
    assert set(runs) == {"rollouts", "rollouts-2"}
    assert dict(runs["rollouts"]["labels"]) == {"arm": "s85", "pool": "swe-gym"}
    assert runs["rollouts"]["source"] == "verl"
    assert st.resolve_run("rollouts-2") == "rollouts-2"
    with pytest.raises(RolloutlabError, match="not in the store"):
        st.resolve_run("nope")


def test_python_api_tables(tmp_path: Path) -> None:
    src = write_verl(tmp_path / "r", {1: [[1, 0, 0, 1]], 2: [[1, 1, 1, 1]]})
    store = tmp_path / "s"
    rolloutlab.ingest([src], store)
    st = rolloutlab.open_store(store)
    steps = st.steps("r").df()
    assert steps["mean_reward"].tolist() == [0.5, 1.0]
    assert st.trajectories("r", step=2).arrow().read_all().num_rows == 4
    assert st.turns("r").df().empty  # single-turn dumps have no turn rows
    assert pq.read_table(store / "runs" / "runs.parquet").num_rows == 1


def test_open_missing_store(tmp_path: Path) -> None:
    with pytest.raises(RolloutlabError, match="no store at"):
        open_store(tmp_path / "none")


def test_store_files_are_parquet_partitioned(tmp_path: Path) -> None:
    src = write_verl(tmp_path / "r", {1: [[1, 0]]})
    store = tmp_path / "s"
    rolloutlab.ingest([src], store)
    files = sorted(str(p.relative_to(store)) for p in store.rglob("*.parquet"))
    assert any(f.startswith("trajectories/run_id=r/") for f in files)
    assert any(f.startswith("texts/run_id=r/") for f in files)
    # numbers and text apart: the trajectories table has no text columns
    cols = pq.read_schema(next((store / "trajectories").rglob("*.parquet"))).names
    assert "prompt" not in cols and "response" not in cols


def test_parallel_workers_give_same_rows(tmp_path: Path) -> None:
    src = write_verl(tmp_path / "r", {s: [[1, 0, s % 2]] for s in range(1, 6)})
    rolloutlab.ingest([src], tmp_path / "a", jobs=1)
    rolloutlab.ingest([src], tmp_path / "b", jobs=2)
    q = "SELECT traj_id, step, group_id, reward FROM trajectories ORDER BY traj_id"
    assert open_store(tmp_path / "a").sql(q).fetchall() == open_store(tmp_path / "b").sql(q).fetchall()


def test_line_numbers_survive_workers(tmp_path: Path) -> None:
    src = write_verl(tmp_path / "r", {1: [[1]], 2: [[1]]})
    (src / "2.jsonl").write_bytes(verl_line(2, "p", 1.0) + b"\n" + verl_line(2, "p", "high") + b"\n")
    with pytest.raises(InputError) as e:
        rolloutlab.ingest([src], tmp_path / "s", jobs=2)
    assert e.value.line == 2 and "score" in e.value.message and "'high'" in e.value.message
