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
    # … with every rank's share: 4 tasks × 2 samples a step, 4 groups whose ids do not repeat
    import orjson

    lines = (tmp_path / "run" / "metrics.jsonl").read_bytes().splitlines()
    for step, line in zip((1, 2), lines, strict=True):
        rows = [orjson.loads(x) for x in (tmp_path / "run" / "rollouts" / f"step_{step:06d}.jsonl").read_bytes().splitlines()]
        trained = [r for r in rows if "dropped" not in (r.get("extras") or {})]
        assert len({r["traj_id"] for r in rows}) == len(rows)
        assert sorted({r["group_id"] for r in trained}) == [f"{step}-g{g}" for g in range(4)]
        metrics = orjson.loads(line)["metrics"]
        assert metrics["rollout/episodes"] == 8.0
        assert metrics["rollout/trained_groups"] == 4.0
        assert metrics["reward/mean"] == pytest.approx(sum(r["reward"] for r in trained) / len(trained))


def test_rank_metrics_are_summed_maxed_or_averaged() -> None:
    from rolloutlab.train._loop import combine_ranks

    shares = [{"rollout/dropped_groups": 1.0, "rollout/refills": 2.0, "actor/loss": 0.5, "adv/mean": None},
              {"rollout/dropped_groups": 2.0, "rollout/refills": 1.0, "actor/loss": 1.5, "perf/sampled_tokens": 7.0}]
    assert combine_ranks(shares) == {"actor/loss": 1.0, "adv/mean": None, "perf/sampled_tokens": 7.0,
                                     "rollout/dropped_groups": 3.0, "rollout/refills": 2.0}
