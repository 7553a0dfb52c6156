"""Per-step metric tables: plain CSV/TSV, wandb history and chart exports."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

import rolloutlab
from rolloutlab.io import InputError
from rolloutlab.io.importers import REGISTRY, detect_format


def _metrics(store: Any) -> dict[tuple[str, int, str], float | None]:
    return {(s, st, n): v for s, st, n, v in store.sql("SELECT split, step, name, value FROM metrics").fetchall()}


def test_wandb_history_export(tmp_path: Path, ingest_one: Any) -> None:
    # run.history().to_csv(): wandb's _step/_runtime/_timestamp plus the trainer's own step.
    p = tmp_path / "grpo-run.csv"
    p.write_text(
        "_step,_runtime,_timestamp,train/global_step,train/reward,train/kl,eval/reward\n"
        "0,10.5,1717000000.1,1,0.25,0.001,\n"
        "1,20.5,1717000010.1,2,0.5,,\n"
        "2,30.5,1717000020.1,2,,,0.75\n"
        "3,40.5,1717000030.1,3,NaN,0.002,\n"
    )
    report, store = ingest_one(p)
    assert report.sources[0].format == "metrics_table"
    m = _metrics(store)
    assert m == {("train", 1, "train/reward"): 0.25, ("train", 1, "train/kl"): 0.001,
                 ("train", 2, "train/reward"): 0.5, ("train", 2, "eval/reward"): 0.75,
                 ("train", 3, "train/reward"): None, ("train", 3, "train/kl"): 0.002}
    assert store.sql("SELECT name FROM runs").fetchall() == [("grpo-run",)]


def test_wandb_chart_export_keeps_min_max(tmp_path: Path, ingest_one: Any) -> None:
    p = tmp_path / "wandb_export.csv"
    p.write_text(
        '"Step","run-a - reward","run-a - reward__MIN","run-a - reward__MAX"\n'
        '"10","0.5","0.25","0.75"\n'
        '"20","0.625","","0.875"\n'
    )
    _, store = ingest_one(p)
    assert _metrics(store) == {
        ("train", 10, "run-a - reward"): 0.5, ("train", 10, "run-a - reward__MIN"): 0.25,
        ("train", 10, "run-a - reward__MAX"): 0.75, ("train", 20, "run-a - reward"): 0.625,
        ("train", 20, "run-a - reward__MAX"): 0.875}


def test_tsv_gzip_folder_and_val_split(tmp_path: Path, ingest_one: Any) -> None:
    d = tmp_path / "tables"
    d.mkdir()
    with gzip.open(d / "train.tsv.gz", "wt") as f:
        f.write("step\tloss\tnote\n1\t2.5\twarm\n2\t1.5\tok\n")
    (d / "val_metrics.csv").write_text("global_step,acc\n2,0.8\n")
    (d / "README.md").write_text("not a table")
    assert detect_format(d).name == "metrics_table"
    report, store = ingest_one(d)
    assert _metrics(store) == {("train", 1, "loss"): 2.5, ("train", 2, "loss"): 1.5, ("val", 2, "acc"): 0.8}
    assert any("2 non-numeric cells skipped" in w for w in report.sources[0].warnings)


def test_step_column_priority_and_float_steps(tmp_path: Path, ingest_one: Any) -> None:
    p = tmp_path / "m.csv"
    p.write_text("Step,step,x\n100,1.0,3\n200,2,4\n")
    _, store = ingest_one(p)
    assert _metrics(store) == {("train", 1, "x"): 3.0, ("train", 2, "x"): 4.0}


def test_detection(tmp_path: Path, samples: Path) -> None:
    # The real samples of other formats (Inspect logs, NeMo Gym rollouts) are not claimed.
    for sample in [samples, *samples.rglob("*")]:
        assert REGISTRY["metrics_table"].detect(sample) == 0, sample
    (tmp_path / "ok.csv").write_text("trainer/global_step,reward\n1,0.5\n")
    (tmp_path / "nostep.csv").write_text("epoch,reward\n1,0.5\n")
    assert detect_format(tmp_path / "ok.csv").name == "metrics_table"
    assert REGISTRY["metrics_table"].detect(tmp_path / "nostep.csv") == 0
    d = tmp_path / "rollout"
    d.mkdir()
    (d / "1.jsonl").write_text(json.dumps({"input": "q", "output": "a", "score": 1.0, "step": 1}) + "\n")
    assert REGISTRY["metrics_table"].detect(d) == 0


@pytest.mark.parametrize("cell", ["abc", "1.5", "", "-1"])
def test_bad_step_cell_names_file_line_column(tmp_path: Path, ingest_one: Any, cell: str) -> None:
    good = tmp_path / "good.csv"
    good.write_text("step,loss\n1,0.5\n")
    ingest_one(good)
    bad = tmp_path / "bad.csv"
    bad.write_text(f"loss,step\n0.5,1\n0.4,{cell}\n")
    with pytest.raises(InputError) as e:
        ingest_one(bad)
    assert (e.value.path, e.value.line, e.value.column) == (str(bad), 3, 2)
    assert "'step'" in e.value.message
    assert rolloutlab.open_store(tmp_path / "store").sql("SELECT count(*) FROM metrics").fetchall()[0][0] == 1


def test_bad_step_row_can_be_skipped(tmp_path: Path, ingest_one: Any) -> None:
    p = tmp_path / "m.csv"
    p.write_text("step,loss\n1,0.5\nx,0.4\n3,0.3\n")
    report, store = ingest_one(p, on_error="skip")
    assert report.rejects == 1
    assert _metrics(store) == {("train", 1, "loss"): 0.5, ("train", 3, "loss"): 0.3}
