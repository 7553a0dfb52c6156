"""An interrupted command says what it leaves behind, in its own terms (not the store's)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_interrupted_eval_says_how_to_resume(tmp_path: Path) -> None:
    out = tmp_path / "ev"
    cmd = [sys.executable, "-m", "rolloutlab", "eval", "--env", "guess-number-v0", "--policy",
           "scripted:tests.envs._remote_fakes:slow_guess", "--episodes", "40", "--concurrency", "1", "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "200"})
    deadline = time.monotonic() + 120
    while not list(out.glob("eval/*/.episodes.partial.jsonl")) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    text = err.decode()
    assert "interrupted (SIGINT): finished episodes are kept" in text and "store" not in text
