"""``algorithm.process_rewards=DIR``: the step labels of a ``rolloutlab label`` output replace
the per-turn rewards of the turns whose task and replies they hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from rolloutlab.agent import Episode, TokenSample
from rolloutlab.envs import Task
from rolloutlab.errors import RolloutlabError
from rolloutlab.io import RunWriter
from rolloutlab.schema import Run, Trajectory, Turn
from rolloutlab.train._config import ConfigError
from rolloutlab.train._data import Group, compute_advantages
from rolloutlab.train._process_labels import load_process_labels, process_key

from ._helpers import tiny_config


def _episode(traj_id: str, task: str, turns: list[tuple[str, float]]) -> Episode:
    traj = Trajectory(traj_id=traj_id, step=1, group_id="g", task_id=task, reward=sum(r for _, r in turns),
                      num_turns=len(turns), turns=[Turn(turn_idx=t, action=a, reward=r) for t, (a, r) in enumerate(turns)])
    n = len(turns)
    return Episode(trajectory=traj, samples=[TokenSample(prompt_ids=[1], response_ids=[5] * n, loss_mask=[1] * n,
                                                         sampler_logprobs=[-1.0] * n, turn_index=list(range(n)))])


def _labelled_run(path: Path) -> Path:
    def turn(k: int, a: str, env_r: float, value: float | None) -> Turn:
        return Turn(turn_idx=k, action=a, reward=value,
                    extras={"env_reward": env_r, "label": {"method": "mc", "value": value, "hard": bool(value)}})

    ts = [
        Trajectory(traj_id="x", step=1, task_id="train/1", reward=1.0,
                   turns=[turn(0, "3", 0.0, 0.5), turn(1, "5", 1.0, 1.0)]),
        Trajectory(traj_id="y", step=1, task_id="train/1", reward=0.0,
                   turns=[turn(0, "3", 0.0, 0.25), turn(1, "6", 0.0, None)]),
    ]
    with RunWriter(path, Run(run_id="l", name="l")) as w:
        w.write_step(1, ts)
    return path


def test_labels_replace_the_turn_rewards_they_hold(tmp_path: Path) -> None:
    labels = load_process_labels(_labelled_run(tmp_path / "lab"))
    # the same state labelled twice: the mean; an unlabelled turn (value null) is not in the table
    assert labels == {process_key("train/1", ["3"]): 0.375, process_key("train/1", ["3", "5"]): 1.0}
    eps = [_episode("a", "train/1", [("3", 0.0), ("5", 1.0)]), _episode("b", "train/1", [("3", 0.0), ("7", 0.0)]),
           _episode("c", "train/2", [("3", 0.0)])]
    cfg = tiny_config("algorithm.adv_estimator=center_mean", f"algorithm.process_rewards={tmp_path / 'lab'}")
    samples, diag = compute_advantages(cfg, [Group(task=Task(id="t", split="train"), episodes=eps)], labels=labels)
    assert diag["adv/label_frac"] == pytest.approx(3 / 5)
    # turn rewards: a = (0.375, 1.0) from the labels; b = (0.375 labelled, 0.0 the env's: ["3","7"] unlabelled);
    # c = (0.0: another task).  center_mean: r - mean(0.375, 1, 0.375, 0, 0) = r - 0.35
    got = [s.advantages for s in samples]
    assert got == [[pytest.approx(0.025), pytest.approx(0.65)], [pytest.approx(0.025), pytest.approx(-0.35)],
                   [pytest.approx(-0.35)]]
    plain, _ = compute_advantages(cfg, [Group(task=Task(id="t", split="train"), episodes=eps)])
    assert [s.advantages for s in plain] != got  # without labels: the environment's rewards


def test_bad_process_rewards_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs a per-turn estimator"):
        tiny_config("algorithm.adv_estimator=grpo", "algorithm.process_rewards=somewhere")
    with pytest.raises(RolloutlabError, match="no rollouts/step_"):
        load_process_labels(tmp_path)
    with RunWriter(tmp_path / "plain", Run(run_id="p", name="p")) as w:
        w.write_step(1, [Trajectory(traj_id="a", step=1, reward=0.0, turns=[Turn(turn_idx=0, action="3", reward=0.0)])])
    with pytest.raises(RolloutlabError, match="no labelled turns"):
        load_process_labels(tmp_path / "plain")
