"""Interaction-horizon schedule of ScalingInter-RL (progressively longer episodes)."""

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
    AgentGym-RL ``verl/agent_trainer/ppo/ray_trainer.py::StepRoundsScheduler``, whose
    ``step()`` advances the stage after every K-th step, giving the formula above.
    Departure: its ``set_global_steps(s)`` after a checkpoint resume uses stage
    ``s // K`` -- one step early at each boundary (resuming at s = K already gives
    stage 1) -- we deliberately do not reproduce that; the cap depends on ``step``
    alone, so a resumed run follows the same schedule as an uninterrupted one.
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
