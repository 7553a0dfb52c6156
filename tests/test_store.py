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
    assert before.keys() == after.keys() - {"_manifest.json.prev"}
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
    n_turns = st.sql("SELECT sum(num_turns) FROM trajectories").fetchall()[0][0]
    assert len(st.turns("r").df()) == n_turns  # n turn rows for num_turns = n (docs/store.md)
    assert pq.read_table(st.files("runs")[0]).num_rows == 1


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


# -- issue 12 § 5: the runs table is committed like the others; direct readers ----------

def test_runs_table_is_written_under_a_new_name_and_committed(tmp_path: Path) -> None:
    src = write_verl(tmp_path / "r", {1: [[1, 0]]})
    store = tmp_path / "s"
    rolloutlab.ingest([src], store)
    first = open_store(store).files("runs")
    assert len(first) == 1 and first[0].name.startswith("runs-") and first[0].exists()
    assert not (store / "runs" / "runs.parquet").exists()  # never rewritten in place
    write_verl(src, {2: [[1, 1]]})
    rolloutlab.ingest([src], store)
    second = open_store(store).files("runs")
    assert second != first and not first[0].exists()  # the old one is collected
    assert pq.read_table(second[0]).column("last_step").to_pylist() == [2]
    assert [p.name for p in (store / "runs").iterdir()] == [second[0].name]


def _killed_ingest_leftovers(store: Path) -> None:
    """What a kill between writing and committing leaves: staged files and a moved-in
    file the manifest does not list (a direct glob sees both)."""
    committed = open_store(store).files("trajectories")[0]
    staged = store / "_staging" / "deadbeef" / "trajectories" / "run_id=r"
    staged.mkdir(parents=True)
    (staged / "x.parquet").write_bytes(committed.read_bytes())
    (committed.parent / "stray-not-committed.parquet").write_bytes(committed.read_bytes())


def test_direct_readers_read_exactly_the_committed_files(tmp_path: Path) -> None:
    import duckdb
    import polars as pl

    src = write_verl(tmp_path / "r", {1: [[1, 0]], 2: [[1, 1]]})
    store = tmp_path / "s"
    rolloutlab.ingest([src], store)
    _killed_ingest_leftovers(store)
    glob = duckdb.sql(f"SELECT count(*) FROM read_parquet('{store}/trajectories/**/*.parquet')").fetchall()[0][0]
    assert glob > 4  # what the README used to suggest counts uncommitted rows
    # the one-liners of docs/store.md
    files = [str(f) for f in rolloutlab.open_store(store).files("trajectories")]
    assert duckdb.sql("SELECT count(*) FROM read_parquet($files)", params={"files": files}).fetchall() == [(4,)]
    assert pl.read_parquet(files).height == 4
    runs = [str(f) for f in rolloutlab.open_store(store).files("runs")]
    assert pl.read_parquet(runs).height == 1


def test_next_ingest_removes_leftovers_of_killed_ones(tmp_path: Path) -> None:
    src = write_verl(tmp_path / "r", {1: [[1, 0]]})
    store = tmp_path / "s"
    rolloutlab.ingest([src], store)
    _killed_ingest_leftovers(store)
    (store / "._manifest.json.tmp4242").write_bytes(b'{"runs": {')  # a killed manifest write
    (store / "._manifest.json.prev.tmp4242").write_bytes(b"")
    rep = rolloutlab.ingest([src], store)
    assert rep.sources[0].parts_unchanged == 1
    assert len(rep.leftovers_removed) == 3
    assert not (store / "_staging").exists()
    assert not list(store.glob(".*.tmp*"))
    assert not list(store.rglob("stray-not-committed.parquet"))
    on_disk = sorted(p for t in ("trajectories", "texts", "turns", "metrics", "rejects") for p in (store / t).rglob("*.parquet")
                     if (store / t).exists())
    st = open_store(store)
    assert on_disk == sorted(p for t in ("trajectories", "texts", "turns", "metrics", "rejects") for p in st.files(t))


def test_viewer_retry_resolves_the_text_files_again(tmp_path: Path) -> None:
    """An ingest replaces a step's texts file between the viewer resolving the file list
    and reading it: the retry must read the newly committed file, not the stale list."""
    from rolloutlab.viewer._live import StoreView
    from rolloutlab.viewer._queries import texts

    src = write_verl(tmp_path / "r", {1: [[1, 0]]})
    store = tmp_path / "s"
    rolloutlab.ingest([src], store, name="r")
    view = StoreView(store)
    real_query = view.query
    calls: list[list[str]] = []

    def query(sql: str, params: list[object]) -> list[dict[str, object]]:
        files = next((p for p in params if isinstance(p, list)), None)
        if files is not None:
            calls.append(list(files))
            if len(calls) == 1:  # the ingest lands between the list and the read
                write_verl(src, {1: [[1, 1, 1]]})
                rolloutlab.ingest([src], store, name="r")
        return real_query(sql, params)

    view.query = query  # type: ignore[method-assign]
    rows = texts(view, "r", "train", 1, "traj_id", "turn_idx = -1", [])
    assert len(rows) == 3
    assert len(calls) == 2 and calls[0] != calls[1]
