"""Bad input: each case gives a clear error naming file, line and value — or is
quarantined with ``on_error="skip"`` — and nothing is dropped silently."""

from __future__ import annotations

from pathlib import Path

import pytest

import rolloutlab
from rolloutlab.io import InputError, RecordError, RolloutlabError, open_store
from tests._verl import verl_line, write_verl


def _dump(tmp_path: Path, *lines: bytes, name: str = "1.jsonl", newline: bool = True) -> Path:
    d = tmp_path / "dump"
    d.mkdir(exist_ok=True)
    (d / name).write_bytes(b"\n".join(lines) + (b"\n" if newline else b""))
    return d


def test_malformed_line_names_file_line_column(tmp_path: Path) -> None:
    d = _dump(tmp_path, verl_line(1, "p", 1.0), b'{"input": "p", "output": "o" "score": 1}', verl_line(1, "p", 0.0))
    with pytest.raises(InputError) as e:
        rolloutlab.ingest([d], tmp_path / "s")
    err = e.value
    assert err.path.endswith("1.jsonl") and err.line == 2 and err.column == 30
    assert '"score"' in (err.snippet or "")
    assert "1.jsonl:2:30: invalid JSON" in str(err)
    assert not (tmp_path / "s" / "_manifest.json").exists()


def test_skip_quarantines_into_rejects(tmp_path: Path) -> None:
    d = _dump(tmp_path, verl_line(1, "p", 1.0), b"{broken", verl_line(1, "p", "0.5"), verl_line(1, "p", 0.0))
    rep = rolloutlab.ingest([d], tmp_path / "s", on_error="skip")
    assert rep.rejects == 2
    st = open_store(tmp_path / "s")
    assert st.sql("SELECT count(*) FROM trajectories").fetchall()[0] == (2,)
    rej = st.sql("SELECT line, error FROM rejects ORDER BY line").fetchall()
    assert [r[0] for r in rej] == [2, 3]
    assert "invalid JSON" in rej[0][1] and "'0.5'" in rej[1][1]


def test_truncated_last_line_is_pending_not_corrupt(tmp_path: Path) -> None:
    d = write_verl(tmp_path / "dump", {1: [[1, 0]]})
    (d / "2.jsonl").write_bytes(verl_line(2, "p", 1.0) + b"\n" + verl_line(2, "p", 0.0)[:25])
    rep = rolloutlab.ingest([d], tmp_path / "s")
    assert rep.sources[0].parts_pending == ["train/2.jsonl"]
    assert any("not yet complete" in w for w in rep.sources[0].warnings)
    st = open_store(tmp_path / "s")
    assert st.sql("SELECT DISTINCT step FROM trajectories").fetchall() == [(1,)]
    # the writer finishes the line: the next ingest reads the step
    (d / "2.jsonl").write_bytes(verl_line(2, "p", 1.0) + b"\n" + verl_line(2, "p", 0.0) + b"\n")
    rolloutlab.ingest([d], tmp_path / "s")
    assert open_store(tmp_path / "s").sql("SELECT count(*) FROM trajectories WHERE step = 2").fetchall()[0] == (2,)


def test_truncated_line_in_the_middle_is_corrupt(tmp_path: Path) -> None:
    d = _dump(tmp_path, verl_line(1, "p", 1.0)[:20], verl_line(1, "p", 0.0))
    with pytest.raises(InputError, match=r"1\.jsonl:1:"):
        rolloutlab.ingest([d], tmp_path / "s")


def test_non_utf8(tmp_path: Path) -> None:
    d = _dump(tmp_path, verl_line(1, "p", 1.0), b'{"input": "p\xff\xfe", "output": "o", "score": 1.0, "step": 1}')
    with pytest.raises(InputError) as e:
        rolloutlab.ingest([d], tmp_path / "s")
    assert e.value.line == 2 and "UTF-8" in e.value.message


@pytest.mark.parametrize("token", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_finite_reward(tmp_path: Path, token: bytes) -> None:
    d = _dump(tmp_path, verl_line(1, "p", 1.0), b'{"input": "p", "output": "o", "score": ' + token + b', "step": 1}')
    with pytest.raises(InputError) as e:
        rolloutlab.ingest([d], tmp_path / "s")
    assert e.value.line == 2 and "finite" in e.value.message


def test_wrong_type_reward(tmp_path: Path) -> None:
    d = _dump(tmp_path, verl_line(1, "p", [1, 2]))
    with pytest.raises(InputError, match=r"1\.jsonl:1: field 'score' must be a number, got list"):
        rolloutlab.ingest([d], tmp_path / "s")


def test_missing_required_field(tmp_path: Path) -> None:
    d = _dump(tmp_path, verl_line(1, "p", 1.0), b'{"input": "p", "score": 1.0, "step": 1}')
    with pytest.raises(InputError, match=r"1\.jsonl:2: missing required field 'output'"):
        rolloutlab.ingest([d], tmp_path / "s")


def test_empty_file_is_reported(tmp_path: Path) -> None:
    d = write_verl(tmp_path / "dump", {1: [[1]]})
    (d / "2.jsonl").write_bytes(b"")
    rep = rolloutlab.ingest([d], tmp_path / "s")
    assert any("empty file" in w for w in rep.sources[0].warnings)


def test_fifty_megabyte_line(tmp_path: Path) -> None:
    big = "x" * (50 * 1024 * 1024)
    d = _dump(tmp_path, verl_line(1, "p", 1.0, output=big))
    rolloutlab.ingest([d], tmp_path / "s")
    st = open_store(tmp_path / "s")
    assert st.sql("SELECT response_chars FROM trajectories").fetchall()[0] == (len(big),)


def test_unknown_format_lists_supported(tmp_path: Path) -> None:
    f = tmp_path / "mystery.jsonl"
    f.write_text('{"foo": 1}\n')
    with pytest.raises(RolloutlabError) as e:
        rolloutlab.ingest([f], tmp_path / "s")
    msg = str(e.value)
    assert "unknown format" in msg and "verl" in msg and "--format" in msg and "--map" in msg


def test_missing_source(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        rolloutlab.ingest([tmp_path / "nope"], tmp_path / "s")


def test_mapped_importer(tmp_path: Path) -> None:
    f = tmp_path / "any.jsonl"
    f.write_text('{"q": "a", "a": "x", "s": 1.0, "uid": "g1", "it": 3}\n{"q": "a", "a": "y", "s": null, "uid": "g1", "it": 3}\n'
                 '{"q": "b", "a": "z", "s": 0.0, "uid": "g2", "it": 3}\n')
    rolloutlab.ingest([f], tmp_path / "s", mapping={"prompt": "q", "response": "a", "reward": "s", "group": "uid", "step": "it"})
    st = open_store(tmp_path / "s")
    rows = st.sql("SELECT step, group_id, sample_idx, reward, graded FROM trajectories ORDER BY traj_id").fetchall()
    # a null reward is ungraded, not zero
    assert rows == [(3, "3:g1", 0, 1.0, True), (3, "3:g1", 1, None, False), (3, "3:g2", 0, 0.0, True)]
    with pytest.raises(RolloutlabError, match="unknown field 'rewrd'"):
        rolloutlab.ingest([f], tmp_path / "s2", mapping={"rewrd": "s"})


# -- issue 12 § 1: every class of malformed input is a located error, never a traceback --

def test_nesting_past_the_fallback_parser_is_located(tmp_path: Path) -> None:
    # NaN sends the line to Python's json, whose recursion limit used to escape as RecursionError
    deep = b'{"input": "p", "output": "o", "score": NaN, "step": 1, "x": ' + b"[" * 1500 + b"]" * 1500 + b"}"
    d = _dump(tmp_path, verl_line(1, "p", 1.0), deep)
    with pytest.raises(InputError) as e:
        rolloutlab.ingest([d], tmp_path / "s")
    assert e.value.line == 2 and "nested too deeply" in e.value.message
    rep = rolloutlab.ingest([d], tmp_path / "s2", on_error="skip")
    assert rep.rejects == 1


def test_lone_surrogate_is_located_and_quarantined(tmp_path: Path) -> None:
    bad = b'{"input": "p", "output": "\\ud800 o", "score": NaN, "step": 1}'
    d = _dump(tmp_path, verl_line(1, "p", 1.0), bad)
    with pytest.raises(InputError) as e:
        rolloutlab.ingest([d], tmp_path / "s")
    assert e.value.line == 2 and "surrogate" in e.value.message
    rep = rolloutlab.ingest([d], tmp_path / "s2", on_error="skip")
    assert rep.rejects == 1
    st = open_store(tmp_path / "s2")
    assert st.sql("SELECT count(*) FROM trajectories").fetchall() == [(1,)]


def test_integers_past_64_bits(tmp_path: Path) -> None:
    from rolloutlab.io._sink import storable, to_text

    assert to_text({"n": 2**70}) == '{"n": 1180591620717411303424}'  # orjson refuses it
    assert storable({"n": 2**70}) == {"n": float(2**70)}
    line = b'{"input": "p", "output": "o", "gts": "g", "score": 1.0, "step": 1, "big": [123456789012345678901234567890, NaN]}'
    rolloutlab.ingest([_dump(tmp_path, verl_line(1, "p", 1.0), line)], tmp_path / "s")
    extras = open_store(tmp_path / "s").sql("SELECT extras FROM texts WHERE extras LIKE '%big%'").fetchall()[0][0]
    assert "1.2345678901234568e+29" in extras


@pytest.mark.parametrize("value", [float("inf"), 1e400, 2**64, -(2**70)])
def test_absurd_counts_are_record_errors(value: float) -> None:
    from rolloutlab.io._sink import as_float, as_int

    with pytest.raises(RecordError, match="tokens"):
        as_int(value, "tokens")
    if isinstance(value, int) and abs(value) > 2**1023:
        with pytest.raises(RecordError, match="out of range"):
            as_float(value, "reward")
    with pytest.raises(RecordError, match="out of range"):
        as_float(10**400, "reward")


def test_a_bad_turn_leaves_no_half_record(tmp_path: Path) -> None:
    """A turn value refused after the trajectory's columns were appended must not leave
    the columns of unequal length (skip goes on with the next record)."""
    import pyarrow.parquet as pq

    from rolloutlab.io import PartSink, TurnData

    sink = PartSink("r", tmp_path, "p")
    with pytest.raises(RecordError, match="turn 1 reward"):
        sink.add_trajectory(traj_id="a", step=1, reward=1.0, turns=[TurnData(reward=0.5), TurnData(reward="x")])
    sink.add_trajectory(traj_id="b", step=1, reward=1.0, turns=[TurnData(reward=0.5)])
    sink.close()
    assert pq.read_table(tmp_path / sink.files["trajectories"]).column("traj_id").to_pylist() == ["b"]
    assert pq.read_table(tmp_path / sink.files["turns"]).num_rows == 1
    assert sink.counts["turns"] == 1


def _tau_file(tmp_path: Path, tool_calls: object) -> Path:
    import json

    traj = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x", "tool_calls": tool_calls}]
    recs = [{"task_id": 0, "reward": 1.0, "info": {}, "traj": traj, "trial": 0},
            {"task_id": 1, "reward": 0.0, "info": {}, "traj": traj[:1], "trial": 0}]
    p = tmp_path / "tool-calling-gpt-4o-0.0_range_0-2_user-gpt-4o-llm_0318103606.json"
    p.write_text(json.dumps(recs, indent=2))
    return p


def test_wrong_types_tau_bench_tool_calls(tmp_path: Path) -> None:
    p = _tau_file(tmp_path, 1.5)
    with pytest.raises(InputError, match=r"tool_calls' must be a list, got float 1\.5") as e:
        rolloutlab.ingest([p], tmp_path / "s", format="tau_bench")
    assert e.value.path and e.value.path.endswith(".json")
    rep = rolloutlab.ingest([p], tmp_path / "s2", format="tau_bench", on_error="skip")
    assert rep.rejects == 1 and rep.sources[0].counts["trajectories"] == 1


def test_wrong_types_nemo_gym_role(tmp_path: Path) -> None:
    import orjson

    from tests.conftest import SAMPLES

    lines = (SAMPLES / "nemo_gym" / "example_multi_turn_gymnasium.rollouts.jsonl").read_bytes().splitlines()
    rec = orjson.loads(lines[0])
    items = rec["response"]["output"]
    items[0]["role"] = []
    p = tmp_path / "x.rollouts.jsonl"
    p.write_bytes(orjson.dumps(rec) + b"\n" + lines[1] + b"\n")
    with pytest.raises(InputError, match=r"x\.rollouts\.jsonl:1: field 'role' must be text, got list"):
        rolloutlab.ingest([p], tmp_path / "s", format="nemo_gym")
    rep = rolloutlab.ingest([p], tmp_path / "s2", format="nemo_gym", on_error="skip")
    assert rep.rejects == 1 and rep.sources[0].counts["trajectories"] == 1


def test_wrong_types_inspect_results_scores(tmp_path: Path) -> None:
    import orjson

    from tests.conftest import SAMPLES

    log = orjson.loads((SAMPLES / "inspect" / "popularity.json").read_bytes())
    log["results"]["scores"] = 1
    p = tmp_path / "log.json"
    p.write_bytes(orjson.dumps(log))
    with pytest.raises(InputError, match=r"log\.json: results\.scores must be a list, got int 1"):
        rolloutlab.ingest([p], tmp_path / "s")
    rep = rolloutlab.ingest([p], tmp_path / "s2", on_error="skip")  # the log's header is bad: the file is quarantined
    assert rep.rejects == 1 and any("quarantined" in w for w in rep.sources[0].warnings)


def test_corrupt_deflate_in_eval_archive(tmp_path: Path) -> None:
    import zipfile

    from tests.conftest import SAMPLES

    data = bytearray((SAMPLES / "inspect" / "log_read_sample.eval").read_bytes())
    with zipfile.ZipFile(SAMPLES / "inspect" / "log_read_sample.eval") as z:
        info = next(i for i in z.infolist() if i.filename.startswith("samples/") and i.compress_size > 64)
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start + 8 : start + 40] = b"\xff" * 32  # the deflate stream, not the zip directory
    p = tmp_path / "log.eval"
    p.write_bytes(bytes(data))
    with pytest.raises(InputError) as e:
        rolloutlab.ingest([p], tmp_path / "s")
    assert e.value.path and e.value.path.endswith("log.eval") and info.filename in e.value.message
    rep = rolloutlab.ingest([p], tmp_path / "s2", on_error="skip")
    assert rep.rejects == 1


def test_tensorboard_absurd_record_length(tmp_path: Path) -> None:
    import struct

    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    d = tmp_path / "tb"
    d.mkdir()
    w = EventFileWriter(str(d))
    w.add_event(event_pb2.Event(step=1, summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="a", simple_value=1.0)])))
    w.close()
    f = next(d.glob("events.out.tfevents.*"))
    head = struct.pack("<Q", 2**63)  # passes its checksum, points 8 EiB past the end
    f.write_bytes(f.read_bytes() + head + struct.pack("<I", masked_crc32c(head)) + b"\0" * 16)
    with pytest.raises(InputError, match="length 9223372036854775808 is past the end of the file") as e:
        rolloutlab.ingest([d], tmp_path / "s")
    assert e.value.path == str(f)
    rep = rolloutlab.ingest([d], tmp_path / "s2", on_error="skip")
    assert rep.rejects == 1
    assert open_store(tmp_path / "s2").sql("SELECT source, error FROM rejects").fetchall() == [
        (str(f), f"corrupt record at byte {f.stat().st_size - 28}: length 9223372036854775808 is past the end of the file")]


def test_unforeseen_exception_is_located_and_called_a_bug(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rolloutlab.io.importers import tau_bench

    def boom(*args: object) -> None:
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(tau_bench, "_result", boom)
    p = _tau_file(tmp_path, [])
    with pytest.raises(InputError) as e:
        rolloutlab.ingest([p], tmp_path / "s", format="tau_bench")
    assert e.value.path == str(p) and "ZeroDivisionError" in e.value.message and "this is a bug" in e.value.message
    rep = rolloutlab.ingest([p], tmp_path / "s2", format="tau_bench", on_error="skip")
    assert rep.rejects == 2


def test_unforeseen_exception_outside_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rolloutlab.io.importers import REGISTRY

    def boom(*args: object) -> None:
        raise AttributeError("'NoneType' object has no attribute 'x'")

    monkeypatch.setattr(REGISTRY["tau_bench"], "read", boom)
    p = _tau_file(tmp_path, [])
    with pytest.raises(InputError, match=r"unexpected AttributeError in the tau_bench importer.*this is a bug") as e:
        rolloutlab.ingest([p], tmp_path / "s", format="tau_bench")
    assert e.value.path == str(p)
    rep = rolloutlab.ingest([p], tmp_path / "s2", format="tau_bench", on_error="skip")
    assert rep.rejects == 1 and any("quarantined" in w for w in rep.sources[0].warnings)
    assert open_store(tmp_path / "s2").sql("SELECT count(*) FROM rejects").fetchall() == [(1,)]
