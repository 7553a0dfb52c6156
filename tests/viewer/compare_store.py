"""A hand-built store for the scalar panel and compare page tests (values known by hand).

- ``arm-a`` (running): 4 steps × 2 groups × 4 samples; metrics ``loss/policy`` (null at
  step 3), ``loss/value``, ``timing/step_s`` (not at step 3), ``lr`` (no prefix) and one
  whose name is an XSS payload;
- a run whose *name* is an XSS payload (finished): the same steps; ``loss/policy`` and
  verl's ``perf/total_num_tokens``, no step time;
- ``metrics-only`` (a CSV of per-step scalars, no trajectories).
"""

from __future__ import annotations

from pathlib import Path

import rolloutlab
from rolloutlab.io import RunWriter
from rolloutlab.schema import Run, Trajectory

A = "arm-a"
HOSTILE_RUN_NAME = '<img src=x onerror="window.__xss=1"> arm b'
HOSTILE_METRIC = '<script>window.__xss=1</script>'
METRICS_ONLY = "metrics-only"
A_METRICS: dict[int, dict[str, float | None]] = {
    1: {"loss/policy": 1.0, "loss/value": 4.0, "timing/step_s": 2.0, "lr": 0.1, HOSTILE_METRIC: 1.0},
    2: {"loss/policy": 0.5, "loss/value": 3.0, "timing/step_s": 3.0, "lr": 0.1, HOSTILE_METRIC: 2.0},
    3: {"loss/policy": None, "loss/value": 2.0, "lr": 0.1, HOSTILE_METRIC: 3.0},
    4: {"loss/policy": 0.25, "loss/value": 1.0, "timing/step_s": 5.0, "lr": 0.1, HOSTILE_METRIC: 4.0},
}
B_METRICS: dict[int, dict[str, float | None]] = {
    s: {"loss/policy": v, "perf/total_num_tokens": 100.0} for s, v in zip((1, 2, 3, 4), (2.0, 1.0, 0.5, 0.25), strict=True)
}
STEPS = (1, 2, 3, 4)


def trajectories(step: int, *, better: bool) -> list[Trajectory]:
    """2 groups × 4 samples; prompt 10 + response 5·(i+1) tokens each."""
    out = []
    for g in range(2):
        for i in range(4):
            ok = (i + g + step + (1 if better else 0)) % 3 == 0
            out.append(Trajectory(
                traj_id=f"s{step}-g{g}-{i}", step=step, group_id=f"{step}:g{g}", sample_idx=i, task_id=f"task-{g}",
                prompt=f"solve task {g}", response=f"answer {i} of group {g}", reward=float(ok), success=ok,
                num_turns=1, prompt_tokens=10, response_tokens=5 * (i + 1)))
    return out


def tokens_per_step() -> float:
    return sum(10 + 5 * (i + 1) for _ in range(2) for i in range(4))


def _run(dest: Path, run: Run, metrics: dict[int, dict[str, float | None]], *, better: bool) -> Path:
    w = RunWriter(dest, run)
    for s in STEPS:
        w.write_step(s, trajectories(s, better=better))
        w.log_metrics(s, metrics[s])
    w.write_run()
    return dest


def make_compare_store(root: Path, *, status_a: str = "running", status_b: str = "finished") -> tuple[Path, str]:
    """(store, the run id of the hostile-named run)."""
    store = root / "store"
    a = _run(root / "runs" / A, Run(run_id=A, name=A, status=status_a), A_METRICS, better=False)  # type: ignore[arg-type]
    b = _run(root / "runs" / "b", Run(run_id="arm-b", name=HOSTILE_RUN_NAME, status=status_b),  # type: ignore[arg-type]
             B_METRICS, better=True)
    rolloutlab.ingest([a], store)
    rolloutlab.ingest([b], store)
    csv = root / "metrics" / f"{METRICS_ONLY}.csv"
    csv.parent.mkdir(parents=True)
    csv.write_text("step,reward/mean,success/rate\n" + "".join(f"{s},{0.1 * s:.2f},{0.05 * s:.2f}\n" for s in range(1, 11)))
    rolloutlab.ingest([csv], store, name=METRICS_ONLY)
    b_id = next(r for r in rolloutlab.open_store(store).run_ids() if r not in (A, METRICS_ONLY))
    return store, b_id
