"""What the model was trained on, in the run format: each turn's tokens, loss mask, sampler and
trainer log-probs, entropies and advantages (``Turn.token_data``, issue 22 §1)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from rolloutlab.agent import TokenSample, turn_tokens
from rolloutlab.envs import Task
from rolloutlab.io import RunWriter, read_trajectories
from rolloutlab.schema import Run, Trajectory, Turn, TurnTokens
from rolloutlab.train._data import Group, compute_advantages, record_token_data

from ._helpers import TINY, tiny_config


class _Pieces:
    """A tokenizer stand-in: id ``i`` decodes to ``"w{i}"``, the specials 0 and 1 to nothing."""

    eos_token_id = 1

    def decode(self, ids: list[int]) -> str:
        return "".join("" if i < 2 else f"w{i}" for i in ids)

    def render(self, messages: object, *, add_generation_prompt: bool) -> list[int]:
        raise NotImplementedError


def _two_turns() -> list[TokenSample]:
    # turn 0: sampled 5, 6, then template/observation 1, 7 (mask 0); turn 1: sampled 8, 1
    return [TokenSample(prompt_ids=[0, 3], response_ids=[5, 6, 1, 7, 8, 1], loss_mask=[1, 1, 0, 0, 1, 1],
                        sampler_logprobs=[-0.123456, -1.0, 0.0, 0.0, -2.5, -0.00001],
                        turn_index=[0, 0, 0, 0, 1, 1])]


def test_the_loop_splits_a_sample_into_its_turns() -> None:
    out = turn_tokens(_two_turns(), _Pieces())  # type: ignore[arg-type]
    assert out[0] == TurnTokens(ids=[5, 6, 1, 7], text=["w5", "w6", "", "w7"], loss_mask=[1, 1, 0, 0],
                                logprobs=[-0.1235, -1.0, 0.0, 0.0])
    assert out[1] == TurnTokens(ids=[8, 1], text=["w8", ""], loss_mask=[1, 1], logprobs=[-2.5, 0.0])
    assert "-0.0" not in orjson.dumps(out[1].model_dump()).decode()  # a rounded -1e-5 is written 0.0


def test_a_sample_break_leaves_each_turn_its_own_tokens() -> None:
    # a template rewrite after turn 0 opens a new sample at turn 1 (its prompt holds the observation)
    samples = [TokenSample([0], [5, 1], [1, 1], [-1.0, -0.5], [0, 0]),
               TokenSample([0, 5, 1, 7], [8, 1], [1, 1], [-2.0, -0.25], [1, 1], first_turn=1)]
    out = turn_tokens(samples, _Pieces())  # type: ignore[arg-type]
    assert out[0].ids == [5, 1] and out[1].ids == [8, 1] and out[1].logprobs == [-2.0, -0.25]


def test_the_trainer_adds_advantages_and_its_log_probs_to_the_turns() -> None:
    samples = _two_turns()
    data = turn_tokens(samples, _Pieces())  # type: ignore[arg-type]
    from rolloutlab.agent import Episode

    eps = []
    for i, reward in enumerate((1.0, 0.0)):
        turns = [Turn(turn_idx=t, token_data=data[t].model_copy(deep=True)) for t in (0, 1)]
        eps.append(Episode(Trajectory(traj_id=f"e{i}", step=1, group_id="g", reward=reward, num_turns=2, turns=turns),
                           [TokenSample(**{k: list(v) if isinstance(v, list) else v for k, v in vars(samples[0]).items()})]))
    group = Group(task=Task(id="t", split="train"), episodes=eps)
    trained, _ = compute_advantages(tiny_config(), [group])
    # what the update keeps: the trainer's log-prob and entropy of each response token
    for s in trained:
        s.trainer_logprobs = [x - 0.5 if m else 0.0 for x, m in zip(s.sampler_logprobs, s.loss_mask, strict=True)]
        s.entropies = [2.0 if m else 0.0 for m in s.loss_mask]
    record_token_data([group], trained)
    # GRPO over rewards 1, 0: mean 0.5, unbiased std 0.7071: +-0.7071 on every sampled token
    t0 = eps[0].trajectory.turns[0].token_data
    assert t0 is not None and t0.advantages == [0.7071, 0.7071, 0.0, 0.0]
    assert t0.trainer_logprobs == [-0.6235, -1.5, 0.0, 0.0] and t0.entropies == [2.0, 2.0, 0.0, 0.0]
    t1 = eps[1].trajectory.turns[1].token_data
    assert t1 is not None and t1.advantages == [-0.7071, -0.7071] and t1.trainer_logprobs == [-3.0, -0.5]


def test_token_arrays_must_be_aligned_and_finite() -> None:
    with pytest.raises(ValueError, match=r"len\(loss_mask\) = 1 but len\(ids\) = 2"):
        TurnTokens(ids=[1, 2], loss_mask=[1])
    with pytest.raises(ValueError, match=r"loss_mask\[1\] must be 0 or 1, got 2"):
        TurnTokens(ids=[1, 2], loss_mask=[1, 2])
    with pytest.raises(ValueError, match=r"advantages\[0\] must be finite"):
        TurnTokens(text=["a"], advantages=[float("nan")])
    with pytest.raises(ValueError, match="needs the token ids or their text pieces"):
        TurnTokens(logprobs=[-1.0])
    with pytest.raises(ValueError, match="finish_reason"):
        Turn(turn_idx=0, finish_reason="eos")  # type: ignore[arg-type]


def test_the_fields_round_trip_through_the_run_directory(tmp_path: Path) -> None:
    data = TurnTokens(ids=[3, 4], text=["<b>", ""], loss_mask=[1, 0], logprobs=[-0.25, 0.0],
                      trainer_logprobs=[-0.5, 0.0], advantages=[1.5, 0.0], entropies=[0.75, 0.0])
    t = Trajectory(traj_id="a", step=1, reward=1.0, turns=[Turn(turn_idx=0, finish_reason="length", token_data=data)])
    with RunWriter(tmp_path / "r", Run(run_id="r", name="r")) as w:
        path = w.write_step(1, [t])
    ((_, back),) = list(read_trajectories(path))
    assert back == t and back.turns[0].token_data == data


def test_a_training_run_records_what_it_trained_on(tmp_path: Path) -> None:
    from rolloutlab.cli import main

    run = tmp_path / "r"
    assert main(["train", *TINY, "rollout.max_tokens_per_turn=3", "rollout.tasks_per_step=2", "rollout.n=2",
                 "trainer.save_every=0", "trainer.total_steps=1", "--out", str(run)]) == 0
    lines = (run / "rollouts" / "step_000001.jsonl").read_bytes().splitlines()
    seen = 0
    for line in lines:
        t = Trajectory.model_validate(orjson.loads(line))
        adv = t.extras["advantage"]
        for u in t.turns:
            d = u.token_data
            assert d is not None and d.loss_mask is not None and d.logprobs is not None
            assert d.trainer_logprobs is not None and d.entropies is not None and d.advantages is not None
            assert u.finish_reason in ("stop", "length") and sum(d.loss_mask) == u.tokens
            for m, lp, tlp, a, e in zip(d.loss_mask, d.logprobs, d.trainer_logprobs, d.advantages, d.entropies,
                                        strict=True):
                if m:  # the trainer scores the sampled token the sampler scored: same weights, same position
                    assert tlp == pytest.approx(lp, abs=2e-3) and a == pytest.approx(adv, abs=1e-4) and e > 0
                    seen += 1
                else:
                    assert lp == tlp == a == e == 0.0
    assert seen > 0
