"""``summary.json`` of one evaluated checkpoint: an :class:`EvalSummary` from its episodes.

The figures are :class:`rolloutlab.outcomes.StepOutcome`'s, over the checkpoint's episodes —
the definitions the trainer's metrics, ``analyze``, ``show``, the report and the viewer use:

- ``mean_reward``: mean reward of the graded episodes; ungraded episodes (an environment or
  policy failure, a grader that gave nothing) are left out, never counted as 0;
- ``success_rate``: share of the episodes with a known success that succeeded.  Success is
  what the environment reported, or what the agent loop decided from the environment's
  declared reward range when it reported none (:mod:`rolloutlab.outcomes`); for episodes
  recorded without either, the rule is chosen from these episodes' rewards
  (:func:`rolloutlab.outcomes.choose_rule`);
- ``zero_variance_frac``: share of tasks (groups) with two or more graded samples whose rewards are
  equal (within ``outcomes.ZERO_VAR_TOL``);
- ``pass_at_k[k]``: the unbiased pass@k estimator (:func:`rolloutlab.algos.pass_at_k`,
  Chen et al. 2021) per task from its graded samples n and successes c, averaged over the
  tasks with n >= k;
- ``mean_turns``: mean number of turns over the episodes that record it; ``ungraded_rate``:
  share of episodes without a grade; ``terminations``: episodes per ``Trajectory.termination``;
- ``per_category``: the same figures per task category (``extras["task_category"]``);
- ``invalid_action_rate``: invalid actions per turn over the episodes where both are known
  (:func:`invalid_action_rate`, ``StepOutcome.invalid_action_rate``, the analysis's per-step one);
- ``length_cut_rate``: share of the turns whose reply reached the token cap per turn
  (:func:`rolloutlab.outcomes.length_cut_rate`, the trainer's ``response_length/clip_ratio``;
  a turn without a token count, as a text endpoint records it, by its finish reason);
  ``max_tokens_per_turn`` and ``temperature`` are the settings the episodes were sampled with.
  ``run_eval`` says so when either rate passes :data:`LOST_WARN_RATE`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from rolloutlab.algos import pass_at_k
from rolloutlab.outcomes import SuccessStats, choose_rule, length_cut_rate, step_outcome
from rolloutlab.schema import EvalSummary, Trajectory

LOST_WARN_RATE = 0.5
"""``run_eval`` warns when more than this share of a checkpoint's turns were invalid, or cut
at the token cap."""


def successes(trajs: Sequence[Trajectory]) -> list[bool | None]:
    """Per episode: solved, not solved, or unknown (ungraded), by the one success rule."""
    rewards = [t.reward for t in trajs if t.reward is not None]
    graded = [t for t in trajs if t.graded]
    rule = choose_rule(SuccessStats(
        graded=len(graded), graded_with_success=sum(t.success is not None for t in graded),
        reward_min=min(rewards) if rewards else None, reward_max=max(rewards) if rewards else None))
    return [rule.decide(t.reward, t.success, t.graded) for t in trajs]


def invalid_action_rate(trajs: Sequence[Trajectory]) -> float | None:
    """Invalid actions per turn, summed over the episodes that report both (``None``: none
    does, or no turn was taken)."""
    return step_outcome([t.reward for t in trajs], [t.graded for t in trajs], [None] * len(trajs),
                        [None] * len(trajs), [t.num_turns for t in trajs], [t.response_tokens for t in trajs],
                        [t.invalid_actions for t in trajs]).invalid_action_rate


def _length_cut_rate(trajs: Sequence[Trajectory], max_tokens: int) -> float | None:
    """:func:`rolloutlab.outcomes.length_cut_rate` over every turn: its token count, else the
    turn's ``finish_reason``."""
    turns = [tu for t in trajs for tu in t.turns]
    return length_cut_rate([tu.tokens for tu in turns], max_tokens, [tu.finish_reason for tu in turns])


def _figures(trajs: Sequence[Trajectory], solved: Sequence[bool | None]) -> dict[str, float]:
    row = step_outcome([t.reward for t in trajs], [t.graded for t in trajs], list(solved),
                       [t.group_id for t in trajs],
                       [t.num_turns for t in trajs], [t.response_tokens for t in trajs])
    out = {"episodes": float(row.rollouts), "graded": float(row.graded)}
    for name in ("mean_reward", "success_rate", "ungraded_rate", "zero_variance_frac", "mean_turns"):
        if (v := getattr(row, name)) is not None:
            out[name] = v
    return out


def summarize(checkpoint: str, step: int | None, trajs: Sequence[Trajectory], ks: Sequence[int], *,
              env: str | None = None, policy: str | None = None, split: str | None = None,
              samples: int | None = None, max_tokens_per_turn: int | None = None,
              temperature: float | None = None) -> EvalSummary:
    """The summary of one checkpoint's episodes (definitions in the module docstring)."""
    solved = successes(trajs)
    fig = _figures(trajs, solved)
    by_task: dict[str, list[bool]] = defaultdict(list)
    for t, s in zip(trajs, solved, strict=True):
        if s is not None:
            by_task[t.task_id or t.traj_id].append(s)
    passk: dict[str, float] = {}
    for k in ks:
        vals = [pass_at_k(len(v), sum(v), k) for v in by_task.values() if len(v) >= k]
        if vals:
            passk[str(k)] = float(sum(vals) / len(vals))
    cats: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(trajs):
        c = t.extras.get("task_category")
        if c is not None:
            cats[str(c)].append(i)
    per_category = {c: _figures([trajs[i] for i in idx], [solved[i] for i in idx]) for c, idx in sorted(cats.items())}
    n = len(trajs)
    return EvalSummary(
        checkpoint=checkpoint, step=step, episodes=n, graded=int(fig["graded"]),
        mean_reward=fig.get("mean_reward"), success_rate=fig.get("success_rate"), pass_at_k=passk,
        per_category=per_category,
        mean_turns=fig.get("mean_turns"), ungraded_rate=fig.get("ungraded_rate"),
        zero_variance_frac=fig.get("zero_variance_frac"),
        terminations=dict(Counter(t.termination or "unknown" for t in trajs)),
        env=env, policy=policy, split=split, samples=samples,
        invalid_action_rate=invalid_action_rate(trajs),
        length_cut_rate=None if max_tokens_per_turn is None else _length_cut_rate(trajs, max_tokens_per_turn),
        max_tokens_per_turn=max_tokens_per_turn, temperature=temperature,
    )
