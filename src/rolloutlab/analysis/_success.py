"""The one success rule: which trajectories of a run's split count as solved.

A source records ``success`` or it does not (a verl dump without an ``acc`` key, a
TensorBoard export); where it does not, success is derived from the reward.  The rule is
chosen once per (run, split) from four numbers (:class:`SuccessStats`) and then applied
everywhere: to the analysis's DataFrame (:meth:`SuccessRule.apply`), and in SQL by the
viewer (:meth:`SuccessRule.sql`), so the dashboard, the step pages, the sample cards and
the ``success=`` filter cannot disagree.  Every page and report states the rule
(:attr:`SuccessRule.text`).

The rule, in order:

- ``success`` as the source gave it, when every graded trajectory has one;
- else ``reward >= threshold`` when a threshold is given;
- else, when every reward lies in [0, 1], ``reward == 1`` (fully solved; compared as
  ``reward >= 1 - 1e-9`` so a float sum of components still counts);
- else ``reward > 0``.

An ungraded trajectory has unknown success (null / NA), never False.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import pandas as pd

SOLVED_TOL = 1e-9
"""``reward == 1`` is tested as ``reward >= 1 - SOLVED_TOL``."""

RuleKind = Literal["given", "threshold", "solved", "positive"]


@dataclass(frozen=True)
class SuccessStats:
    """What the rule is chosen from, for one run's split."""

    graded: int
    """Graded trajectories."""
    graded_with_success: int
    """Graded trajectories whose source recorded ``success``."""
    reward_min: float | None
    """Smallest reward (None when no trajectory has one)."""
    reward_max: float | None


STATS_SQL = (
    "SELECT count(*) FILTER (WHERE graded) AS graded, "
    "count(*) FILTER (WHERE graded AND {success} IS NOT NULL) AS graded_with_success, "
    "min(reward) AS reward_min, max(reward) AS reward_max "
    "FROM {table} WHERE run_id = ? AND split = ?"
)
""":class:`SuccessStats` of one (run, split) in SQL: format ``success`` (the column that
holds the recorded success) and ``table``, bind ``run_id, split``."""


@dataclass(frozen=True)
class SuccessRule:
    """How success is decided for one run's split (see the module docstring)."""

    kind: RuleKind
    threshold: float | None = None

    @property
    def text(self) -> str:
        """The rule in words, as every page and report states it."""
        if self.kind == "given":
            return "success as recorded by the source"
        if self.kind == "threshold":
            return f"reward >= {self.threshold:g}"
        if self.kind == "solved":
            return "reward == 1 (rewards lie in [0, 1])"
        return "reward > 0"

    def apply(self, traj: pd.DataFrame) -> pd.Series:
        """Success per row of ``traj`` (columns ``graded, success, reward``): nullable boolean."""
        graded = traj["graded"].astype(bool)
        if self.kind == "given":
            return traj["success"].where(graded).astype("boolean")
        r = traj["reward"]
        ok = r >= self.threshold if self.kind == "threshold" else r >= 1 - SOLVED_TOL if self.kind == "solved" else r > 0
        return ok.where(graded).astype("boolean")

    def sql(self, success: str = "success") -> str:
        """The rule as a SQL boolean expression over ``graded, reward`` and ``success``
        (the column holding the recorded success); null for ungraded rows.  Built from
        fixed text and a float only: safe to paste into a statement."""
        if self.kind == "given":
            return f"(CASE WHEN graded THEN {success} END)"
        if self.kind == "threshold":
            assert self.threshold is not None and math.isfinite(self.threshold)
            return f"(CASE WHEN graded THEN reward >= {float(self.threshold)!r} END)"
        if self.kind == "solved":
            return f"(CASE WHEN graded THEN reward >= {1 - SOLVED_TOL!r} END)"
        return "(CASE WHEN graded THEN reward > 0 END)"


def choose_rule(stats: SuccessStats, threshold: float | None = None) -> SuccessRule:
    """The rule for a split with these statistics (``threshold``: the user's, if any)."""
    if threshold is not None:
        if not math.isfinite(threshold):
            raise ValueError(f"success threshold must be a finite number, got {threshold!r}")
        return SuccessRule("threshold", float(threshold))
    if stats.graded and stats.graded_with_success == stats.graded:
        return SuccessRule("given")
    if stats.reward_min is not None and stats.reward_max is not None and stats.reward_min >= 0 and stats.reward_max <= 1:
        return SuccessRule("solved")
    return SuccessRule("positive")


def stats_of(traj: pd.DataFrame) -> SuccessStats:
    """:class:`SuccessStats` of a DataFrame with ``graded, success, reward``."""
    graded = traj["graded"].astype(bool)
    r = traj["reward"].dropna()
    return SuccessStats(
        graded=int(graded.sum()),
        graded_with_success=int(traj["success"][graded].notna().sum()),
        reward_min=float(r.min()) if len(r) else None,
        reward_max=float(r.max()) if len(r) else None,
    )
