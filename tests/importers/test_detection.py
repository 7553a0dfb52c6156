"""Detection is the same for a file and for a folder holding it (issue 7, item 8)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from rolloutlab.io.importers import detect_format
from tests._verl import write_verl


def _sample(kind: str, name: str) -> Callable[[Path, Path], Path]:
    def make(samples: Path, dest: Path) -> Path:
        return Path(shutil.copy(samples / kind / name, dest / name))
    return make


def _verl(samples: Path, dest: Path) -> Path:
    return write_verl(dest, {3: [[1, 0]]}) / "3.jsonl"


def _generic_metrics(samples: Path, dest: Path) -> Path:
    f = dest / "metrics.jsonl"
    f.write_text('{"step": 0, "loss": 1.5, "reward": 0.1}\n{"step": 1, "loss": 1.2, "reward": 0.2}\n')
    return f


def _csv(samples: Path, dest: Path) -> Path:
    f = dest / "history.csv"
    f.write_text("step,loss\n0,1.5\n1,1.2\n")
    return f


def _tau(samples: Path, dest: Path) -> Path:
    from tests.importers.test_tau_bench import RUN_FILE, _write, results

    _write(dest / RUN_FILE, results())
    return dest / RUN_FILE


def _swe(samples: Path, dest: Path) -> Path:
    import json

    from tests.importers.test_swe_agent import _traj

    f = dest / "pkg__pkg-1.traj"
    f.write_text(json.dumps(_traj("submitted")))
    return f


def _verl_agent(samples: Path, dest: Path) -> Path:
    from tests.importers.test_verl_agent import GROUPS, write_dump

    write_dump(dest, 2, GROUPS)
    return dest / "2.jsonl"


CASES = {
    "tau_bench": _tau,
    "swe_agent": _swe,
    "verl-agent": _verl_agent,
    "nemo_gym/blackjack": _sample("nemo_gym", "blackjack.rollouts.jsonl"),
    "nemo_gym/toolsandbox": _sample("nemo_gym", "toolsandbox.rollouts.jsonl"),
    "inspect/eval": _sample("inspect", "log_read_sample.eval"),
    "inspect/json": _sample("inspect", "popularity.json"),
    "verl": _verl,
    "generic metrics.jsonl": _generic_metrics,
    "csv": _csv,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_file_and_its_folder_detect_alike(case: str, samples: Path, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    f = CASES[case](samples, folder)
    assert detect_format(folder).name == detect_format(f).name


def test_generic_metrics_file_and_folder_both_tinker(tmp_path: Path) -> None:
    f = _generic_metrics(tmp_path, tmp_path)
    assert detect_format(f).name == detect_format(tmp_path).name == "tinker"


@pytest.mark.parametrize("depth", ["data", "resources_servers/blackjack/data"])
def test_nemo_gym_files_below_the_folder(depth: str, samples: Path, tmp_path: Path) -> None:
    d = tmp_path / "gym" / depth
    d.mkdir(parents=True)
    f = _sample("nemo_gym", "blackjack.rollouts.jsonl")(samples, d)
    assert detect_format(tmp_path / "gym").name == detect_format(f).name == "nemo_gym"
