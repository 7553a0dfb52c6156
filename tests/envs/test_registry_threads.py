"""The registry loads once, and a thread arriving while another loads it waits for it."""

from __future__ import annotations

import subprocess
import sys


def test_concurrent_first_use_from_threads_sees_every_builtin() -> None:
    # a fresh interpreter: the registry must not be loaded yet when 16 threads race to it
    code = (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from rolloutlab.envs import make_env\n"
        "def f(i):\n"
        "    try:\n"
        "        make_env('guess-number-v0'); return None\n"
        "    except Exception as e:\n"
        "        return repr(e)\n"
        "with ThreadPoolExecutor(16) as ex:\n"
        "    errs = [e for e in ex.map(f, range(16)) if e]\n"
        "print(len(errs), errs[:1])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("0 "), out.stdout
