"""Seeded fuzzing of the importers: mutated real and format-faithful files never give a
traceback, a hang or unbounded memory (issue 12 § 1).

Each case takes a seed file (the real samples in ``tests/fixtures/samples``, and small
files built here to the formats' specs where no real sample is bundled), mutates it —
bytes flipped, cut, duplicated, or one JSON value replaced by a hostile one (nesting past
1,024 levels, a lone surrogate, a 30-digit integer, ``1e400``, a value of the wrong
type) — and ingests it, alternating ``on_error="fail"`` and ``"skip"``.  The only allowed
outcomes are success or a :class:`RolloutlabError` that names the file; an error that says
"this is a bug" (the importer boundary's catch-all) fails the test too, as does any case
running past 20 s or the process growing by more than 1 GiB.

The mutator is deterministic (``random.Random(seed)``); a failure message gives the
format and case number, which replays it: ``FUZZ_ONLY=nemo_gym:17``.
``FUZZ_CASES`` changes the number of cases per format (default 200: 1,400 cases, about
32 s of CPU in all; 400 per format also pass).
"""

from __future__ import annotations

import io
import json
import os
import random
import resource
import signal
import struct
import traceback
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import rolloutlab
from rolloutlab.io import RolloutlabError

SAMPLES = Path(__file__).parent / "fixtures" / "samples"
CASES = int(os.environ.get("FUZZ_CASES", "200"))
ONLY = os.environ.get("FUZZ_ONLY", "")

# JSON text that orjson cannot write, spliced in through placeholders.
_RAW = {
    "__DEEP__": "[" * 1500 + "]" * 1500,
    "__DEEPISH__": '{"a":' * 300 + "1" + "}" * 300,  # orjson reads it, cannot write it back
    "__SURR__": '"\\ud800 x"',
    "__BIGINT__": "123456789012345678901234567890123",
    "__HUGE__": "1e400",
    "__NAN__": "NaN",
}
_HOSTILE: list[Any] = [*(f"@{k}@" for k in _RAW), 1.5, -1, -(2**40), 2**62, [], {}, [1, [2]], {"x": {}}, "",
                       "x" * 5000, None, True, False, 0, "1", "\x00\u202e<script>"]


def _value_paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _value_paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:20]):
            yield from _value_paths(v, (*prefix, i))


def _replace(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    obj[path[0]] = _replace(obj[path[0]], path[1:], value)
    return obj


def _dumps(obj: Any, rng: random.Random) -> bytes:
    data = orjson.dumps(obj)
    for k, raw in _RAW.items():
        data = data.replace(f'"@{k}@"'.encode(), raw.encode())
    if b"NaN" not in data and rng.random() < 0.5 and data.endswith(b"}"):
        data = data[:-1] + b', "zz_nan": NaN}'  # sends the line through the lenient parser
    return data


def mutate_json(data: bytes, rng: random.Random) -> bytes:
    """Replace one to three values of a JSON document by hostile ones."""
    obj = orjson.loads(data)
    for _ in range(rng.randint(1, 3)):
        paths = list(_value_paths(obj))
        obj = _replace(obj, rng.choice(paths[1:] or paths), rng.choice(_HOSTILE))
    return _dumps(obj, rng)


def mutate_jsonl(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    idx = [i for i, ln in enumerate(lines) if ln.strip()]
    for i in rng.sample(idx, min(len(idx), rng.randint(1, 2))):
        lines[i] = mutate_json(lines[i], rng)
    return b"\n".join(lines)


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not b:
            break
        op = rng.randrange(6)
        i = rng.randrange(len(b))
        if op == 0:
            b[i] = rng.randrange(256)
        elif op == 1:
            del b[i : i + rng.randint(1, 64)]
        elif op == 2:
            b[i:i] = b[i : i + rng.randint(1, 256)]
        elif op == 3:
            del b[i:]
        elif op == 4:
            b[i:i] = rng.choice([b"\xff\xfe", b"\\ud800", b"[[[[[[", b"1e400", b"\x00", b'"', b"\n", b"NaN"])
        else:
            b[i] ^= 1 << rng.randrange(8)
    return bytes(b)


def mutate_zip(data: bytes, rng: random.Random) -> bytes:
    """An Inspect ``.eval``: mutate one member's JSON (and re-zip), or the archive's bytes."""
    if rng.random() < 0.3:
        # damage the deflate stream of a member, leaving the zip directory intact
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            info = rng.choice([i for i in z.infolist() if i.compress_size > 8])
        start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
        b = bytearray(data)
        for _ in range(4):
            b[start + rng.randrange(info.compress_size)] = rng.randrange(256)
        return bytes(b)
    if rng.random() < 0.2:
        return mutate_bytes(data, rng)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as z, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as w:
        names = [n for n in z.namelist() if n.endswith(".json")]
        victim = rng.choice(names)
        for n in z.namelist():
            raw = z.read(n)
            w.writestr(n, mutate_json(raw, rng) if n == victim else raw)
    return out.getvalue()


def mutate_tfrecord(data: bytes, rng: random.Random) -> bytes:
    """A TensorBoard event file: bytes, or one record's length made absurd with a valid
    length checksum (what a reader must not trust)."""
    if rng.random() < 0.5:
        return mutate_bytes(data, rng)
    from rolloutlab.io.importers.tensorboard import _load_tensorboard

    masked_crc32c = _load_tensorboard()[2]
    offsets, off = [], 0
    while off + 12 <= len(data):
        offsets.append(off)
        (length,) = struct.unpack("<Q", data[off : off + 8])
        off += 12 + length + 4
    off = rng.choice(offsets)
    length = rng.choice([2**63, 2**40, 2**31, len(data)])
    head = struct.pack("<Q", length)
    return data[:off] + head + struct.pack("<I", masked_crc32c(head)) + data[off + 12 :]


# -- seeds ------------------------------------------------------------------------------
def _verl(d: Path) -> Path:
    d.mkdir()
    lines = [orjson.dumps({"input": f"user\nq{g}\nassistant\n", "output": f"a{s}", "gts": "a1", "score": float(s),
                           "step": 1, "acc": bool(s), "data_source": "gsm8k"}) for g in range(2) for s in range(2)]
    (d / "1.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return d / "1.jsonl"


def _tau(d: Path) -> Path:
    d.mkdir()
    call = {"id": "c1", "type": "function", "function": {"name": "get_order", "arguments": '{"id": "#1"}'}}
    traj = [{"role": "system", "content": "policy"}, {"role": "user", "content": "where is #1?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "name": "get_order", "content": '{"status": "shipped"}'},
            {"role": "assistant", "content": "shipped"}, {"role": "user", "content": "###STOP###"}]
    info = {"reward_info": {"reward": 1.0, "info": {"r_actions": 1.0}, "actions": []}, "user_cost": 0.01}
    recs = [{"task_id": i, "reward": float(i % 2), "info": info, "traj": traj, "trial": 0} for i in range(2)]
    p = d / "tool-calling-gpt-4o-0.0_range_0-2_user-gpt-4o-llm_0318103606.json"
    p.write_text(json.dumps(recs, indent=2))
    return p


def _swe(d: Path) -> Path:
    (d / "repo__a-1").mkdir(parents=True)
    steps = [{"thought": f"t{i}", "action": a, "observation": f"o{i}", "response": f"t{i}\n```\n{a}\n```",
              "state": {"open_file": "n/a"}, "execution_time": 0.1} for i, a in enumerate(["find_file x.py", "submit"])]
    traj = {"environment": "main", "trajectory": steps,
            "history": [{"role": "system", "content": "SETTING", "agent": "main", "message_type": "system_prompt"},
                        {"role": "user", "content": [{"type": "text", "text": "ISSUE"}], "agent": "main"}],
            "info": {"submission": "diff", "exit_status": "submitted",
                     "model_stats": {"instance_cost": 0.5, "tokens_sent": 900, "tokens_received": 120, "api_calls": 2}},
            "replay_config": json.dumps({"agent": {"model": {"name": "gpt-4o"}}})}
    p = d / "repo__a-1" / "repo__a-1.traj"
    p.write_text(json.dumps(traj, indent=2))
    return p


def _tensorboard(d: Path) -> Path:
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    d.mkdir()
    w = EventFileWriter(str(d))
    for step in range(4):
        w.add_event(event_pb2.Event(step=step, wall_time=1000.0 + step, summary=summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag="train/reward", simple_value=0.1 * step)])))
    w.close()
    return next(d.glob("events.out.tfevents.*"))


def _sample(rel: str) -> Callable[[Path], Path]:
    def seed(d: Path) -> Path:
        d.mkdir()
        p = d / Path(rel).name
        p.write_bytes((SAMPLES / rel).read_bytes())
        return p

    return seed


def _first_lines(rel: str, n: int = 3) -> Callable[[Path], Path]:
    """A real JSONL sample cut to its first lines (cases stay fast)."""

    def seed(d: Path) -> Path:
        d.mkdir()
        p = d / Path(rel).name
        p.write_bytes(b"".join((SAMPLES / rel).read_bytes().splitlines(keepends=True)[:n]))
        return p

    return seed


NEMO = sorted(p.name for p in (SAMPLES / "nemo_gym").glob("*.jsonl"))
FORMATS: dict[str, tuple[list[Callable[[Path], Path]], Callable[[bytes, random.Random], bytes], str | None]] = {
    "nemo_gym": ([_first_lines(f"nemo_gym/{n}") for n in NEMO], mutate_jsonl, "nemo_gym"),
    "inspect_json": ([_sample("inspect/popularity.json"), _sample("inspect/browser.json")], mutate_json, None),
    "inspect_eval": ([_sample("inspect/log_read_sample.eval")], mutate_zip, None),
    "verl": ([_verl], mutate_jsonl, "verl"),
    "tau_bench": ([_tau], mutate_json, "tau_bench"),
    "swe_agent": ([_swe], mutate_json, "swe_agent"),
    "tensorboard": ([_tensorboard], mutate_tfrecord, "tensorboard"),
}


class _Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Hang("case ran past 20 s")


def _run_case(fmt: str, i: int, tmp: Path) -> str | None:
    """One case; returns a failure description or None."""
    seeds, mutate, forced = FORMATS[fmt]
    rng = random.Random(f"{fmt}:{i}")
    case = tmp / f"{fmt}-{i}"
    case.mkdir()
    src = rng.choice(seeds)(case / "src")
    data = src.read_bytes()
    try:
        bad = mutate(data, rng) if rng.random() < 0.8 else mutate_bytes(data, rng)
    except (ValueError, IndexError, orjson.JSONDecodeError):  # mutated seed not JSON: bytes then
        bad = mutate_bytes(data, rng)
    src.write_bytes(bad)
    on_error = "skip" if i % 2 else "fail"
    where = f"{fmt}:{i} ({on_error}, FUZZ_ONLY={fmt}:{i})"
    signal.alarm(20)
    try:
        rolloutlab.ingest([src], case / "store", format=forced if rng.random() < 0.5 else None, on_error=on_error)
        if i % 10 == 0:  # what was committed reads back
            st = rolloutlab.open_store(case / "store")
            st.sql("SELECT count(*) FROM texts").fetchall()
            st.sql("SELECT count(*) FROM runs").fetchall()
    except RolloutlabError as e:
        msg = str(e)
        if "this is a bug" in msg or "ran out of memory" in msg:
            return f"{where}: {msg}"
        if src.name not in msg and str(case) not in msg:
            return f"{where}: error does not name the file: {msg}"
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        return f"{where}: uncaught {type(e).__name__}: {e}\n{traceback.format_exc()[-3000:]}"
    finally:
        signal.alarm(0)
    return None


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_fuzz_no_traceback(fmt: str, tmp_path: Path) -> None:
    if ONLY and not ONLY.startswith(f"{fmt}:") and fmt != ONLY:
        pytest.skip("FUZZ_ONLY names another format")
    cases = [int(ONLY.split(":")[1])] if ONLY.startswith(f"{fmt}:") else range(CASES)
    old = signal.signal(signal.SIGALRM, _alarm)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        failures = [f for i in cases if (f := _run_case(fmt, i, tmp_path)) is not None]
    finally:
        signal.signal(signal.SIGALRM, old)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    assert not failures, f"{len(failures)} of {len(cases)} cases failed:\n" + "\n".join(failures[:8])
    assert grown_mib < 1024, f"memory grew by {grown_mib:.0f} MiB while fuzzing {fmt}"
