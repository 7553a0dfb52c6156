"""Interrupts, a full disk and a busy lock tell the truth (issue 12 § 4).

Ctrl-C and SIGTERM during an ingest exit 130 / 143 with one line saying the store is
unchanged (and leave no staging folder); a signal during the commit itself is held until
the manifest swap is done and then says so; a full disk is one line naming the folder;
an ingest waiting for another's lock says so and names its pid.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

import rolloutlab
from rolloutlab.cli import main
from rolloutlab.io import Store, open_store
from tests._verl import write_verl

ROOT = Path(__file__).resolve().parents[1]

# An ingest that stops for a while after staging its first part: the test signals it
# there, at a known point, instead of racing a timer.
_SLOW_INGEST = """
import sys, time
import rolloutlab.io._ingest as ing
orig = ing._read_parts
def slow(*args, **kwargs):  # after the first part (or batch of parts) is staged
    for item in orig(*args, **kwargs):
        if item[3].closing is not None:
            item[3].closing.result()
        print("STAGED", flush=True)
        time.sleep(60)
        yield item
ing._read_parts = slow
from rolloutlab.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _files(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file() and p.name != ".lock"}


@pytest.mark.parametrize(("sig", "code", "name"), [(signal.SIGINT, 130, "SIGINT"), (signal.SIGTERM, 143, "SIGTERM")])
def test_signal_during_ingest(tmp_path: Path, sig: int, code: int, name: str) -> None:
    src = write_verl(tmp_path / "src", {1: [[1, 0]]})
    store = tmp_path / "s"
    rolloutlab.ingest([src], store)
    before = _files(store)
    write_verl(src, {2: [[1, 1]], 3: [[0, 1]]})
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_INGEST, "ingest", str(src), "--store", str(store)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200"})
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "STAGED"
        assert any((store / "_staging").rglob("*.parquet"))  # the interrupt lands mid-ingest
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines == [f"interrupted ({name}): the store is unchanged"]
    assert _files(store) == before
    assert not (store / "_staging").exists()


def test_signal_during_commit_finishes_it_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    src = write_verl(tmp_path / "src", {1: [[1, 0]]})
    store = tmp_path / "s"
    import rolloutlab.io._store as store_mod

    real = store_mod.write_atomic

    def interrupted_write(path: Path, data: bytes) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # arrives between the moves and the manifest swap
        real(path, data)

    monkeypatch.setattr(store_mod, "write_atomic", interrupted_write)
    assert main(["ingest", str(src), "--store", str(store)]) == 130
    assert "after the store was committed: it holds the new data" in capsys.readouterr().err
    monkeypatch.setattr(store_mod, "write_atomic", real)
    assert open_store(store).sql("SELECT count(*) FROM trajectories").fetchall() == [(2,)]


@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device"),
                                   pa.ArrowIOError("IOError: [Errno 28] No space left on device (error writing)")])
def test_disk_full_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                               error: Exception) -> None:
    src = write_verl(tmp_path / "src", {1: [[1, 0]]})
    store = tmp_path / "s"
    rolloutlab.ingest([src], store)
    before = _files(store)
    write_verl(src, {2: [[1, 1]]})
    from rolloutlab.io._sink import PartSink

    def full(self: PartSink) -> None:
        raise error

    monkeypatch.setattr(PartSink, "flush", full)
    capsys.readouterr()
    assert main(["ingest", str(src), "--store", str(store)]) == 1
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert err == [f"error: no space left on the disk holding {store}; the store is unchanged"]
    assert _files(store) == before and not (store / "_staging").exists()


def test_waiting_for_the_lock_names_the_holder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_verl(tmp_path / "src", {1: [[1, 0]]})
    store = tmp_path / "s"
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with Store(store).lock():
            held.set()
            release.wait(30)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(30)
    threading.Timer(1.0, release.set).start()  # the waiting ingest goes on once released
    try:
        assert main(["ingest", str(src), "--store", str(store)]) == 0
    finally:
        release.set()
        t.join()
    err = capsys.readouterr().err
    assert f"waiting for another ingest into {store} (pid {os.getpid()}) to finish" in err.replace("\n", "")
    assert (store / ".lock").read_text() == ""  # released: no stale pid


def test_lock_holder_pid_is_recorded(tmp_path: Path) -> None:
    st = Store(tmp_path / "s")
    with st.lock():
        assert (tmp_path / "s" / ".lock").read_text() == str(os.getpid())
    t0 = time.monotonic()
    with st.lock():  # re-acquired at once: nothing waits on a released lock
        pass
    assert time.monotonic() - t0 < 30


def test_kill_9_leftovers_are_removed_by_the_next_ingest(tmp_path: Path) -> None:
    src = write_verl(tmp_path / "src", {1: [[1, 0]]})
    store = tmp_path / "s"
    rolloutlab.ingest([src], store)
    write_verl(src, {2: [[1, 1]]})
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_INGEST, "ingest", str(src), "--store", str(store)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "STAGED"
        proc.kill()  # SIGKILL: no handler runs, the staging folder stays
        proc.wait(30)
    finally:
        proc.kill()
    left = list((store / "_staging").rglob("*.parquet"))
    assert left
    assert open_store(store).sql("SELECT count(*) FROM trajectories").fetchall() == [(2,)]  # the old state
    rep = rolloutlab.ingest([src], store)
    assert len(rep.leftovers_removed) == 1 and not (store / "_staging").exists()
    assert open_store(store).sql("SELECT count(*) FROM trajectories").fetchall() == [(4,)]


def test_ctrl_c_during_commit_in_library_use_is_keyboard_interrupt(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside the CLI, Python's own Ctrl-C stays: KeyboardInterrupt, after the swap."""
    import rolloutlab.io._store as store_mod

    real = store_mod.write_atomic

    def interrupted_write(path: Path, data: bytes) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        real(path, data)

    monkeypatch.setattr(store_mod, "write_atomic", interrupted_write)
    src = write_verl(tmp_path / "src", {1: [[1, 0]]})
    with pytest.raises(KeyboardInterrupt):
        rolloutlab.ingest([src], tmp_path / "s")
    monkeypatch.setattr(store_mod, "write_atomic", real)
    assert open_store(tmp_path / "s").sql("SELECT count(*) FROM trajectories").fetchall() == [(2,)]
