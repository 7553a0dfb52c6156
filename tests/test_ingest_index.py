"""``rolloutlab ingest --index FILE``: an index names the run and labels of each source;
a source it does not name is reported, not ingested; bad lines name file and line."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import rolloutlab
from rolloutlab.cli import main
from rolloutlab.io import InputError
from rolloutlab.io._index import read_index
from tests._skyrl_log import console_record


def write_run(folder: Path, name: str, seed: int, steps: int = 4) -> dict[int, float]:
    rng = random.Random(seed)
    vals = {s: rng.random() for s in range(1, steps + 1)}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(console_record(s, {"reward/avg_raw_reward": v}, s) for s, v in vals.items()))
    return {s: float(f"{v:.4f}") for s, v in vals.items()}


def runs_in(store: Path) -> dict[str, dict[str, object]]:
    return {rid: e["run"] for rid, e in rolloutlab.open_store(store).manifest["runs"].items()}


def test_index_names_and_labels_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = tmp_path / "logs"
    a = write_run(logs, "eval_0.log", 1)
    b = write_run(logs, "eval_1.log", 2)
    write_run(logs, "eval_2.log", 3)  # not in the index
    (logs / "README.md").write_text("logs of the paper\n")
    index = tmp_path / "eval_log_index.txt"
    index.write_text("# file\trun\tlabels\n"
                     "eval_0.log\tbaseline arm=s0 seed=1\n"
                     "eval_1.log  treated   arm=s85   # the 85% arm\n"
                     "\n"
                     "eval_9.log treated\n")
    store = tmp_path / "store"
    assert main(["ingest", str(logs), "--store", str(store), "--index", str(index)]) == 0
    err = capsys.readouterr().err
    runs = runs_in(store)
    assert sorted(runs) == ["baseline", "treated"]
    assert runs["baseline"]["labels"] == {"arm": "s0", "seed": "1"}
    assert runs["treated"]["labels"] == {"arm": "s85"}
    st = rolloutlab.open_store(store)
    for rid, want in (("baseline", a), ("treated", b)):
        got = dict(st.sql("SELECT step, value FROM metrics WHERE run_id = ?", params=[rid]).fetchall())
        assert got == want
    assert "not in the index, not ingested" in err and "eval_2.log" in err and "README.md" in err
    assert "index entry naming no source" in err and "eval_9.log" in err and ":5" in err


def test_index_of_run_folders_merges_and_labels(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    write_run(root / "s85_seed1", "train.log", 1)
    write_run(root / "s85_seed2", "train.log", 2)
    write_run(root / "s90_seed1", "train.log", 3)
    index = tmp_path / "index.txt"
    index.write_text("runs/s85_seed1 s85 seed=1\ns85_seed2 s85 seed=2\ns90_seed1 s90\n")
    rep = rolloutlab.ingest([root / "s85_seed1", root / "s85_seed2", root / "s90_seed1"], tmp_path / "store",
                            index=index)
    assert [s.run_id for s in rep.sources] == ["s85", "s85", "s90"]
    assert not rep.unindexed and not rep.index_unused
    st = rolloutlab.open_store(tmp_path / "store")
    n = dict(st.sql("SELECT run_id, count(*) FROM metrics GROUP BY run_id").fetchall())
    assert n == {"s85": 8, "s90": 4}
    # the folder of runs given as one source: each named sub-folder is its own source
    rep = rolloutlab.ingest([root], tmp_path / "store2", index=index)
    assert sorted(s.run_id for s in rep.sources) == ["s85", "s85", "s90"]


def test_source_not_in_index_is_reported_not_guessed(tmp_path: Path) -> None:
    write_run(tmp_path, "x.log", 1)
    index = tmp_path / "i.txt"
    index.write_text("y.log runY\n")
    rep = rolloutlab.ingest([tmp_path / "x.log"], tmp_path / "store", index=index)
    assert rep.sources == [] and rep.unindexed == [str(tmp_path / "x.log")]
    assert rep.index_unused == [f"{index}:1: y.log"]


def test_compressed_names_match_their_stem(tmp_path: Path) -> None:
    write_run(tmp_path / "d", "arm_a.log", 1)
    import gzip

    p = tmp_path / "d" / "arm_a.log"
    gz = tmp_path / "d" / "arm_a.log.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    p.unlink()
    index = tmp_path / "i.txt"
    index.write_text("arm_a A\n")
    rep = rolloutlab.ingest([gz], tmp_path / "store", index=index)
    assert [s.run_id for s in rep.sources] == ["A"]


@pytest.mark.parametrize(("text", "why", "line"), [
    ("a.log run\nlonely\n", "one column", 2),
    ("a.log run arm\n", "not key=value", 1),
    ("a.log run1\na.log run2\n", "listed twice", 2),
    ("# nothing\n\n", "names no source", None),
])
def test_bad_index_names_file_and_line(tmp_path: Path, text: str, why: str, line: int | None) -> None:
    p = tmp_path / "index.txt"
    p.write_text(text)
    with pytest.raises(InputError) as ei:
        read_index(p)
    assert why in ei.value.message and ei.value.line == line and "index.txt" in str(ei.value)


def test_cli_json_reports_unindexed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path / "l", "a.log", 1)
    write_run(tmp_path / "l", "b.log", 2)
    idx = tmp_path / "i.txt"
    idx.write_text("a.log A k=v\n")
    capsys.readouterr()
    assert main(["ingest", str(tmp_path / "l"), "--store", str(tmp_path / "s"), "--index", str(idx), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["unindexed"] == [str(tmp_path / "l" / "b.log")]
    assert [s["run_id"] for s in out["sources"]] == ["A"]
    assert main(["ingest", str(tmp_path / "l"), "--store", str(tmp_path / "s"), "--index", str(idx),
                 "--name", "x"]) == 1
