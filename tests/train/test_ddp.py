"""Two CPU processes on the gloo backend train in step and end with identical parameters."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ._helpers import TINY, run_ranks

SCRIPT = """
import os, sys, torch
from rolloutlab.train import load_config
from rolloutlab.train._loop import Trainer
out, dump = sys.argv[1], sys.argv[2].format(rank=os.environ["RANK"])
cfg = load_config(None, sys.argv[3:])
t = Trainer(cfg, out)
t.run()
inner = t.model.module
torch.save({k: v.detach().clone() for k, v in inner.state_dict().items()}, dump)
torch.distributed.destroy_process_group()
"""


@pytest.mark.slow
def test_two_gloo_processes_end_with_identical_parameters(tmp_path: Path) -> None:
    args = [*TINY, "rollout.tasks_per_step=4", "rollout.n=2", "trainer.total_steps=2", "trainer.save_every=0"]
    run_ranks(SCRIPT, [str(tmp_path / "run"), str(tmp_path / "p{rank}.pt"), *args])
    a, b = torch.load(tmp_path / "p0.pt"), torch.load(tmp_path / "p1.pt")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    # and they moved from the shared initialisation
    from rolloutlab.agent._hf import tiny_model

    init = tiny_model(16, seed=0, shape=__import__("rolloutlab.agent._hf", fromlist=["TinyModelConfig"]).TinyModelConfig(hidden_size=32, intermediate_size=64))
    assert any(not torch.equal(v, a[k]) for k, v in init.state_dict().items())
    assert len(list((tmp_path / "run" / "rollouts").iterdir())) == 2  # rank 0 writes the run
