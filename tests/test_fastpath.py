"""The native-reader fast paths (issue 7, "Ingest at native speed").

The same files are ingested through a native reader — polars (the ``fast`` extra) and,
as without it, pyarrow's JSON reader — and through the line reader, and every table is
compared: every column, in key order, through the store and as the Parquet files hold
them (texts and turns included; a batch of files shares one file per table); files a native reader must refuse still give the line
reader's result and its located errors.  No real verl dump is bundled in
tests/fixtures/samples, so the files are the benchmark's generator and format-faithful
dumps written here (``_dump_generations`` writes one ``json.dumps`` of one dict per line,
keys ``input, output, gts, score, step`` then the reward extras), and seeded random ones.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
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


@pytest.fixture(params=["polars", "pyarrow"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The native reader under test: polars, or pyarrow's (polars made uninstalled)."""
    if request.param == "polars":
        pytest.importorskip("polars")
    else:
        monkeypatch.setitem(sys.modules, "polars", None)  # import polars -> ImportError
    return str(request.param)


def _tables(store: Path) -> dict[str, list[tuple[Any, ...]]]:
    st = rolloutlab.open_store(store)
    return {t: st.sql(f"SELECT * FROM {t} ORDER BY {k}").fetchall() for t, k in _KEYS.items()}


def _files_rows(store: Path) -> dict[str, tuple[list[pa.Schema], list[dict[str, Any]]]]:
    """Each table's Parquet files as they hold them, each file once (a batch's parts
    share theirs): the distinct schemas, and every row, in key order."""
    st = rolloutlab.open_store(store)
    out: dict[str, tuple[list[pa.Schema], list[dict[str, Any]]]] = {}
    for table, key in _KEYS.items():
        schemas: list[pa.Schema] = []
        rows: list[dict[str, Any]] = []
        for f in st.files(table):
            t = pq.read_table(f)
            if not any(t.schema.equals(x) for x in schemas):
                schemas.append(t.schema)
            rows += t.to_pylist()
        cols = [c.strip() for c in key.split(",")]
        out[table] = (schemas, sorted(rows, key=lambda r: tuple(r[c] for c in cols)))
    return out


def _ingest_both(src: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> tuple[Any, Any, int]:
    """Ingest ``src`` through the native path, then through the line reader only; the
    number of files the native path accepted (alone or in a batch)."""
    accepted = []
    real = _verl_fast.read_dump_native
    real_batch = VerlImporter.read_batch

    def spy(*a: Any) -> bool:
        ok = real(*a)
        accepted.append(ok)
        return ok

    def spy_batch(self: VerlImporter, parts: Any, sink: Any) -> Any:
        got = real_batch(self, parts, sink)
        accepted.extend(g is not None for g in got)
        return got

    with monkeypatch.context() as m:
        m.setattr(_verl_fast, "read_dump_native", spy)
        m.setattr(VerlImporter, "read_batch", spy_batch)
        fast = rolloutlab.ingest([src], tmp / "fast", **kw)
    with monkeypatch.context() as m:
        m.setattr(_verl_fast, "read_dump_native", lambda *a: False)
        m.setattr(VerlImporter, "batchable", lambda self, part: False)
        m.setattr(VerlImporter, "_read_dump_fast", staticmethod(lambda *a: False))
        slow = rolloutlab.ingest([src], tmp / "slow", **kw)
    return fast, slow, sum(accepted)


def _assert_same(tmp: Path, fast: Any, slow: Any) -> None:
    """Same counts; every table equal row for row in key order, through the store and as
    the Parquet files hold the rows (their schemas, texts and turns included)."""
    assert [s.counts for s in fast.sources] == [s.counts for s in slow.sources]
    a, b = _tables(tmp / "fast"), _tables(tmp / "slow")
    for table in _KEYS:
        assert len(a[table]) == len(b[table]), table
        for ra, rb in zip(a[table], b[table], strict=True):
            assert ra == rb, (table, ra, rb)
    fa, fb = _files_rows(tmp / "fast"), _files_rows(tmp / "slow")
    for table in _KEYS:
        (sa, ra), (sb, rb) = fa[table], fb[table]
        assert sa == sb, (table, sa, sb)
        assert ra == rb, table


def _line(**rec: Any) -> bytes:
    return json.dumps(rec, ensure_ascii=False).encode()  # as verl writes them (spaces after : and ,)


def test_generated_dump_same_both_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str) -> None:
    dump = make_verl_dump(tmp_path / "dump", steps=3, trajs=64)
    fast, slow, accepted = _ingest_both(dump, tmp_path, monkeypatch)
    assert accepted == 3
    _assert_same(tmp_path, fast, slow)
    assert fast.sources[0].counts["trajectories"] == 192


def test_varied_dump_same_both_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str) -> None:
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


def test_no_extras_and_step_from_file_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str) -> None:
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
                                                     body: bytes, reader: str) -> None:
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
    (b'{"input": "p", "output": "x\\ud800y", "score": 1}', "surrogate"),  # polars reads it as U+0000
    (b'{"input": "p", "output": "\\udc00", "score": 1}', "surrogate"),
    (b'{"input": "p", "output": "\xff", "score": 1}', "UTF-8"),
    # two records on one line: the native reader would read both
    (GOOD[:-1] + b" " + GOOD[:-1], "invalid JSON"),
    (b'{"input": "p", "output": "o", "score": 1, "a": "x", "b": 1} {"input": "p", "output": "o", "score": 1, "a": "x", "b": 1}',
     "invalid JSON"),
])
def test_malformed_lines_keep_located_errors(tmp_path: Path, bad: bytes, what: str, reader: str) -> None:
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


def test_the_ingest_process_ends_quickly_with_everything_written(tmp_path: Path) -> None:
    """The ingest command ends its process without interpreter teardown
    (rolloutlab.cli._QUICK_EXIT): its output is complete, its status the command's, and
    nothing is left behind — the store committed, no staging folder, the lock released."""
    dump = make_verl_dump(tmp_path / "dump", steps=3, trajs=64)
    store = tmp_path / "st"
    cmd = [sys.executable, "-m", "rolloutlab", "ingest", str(dump), "--store", str(store)]
    done = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sources"][0]["counts"]["trajectories"] == 3 * 64  # all of it, flushed
    assert rolloutlab.open_store(store).sql("SELECT count(*) FROM trajectories").fetchall() == [(3 * 64,)]
    assert not (store / "_staging").exists() and (store / ".lock").read_text() == ""
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)  # unchanged, in words
    assert again.returncode == 0 and "0 parts read, 3 unchanged" in again.stderr
    bad = subprocess.run([*cmd[:4], str(tmp_path / "nothing"), *cmd[5:]], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1 and "no such file or folder" in bad.stderr


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


def _rows(*recs: dict[str, Any], style: str = "verl") -> bytes:
    dump = (lambda r: json.dumps(r, ensure_ascii=False)) if style == "verl" else (lambda r: orjson.dumps(r).decode())
    return "".join(dump(r) + "\n" for r in recs).encode()


_BASE = {"input": "p", "output": "o", "score": 1}
_MANY = [dict(_BASE, pred="x")] * 150  # past the rows polars infers its schema from


@pytest.mark.parametrize(("body", "polars_takes"), [
    # what polars reads otherwise than orjson: refused
    (b'{"input": "p", "output": "o", "score": 1, "pred": "a", "pred": "b"}\n', False),  # keeps the first
    (b'{"input": "p", "input": "q", "output": "o", "score": 1}\n', False),
    (_rows(*_MANY, dict(_BASE, pred="x", late=2)), False),  # a key polars drops
    (_rows(*_MANY, dict(_BASE, pred=3)), False),  # a number polars turns into text
    (_rows(dict(_BASE, pred=3), dict(_BASE, pred="x")), False),
    (_rows(dict(_BASE, output="a\x00b")), False),  # U+0000, which is also what a lone surrogate reads as
    # layouts the byte check does not know: refused, same result
    (b'{"input" : "p", "output": "o", "score": 1}\n', False),
    (b'{ "input": "p", "output": "o", "score": 1}\n', False),
    (b'{"input":\t"p", "output": "o", "score": 1}\n', False),
    (b'{"input": "p", "output": "o", "score": 1} \n{"input": "p", "output": "o", "score": 1}\n', False),
    # escapes and both writers' spacing: read natively, the same rows
    (_rows(dict(_BASE, output='q"uo\\te / \\/ é 😀 \n\t\x01\x7f\u2028', gts='"g"', pred="\\")), True),
    (_rows(dict(_BASE, output="é 😀"), style="orjson"), True),
    (_rows(dict(_BASE, pred="".join(map(chr, range(1, 0x80))) + "\u2028\ufeff😀"), dict(_BASE, pred="x")), True),
    (json.dumps(dict(_BASE, output="é 😀 \x01"), ensure_ascii=True).encode() + b"\n", True),
    (_rows(*[dict(_BASE, **{f"k{i}": i for i in range(40)})] * 2), None),  # polars may reorder > 32 keys
    # a key of the record that the line path overwrites with the environment's last reply
    (_rows(dict(_BASE, output="a\nassistant\nb\ntool\nlate reply", final_observation="mine")), False),
])
def test_polars_hazards_give_the_line_readers_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str,
                                                     body: bytes, polars_takes: bool | None) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "1.jsonl").write_bytes(body)
    fast, slow, accepted = _ingest_both(d, tmp_path, monkeypatch)
    _assert_same(tmp_path, fast, slow)
    if reader == "polars" and polars_takes is not None:
        assert accepted == polars_takes


def _layout_by_hand(data: bytes, n_rows: int, names: list[str], strings: set[str]) -> bool:
    """layout_holds, the slow obvious way: split the lines, walk each one's strings."""
    lines = data.split(b"\n")
    if lines[-1] != b"" or len(lines) - 1 != n_rows:
        return False
    want = [orjson.dumps(k) for k in names]
    for line in lines[:-1]:
        if not (line.startswith(b'{"') and line.endswith(b"}")):
            return False
        keys, values, i = [], [], 0
        while i < len(line):
            if line[i:i + 1] != b'"':
                i += 1
                continue
            j = i + 1
            while line[j:j + 1] != b'"':
                j += 2 if line[j:j + 1] == b"\\" else 1
            if line[j + 1:j + 2] == b":":
                keys.append(line[i:j + 1])
                v = j + 2 + (line[j + 2:j + 3] == b" ")
                values.append(line[v:v + 1])
            i = j + 1
        if keys != want or any(v != b'"' for k, v in zip(names, values, strict=True) if k in strings):
            return False
    return True


def test_layout_holds_matches_a_walk_of_each_line() -> None:
    """Random files of scalar records (the case layout_holds is for): repeated, missing,
    reordered or escaped keys, numbers where text is expected, blank lines, both
    writers' spacing, backslash runs before quotes."""
    import random

    from rolloutlab.io._ndjson import layout_holds

    rng = random.Random(7)
    texts = ["plain", 'q"q', "back\\", "\\\\", 'x\\"', "é😀", "\n\t", "", ":", '":"', "\\u0041"]
    agree = disagree = 0
    for _ in range(600):
        names = rng.sample(["input", "output", "score", "a", "b\u00e9", "c d"], rng.randint(1, 5))
        strings = {k for k in names if rng.random() < 0.6}
        lines = []
        for _ in range(rng.randint(1, 4)):
            rec: list[tuple[str, Any]] = [(k, rng.choice(texts) if k in strings else rng.choice([1, 2.5, True, -3]))
                                          for k in names]
            r = rng.random()
            if r < 0.08:
                rec.append((rng.choice(names), "dup"))
            elif r < 0.14:
                rec.reverse()
            elif r < 0.2 and strings:
                rec = [(k, 5 if k in strings else v) for k, v in rec]
            elif r < 0.25:
                rec = rec[:-1]
            sep = rng.choice([(", ", ": "), (",", ":")])
            body = sep[0].join(orjson.dumps(k).decode() + sep[1] + orjson.dumps(v).decode() for k, v in rec)
            if rng.random() < 0.3:
                body = json.dumps(dict(rec), ensure_ascii=True)[1:-1]
            lines.append("{" + body + "}")
            if rng.random() < 0.05:
                lines.append(rng.choice(["", " "]))
        data = ("\n".join(lines) + "\n").encode()
        n = sum(1 for ln in lines if ln.strip())
        want = _layout_by_hand(data, n, names, strings)
        assert layout_holds(data, n, names, strings) == want, data
        agree += want
        disagree += not want
    assert agree > 100 and disagree > 100  # both answers were exercised


def test_prefetched_takes_the_result_of_an_unchanged_file(tmp_path: Path) -> None:
    import os

    from rolloutlab.io._ndjson import prefetch, prefetched

    f = tmp_path / "1.jsonl"
    f.write_bytes(b"one\n")
    calls: list[bytes] = []

    def load(p: Path) -> bytes:
        calls.append(p.read_bytes())
        return p.read_bytes()

    prefetch(f, load)
    assert prefetched(f, load) == b"one\n" and calls == [b"one\n"]  # loaded once, in the background
    prefetch(f, load)
    f.write_bytes(b"two, longer\n")
    os.utime(f, ns=(1, 1))
    assert prefetched(f, load) == b"two, longer\n"  # changed since: loaded again
    assert prefetched(f, lambda p: b"other load") == b"other load"  # nothing ahead for another load


def test_random_dumps_same_both_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str) -> None:
    """Seeded random verl dumps, some well-formed, some with one fault (a type change, a
    missing or repeated key, an escape, a blank line): the native reader gives the line
    reader's tables, or the line reader's error."""
    import random

    rng = random.Random(11)
    values: list[Any] = ["a", 'q"', "\\", "é", "😀", "\n", 0, 1, 2.5, -7, True, False, None, [1], {"x": 1}, "", 10**20]
    taken = 0
    for case in range(24):
        d = tmp_path / f"c{case}" / "dump"
        d.mkdir(parents=True)
        extras = rng.sample(["gts", "acc", "pred", "f1", "data_source"], rng.randint(0, 4))
        kinds = {k: rng.choice(["str", "int", "float", "bool"]) for k in extras}
        recs = []
        for i in range(rng.randint(3, 12)):
            rec: dict[str, Any] = {"input": f"prompt {i % 3}", "output": rng.choice(["o", HERMES, "a\nuser\nb\nassistant\nc"]),
                                   "score": rng.choice([0, 1, 0.5]), "step": 2}
            for k in extras:
                rec[k] = {"str": f"v{i}", "int": i, "float": i / 4, "bool": i % 2 == 0}[kinds[k]]
            recs.append(rec)
        if case % 2:
            i, k = rng.randrange(len(recs)), rng.choice(["input", "output", "score", "step", *extras])
            recs[i][k] = rng.choice(values)
        lines = [json.dumps(r, ensure_ascii=rng.random() < 0.5) for r in recs]
        if case % 6 == 3:
            lines.insert(rng.randrange(len(lines)), "")
        if case % 6 == 5:
            i = rng.randrange(len(lines))
            lines[i] = lines[i][:-1] + ', "score": 3}'
        (d / "2.jsonl").write_text("\n".join(lines) + "\n")
        try:
            fast, slow, accepted = _ingest_both(d, d.parent, monkeypatch)
        except rolloutlab.RolloutlabError as e:  # then the line reader alone fails the same way
            with monkeypatch.context() as m, pytest.raises(rolloutlab.RolloutlabError) as slow_error:
                m.setattr(_verl_fast, "read_dump_native", lambda *a: False)
                m.setattr(VerlImporter, "_read_dump_fast", staticmethod(lambda *a: False))
                rolloutlab.ingest([d], d.parent / "slow-alone")
            assert str(e) == str(slow_error.value)
            continue
        _assert_same(d.parent, fast, slow)
        taken += accepted
    assert taken >= 6  # the native reader read the well-formed ones


def test_a_file_the_batch_refuses_is_not_parsed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step file polars must not read (here a blank line) is left by the batch reader to
    the line reader, without a second polars parse on the way."""
    pytest.importorskip("polars")
    from collections import Counter

    from rolloutlab.io.importers import _verl_polars

    d = tmp_path / "d"
    d.mkdir()
    for step in (1, 2, 3):
        body = b"".join(_line(input=f"p{i % 2}", output="o", score=i % 2, step=step) + b"\n" for i in range(4))
        (d / f"{step}.jsonl").write_bytes(body.replace(b"\n", b"\n\n", 1) if step == 2 else body)
    calls: Counter[str] = Counter()
    real = _verl_polars._parse

    def counted(path: Path) -> Any:
        calls[path.name] += 1
        return real(path)

    monkeypatch.setattr(_verl_polars, "_parse", counted)
    rep = rolloutlab.ingest([d], tmp_path / "s").sources[0]
    assert rep.parts_read == 3 and rep.counts["trajectories"] == 12
    assert calls == Counter({"1.jsonl": 1, "2.jsonl": 1, "3.jsonl": 1})
