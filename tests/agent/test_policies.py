"""Scripted and random policies: named scripts, module:function scripts, random admissible
actions, and random token ids through the token-in/token-out loop."""

from __future__ import annotations

import asyncio

import pytest

from rolloutlab.agent import (
    SCRIPTS,
    GenerateRequest,
    LoopConfig,
    RandomPolicy,
    ScriptedPolicy,
    check_token_sample,
    run_episode,
)
from rolloutlab.envs import Task
from rolloutlab.envs.builtin.guess_number import GuessNumberEnv
from rolloutlab.io import RolloutlabError
from tests.agent._fakes import CharTokenizer, FakeGuessEnv


def test_guess_number_script_reads_the_range() -> None:
    for n in (8, 32, 1000):
        for i in range(5):
            ep = asyncio.run(run_episode(lambda n=n: GuessNumberEnv(n=n, max_turns=12), ScriptedPolicy(SCRIPTS["guess-number"]),
                                         Task(id=f"test/{i}", split="test"), config=LoopConfig(), seed=0, step=0,
                                         traj_id="t"))
            assert ep.trajectory.success, (n, i, [u.action for u in ep.trajectory.turns])


def test_script_by_module_path_and_unknown() -> None:
    p = ScriptedPolicy.named("tests.agent._fakes:bisect_answer", parser="xml")
    g = asyncio.run(p.generate(GenerateRequest(messages=({"role": "user", "content": "go"},), prompt_ids=None,
                                               max_tokens=4)))
    assert g.text == "<action>3</action>"
    with pytest.raises(RolloutlabError, match="unknown script 'nope'; known: echo, guess-number"):
        ScriptedPolicy.named("nope")
    with pytest.raises(RolloutlabError, match="cannot import"):
        ScriptedPolicy.named("no_such_module:fn")


def test_random_policy_picks_admissible_actions() -> None:
    p = RandomPolicy(seed=1)
    req = GenerateRequest(messages=(), prompt_ids=None, max_tokens=4, available_actions=("a", "b", "c"))
    got = {asyncio.run(p.generate(req)).text for _ in range(50)}
    assert got == {"a", "b", "c"}


def test_random_tokens_through_the_token_loop() -> None:
    tok = CharTokenizer()
    policy = RandomPolicy(seed=3, tokenizer=tok, vocab_size=len(tok.vocab))
    for seed in range(5):
        ep = asyncio.run(run_episode(lambda: FakeGuessEnv(target=6), policy, Task(id="train/0", split="train"),
                                     config=LoopConfig(max_turns=4, max_tokens_per_turn=6), seed=seed, step=0,
                                     traj_id="t"))
        t = ep.trajectory
        assert t.termination in ("max_turns", "done") and t.num_turns and ep.samples
        for s in ep.samples:
            check_token_sample(s)
        assert sum(s.loss_mask.count(1) for s in ep.samples) == t.response_tokens
    with pytest.raises(RolloutlabError, match="vocab_size"):
        RandomPolicy(tokenizer=tok)
