"""Two CPU processes on the gloo backend train in step and end with identical parameters."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ._helpers import TINY

SCRIPT = """
import sys, torch
from rolloutlab.train import load_config
from rolloutlab.train._loop import Trainer
out, dump = sys.argv[1], sys.argv[2]
cfg = load_config(None, sys.argv[3:])
t = Trainer(cfg, out)
t.run()
inner = t.model.module
torch.save({k: v.detach().clone() for k, v in inner.state_dict().items()}, dump)
torch.distributed.destroy_process_group()
"""


def _port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.slow
def test_two_gloo_processes_end_with_identical_parameters(tmp_path: Path) -> None:
    args = [*TINY, "rollout.tasks_per_step=4", "rollout.n=2", "trainer.total_steps=2", "trainer.save_every=0"]
    port = _port()
    procs = []
    for rank in (0, 1):
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
               "WORLD_SIZE": "2", "LOCAL_RANK": str(rank)}
        procs.append(subprocess.Popen([sys.executable, "-c", SCRIPT, str(tmp_path / "run"), str(tmp_path / f"p{rank}.pt"), *args],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, out
    a, b = torch.load(tmp_path / "p0.pt"), torch.load(tmp_path / "p1.pt")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    # and they moved from the shared initialisation
    from rolloutlab.agent._hf import tiny_model

    init = tiny_model(16, seed=0, shape=__import__("rolloutlab.agent._hf", fromlist=["TinyModelConfig"]).TinyModelConfig(hidden_size=32, intermediate_size=64))
    assert any(not torch.equal(v, a[k]) for k, v in init.state_dict().items())
    assert len(list((tmp_path / "run" / "rollouts").iterdir())) == 2  # rank 0 writes the run
