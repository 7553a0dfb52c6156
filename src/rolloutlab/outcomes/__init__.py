"""Outcomes, defined once: success, ungraded, zero-variance groups and the per-step row.

The ground floor beside :mod:`rolloutlab.algos` (it imports nothing of ours): the trainer's
metrics, ``eval``'s ``summary.json``, ``analyze``, the store's step table, ``show``, the report
and the viewer all read these definitions, so they cannot show a user two numbers for one
quantity.  Each quantity has its numpy definition and its SQL rendering side by side here, with
a test that they agree (tests/outcomes).

- :mod:`._success` — the success rule: which trajectories count as solved, chosen from the
  environment's declared reward range (our own runs, at record time) or from the rewards a
  source recorded (imported runs); ungraded is unknown, never a failure.
- :mod:`._groups` — the zero-variance rule: a group of two or more graded rollouts whose
  rewards differ by no more than :data:`ZERO_VAR_TOL`; a group with fewer than two graded
  rollouts is neither (no variance can be measured; DAPO's filter keeps it).
- :mod:`._steps` — :class:`StepOutcome`, one row per step, and its metric names.
"""

from ._groups import ZERO_VAR_TOL, is_zero_variance, zero_variance_flags
from ._steps import (
    METRIC_NAMES,
    STEP_FIELDS,
    StepOutcome,
    length_cut_rate,
    step_outcome,
    step_outcomes,
    step_sql,
)
from ._success import (
    SOLVED_TOL,
    STATS_SQL,
    SuccessRule,
    SuccessStats,
    choose_rule,
    rule_for_range,
    stats_of,
)

__all__ = [
    "METRIC_NAMES",
    "SOLVED_TOL",
    "STATS_SQL",
    "STEP_FIELDS",
    "ZERO_VAR_TOL",
    "StepOutcome",
    "SuccessRule",
    "SuccessStats",
    "choose_rule",
    "is_zero_variance",
    "length_cut_rate",
    "rule_for_range",
    "stats_of",
    "step_outcome",
    "step_outcomes",
    "step_sql",
    "zero_variance_flags",
]
