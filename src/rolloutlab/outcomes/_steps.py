"""One row per step: :class:`StepOutcome`, the figures every screen shows for a step.

Definitions (over one step's rollouts — every trajectory of the step as recorded, retried and
set-aside attempts included, since each was sampled from the policy of that step):

======================  ===========================================================================
field                   definition (numpy) — SQL rendering in :func:`step_sql`
======================  ===========================================================================
``rollouts``            number of trajectories                                   ``count(*)``
``graded``              trajectories with ``graded`` and a reward
``ungraded_rate``       ``1 - graded / rollouts``
``mean_reward``         mean reward over graded trajectories (ungraded left out, never 0)
``std_reward``          sample std (ddof 1) of those rewards; null under two
``mean_reward_all``     sum of graded rewards / ``rollouts`` (ungraded counted as 0: the figure a
                        framework that scores failures 0 would report)
``success_rate``        successes / trajectories with a known success (the success rule of
                        :mod:`._success`, already applied to the ``success`` column)
``success_rate_all``    successes / ``rollouts`` (unknown counted as failure)
``groups``              distinct non-null group ids
``zero_variance_frac``  zero-variance groups / groups with two or more graded rollouts
                        (:mod:`._groups`); null when there is no such group
``mean_turns``          mean ``num_turns`` over trajectories that record it
``mean_response_tokens``  mean ``response_tokens`` over trajectories that record it
``invalid_action_rate``  invalid actions per turn: ``sum(invalid_actions) / sum(num_turns)`` over
                        the trajectories that record both; null when they took no turn
======================  ===========================================================================

Per turn, beside the row: :func:`length_cut_rate`, the share of generated turns that stopped at
the token cap (the trainer's ``response_length/clip_ratio``, ``eval``'s ``summary.json``).

A figure over nothing (no graded trajectory, …) is null — NaN in numpy and pandas, ``None`` in
JSON — never 0.  The trainer logs these under :data:`METRIC_NAMES`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ._groups import GRADED_SQL, SPREAD_SQL, ZERO_VAR_TOL, zero_variance_flags

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class StepOutcome:
    """The outcome figures of one step (definitions in the module docstring)."""

    rollouts: int
    graded: int
    ungraded_rate: float | None
    mean_reward: float | None
    std_reward: float | None
    mean_reward_all: float | None
    success_rate: float | None
    success_rate_all: float | None
    groups: int
    zero_variance_frac: float | None
    mean_turns: float | None
    mean_response_tokens: float | None
    invalid_action_rate: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


STEP_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(StepOutcome))
"""The fields of :class:`StepOutcome`, in order."""

METRIC_NAMES: dict[str, str] = {
    "rollouts": "rollout/episodes",
    "graded": "rollout/graded",
    "ungraded_rate": "rollout/ungraded_rate",
    "mean_reward": "reward/mean",
    "std_reward": "reward/std",
    "mean_reward_all": "reward/mean_all",
    "success_rate": "success/rate",
    "success_rate_all": "success/rate_all",
    "groups": "rollout/groups",
    "zero_variance_frac": "rollout/zero_variance_frac",
    "mean_turns": "episode/turns_mean",
    "mean_response_tokens": "response/length_mean",
    "invalid_action_rate": "episode/invalid_action_rate",
}
""":class:`StepOutcome` field → the trainer's metric name (``metrics.jsonl``)."""


def _mean(x: npt.NDArray[np.float64]) -> float | None:
    return float(np.mean(x)) if len(x) else None


def _floats(a: Values) -> npt.NDArray[np.float64]:
    """``a`` as floats, NaN for unknown (None, NaN, pandas' NA); booleans as 0/1."""
    try:
        return np.asarray(a, dtype=float)
    except (TypeError, ValueError):
        out = []
        for x in np.asarray(a, dtype=object):
            try:
                out.append(float(x))
            except (TypeError, ValueError):
                out.append(math.nan)
        return np.asarray(out, dtype=float)


def _known_mean(a: Values) -> float | None:
    v = _floats(a)
    return _mean(v[~np.isnan(v)])


Values = Sequence[Any] | npt.NDArray[Any]
"""Per-rollout values: a list (None for unknown) or an array (NaN for unknown)."""


def length_cut_rate(turn_tokens: Iterable[int | None], max_tokens: int,
                    finish_reasons: Iterable[str | None] | None = None) -> float | None:
    """Share of turns cut at the per-turn token cap: verl's ``response_length/clip_ratio``,
    per turn (each turn is one generation).  A turn whose generated token count is recorded
    is cut when the count reached ``max_tokens``; one without a count (a text endpoint that
    reports no usage) when its ``finish_reason`` (``finish_reasons``, turn by turn) is
    ``"length"``; a turn with neither is left out.  ``None`` when no turn is known."""
    reasons = iter(finish_reasons) if finish_reasons is not None else None
    cut: list[bool] = []
    for count in turn_tokens:
        reason = next(reasons, None) if reasons is not None else None
        if count is not None:
            cut.append(count >= max_tokens)
        elif reason is not None:
            cut.append(reason == "length")
    return sum(cut) / len(cut) if cut else None


def step_outcome(
    reward: Values,
    graded: Values,
    success: Values,
    group_id: Values,
    num_turns: Values,
    response_tokens: Values,
    invalid_actions: Values | None = None,
) -> StepOutcome:
    """The :class:`StepOutcome` of one step's rollouts, from per-rollout arrays (None or NaN
    where a value is unknown; ``success`` already decided by the success rule)."""
    r = _floats(reward)
    n = len(r)
    ok = np.asarray(graded, dtype=bool) & ~np.isnan(r)
    s = _floats(success)
    gids = np.asarray(group_id, dtype=object)
    uniq: dict[Any, int] = {}
    codes = np.array([-1 if g is None or (isinstance(g, float) and math.isnan(g)) else uniq.setdefault(g, len(uniq))
                      for g in gids], dtype=np.int64)
    measurable, zero = zero_variance_flags(r, ok, codes, len(uniq))
    rg = r[ok]
    known = s[~np.isnan(s)]
    iar = None
    if invalid_actions is not None:
        inv, turns = _floats(invalid_actions), _floats(num_turns)
        both = ~np.isnan(inv) & ~np.isnan(turns)
        iar = float(inv[both].sum() / turns[both].sum()) if turns[both].sum() > 0 else None
    return StepOutcome(
        rollouts=n,
        graded=int(ok.sum()),
        ungraded_rate=float(1.0 - ok.sum() / n) if n else None,
        mean_reward=_mean(rg),
        std_reward=float(np.std(rg, ddof=1)) if len(rg) >= 2 else None,
        mean_reward_all=float(rg.sum() / n) if n else None,
        success_rate=_mean(known),
        success_rate_all=float(known.sum() / n) if n else None,
        groups=len(uniq),
        zero_variance_frac=float(zero.sum() / measurable.sum()) if measurable.any() else None,
        mean_turns=_known_mean(num_turns),
        mean_response_tokens=_known_mean(response_tokens),
        invalid_action_rate=iar,
    )


def step_outcomes(traj: pd.DataFrame) -> pd.DataFrame:
    """:class:`StepOutcome` per step of a DataFrame with columns ``step, group_id, graded,
    reward, success`` (decided), ``num_turns, response_tokens``: one row per step, indexed by
    step, null figures as NaN."""
    import pandas as pd

    cols = {
        "reward": pd.to_numeric(traj["reward"], errors="coerce").to_numpy(dtype=float, na_value=np.nan),
        "graded": traj["graded"].fillna(False).to_numpy(dtype=bool),
        "success": traj["success"].astype("Float64").to_numpy(dtype=float, na_value=np.nan),
        "group_id": traj["group_id"].astype(object).where(traj["group_id"].notna(), None).to_numpy(dtype=object),
        "num_turns": pd.to_numeric(traj["num_turns"], errors="coerce").to_numpy(dtype=float, na_value=np.nan),
        "response_tokens": pd.to_numeric(traj["response_tokens"], errors="coerce").to_numpy(dtype=float, na_value=np.nan),
        "invalid_actions": pd.to_numeric(traj["invalid_actions"], errors="coerce").to_numpy(dtype=float, na_value=np.nan),
    }
    rows = {}
    for step, idx in traj.groupby("step", sort=True).indices.items():
        rows[step] = step_outcome(*(cols[c][idx] for c in ("reward", "graded", "success", "group_id", "num_turns",
                                                            "response_tokens", "invalid_actions"))).to_dict()
    out = pd.DataFrame.from_dict(rows, orient="index", columns=list(STEP_FIELDS))
    for c in STEP_FIELDS:
        out[c] = out[c].astype(float) if c not in ("rollouts", "graded", "groups") else out[c].astype(int)
    out.index.name = "step"
    return out


def step_sql(source: str, keys: tuple[str, ...] = ("step",)) -> str:
    """:class:`StepOutcome` per ``keys`` (``step``, or e.g. ``run_id, split, step``) in DuckDB,
    over ``source``: a SELECT yielding ``keys`` and ``group_id, graded, reward, success``
    (decided by the success rule), ``num_turns, response_tokens, invalid_actions``.  Columns: ``keys``, then
    :data:`STEP_FIELDS`, ordered by ``keys``."""
    by = ", ".join(keys)
    on = " AND ".join(f"t.{k} IS NOT DISTINCT FROM z.{k}" for k in keys)
    sel = ", ".join(f"t.{k} AS {k}" for k in keys)
    return f"""
WITH t AS ({source}),
g AS (
    SELECT {by}, group_id, {GRADED_SQL} AS n, {SPREAD_SQL} AS spread
    FROM t WHERE group_id IS NOT NULL GROUP BY {by}, group_id
),
z AS (
    SELECT {by}, avg(CASE WHEN spread <= {ZERO_VAR_TOL!r} THEN 1.0 ELSE 0.0 END) AS zero_variance_frac
    FROM g WHERE n >= 2 GROUP BY {by}
)
SELECT {sel},
       count(*) AS rollouts,
       count(*) FILTER (WHERE t.graded AND t.reward IS NOT NULL) AS graded,
       1.0 - (count(*) FILTER (WHERE t.graded AND t.reward IS NOT NULL))::DOUBLE / count(*) AS ungraded_rate,
       avg(t.reward) FILTER (WHERE t.graded) AS mean_reward,
       stddev_samp(t.reward) FILTER (WHERE t.graded) AS std_reward,
       coalesce(sum(t.reward) FILTER (WHERE t.graded), 0)::DOUBLE / count(*) AS mean_reward_all,
       avg(CAST(t.success AS DOUBLE)) AS success_rate,
       (count(*) FILTER (WHERE t.success))::DOUBLE / count(*) AS success_rate_all,
       count(DISTINCT t.group_id) AS groups,
       any_value(z.zero_variance_frac) AS zero_variance_frac,
       avg(t.num_turns) AS mean_turns,
       avg(t.response_tokens) AS mean_response_tokens,
       sum(t.invalid_actions) FILTER (WHERE t.invalid_actions IS NOT NULL AND t.num_turns IS NOT NULL)::DOUBLE
         / nullif(sum(t.num_turns) FILTER (WHERE t.invalid_actions IS NOT NULL AND t.num_turns IS NOT NULL), 0)
         AS invalid_action_rate
FROM t LEFT JOIN z ON {on}
GROUP BY {", ".join(f"t.{k}" for k in keys)} ORDER BY {", ".join(f"t.{k}" for k in keys)}
"""
