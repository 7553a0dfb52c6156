"""``make act-prm`` at a tiny scale: train a few steps → label the last step's trajectories
(``--steps``) with the trained checkpoint → export the steps whose label passes (``--by
label``) → SFT the initial model for one epoch → the checkpoint loads and plays in ``eval``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rolloutlab.io import read_trajectories


def test_rl_label_export_sft_eval(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rolloutlab.cli import main

    rl, lab, best, sft, ev = (tmp_path / n for n in ("rl", "labelled", "best", "sft", "eval"))
    assert main(["train", "demo", "rollout.tasks_per_step=4", "rollout.n=2", "trainer.total_steps=3",
                 "trainer.save_every=3", "trainer.threads=1", "logging.progress=false", "--out", str(rl)]) == 0
    capsys.readouterr()  # the trainer's lines
    assert main(["label", str(rl), "--method", "mc", "--n", "2", "--steps", "3", "--max-tokens", "1",
                 "--policy", f"hf:{rl / 'checkpoints' / 'step_000003'}", "--out", str(lab), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["labelled"] == 8  # step 3's 4 tasks x 2, not steps 1-2
    labelled = [t for f in sorted((lab / "rollouts").glob("step_*.jsonl")) for _, t in read_trajectories(f)]
    values = [u.extras["label"]["value"] for t in labelled if t.step == 3 for u in t.turns if u.extras]
    assert len(values) == sum(len(t.turns) for t in labelled if t.step == 3)
    assert main(["export", str(lab), "--as", "rejection", "--by", "label", "--threshold", "0", "--out", str(best)]) == 0
    manifest = json.loads((best / "export.json").read_text())
    assert manifest["skipped_unlabelled"] == 16 and manifest["rows"] == sum(v is not None for v in values)
    assert main(["sft", str(best), "sft_tiny", "epochs=1", "threads=1", "--out", str(sft), "--no-progress"]) == 0
    ckpts = sorted(p.name for p in (sft / "checkpoints").iterdir())
    assert ckpts[0] == "step_000000" and len(ckpts) == 2
    assert main(["eval", "--env", "guess-number-v0", "--policy", f"hf:{sft / 'checkpoints' / ckpts[-1]}",
                 "--episodes", "4", "--max-tokens", "1", "--split", "test", "--out", str(ev)]) == 0
    summary = next(ev.glob("eval/*/summary.json"))
    assert json.loads(summary.read_text())["episodes"] == 4
