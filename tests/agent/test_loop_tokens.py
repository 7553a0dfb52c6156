"""Token-in/token-out: the running ids the policy continues are exactly the prompt, the
sampled ids and the observation deltas; template rewrites and retokenisation drift start a
new sample; the sampled ids are never re-encoded."""

from __future__ import annotations

import asyncio
from typing import Any

from rolloutlab.agent import Episode, LoopConfig, TokenSample, check_token_sample, run_episode
from rolloutlab.envs import Task
from tests.agent._fakes import IM_END, NL, CharTokenizer, FakeGuessEnv, TokenPolicy, bisect_answer

TASK = Task(id="train/3", split="train")


def _run(policy: Any, *, target: int = 6, max_turns: int = 6) -> Episode:
    return asyncio.run(run_episode(lambda: FakeGuessEnv(target=target), policy, TASK,
                                   config=LoopConfig(max_turns=max_turns), seed=1, step=0, traj_id="t"))


def _check_invariants(ep: Episode, policy: TokenPolicy) -> None:
    """Every sample's invariants, and every sampled reply present verbatim with mask 1."""
    for s in ep.samples:
        check_token_sample(s)
        assert len(s.response_ids) == len(s.loss_mask) == len(s.sampler_logprobs) == len(s.turn_index)
        for m, lp in zip(s.loss_mask, s.sampler_logprobs, strict=True):
            assert (m == 1 and lp == -0.25) or (m == 0 and lp == 0.0)
    sampled_by_turn: dict[int, list[int]] = {}
    for s in ep.samples:
        for tok, m, t in zip(s.response_ids, s.loss_mask, s.turn_index, strict=True):
            if m == 1:
                sampled_by_turn.setdefault(t, []).append(tok)
    assert [sampled_by_turn[t] for t in sorted(sampled_by_turn)] == policy.sampled
    assert sum(s.loss_mask.count(1) for s in ep.samples) == ep.trajectory.response_tokens


def _full(s: TokenSample) -> list[int]:
    return s.prompt_ids + s.response_ids


def test_stable_template_is_one_sample_and_each_prompt_extends_the_last() -> None:
    tok = CharTokenizer()
    policy = TokenPolicy(tok)
    ep = _run(policy, target=6)
    traj = ep.trajectory
    assert traj.success is True and traj.reward == 1.0 and traj.termination == "done"
    assert traj.num_turns == len(policy.prompts) == 3  # bisection 3 -> 5 -> 6
    assert len(ep.samples) == 1
    s = ep.samples[0]
    _check_invariants(ep, policy)
    # each prompt the policy continued = the previous prompt + its sampled ids + mask-0 delta
    for prev, sampled, nxt in zip(policy.prompts, policy.sampled, policy.prompts[1:], strict=False):
        assert nxt[: len(prev) + len(sampled)] == (*prev, *sampled)
    # and the whole running sequence is prompt + response, ending with the last sampled ids
    assert tuple(_full(s)[: len(policy.prompts[-1])]) == policy.prompts[-1]
    assert _full(s)[len(policy.prompts[-1]):] == policy.sampled[-1]
    # the running ids equal the template's rendering of the history (token for token)
    msgs = [*traj.prompt, {"role": "assistant", "content": "3"}, {"role": "user", "content": "higher"},
            {"role": "assistant", "content": "5"}, {"role": "user", "content": "higher"}]  # type: ignore[misc]
    assert list(policy.prompts[-1]) == tok.render(msgs, add_generation_prompt=True)
    # the newline closing each reply after <|im_end|> was not sampled: mask 0
    i = s.response_ids.index(IM_END)
    assert s.loss_mask[i] == 1 and s.response_ids[i + 1] == NL and s.loss_mask[i + 1] == 0
    assert s.turn_index[0] == 0 and s.turn_index[-1] == 2 and s.first_turn == 0
    assert traj.prompt_tokens == len(s.prompt_ids)
    assert traj.extras["token_breaks"] == []


def test_think_stripping_template_starts_a_new_sample_each_turn() -> None:
    tok = CharTokenizer(strip_think=True)
    policy = TokenPolicy(tok, think=True)
    ep = _run(policy, target=6)
    assert ep.trajectory.num_turns == 3
    assert len(ep.samples) == 3
    assert [s.first_turn for s in ep.samples] == [0, 1, 2]
    assert [b["reason"] for b in ep.trajectory.extras["token_breaks"]] == ["template_rewrite"] * 2
    _check_invariants(ep, policy)
    for k, s in enumerate(ep.samples):
        # each sample's prompt is exactly what the model was given at that turn
        assert tuple(s.prompt_ids) == policy.prompts[k]
        assert s.response_ids == policy.sampled[k] and set(s.turn_index) == {k}
    # the re-rendered prompt dropped the earlier <think> the model did see
    assert tok.encode_chars("<think>t1</think>") not in [policy.prompts[1][i:i + 17] for i in range(len(policy.prompts[1]))]


def test_retokenisation_drift_keeps_the_sampled_ids() -> None:
    tok = CharTokenizer(merge=True)
    policy = TokenPolicy(tok, answer=lambda m: "<think>abc</think>" + bisect_answer(m))
    ep = _run(policy, target=6)
    assert len(ep.samples) == 3
    assert {b["reason"] for b in ep.trajectory.extras["token_breaks"]} == {"retokenization_drift"}
    _check_invariants(ep, policy)
    merged = tok.index["ab"]
    for k, s in enumerate(ep.samples):
        assert s.response_ids == policy.sampled[k]  # sampled a, b — never the merged re-encoding
        assert merged not in s.response_ids
    # the next prompt is the re-rendered history, which holds the re-encoded reply (mask 0, prompt side)
    assert merged in ep.samples[1].prompt_ids


def test_no_merge_when_reply_has_no_mergeable_text() -> None:
    tok = CharTokenizer(merge=True)
    policy = TokenPolicy(tok)
    ep = _run(policy, target=6)
    assert len(ep.samples) == 1
    _check_invariants(ep, policy)


def test_invalid_action_turn_is_in_the_sample_and_counts() -> None:
    tok = CharTokenizer()
    answers = iter(["", "3", "5", "6"])
    policy = TokenPolicy(tok, answer=lambda m: next(answers))
    ep = asyncio.run(run_episode(lambda: FakeGuessEnv(target=6), policy, TASK,
                                 config=LoopConfig(max_turns=4, invalid_action_penalty=-0.1),
                                 seed=1, step=0, traj_id="t"))
    t = ep.trajectory
    assert t.num_turns == 4 and t.invalid_actions == 1
    assert t.turns[0].action_valid is False and t.turns[0].reward == -0.1
    assert "could not be read" in (t.turns[1].observation or "")
    assert t.reward == 1.0 - 0.1 and t.success is True
    assert len(ep.samples) == 1
    _check_invariants(ep, policy)


def test_horizon_cut_is_max_turns_with_zero_reward() -> None:
    policy = TokenPolicy(CharTokenizer(), answer=lambda m: "0")
    ep = _run(policy, target=6, max_turns=2)
    t = ep.trajectory
    assert t.termination == "max_turns" and t.num_turns == 2
    # the environment reported no success: decided when recorded, from the declared range (outcomes)
    assert t.reward == 0.0 and t.graded and t.success is False
    assert t.extras["success_rule"] == "reward == 1 (rewards lie in [0, 1])"
    # the last turn's observation is not appended: the sample ends with the sampled ids
    assert ep.samples[0].loss_mask[-1] == 1
    assert [u.reward for u in t.turns] == [0.0, 0.0] and [u.anchor_obs for u in t.turns] == ["start", "higher@0"]


def test_truncated_reply_gets_its_closing_tokens_masked() -> None:
    """A reply cut by the token cap has no EOS: the template's <|im_end|> and newline that
    close it were not sampled, so they are mask 0 and the sample stays merged."""
    tok = CharTokenizer()

    class Truncating(TokenPolicy):
        async def generate(self, request: Any) -> Any:
            g = await super().generate(request)
            ids = list(g.token_ids)[:-1]  # drop the EOS: finish_reason "length"
            self.sampled[-1] = ids
            return type(g)(text=tok.decode(ids), token_ids=tuple(ids), logprobs=g.logprobs[:-1], finish_reason="length")

    policy = Truncating(tok)
    ep = _run(policy, target=6)
    assert len(ep.samples) == 1 and [u.finish_reason for u in ep.trajectory.turns] == ["length"] * 3
    _check_invariants(ep, policy)
    s = ep.samples[0]
    first_end = s.response_ids.index(IM_END)
    assert s.loss_mask[first_end] == 0 and s.response_ids[first_end + 1] == NL and s.loss_mask[first_end + 1] == 0
