"""guess-number-v0: rules, reward, anchors, task ids, bad input."""

from __future__ import annotations

import asyncio

import pytest

from rolloutlab.envs import StepResult, get_env_spec, make_env
from rolloutlab.envs.builtin.guess_number import SPLIT_SIZES, guess_number_tasks, target_of
from rolloutlab.io import RolloutlabError


def _play(actions: list[str], task: str = "test/3", **kw: int) -> tuple[str, list[StepResult]]:
    async def go() -> tuple[str, list[StepResult]]:
        env = make_env("guess-number-v0", **kw)
        try:
            obs = await env.reset(task=task)
            out = []
            for a in actions:
                r = await env.step(a)
                out.append(r)
                if r.terminated or r.truncated:
                    break
            return obs.messages[0]["content"], out
        finally:
            await env.close()

    return asyncio.run(go())


def _binary_search(target: int, n: int = 8) -> list[int]:
    lo, hi, guesses = 0, n - 1, []
    while True:
        g = (lo + hi) // 2
        guesses.append(g)
        if g == target:
            return guesses
        lo, hi = (g + 1, hi) if g < target else (lo, g - 1)


def test_binary_search_solves_every_target() -> None:
    seen = set()
    for i in range(64):
        tid = f"test/{i}"
        t = target_of(tid, 8)
        seen.add(t)
        opening, steps = _play([str(g) for g in _binary_search(t)], task=tid)
        assert opening == "guess a number from 0 to 7"
        last = steps[-1]
        assert last.terminated and not last.truncated and last.stop_reason == "solved"
        assert last.info.success is True and last.reward == 1.0 and last.messages[0]["content"] == "correct"
        assert sum(s.reward or 0 for s in steps) == 1.0 and len(steps) <= 4
        assert all(s.reward == 0.0 and not s.terminated and s.info.success is None for s in steps[:-1])
    assert seen == set(range(8))  # the ids cover every target


def test_feedback_anchor_and_failure() -> None:
    tid = next(f"train/{i}" for i in range(100) if target_of(f"train/{i}", 8) == 5)
    _, steps = _play(["0", "7", "x", "6"], task=tid)
    assert [s.messages[0]["content"] for s in steps] == ["higher", "lower", "invalid", "lower"]
    assert [s.anchor for s in steps] == ["1-7 @1", "1-6 @2", "1-6 @3", "1-5 @4"]
    assert [s.info.action_valid for s in steps] == [True, True, False, True]
    last = steps[-1]
    assert last.terminated and last.stop_reason == "out_of_guesses" and last.info.success is False
    assert last.reward == 0.0 and last.info.score == 0.0 and last.info.available_actions is None


@pytest.mark.parametrize("bad", ["", "8", "-1", "3 4", "three", "9" * 5000, "\x00"])
def test_invalid_actions_use_a_guess_and_never_raise(bad: str) -> None:
    _, (s,) = _play([bad])
    assert s.info.action_valid is False and s.messages[0]["content"] == "invalid" and not s.terminated


def test_parameters_n_and_max_turns() -> None:
    opening, steps = _play(["0"] * 10, n=100, max_turns=6)
    assert opening == "guess a number from 0 to 99" and len(steps) <= 6
    env = make_env("guess-number-v0", n=100, max_turns=6)
    assert env.spec.max_turns == 6 and get_env_spec("guess-number-v0").max_turns == 4
    with pytest.raises(RolloutlabError, match="n >= 2"):
        make_env("guess-number-v0", n=1)


def test_tasks_deterministic_and_bad_ids() -> None:
    a, b = guess_number_tasks("train", 1), guess_number_tasks("train", 1)
    assert a == b and a != guess_number_tasks("train", 2) and len(a) == SPLIT_SIZES["train"]
    assert {t.id for t in a}.isdisjoint({t.id for t in guess_number_tasks("test", 1)})
    with pytest.raises(RolloutlabError, match="no split 'dev'"):
        guess_number_tasks("dev", 0)
    for bad in ["test/999", "nope", "train/x"]:
        with pytest.raises(RolloutlabError, match="unknown task"):
            _play([], task=bad)


def test_reset_with_seed_is_deterministic() -> None:
    async def first(seed: int) -> list[str]:
        env = make_env("guess-number-v0")
        await env.reset(seed=seed)
        out = []
        for g in range(4):
            r = await env.step(str(g))
            out.append(r.messages[0]["content"])
            if r.terminated:
                break
        await env.close()
        return out

    assert asyncio.run(first(7)) == asyncio.run(first(7))
    assert len({tuple(asyncio.run(first(s))) for s in range(20)}) > 1


def test_step_before_reset_is_a_clear_error() -> None:
    env = make_env("guess-number-v0")
    with pytest.raises(RolloutlabError, match="before reset"):
        asyncio.run(env.step("3"))


def test_binary_search_script_solves_every_task_within_four() -> None:
    from rolloutlab.envs.builtin.guess_number import binary_search

    async def go(task: str) -> tuple[int, bool]:
        env = make_env("guess-number-v0")
        obs = await env.reset(task=task)
        msgs = list(obs.messages)
        for turn in range(1, 5):
            action = binary_search(msgs)
            r = await env.step(action)
            msgs += [{"role": "assistant", "content": action}, *r.messages]
            if r.terminated:
                await env.close()
                return turn, bool(r.info.success)
        raise AssertionError("not ended")

    results = [asyncio.run(go(f"test/{i}")) for i in range(40)]
    assert all(ok for _, ok in results) and max(t for t, _ in results) <= 4
