"""Archives of a run (.tar.gz, .zip) are read transparently; unsafe members are refused."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

import pytest

import rolloutlab
from rolloutlab.io import InputError
from tests._verl import write_verl


def test_tar_gz_of_a_run(tmp_path: Path) -> None:
    src = write_verl(tmp_path / "rollouts", {1: [[1, 0]], 2: [[1, 1]]})
    arc = tmp_path / "run.tar.gz"
    with tarfile.open(arc, "w:gz") as t:
        t.add(src, arcname="rollouts")
    rep = rolloutlab.ingest([arc], tmp_path / "s")
    assert rep.sources[0].format == "verl" and rep.sources[0].counts["trajectories"] == 4
    # re-ingesting the same archive changes nothing (same source, same run)
    rep = rolloutlab.ingest([arc], tmp_path / "s")
    assert rep.sources[0].parts_read == 0 and rep.sources[0].run_id == "rollouts"


def test_zip_of_a_run(tmp_path: Path) -> None:
    src = write_verl(tmp_path / "rollouts", {3: [[0, 1, 1]]})
    arc = tmp_path / "run.zip"
    with zipfile.ZipFile(arc, "w") as z:
        for p in src.iterdir():
            z.write(p, f"rollouts/{p.name}")
    rolloutlab.ingest([arc], tmp_path / "s")
    st = rolloutlab.open_store(tmp_path / "s")
    assert st.sql("SELECT step, count(*) FROM trajectories GROUP BY step").fetchall() == [(3, 3)]


def test_archive_escaping_its_folder_is_refused(tmp_path: Path) -> None:
    arc = tmp_path / "evil.zip"
    with zipfile.ZipFile(arc, "w") as z:
        z.writestr("../../escape.jsonl", "{}")
    with pytest.raises(InputError, match="outside the archive"):
        rolloutlab.ingest([arc], tmp_path / "s")
