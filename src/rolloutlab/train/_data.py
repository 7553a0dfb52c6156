"""From tasks to training samples: the task sampler, episode groups, rewards and advantages.

Advantages come from the estimator registry :data:`rolloutlab.algos.ESTIMATORS` — the same
entries the analysis replays — through :func:`rolloutlab.algos.estimate_advantages`, and are
turned into one value per response token:

- trajectory-level estimators (``grpo``, ``dr_grpo``, ``rloo``, ``reinforce_pp_baseline``): one
  value per episode over its group (the ``n`` episodes of one task), on every sampled token;
  REINFORCE++-baseline whitens over the step's sampled (loss-masked) response tokens, as verl;
- turn-level ones (``gigpo``, ``per_turn_norm``, ``center_mean_std``, ``center_mean``,
  ``std_sum``): one value per turn; a token gets its turn's value.

The values used are recorded on each trajectory (``extras.advantage`` or
``extras.turn_advantages``), so a replay of the run can be checked against them.

A turn for which a graded episode's environment gave no reward counts as reward 0 in the
per-turn estimators (:func:`rolloutlab.algos.graded_turn_rewards`; the episode reward is the
sum of the given step rewards, so the two agree).  Ungraded episodes never reach this
module: their groups were retried or dropped.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rolloutlab import algos
from rolloutlab.agent import TOKEN_DIGITS, Episode, turn_positions
from rolloutlab.envs import Task
from rolloutlab.outcomes import is_zero_variance
from rolloutlab.train._config import TrainConfig
from rolloutlab.train._process_labels import ProcessLabels, process_key

__all__ = ["Group", "TaskSampler", "TrainSample", "compute_advantages", "record_token_data", "zero_variance"]


class TaskSampler:
    """Tasks of a split in epochs: each epoch a fresh permutation, a pure function of
    ``(seed, epoch)``; the position ``(epoch, index)`` is all the state there is, so a
    resumed run draws exactly the tasks the uninterrupted one would (also across an epoch
    boundary)."""

    def __init__(self, tasks: Sequence[Task], seed: int) -> None:
        if not tasks:
            raise ValueError("the task split is empty")
        self.tasks = list(tasks)
        self.seed = seed
        self.epoch = 0
        self.index = 0
        self._order = self._perm(0)

    def _perm(self, epoch: int) -> list[int]:
        order = list(range(len(self.tasks)))
        random.Random(f"{self.seed}/{epoch}").shuffle(order)
        return order

    def draw(self, k: int) -> list[Task]:
        out: list[Task] = []
        while len(out) < k:
            if self.index >= len(self._order):
                self.epoch += 1
                self.index = 0
                self._order = self._perm(self.epoch)
            out.append(self.tasks[self._order[self.index]])
            self.index += 1
        return out

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.index = int(state["epoch"]), int(state["index"])
        self._order = self._perm(self.epoch)


@dataclass
class Group:
    """The ``n`` episodes of one task in one step."""

    task: Task
    episodes: list[Episode] = field(repr=False)
    """Left out of the repr: ``asyncio.run`` formats the repr of its finished task's result
    (the step's groups) when it restores the SIGINT handler (``signal.getsignal`` -> a failed
    enum lookup), and every episode's full repr cost 30 ms a step on the tiny task."""
    retries: int = 0

    @property
    def graded(self) -> bool:
        return all(e.trajectory.graded for e in self.episodes)

    @property
    def rewards(self) -> list[float]:
        return [float(e.trajectory.reward) for e in self.episodes if e.trajectory.reward is not None]


def zero_variance(group: Group) -> bool:
    """The group's graded rewards are equal by the one zero-variance rule
    (:func:`rolloutlab.outcomes.is_zero_variance`: two or more graded rollouts within
    ``ZERO_VAR_TOL``).  No GRPO signal; DAPO's dynamic sampling filters these and keeps a
    group of one."""
    return is_zero_variance(group.rewards)


@dataclass
class TrainSample:
    """One token sequence to train on, with a per-token advantage."""

    prompt_ids: list[int]
    response_ids: list[int]
    loss_mask: list[int]
    sampler_logprobs: list[float]
    advantages: list[float]
    group: int
    """Index of the group within the step."""
    episode: int
    """Index of the episode within the step."""
    meta: dict[str, Any] = field(default_factory=dict)
    trainer_logprobs: list[float] | None = None
    """The trainer's log-prob of each response token before the step's update (0.0 on mask 0),
    kept by the update when the run records tokens."""
    entropies: list[float] | None = None
    """The trainer's entropy at each response token on its first pass (0.0 on mask 0)."""


def _turn_rewards(ep: Episode) -> list[float]:
    """The per-turn rewards of the episode's record, a turn without one as 0.0 (see above)."""
    return [float(r) for r in algos.graded_turn_rewards([u.reward for u in ep.trajectory.turns])[0]]


def _record_advantages(episodes: Sequence[Episode], unit: str, per_turn: Sequence[Sequence[float]]) -> None:
    """Write the advantage each episode is trained with into its trajectory's ``extras``
    (``advantage``: one value, or ``turn_advantages``: one per turn; see docs/run-format.md),
    so that the replay of the run can be checked against what the trainer did."""
    for e, turns in zip(episodes, per_turn, strict=True):
        vals = [v if np.isfinite(v) else None for v in turns]
        if unit == "trajectory":
            e.trajectory.extras["advantage"] = vals[0] if vals else None
        else:
            e.trajectory.extras["turn_advantages"] = vals


def _rounded(xs: Sequence[float]) -> list[float]:
    return [round(float(x), TOKEN_DIGITS) + 0.0 for x in xs]  # + 0.0: no "-0.0" in the file


def record_token_data(groups: Sequence[Group], samples: Sequence[TrainSample]) -> None:
    """Add what the trainer knows per token — the advantage each token was trained with, and,
    after the update, the trainer's log-probs and entropies — to the ``token_data`` of each
    turn the agent loop recorded (``LoopConfig.record_tokens``).  ``samples`` are
    :func:`compute_advantages`' output for ``groups``, in its order (episode by episode, each
    episode's token samples in order)."""
    it = iter(samples)
    for e in (e for g in groups for e in g.episodes):
        mine = [next(it) for _ in e.samples]
        turns = e.trajectory.turns
        for t, pos in turn_positions(e.samples).items():
            data = turns[t].token_data if t < len(turns) else None
            if data is None:
                continue
            data.advantages = _rounded([mine[k].advantages[i] for k, i in pos])
            lps = [mine[k].trainer_logprobs for k, _ in pos]
            if all(x is not None for x in lps):
                data.trainer_logprobs = _rounded([mine[k].trainer_logprobs[i] for k, i in pos])  # type: ignore[index]
            ents = [mine[k].entropies for k, _ in pos]
            if all(x is not None for x in ents):
                data.entropies = _rounded([mine[k].entropies[i] for k, i in pos])  # type: ignore[index]


def compute_advantages(
    cfg: TrainConfig, groups: Sequence[Group], *, reward_shift: Sequence[float] | None = None,
    labels: ProcessLabels | None = None,
) -> tuple[list[TrainSample], dict[str, float]]:
    """Advantages of every episode's tokens; ``reward_shift`` (one per episode, in order)
    is added to the episode reward first (the KL-in-reward penalty); ``labels``
    (``algorithm.process_rewards``) replace the per-turn rewards of the turns they hold.
    Returns the samples and a few diagnostics (``adv/mean``, ``adv/abs_mean``,
    ``adv/zero_frac``, ``adv/std``; ``adv/label_frac`` with ``labels``)."""
    a = cfg.algorithm
    est = a.adv_estimator
    eps_list: list[Episode] = [e for g in groups for e in g.episodes]
    gid = np.array([gi for gi, g in enumerate(groups) for _ in g.episodes], dtype=np.int64)
    rewards = np.array([float(e.trajectory.reward) if e.trajectory.reward is not None else np.nan for e in eps_list])
    if reward_shift is not None:
        rewards = rewards + np.asarray(reward_shift, dtype=np.float64)
    spec = algos.estimator_spec(est)
    # verl whitens REINFORCE++-baseline over the loss-masked (sampled) response tokens
    tokens = np.array([sum(sum(s.loss_mask) for s in e.samples) for e in eps_list], dtype=np.float64)
    params = algos.EstimatorParams(norm_std=a.norm_adv_by_std, gamma=a.gamma, omega=a.gigpo_omega,
                                   gigpo_mode=a.gigpo_mode, gigpo_episode_stats=a.gigpo_episode_stats)
    per_turn: list[list[float]]  # advantage of each turn of each episode
    label_frac = 0.0  # share of the turns whose reward is a process label (algorithm.process_rewards)
    if spec.unit == "trajectory":
        adv = algos.estimate_advantages(est, algos.AdvantageBatch(rewards, gid, response_tokens=tokens), params)
        per_turn = [[float(adv[i])] * max(1, len(e.trajectory.turns)) for i, e in enumerate(eps_list)]
    else:
        t_rew: list[float] = []
        t_traj: list[int] = []
        t_idx: list[int] = []
        t_anchor: list[str | None] = []
        n_labelled = 0
        for i, e in enumerate(eps_list):
            tr = _turn_rewards(e)
            recs = e.trajectory.turns
            if labels is not None:
                replies = [u.action for u in recs]
                for t in range(len(tr)):
                    label = labels.get(process_key(e.trajectory.task_id, replies[: t + 1]))
                    if label is not None:
                        tr[t] = label
                        n_labelled += 1
            if reward_shift is not None and tr:
                tr[-1] += float(reward_shift[i])  # the penalty lands on the last turn
            for t, r in enumerate(tr):
                t_rew.append(r)
                t_traj.append(i)
                t_idx.append(t)
                t_anchor.append(recs[t].anchor_obs if t < len(recs) else None)
        batch = algos.AdvantageBatch(
            rewards, gid, response_tokens=tokens, turn_traj=np.array(t_traj, dtype=np.intp),
            turn_idx=np.array(t_idx, dtype=np.intp), turn_rewards=np.array(t_rew, dtype=np.float64),
            anchors=np.array(t_anchor, dtype=object),
        )
        if labels is not None:
            label_frac = n_labelled / len(t_rew) if t_rew else 0.0
        flat = algos.estimate_advantages(est, batch, params)
        per_turn = [[] for _ in eps_list]
        for k, i in enumerate(t_traj):
            per_turn[i].append(float(flat[k]))
    _record_advantages(eps_list, spec.unit, per_turn)
    samples: list[TrainSample] = []
    all_adv: list[float] = []
    for i, e in enumerate(eps_list):
        turns = per_turn[i]
        for s in e.samples:
            tok_adv: list[float] = []
            for m, t in zip(s.loss_mask, s.turn_index, strict=True):
                v = turns[min(t, len(turns) - 1)] if turns else 0.0
                v = 0.0 if (m == 0 or not np.isfinite(v)) else v
                tok_adv.append(v)
                if m:
                    all_adv.append(v)
            samples.append(
                TrainSample(
                    prompt_ids=list(s.prompt_ids),
                    response_ids=list(s.response_ids),
                    loss_mask=list(s.loss_mask),
                    sampler_logprobs=list(s.sampler_logprobs),
                    advantages=tok_adv,
                    group=int(gid[i]),
                    episode=i,
                )
            )
    arr = np.asarray(all_adv) if all_adv else np.zeros(1)
    diag = {
        "adv/mean": float(arr.mean()),
        "adv/abs_mean": float(np.abs(arr).mean()),
        "adv/zero_frac": float(np.mean(np.abs(arr) <= 1e-9)),
        "adv/std": float(arr.std()),  # the doctor's advantage spread (advantage_collapse)
    }
    if labels is not None and spec.unit != "trajectory":
        diag["adv/label_frac"] = label_frac
    return samples, diag
