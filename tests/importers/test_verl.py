from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest

from rolloutlab.io import InputError, RolloutlabError
from rolloutlab.io.importers import detect_format
from rolloutlab.io.importers.verl import split_turns
from tests._verl import verl_line, write_verl


def test_dump_counts_rewards_groups(tmp_path: Path, ingest_one) -> None:
    src = write_verl(tmp_path / "rollouts", {1: [[1, 0, 0, 1], [0, 0, 0, 0]], 2: [[1, 1, 1, 0], [1, 0, 1, 0]]})
    assert detect_format(src).name == "verl"
    report, st = ingest_one(src)
    assert report.sources[0].counts["trajectories"] == 16
    rows = st.sql("SELECT step, count(DISTINCT group_id), sum(reward), count(*) FROM trajectories GROUP BY step ORDER BY step").fetchall()
    assert rows == [(1, 2, 2.0, 8), (2, 2, 5.0, 8)]
    # same prompt = same task across steps; sample_idx is the order within the group
    tasks = st.sql("SELECT count(DISTINCT task_id) FROM trajectories").fetchall()[0]
    assert tasks == (2,)
    idx = st.sql("SELECT list(sample_idx ORDER BY traj_id) FROM trajectories WHERE step = 1 GROUP BY group_id").fetchall()
    assert sorted(sorted(r[0]) for r in idx) == [[0, 1, 2, 3], [0, 1, 2, 3]]
    comps = st.sql("SELECT reward_components FROM trajectories LIMIT 1").fetchall()[0][0]
    assert "acc" not in dict(comps)  # bool extras are not numeric components...
    extras = orjson.loads(st.sql("SELECT extras FROM texts WHERE turn_idx = -1 LIMIT 1").fetchall()[0][0])
    assert extras["gts"] == "gold" and extras["acc"] in (True, False)  # ...they stay in extras
    assert st.sql("SELECT count(*) FROM trajectories WHERE success IS NOT NULL").fetchall()[0] == (16,)


def test_dump_without_gts_and_numeric_extras(tmp_path: Path, ingest_one) -> None:
    d = tmp_path / "old"
    d.mkdir()
    (d / "3.jsonl").write_bytes(verl_line(3, "p", 0.5, gts=False, acc=0.5, incorrect_format=1) + b"\n")
    _, st = ingest_one(d)
    reward, comps = st.sql("SELECT reward, reward_components FROM trajectories").fetchall()[0]
    assert reward == 0.5
    assert dict(comps) == {"acc": 0.5, "incorrect_format": 1.0}


def test_validation_folder_is_val_split(tmp_path: Path, ingest_one) -> None:
    src = write_verl(tmp_path / "val_generations", {0: [[1, 0]], 10: [[1, 1]]})
    _, st = ingest_one(src)
    assert st.sql("SELECT DISTINCT split FROM trajectories").fetchall() == [("val",)]
    assert st.sql("SELECT min(step) FROM trajectories").fetchall()[0] == (0,)


def test_multi_turn_output_split_into_turns(tmp_path: Path, ingest_one) -> None:
    out = "<search>q</search>\nuser\n<information>doc</information>\nassistant\n<answer>x</answer>"
    d = tmp_path / "mt"
    d.mkdir()
    (d / "1.jsonl").write_bytes(verl_line(1, "p", 1.0, output=out) + b"\n")
    _, st = ingest_one(d)
    assert st.sql("SELECT num_turns FROM trajectories").fetchall()[0] == (2,)
    rows = st.sql("SELECT turn_idx, observation, action FROM texts WHERE turn_idx >= 0 ORDER BY turn_idx").fetchall()
    assert rows == [(0, None, "<search>q</search>"), (1, "<information>doc</information>", "<answer>x</answer>")]


def test_split_turns_single() -> None:
    assert [t.action for t in split_turns("just an answer\nwith lines")] == ["just an answer\nwith lines"]


def test_metrics_file_logger_and_console(tmp_path: Path, ingest_one) -> None:
    d = write_verl(tmp_path / "run", {1: [[1, 0]]})
    (d / "exp.jsonl").write_text('{"step": 1, "data": {"actor/entropy": 1.5, "critic/score/mean": 0.5, "val-core/gsm8k/acc/mean@1": 0.3}}\n')
    (d / "train.log").write_text("noise\n(TaskRunner pid=1) step:1 - actor/entropy:1.5 - timing_s/gen:3.2\nstep:2 - actor/entropy:1.25\n")
    _, st = ingest_one(d)
    m = st.sql("SELECT split, step, name, value FROM metrics ORDER BY split, step, name, value").fetchall()
    assert ("train", 2, "actor/entropy", 1.25) in m
    assert ("val", 1, "val-core/gsm8k/acc/mean@1", 0.3) in m
    assert ("train", 1, "timing_s/gen", 3.2) in m


def test_compressed_step_files(tmp_path: Path, ingest_one) -> None:
    d = tmp_path / "gz"
    d.mkdir()
    with gzip.open(d / "1.jsonl.gz", "wb") as f:
        f.write(verl_line(1, "p", 1.0) + b"\n" + verl_line(1, "p", 0.0) + b"\n")
    import zstandard

    (d / "2.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(verl_line(2, "p", 1.0) + b"\n"))
    _, st = ingest_one(d)
    assert st.sql("SELECT step, count(*) FROM trajectories GROUP BY step ORDER BY step").fetchall() == [(1, 2), (2, 1)]


def test_duplicate_step_files_refused(tmp_path: Path, ingest_one) -> None:
    d = write_verl(tmp_path / "dup", {1: [[1, 0]]})
    with gzip.open(d / "1.jsonl.gz", "wb") as f:
        f.write(verl_line(1, "p", 1.0) + b"\n")
    with pytest.raises(InputError, match="duplicate step files for step 1"):
        ingest_one(d)


def test_two_sources_one_run_duplicate_step(tmp_path: Path, ingest_one) -> None:
    a = write_verl(tmp_path / "a", {1: [[1, 0]]})
    b = write_verl(tmp_path / "b", {1: [[0, 0]]})
    with pytest.raises(RolloutlabError, match="duplicate step files"):
        ingest_one([a, b], name="merged")


def test_fast_and_line_by_line_readers_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rolloutlab
    from rolloutlab.io.importers.verl import VerlImporter

    d = tmp_path / "d"
    d.mkdir()
    out = "<a>1</a>\nuser\n<obs>o</obs>\nassistant\n<a>2</a>"
    lines = [verl_line(2, f"p{i % 3}", float(i % 2), output=out if i % 4 == 0 else "x", acc=i % 2, f1=0.25 * (i % 4),
                       data_source="nq" if i % 2 else 7) for i in range(12)]
    (d / "2.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    q = """SELECT t.*, x.prompt, x.response, x.extras FROM trajectories t JOIN texts x USING (run_id, traj_id)
           WHERE x.turn_idx = -1 ORDER BY traj_id"""
    qt = "SELECT * FROM texts WHERE turn_idx >= 0 ORDER BY traj_id, turn_idx"
    rolloutlab.ingest([d], tmp_path / "fast")
    monkeypatch.setattr(VerlImporter, "_read_dump_fast", staticmethod(lambda *a: False))
    rolloutlab.ingest([d], tmp_path / "slow")
    fast, slow = rolloutlab.open_store(tmp_path / "fast"), rolloutlab.open_store(tmp_path / "slow")
    assert fast.sql(q).fetchall() == slow.sql(q).fetchall()
    assert fast.sql(qt).fetchall() == slow.sql(qt).fetchall()
    assert len(fast.sql(qt).fetchall()) == 6  # 3 multi-turn rows × 2 turns
