"""A hand-built store for issue 22 §§ 2–4 (groups, compare, charts, labels), values known by hand.

- ``nat`` (env ``sokoban``, finished): train steps 1–11, 12 groups ``g1``…``g12`` of 2
  samples each; sample 0 earns 1.0, sample 1 earns (step − 1)/10; task ids ``"1"``…``"12"``;
  one extra ungraded trajectory at step 1; the prompt is a JSON chat (its user message has
  a newline); held-out ``eval`` at steps 5 and 11 (tasks ``test/101``, ``test/13``, ``test/9``, ``test/2``;
  at step 11 rewards 1, 1, 0, 1);
  metrics ``lr`` = 0.002 always, ``tools/calls`` = 0 always, ``loss`` falling;
- ``twin`` (env ``sokoban``): the same tasks and steps 1–3 (like for like with ``nat``);
- ``other`` (env ``gymnasium-mt``): task ids ``"1"``…``"12"`` too, steps 1–3 — the same ids
  naming other tasks;
- ``one-step`` (status unknown): a single train step.

Reward windows of ``nat`` (11 steps: ceil(1.1) = 2 steps each, pooled over graded
trajectories): first = mean(1, 0, 1, 0.1) = 0.525, last = mean(1, 0.9, 1, 1) = 0.975.
"""

from __future__ import annotations

from pathlib import Path

import rolloutlab
from rolloutlab.io import RunWriter
from rolloutlab.schema import Run, Trajectory

NAT, TWIN, OTHER, ONE = "nat", "twin", "other", "one-step"
GROUPS = 12
USER = "push the box\nonto the goal"
PROMPT = [{"role": "system", "content": "be brief"}, {"role": "user", "content": USER}]
FIRST_WINDOW, LAST_WINDOW = 0.525, 0.975
FINAL_EVAL = 0.75
EVAL_TASKS = (101, 13, 9, 2)
"""The held-out task numbers (``test/101`` …), listed in natural order: 2, 9, 13, 101."""
CONFIG = {"lr": 0.002, "optim": {"beta": 0.9, "name": "adamw"}, "group_size": 2}


def _step(step: int, *, late: float) -> list[Trajectory]:
    out = []
    for g in range(1, GROUPS + 1):
        for i in range(2):
            r = 1.0 if i == 0 else late
            out.append(Trajectory(traj_id=f"s{step}-g{g}-{i}", step=step, group_id=f"g{g}", sample_idx=i,
                                  task_id=str(g), prompt=PROMPT, response=f"answer {i}", reward=r, success=r >= 1.0,
                                  num_turns=1, response_tokens=3 + i))
    return out


def _run(root: Path, run: Run, steps: range, *, with_eval: bool = False) -> Path:
    w = RunWriter(root / run.run_id, run)
    for s in steps:
        trajs = _step(s, late=(s - 1) / 10)
        if s == 1 and with_eval:
            trajs.append(Trajectory(traj_id="s1-ungraded", step=1, group_id="g1", sample_idx=2, task_id="1",
                                    prompt=PROMPT, response="crashed", reward=None, graded=False, num_turns=1))
        if with_eval and s in (5, 11):
            rewards = [1.0, 1.0, 0.0, 1.0] if s == 11 else [0.0, 1.0, 0.0, 0.0]
            trajs += [Trajectory(traj_id=f"e{s}-{k}", step=s, split="eval", group_id=f"e{k}", sample_idx=0,
                                 task_id=f"test/{k}", prompt="q", response="a", reward=r, success=r >= 1.0, num_turns=1)
                      for k, r in zip(EVAL_TASKS, rewards, strict=True)]
        w.write_step(s, trajs)
        if with_eval:
            w.log_metrics(s, {"lr": 0.002, "tools/calls": 0.0, "loss": 1.0 / s})
    w.write_run()
    return root / run.run_id


def make_layout_store(root: Path) -> Path:
    store = root / "store"
    runs = [
        _run(root, Run(run_id=NAT, name=NAT, env="sokoban", model="m-1", algorithm="grpo", config=CONFIG,
                       status="finished"), range(1, 12), with_eval=True),  # type: ignore[arg-type]
        _run(root, Run(run_id=TWIN, name=TWIN, env="sokoban", config={**CONFIG, "lr": 0.001},
                       status="finished"), range(1, 4)),  # type: ignore[arg-type]
        _run(root, Run(run_id=OTHER, name=OTHER, env="gymnasium-mt", status="finished"), range(1, 4)),  # type: ignore[arg-type]
        _run(root, Run(run_id=ONE, name=ONE, status="unknown"), range(1, 2)),  # type: ignore[arg-type]
    ]
    for r in runs:
        rolloutlab.ingest([r], store)
    return store
