"""ScalingInter-RL horizon schedule."""

from __future__ import annotations

import numpy as np
import pytest

from rolloutlab.algos import max_rounds_at


@pytest.mark.parametrize(
    ("step", "cap"), [(1, 10), (100, 10), (101, 20), (200, 20), (201, 30), (250, 30), (1000, 30)]
)
def test_stepwise_schedule(step: int, cap: int) -> None:
    assert max_rounds_at(step, [10, 20, 30], 100) == cap


def test_matches_agentgym_step_counter_without_resume() -> None:
    # replay StepRoundsScheduler's uninterrupted step()/get_rounds() sequence
    rounds, k = [2, 4, 7], 3
    stage, caps = 0, []
    for step in range(1, 20):
        caps.append(rounds[stage])
        if stage + 1 < len(rounds) and step % k == 0:
            stage += 1
    assert [max_rounds_at(s, rounds, k) for s in range(1, 20)] == caps


def test_fixed_and_numpy_inputs() -> None:
    assert max_rounds_at(12345, 15, 100) == 15
    assert max_rounds_at(np.int64(101), np.array([10, 20]).tolist(), np.int64(100)) == 20
    assert max_rounds_at(5, (8,), 1) == 8


def test_validation() -> None:
    with pytest.raises(ValueError):
        max_rounds_at(0, [10], 100)
    with pytest.raises(ValueError):
        max_rounds_at(1, [10], 0)
    with pytest.raises(ValueError):
        max_rounds_at(1, [], 10)
