"""Bad input: each case gives a clear error naming file, line and value — or is
quarantined with ``on_error="skip"`` — and nothing is dropped silently."""

from __future__ import annotations

from pathlib import Path

import pytest

import rolloutlab
from rolloutlab.io import InputError, RolloutlabError, open_store
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
