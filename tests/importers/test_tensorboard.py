"""TensorBoard event files: real files written with tensorboard's own writer when the
package is installed; without it, detection still works and reading says what to install."""

from __future__ import annotations

import builtins
import json
from pathlib import Path
from typing import Any

import pytest

import rolloutlab
from rolloutlab.io import InputError
from rolloutlab.io.importers import REGISTRY, detect_format
from rolloutlab.io.importers.tensorboard import INSTALL_HINT

try:
    import tensorboard  # noqa: F401

    HAVE_TB = True
except ImportError:
    HAVE_TB = False

needs_tb = pytest.mark.skipif(not HAVE_TB, reason="tensorboard not installed")


def _write_events(logdir: Path, scalars: list[tuple[int, str, float]], *, tf2: list[tuple[int, str, float]] = (),
                  extra: bool = False) -> Path:
    """PyTorch-style ``simple_value`` scalars and TF2-style scalar tensors (plugin
    metadata on a tag's first value only), as the real writers emit them."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.compat.proto.tensor_pb2 import TensorProto
    from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    logdir.mkdir(parents=True, exist_ok=True)
    w = EventFileWriter(str(logdir))
    for step, tag, v in scalars:
        w.add_event(event_pb2.Event(step=step, wall_time=1000.0 + step, summary=summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag=tag, simple_value=v)])))
    seen: set[str] = set()
    for step, tag, v in tf2:
        val = summary_pb2.Summary.Value(tag=tag, tensor=TensorProto(dtype=1, float_val=[v],
                                                                    tensor_shape=TensorShapeProto()))
        if tag not in seen:
            val.metadata.plugin_data.plugin_name = "scalars"
            seen.add(tag)
        w.add_event(event_pb2.Event(step=step, wall_time=2000.0, summary=summary_pb2.Summary(value=[val])))
    if extra:  # a text summary and a 2-element tensor: not scalars
        txt = summary_pb2.Summary.Value(tag="config", tensor=TensorProto(dtype=7, string_val=[b"lr=1e-6"],
                                                                        tensor_shape=TensorShapeProto()))
        txt.metadata.plugin_data.plugin_name = "text"
        w.add_event(event_pb2.Event(step=0, summary=summary_pb2.Summary(value=[txt])))
    w.flush()
    w.close()
    return next(logdir.glob("events.out.tfevents.*"))


def _fake_event_file(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    p = d / "events.out.tfevents.1717000000.host.123.0"
    p.write_bytes(b"\x00" * 16)
    return p


def test_detection_without_reading(tmp_path: Path, samples: Path) -> None:
    # The real samples of other formats (Inspect logs, NeMo Gym rollouts) are not claimed.
    for sample in [samples, *samples.rglob("*")]:
        assert REGISTRY["tensorboard"].detect(sample) == 0, sample
    p = _fake_event_file(tmp_path / "runs" / "Jun01_exp")
    assert detect_format(p).name == "tensorboard"
    assert detect_format(tmp_path / "runs").name == "tensorboard"
    d = tmp_path / "rollout"
    d.mkdir()
    (d / "1.jsonl").write_text(json.dumps({"input": "q", "output": "a", "score": 1.0, "step": 1}) + "\n")
    assert REGISTRY["tensorboard"].detect(d) == 0
    assert REGISTRY["tensorboard"].detect(d / "1.jsonl") == 0


def test_missing_package_is_a_clear_error(tmp_path: Path, ingest_one: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    p = _fake_event_file(tmp_path / "logs")
    real_import = builtins.__import__

    def no_tensorboard(name: str, *args: Any, **kw: Any) -> Any:
        if name == "tensorboard" or name.startswith("tensorboard."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    with pytest.raises(InputError) as e:
        ingest_one(p)
    assert e.value.message == INSTALL_HINT
    assert "pip install 'rolloutlab[tensorboard]'" in str(e.value)


@needs_tb
def test_scalars_from_real_event_files(tmp_path: Path, ingest_one: Any) -> None:
    root = tmp_path / "runs"
    _write_events(root / "train", [(1, "loss", 0.5), (2, "loss", 0.25), (2, "train/reward", 0.75)],
                  tf2=[(1, "kl", 0.125), (2, "kl", 0.0625)], extra=True)
    _write_events(root / "validation", [(2, "loss", 0.375)])
    report, store = ingest_one(root)
    assert report.sources[0].format == "tensorboard"
    m = {(s, st, n): v for s, st, n, v in store.sql("SELECT split, step, name, value FROM metrics").fetchall()}
    assert m == {("train", 1, "loss"): 0.5, ("train", 2, "loss"): 0.25, ("train", 2, "train/reward"): 0.75,
                 ("train", 1, "kl"): 0.125, ("train", 2, "kl"): 0.0625, ("val", 2, "loss"): 0.375}
    assert store.sql("SELECT count(*) FROM trajectories").fetchall()[0][0] == 0


@needs_tb
@pytest.mark.parametrize(("pos", "why"), [(2, "length checksum"), (-6, "data checksum")])
def test_corrupt_record_is_an_error(tmp_path: Path, ingest_one: Any, pos: int, why: str) -> None:
    good = _write_events(tmp_path / "good", [(1, "loss", 0.5)])
    ingest_one(good)
    bad = tmp_path / "bad" / "events.out.tfevents.1.host.1.0"
    bad.parent.mkdir()
    data = bytearray(good.read_bytes())
    data[pos] ^= 0xFF          # the first record's length, or inside the last (scalar) record
    bad.write_bytes(bytes(data))
    with pytest.raises(InputError) as e:
        ingest_one(bad)
    assert e.value.path == str(bad) and why in e.value.message
    assert rolloutlab.open_store(tmp_path / "store").sql("SELECT count(*) FROM metrics").fetchall()[0][0] == 1


@needs_tb
def test_record_cut_short_ends_the_file_with_a_warning(tmp_path: Path, ingest_one: Any) -> None:
    good = _write_events(tmp_path / "run", [(1, "loss", 0.5), (2, "loss", 0.25)])
    good.write_bytes(good.read_bytes()[:-7])       # the writer is mid-way through the last record
    report, store = ingest_one(good)
    assert store.sql("SELECT step, value FROM metrics").fetchall() == [(1, 0.5)]
    assert any("incomplete" in w for w in report.sources[0].warnings)
