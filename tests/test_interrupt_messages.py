"""An interrupted command says what it leaves behind, in its own terms (not the store's)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupted_eval_says_how_to_resume(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    """Ctrl-C, and SIGTERM as a job scheduler sends it, end an eval with one line and no traceback."""
    out = tmp_path / "ev"
    cmd = [sys.executable, "-m", "rolloutlab", "eval", "--env", "guess-number-v0", "--policy",
           "scripted:tests.envs._remote_fakes:slow_guess", "--episodes", "40", "--concurrency", "1", "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "200"})
    deadline = time.monotonic() + 120
    while not list(out.glob("eval/*/.episodes.partial.jsonl")) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(0.5)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code
    text = err.decode()
    assert f"interrupted ({sig.name}): finished episodes are kept" in text and "store" not in text
    assert "Traceback" not in text


def test_step_spans_in_messages() -> None:
    """``errors.spans``, the step lists in train's and label's messages."""
    from rolloutlab.errors import spans

    assert spans([4, 5, 6, 9]) == "4-6, 9"
    assert spans([1]) == "1" and spans([]) == ""
    assert spans([1, 3, 4, 10, 11, 12]) == "1, 3-4, 10-12"
