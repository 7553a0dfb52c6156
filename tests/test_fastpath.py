"""The native-reader fast path (issue 7, "Ingest at native speed").

The same files are ingested through the native reader and through the line reader, and
every table is compared row for row (texts and turns included); files the native reader
must refuse still give the line reader's result and its located errors.  No real verl
dump is bundled in tests/fixtures/samples, so the files are the benchmark's generator and
format-faithful dumps written here (``_dump_generations`` writes one ``json.dumps`` of
one dict per line, keys ``input, output, gts, score, step`` then the reward extras).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import rolloutlab
from rolloutlab.io import InputError, PartSink
from rolloutlab.io._ndjson import polars_module
from rolloutlab.io.importers import _verl_fast
from rolloutlab.io.importers.verl import VerlImporter

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from _gen import make_verl_dump

_KEYS = {"trajectories": "traj_id", "turns": "traj_id, turn_idx", "texts": "traj_id, turn_idx",
         "metrics": "step, name", "rejects": "source, line"}

HERMES = ('I will search.\n<tool_call>\n{"name": "search", "arguments": {"q": "x"}}\n</tool_call>\nuser\n'
          '<tool_response>\nfound "x"\n</tool_response>\nassistant\nThe answer is x.')


def _tables(store: Path) -> dict[str, list[tuple[Any, ...]]]:
    st = rolloutlab.open_store(store)
    return {t: st.sql(f"SELECT * FROM {t} ORDER BY {k}").fetchall() for t, k in _KEYS.items()}


def _ingest_both(src: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> tuple[Any, Any, int]:
    """Ingest ``src`` through the native path, then through the line reader only; the
    number of files the native path accepted."""
    accepted = []
    real = _verl_fast.read_dump_native

    def spy(*a: Any) -> bool:
        ok = real(*a)
        accepted.append(ok)
        return ok

    with monkeypatch.context() as m:
        m.setattr(_verl_fast, "read_dump_native", spy)
        fast = rolloutlab.ingest([src], tmp / "fast", **kw)
    with monkeypatch.context() as m:
        m.setattr(_verl_fast, "read_dump_native", lambda *a: False)
        m.setattr(VerlImporter, "_read_dump_fast", staticmethod(lambda *a: False))
        slow = rolloutlab.ingest([src], tmp / "slow", **kw)
    return fast, slow, sum(accepted)


def _assert_same(tmp: Path, fast: Any, slow: Any) -> None:
    assert [s.counts for s in fast.sources] == [s.counts for s in slow.sources]
    a, b = _tables(tmp / "fast"), _tables(tmp / "slow")
    for table in _KEYS:
        assert len(a[table]) == len(b[table]), table
        for ra, rb in zip(a[table], b[table], strict=True):
            assert ra == rb, (table, ra, rb)


def _line(**rec: Any) -> bytes:
    return json.dumps(rec, ensure_ascii=False).encode()  # as verl writes them (spaces after : and ,)


def test_generated_dump_same_both_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dump = make_verl_dump(tmp_path / "dump", steps=3, trajs=64)
    fast, slow, accepted = _ingest_both(dump, tmp_path, monkeypatch)
    assert accepted == 3
    _assert_same(tmp_path, fast, slow)
    assert fast.sources[0].counts["trajectories"] == 192


def test_varied_dump_same_both_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Multi-turn outputs, Hermes calls, a trailing environment reply, escapes and non-ASCII
    text, numeric extras (reward components), acc as 0/1, data_source, repeated prompts."""
    d = tmp_path / "val_dump"
    d.mkdir()
    outs = ["plain", HERMES, "a\nuser\nobs\nassistant\nb\ntool\nlate reply", 'quote " back \\ slash\n\ttab \x01 é 😀',
            "<tool_call>not json</tool_call>", "x\nassistant\n"]
    for step in (0, 5):
        lines = [_line(input=f"system\nq{i % 3}\nuser\né{i % 3}\nassistant\n", output=outs[i % len(outs)],
                       gts=["gold", 'a "b"', "c\n"][i % 3], score=[1.0, 0, 0.5, -2][i % 4], step=step,
                       acc=i % 2, f1=0.25 * i, n_calls=i, data_source="nq", pred=f"p{i}", ok=i % 3 == 0)
                 for i in range(18)]
        (d / f"{step}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    fast, slow, accepted = _ingest_both(d, tmp_path, monkeypatch)
    assert accepted == 2
    _assert_same(tmp_path, fast, slow)
    tabs = _tables(tmp_path / "fast")
    assert {r[1] for r in tabs["trajectories"]} == {"val"}
    assert max(r[14] for r in tabs["trajectories"]) == 2  # num_turns of the two-turn outputs


def test_no_extras_and_step_from_file_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "7.jsonl").write_bytes(b"".join(_line(input=f"p{i % 2}", output="o", score=i) + b"\n" for i in range(6)))
    fast, slow, accepted = _ingest_both(d, tmp_path, monkeypatch)
    assert accepted == 1
    _assert_same(tmp_path, fast, slow)


@pytest.mark.parametrize("body", [
    # a missing key and a null read alike natively: refused
    b'{"input": "p", "output": "o", "score": 1.0, "gts": "g"}\n{"input": "p", "output": "o", "score": 1.0}\n',
    b'{"input": "p", "output": "o", "score": null}\n{"input": "p", "output": "o", "score": 1.0}\n',
    # keys in another order in one record (extras keep the record's order)
    b'{"input": "p", "output": "o", "score": 1, "a": "x", "b": true}\n{"input": "p", "output": "o", "score": 1, "b": false, "a": "y"}\n',
    b'{"input": "p", "output": "o", "score": 1, "f": 1, "g": 2.5}\n{"input": "p", "output": "o", "score": 1, "g": 1, "f": 2}\n',
    # a blank line (still numbered by the line reader), a nested value, a double in gts
    b'{"input": "p", "output": "o", "score": 1}\n\n{"input": "p", "output": "o", "score": 1}\n',
    # the same with extras, whose key order is checked line by line, and a line of spaces
    b'{"input": "p", "output": "o", "score": 1, "a": "x", "b": true}\n\n{"input": "p", "output": "o", "score": 1, "a": "y", "b": false}\n',
    b'{"input": "p", "output": "o", "score": 1, "a": "x", "b": true}\n  \n{"input": "p", "output": "o", "score": 1, "a": "y", "b": false}\n',
    b'{"input": "p", "output": "o", "score": 1, "gts": {"target": ["a"]}}\n',
    b'{"input": "p", "output": "o", "score": 1, "gts": 0.1}\n',
    # a reward key instead of score, a type change down the file
    b'{"input": "p", "output": "o", "score": 1}\n{"input": "p", "output": "o", "reward": 2}\n',
    b'{"input": "p", "output": "o", "score": 1, "pred": "a"}\n{"input": "p", "output": "o", "score": 1, "pred": 3}\n',
])
def test_refused_files_give_the_line_readers_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     body: bytes) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "1.jsonl").write_bytes(body)
    fast, slow, accepted = _ingest_both(d, tmp_path, monkeypatch)
    assert accepted == 0
    _assert_same(tmp_path, fast, slow)


GOOD = b'{"input": "p", "output": "o", "score": 1}\n'


@pytest.mark.parametrize(("bad", "what"), [
    (b'{"input": "p", "output": "o", "score": 1,}', "invalid JSON"),
    (b'{"input": "p", "output": "o", "score": NaN}', "finite"),
    (b'{"input": "p", "output": "o", "score": 1e400}', "invalid JSON"),
    (b'{"input": "p", "output": 5, "score": 1}', "output"),
    (b'{"input": "p", "output": "o", "score": 1, "step": -3}', "step"),
    (b'{"input": "p", "output": "\\ud800", "score": 1}', "surrogate"),
    (b'{"input": "p", "output": "\xff", "score": 1}', "UTF-8"),
    # two records on one line: the native reader would read both
    (GOOD[:-1] + b" " + GOOD[:-1], "invalid JSON"),
    (b'{"input": "p", "output": "o", "score": 1, "a": "x", "b": 1} {"input": "p", "output": "o", "score": 1, "a": "x", "b": 1}',
     "invalid JSON"),
])
def test_malformed_lines_keep_located_errors(tmp_path: Path, bad: bytes, what: str) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "1.jsonl").write_bytes(GOOD + bad + b"\n" + GOOD)
    line = 2
    sink = PartSink("r", tmp_path / "out", "x")
    assert not _verl_fast.read_dump_native(d / "1.jsonl", 1, "train", sink)  # refused, nothing written
    assert sink.counts["trajectories"] == 0 and not sink.files
    with pytest.raises(InputError) as e:
        rolloutlab.ingest([d], tmp_path / "st")
    assert e.value.line == line and "1.jsonl" in str(e.value) and what in str(e.value)
    rep = rolloutlab.ingest([d], tmp_path / "st2", on_error="skip")
    assert rep.rejects == 1
    assert [r[2] for r in _tables(tmp_path / "st2")["rejects"]] == [line]


def test_cli_import_is_light() -> None:
    """`rolloutlab --help` must not load the store's dependencies (checked by module, not
    by time: the machine is shared)."""
    code = ("import sys, rolloutlab.cli\nfrom rolloutlab.cli._app import _register\n_register()\n"
            "print(' '.join(m for m in ('duckdb', 'pyarrow', 'pandas', 'polars', 'torch', 'pydantic', 'numpy')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == []
    helped = subprocess.run([sys.executable, "-c", "import sys\nfrom rolloutlab.cli import main\nmain(['--help'])\n"
                             "print('LOADED', *(m for m in ('duckdb', 'pyarrow', 'pandas', 'torch') if m in sys.modules))"],
                            capture_output=True, text=True, check=True).stdout
    assert helped.splitlines()[-1] == "LOADED"


def test_ingest_command_loads_neither_pandas_nor_duckdb(tmp_path: Path) -> None:
    """The ingest command's process imports what ingesting needs: pyarrow and polars
    when installed, not pandas (pyarrow would import it to type-check values), duckdb
    (queries only) nor pydantic's records."""
    dump = make_verl_dump(tmp_path / "dump", steps=2, trajs=16)
    code = ("import sys\nfrom rolloutlab.cli import main\n"
            f"assert main(['ingest', {str(dump)!r}, '--store', {str(tmp_path / 'st')!r}, '--json']) == 0\n"
            "print('LOADED', *(m for m in ('pandas', 'duckdb', 'polars', 'torch', 'rolloutlab.schema._records')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == ("LOADED polars" if polars_module() is not None else "LOADED")
    assert rolloutlab.open_store(tmp_path / "st").sql("SELECT count(*) FROM trajectories").fetchall() == [(32,)]


def test_rows_containing_matches_python_in() -> None:
    import random

    import pyarrow as pa

    from rolloutlab.io._fastpath import rows_containing

    rng = random.Random(3)
    parts = ["a", "\n", "assistant", "<tool_", "<", "tool_", "é", "x" * 50]
    values = ["".join(rng.choice(parts) for _ in range(rng.randint(0, 8))) for _ in range(400)]
    needles = ("\nassistant\n", "<tool_")
    arr = pa.chunked_array([pa.array(values[:150]), pa.array(values[150:])])
    want = [i for i, v in enumerate(values) if any(n in v for n in needles)]
    got = rows_containing(arr, needles)
    assert set(want) <= set(got)  # none missed
    assert [i for i in got if any(n in values[i] for n in needles)] == want
    assert rows_containing(pa.array(values).slice(100), needles) == [i - 100 for i in got if i >= 100]


def test_rows_containing_long_values() -> None:
    """Needles whose first byte is rare (jumped to) or common (searched whole), far apart."""
    import pyarrow as pa

    from rolloutlab.io._fastpath import rows_containing

    filler = ["word " * 2000, "<b>" * 3000, "line\n" * 1500]
    values = [filler[i % 3] + ("\nassistant\n" if i % 7 == 0 else "") + ("<tool_" if i % 11 == 0 else "")
              + filler[(i + 1) % 3] for i in range(60)]
    needles = ("\nassistant\n", "<tool_")
    want = [i for i, v in enumerate(values) if any(n in v for n in needles)]
    got = rows_containing(pa.array(values), needles)
    assert [i for i in got if any(n in values[i] for n in needles)] == want
