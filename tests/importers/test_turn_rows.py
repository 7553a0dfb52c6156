"""The turn-row rule (docs/store.md § Turn rows) on formats without turns of their own,
and on every bundled real sample.  (Every other importer test checks it too, through the
``ingest_one`` fixture of this folder's conftest.)"""

from __future__ import annotations

from pathlib import Path

import pytest

import rolloutlab
from rolloutlab.io import RolloutlabError
from tests.importers.conftest import turn_row_violations


def test_mapped_num_turns_gives_empty_turn_rows(tmp_path: Path, ingest_one) -> None:
    f = tmp_path / "any.jsonl"
    f.write_text('{"q": "a", "a": "x", "s": 1.0, "n": 3}\n{"q": "b", "a": "y", "s": 0.0, "n": null}\n')
    _, st = ingest_one(f, mapping={"prompt": "q", "response": "a", "reward": "s", "num_turns": "n"})
    assert st.sql("SELECT num_turns FROM trajectories ORDER BY traj_id").fetchall() == [(3,), (None,)]
    assert st.sql("SELECT turn_idx, reward, tokens FROM turns ORDER BY turn_idx").fetchall() == [
        (0, None, None), (1, None, None), (2, None, None)]
    assert st.sql("SELECT count(*) FROM texts WHERE turn_idx >= 0 AND action IS NULL").fetchall() == [(3,)]


def test_implausible_bare_num_turns_refused(tmp_path: Path) -> None:
    f = tmp_path / "any.jsonl"
    f.write_text('{"q": "a", "a": "x", "s": 1.0, "n": 1000000000}\n')
    with pytest.raises(RolloutlabError, match=r"num_turns is 1000000000 without any turn data"):
        rolloutlab.ingest([f], tmp_path / "s", mapping={"prompt": "q", "response": "a", "reward": "s", "num_turns": "n"})


def test_run_directory_num_turns_must_match_turns(tmp_path: Path) -> None:
    from rolloutlab.io import RunWriter
    from rolloutlab.schema import Run, Trajectory, Turn

    d = tmp_path / "run"
    with RunWriter(d, Run(run_id="r", name="r")) as w:
        w.write_step(1, [Trajectory(traj_id="a", step=1, reward=1.0, num_turns=2, turns=[Turn(turn_idx=0, action="x")])])
    with pytest.raises(RolloutlabError, match="num_turns is 2 but 1 turns were given"):
        rolloutlab.ingest([d], tmp_path / "s")


@pytest.mark.parametrize("name", ["nemo_gym", "inspect"])
def test_real_samples_keep_the_rule(samples: Path, tmp_path: Path, name: str) -> None:
    for i, src in enumerate(sorted((samples / name).iterdir())):
        rolloutlab.ingest([src], tmp_path / f"s{i}")
        st = rolloutlab.open_store(tmp_path / f"s{i}")
        assert st.sql("SELECT count(*) FROM trajectories").fetchall()[0][0] > 0, src
        assert turn_row_violations(st) == [], src
