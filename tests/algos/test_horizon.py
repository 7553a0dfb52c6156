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


def _agentgym_caps(rounds: list[int], k: int, last: int, resume_at: int | None = None) -> dict[int, int]:
    """AgentGym-RL's StepRoundsScheduler as its trainer drives it, as a plain replay.

    The scheduler's counter starts at 1; the trainer reads the cap at step t, then calls
    step(), which advances the stage when the counter is a multiple of k and then counts
    up.  A resume from the checkpoint of step s sets the counter to s and the stage to
    s // k (capped), and the trainer continues at s + 1.
    """
    stage, counter, first = 0, 1, 1
    if resume_at is not None:
        stage, counter, first = min(resume_at // k, len(rounds) - 1), resume_at, resume_at + 1
    caps = {}
    for t in range(first, last + 1):
        caps[t] = rounds[stage]
        if stage + 1 < len(rounds) and counter % k == 0:
            stage += 1
        counter += 1
    return caps


def test_agentgym_resume_bug_as_documented_and_not_reproduced() -> None:
    rounds, k = [10, 20, 30], 100
    ours = {t: max_rounds_at(t, rounds, k) for t in range(1, 301)}
    assert _agentgym_caps(rounds, k, 300) == ours  # uninterrupted: the same schedule
    after_50 = _agentgym_caps(rounds, k, 300, resume_at=50)
    assert after_50[101] == 10 and ours[101] == 20  # each later boundary one step late
    assert after_50[201] == 20 and ours[201] == 30
    assert {t: c for t, c in after_50.items() if c != ours[t]} == {101: 10, 201: 20}
    after_100 = _agentgym_caps(rounds, k, 300, resume_at=100)
    assert after_100[101] == 20  # set_global_steps is right for the first step
    assert {after_100[t] for t in range(102, 201)} == {30}  # then it advances again
    assert {ours[t] for t in range(102, 201)} == {20}
    # our cap depends on the step alone, so resuming anywhere changes nothing
    for s in (1, 50, 99, 100, 101, 150, 200):
        assert all(max_rounds_at(t, rounds, k) == ours[t] for t in range(s + 1, 301))
    doc = max_rounds_at.__doc__ or ""
    assert "one step late" in doc and "step 101 gets 10 instead" in doc
    assert "steps 102-200 get 30 instead of 20" in doc and "one step early" not in doc
