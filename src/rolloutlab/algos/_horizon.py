"""Interaction-horizon schedule of ScalingInter-RL (progressively longer episodes).

:func:`max_rounds_at` gives the turn cap of a training step: ``rounds[k]`` during stage
``k`` of ``steps_per_stage`` steps, as AgentGym-RL's ``StepRoundsScheduler`` does in an
uninterrupted run.  It is a pure function of the step.  AgentGym-RL's own scheduler is
not after a checkpoint resume: its counter then runs one step behind the trainer, so
each later stage boundary fires one step late (K = 100, rounds [10, 20, 30], resume at
50: step 101 gets 10 instead of 20), and a resume exactly on a boundary advances twice
(resume at 100: steps 102-200 get 30 instead of 20).  Compare ``max_rounds`` logged by a
resumed AgentGym-RL run with this schedule before attributing a change to the horizon.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["max_rounds_at"]


def max_rounds_at(
    step: int | np.integer[Any],
    rounds: int | np.integer[Any] | Sequence[int],
    steps_per_stage: int | np.integer[Any],
) -> int:
    """Turn cap in force during training step ``step`` (counted from 1).

    ``cap = rounds[min((step - 1) // K, len(rounds) - 1)]`` with ``K = steps_per_stage``;
    an int ``rounds`` is a fixed cap (AgentGym-RL ``FixedRoundsScheduler``).  With
    ``rounds=[10, 20, 30]``, ``K=100``: steps 1..100 -> 10, 101..200 -> 20, then 30.

    Reference: Xi et al. 2025, "AgentGym-RL: Training LLM Agents for Long-Horizon
    Decision Making through Multi-Turn Reinforcement Learning" (ScalingInter-RL);
    AgentGym-RL ``verl/agent_trainer/ppo/ray_trainer.py::StepRoundsScheduler``.  In an
    uninterrupted run its counter starts at 1 and ``step()``, called after each
    training step, moves to the next stage after every K-th step, which is the
    formula above.

    Departure (a resume bug we do not reproduce): on resuming from the checkpoint of
    step ``s`` AgentGym-RL calls ``set_global_steps(s)``, which sets the stage to
    ``s // K`` -- right for step ``s + 1`` -- and the scheduler's counter to ``s``,
    while the trainer goes on at ``s + 1``.  From then on the counter runs one step
    behind the trainer, so every later stage boundary fires one step late: with
    ``K = 100``, ``rounds = [10, 20, 30]`` and a resume at 50, step 101 gets 10 instead
    of 20.  Resuming exactly on a boundary advances twice: after a resume at 100, step
    101 gets 20 (from ``set_global_steps``) and the late boundary moves the stage again
    after step 101, so steps 102-200 get 30 instead of 20.  Here the cap is a pure
    function of ``step``, so a resumed run follows the same schedule as an
    uninterrupted one.
    """
    if step < 1:
        raise ValueError(f"step is counted from 1, got {step}")
    if steps_per_stage < 1:
        raise ValueError(f"steps_per_stage must be >= 1, got {steps_per_stage}")
    if isinstance(rounds, (int, np.integer)):
        return int(rounds)
    caps = list(rounds)
    if not caps:
        raise ValueError("rounds must be an int or a non-empty sequence")
    stage = min((int(step) - 1) // int(steps_per_stage), len(caps) - 1)
    return int(caps[stage])
