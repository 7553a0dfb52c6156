"""Process rewards from a labelled run (``algorithm.process_rewards=DIR``).

``rolloutlab label`` writes a run directory whose turns carry a step label
(``extras.label.value``).  The trainer reads it as a table keyed by the task and the
replies so far, ``(task_id, (reply_0, ..., reply_t))`` → label value (the mean when the same
key was labelled more than once), and a fresh rollout's turn that reaches a labelled state
with the same replies takes that value as its reward in the per-turn estimators.  In a
deterministic environment the same task and replies mean the same state, so the label
belongs to it.  A turn the table does not hold keeps the environment's reward.

Departure from Act-PRM / Math-Shepherd training: they score new rollouts with a model (the
PRM, or the policy's own action probability); this table only holds the states the labelled
run visited, a lookup rather than a learned reward model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from rolloutlab.errors import RolloutlabError
from rolloutlab.io import read_trajectories

__all__ = ["ProcessLabels", "load_process_labels", "process_key"]

ProcessLabels = Mapping[tuple[str, tuple[str, ...]], float]
"""``(task_id, replies up to and including the turn)`` → the turn's label value."""


def process_key(task_id: str | None, replies: Sequence[str | None]) -> tuple[str, tuple[str, ...]]:
    return (task_id or "", tuple(r or "" for r in replies))


def load_process_labels(path: str | Path) -> ProcessLabels:
    """The step labels of the labelled run directory ``path`` (see the module docstring)."""
    p = Path(path)
    files = sorted((p / "rollouts").glob("step_*.jsonl")) if (p / "rollouts").is_dir() else []
    if not files:
        raise RolloutlabError(f"algorithm.process_rewards={path}: no rollouts/step_*.jsonl there; give a run "
                              "directory written by `rolloutlab label --out DIR`")
    sums: dict[tuple[str, tuple[str, ...]], list[float]] = {}
    for f in files:
        for _, t in read_trajectories(f):
            replies = [u.action for u in t.turns]
            for k, u in enumerate(t.turns):
                label = (u.extras or {}).get("label")
                value = label.get("value") if isinstance(label, dict) else None
                if isinstance(value, int | float) and not isinstance(value, bool):
                    sums.setdefault(process_key(t.task_id, replies[: k + 1]), []).append(float(value))
    if not sums:
        raise RolloutlabError(f"algorithm.process_rewards={path}: the run holds no labelled turns; label it first "
                              "with `rolloutlab label RUN --out DIR`")
    return {k: sum(v) / len(v) for k, v in sums.items()}
