"""Generic console metric lines: ``{'k': v}`` per line and ``k=v`` pairs, with a step key;
detected only when unambiguous."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

import rolloutlab
from rolloutlab.io.importers import detect_format
from rolloutlab.io.importers.console_kv import parse_dict_line, parse_kv_line
from tests._skyrl_log import NOISE, loguru


def stored(store: Path, split: str = "train") -> dict[tuple[int, str], float]:
    st = rolloutlab.open_store(store)
    return {(s, n): v for s, n, v in st.sql("SELECT step, name, value FROM metrics WHERE split = ?",
                                            params=[split]).fetchall()}


def test_dict_per_line_python_and_json(tmp_path: Path) -> None:
    rng = random.Random(0)
    want = {}
    lines = []
    for s in range(1, 9):
        m = {"loss": rng.random(), "reward/mean": rng.random(), "lr": 1e-5 * s}
        want.update({(s, k): v for k, v in m.items()})
        rec = {"global_step": s, **m}
        lines.append(loguru(s, str(rec)) if s % 2 else json.dumps(rec) + "\n")
        lines.append(NOISE[s % len(NOISE)])
    p = tmp_path / "train.log.gz"
    p.write_bytes(gzip.compress("".join(lines).encode()))
    assert detect_format(p).name == "console_kv"
    rolloutlab.ingest([p], tmp_path / "store")
    assert stored(tmp_path / "store") == want  # repr() and JSON keep every float exactly


def test_kv_pairs_with_restart_and_eval(tmp_path: Path) -> None:
    p = tmp_path / "run.out"
    p.write_text("starting run=abc\n"
                 "(trainer pid=12) step=1 loss=0.50 reward=0.10 lr=1e-05 mode=train\n"
                 "step=2, loss=0.40, reward=0.20 | eval/acc=0.3\n"
                 "resuming from step=1\n"
                 "step=2 loss=0.45 reward=0.25\n"
                 "step=3 step=4 loss=1\n")
    assert detect_format(p).name == "console_kv"
    rep = rolloutlab.ingest([p], tmp_path / "store")
    assert stored(tmp_path / "store") == {(1, "loss"): 0.5, (1, "reward"): 0.1, (1, "lr"): 1e-05,
                                          (2, "loss"): 0.45, (2, "reward"): 0.25}
    assert stored(tmp_path / "store", "eval") == {(2, "eval/acc"): 0.3}
    w = rep.sources[0].warnings
    assert any("step given twice" in x and ":6" in x for x in w)
    assert any("1 steps logged twice" in x and ": 2 —" in x for x in w)


def test_ambiguous_or_stepless_not_detected(tmp_path: Path) -> None:
    both = tmp_path / "both.log"
    both.write_text("{'step': 1, 'a': 1}\n{'step': 2, 'a': 2}\nstep=3 a=3\nstep=4 a=4\n")
    assert detect_format(both, quiet=True) is None
    forced = rolloutlab.ingest([both], tmp_path / "store", format="console_kv")
    assert forced.sources[0].counts["metrics"] == 4
    hf = tmp_path / "hf.log"  # Hugging Face Trainer: no step key, so no step to read
    hf.write_text("{'loss': 0.5, 'grad_norm': 1.2, 'learning_rate': 1e-05, 'epoch': 0.1}\n" * 3)
    assert detect_format(hf, quiet=True) is None
    one = tmp_path / "one.log"
    one.write_text("step=1 loss=0.5\n")
    assert detect_format(one, quiet=True) is None


@pytest.mark.parametrize(("line", "want"), [
    ("{'step': 3, 'x': {'y': 1.5}}", (3, {"x/y": 1.5})),
    ("{'step': 3.5, 'x': 1}", None),
    ("{'step': True, 'x': 1}", None),
    ("{'step': 3, 'global_step': 4, 'x': 1}", None),
    ("no dict here {", None),
    # the form a verl-based SkyRL trainer prints (step in the prefix and as train/step)
    ("(main_task pid=9) 2025-07-05 10:00:00 model.py:660 - step 1: {'train/loss': 0.0006256469641812146, "
     "'train/pg_clipfrac': 0.0, 'train/step': 1}", (1, {"train/loss": 0.0006256469641812146, "train/pg_clipfrac": 0.0})),
    ("step 2: {'a': 1}", (2, {"a": 1})),
    ("step 2: {'a': 1, 'step': 3}", None),
])
def test_parse_dict_line(line: str, want: object) -> None:
    assert parse_dict_line(line) == want


def test_parse_kv_line() -> None:
    assert parse_kv_line("step=7 a=1 b=x c=2.5e-3") == (7, {"a": "1", "c": "2.5e-3"})
    assert parse_kv_line("step=7/100 a=1") is None
    assert parse_kv_line("a=1 b=2") is None
    assert parse_kv_line("step=1 step=2 a=1") == "step given twice (1, 2)"
