"""Outcome-aware severity: the one rule that weighs a health sign against what the outcome did.

Entropy falling, groups going zero-variance, advantages and gradients shrinking, reward
at a plateau or at its ceiling: on a run whose policy solves its tasks these are what
convergence looks like, not a failure.  The same signs on a run whose outcome stalled
below a high level, fell, or stays far below what a held-out evaluation shows are what
they seem.  So the severity of each of these *convergence signs* (:data:`CONVERGENCE_SIGNS`)
is set here, once, from the run's :class:`Outcome`:

- **converged** — the outcome level (held-out success at the last checkpoint when the run
  has evaluations, :mod:`rolloutlab.analysis._heldout`; else the training success rate,
  else a reward in [0, 1], averaged over the last
  :func:`~rolloutlab.analysis._passk.verdict_window` steps) is at least :data:`HIGH`, the
  training outcome is not falling, and, with evaluations, the training level is not more
  than :data:`GAP` above the held-out one: the sign is **info**, its text saying so with
  the figures, and it carries no remedies (there is nothing to fix).
- **falling** — reward declining at the end or pass@1 lower late than early (the
  ``declining`` / ``regressed`` findings), or the held-out interval of the last
  checkpoint wholly below the first's: the sign is **critical**.
- **stalled** — anything else (below :data:`HIGH`, or far from the held-out result): the
  sign keeps the severity its own rule gave it (warning or critical; the saturation and
  signal findings get theirs from :data:`~rolloutlab.analysis._headline.KIND_SEVERITY`).

Signs that are never convergence (KL or gradient blow-ups, length hacking, ungraded
spikes …) are left as their signature rated them.  :func:`apply_severity` is called once,
on the ranked findings of every analysis.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

import pandas as pd

from rolloutlab.analysis._heldout import HeldOut
from rolloutlab.analysis._passk import verdict_window
from rolloutlab.analysis._records import Finding

__all__ = ["CONVERGENCE_SIGNS", "GAP", "HIGH", "Outcome", "apply_severity", "outcome_of"]

HIGH = 0.8
"""Outcome level (success rate, or reward in [0, 1]) at or above which a run has converged."""
GAP = 0.15
"""Training level this far above the held-out level: the held-out result does not bear out
the training curve, so its convergence signs are not called convergence."""

CONVERGENCE_SIGNS = ("entropy_collapse", "entropy_drop", "zero_variance_groups", "signal", "advantage_collapse",
                     "grad_vanishing", "plateau", "ceiling")
"""Finding kinds that a converging run shows too (health signatures and saturation/signal findings)."""

_FALLING_KINDS = ("declining", "regressed")

State = Literal["converged", "falling", "stalled", "unknown"]


@dataclass(frozen=True)
class Outcome:
    """What the run's outcome did, as the severity rule reads it."""

    state: State
    level: float | None
    """The outcome level compared with :data:`HIGH`."""
    source: str
    """Where ``level`` comes from, in words (for the finding's text)."""
    train_level: float | None = None
    """The training success (or reward in [0, 1]) of the last window."""
    why: str = ""


def _train_level(steps: pd.DataFrame) -> tuple[float, str] | None:
    for col, what in (("success_rate", "training success"), ("mean_reward", "training reward")):
        if col not in steps.columns:
            continue
        s = pd.to_numeric(steps[col], errors="coerce").dropna()
        if s.empty or (col == "mean_reward" and (s.min() < 0 or s.max() > 1)):
            continue
        w = verdict_window(len(s))
        late = s.iloc[-w:]
        return float(late.mean()), f"{what} {_pct(float(late.mean()))} over steps {int(late.index[0])}–{int(late.index[-1])}"
    return None


def _pct(x: float) -> str:
    return f"{round(100 * x, 9):.0f}%"


def outcome_of(steps: pd.DataFrame, findings: list[Finding], heldout: HeldOut | None) -> Outcome:
    """The run's :class:`Outcome` (rule in the module docstring)."""
    train = _train_level(steps)
    train_level = None if train is None else train[0]
    falling = [f.kind for f in findings if f.kind in _FALLING_KINDS]
    if falling:
        return Outcome("falling", train_level, train[1] if train else "training", train_level,
                       f"the training outcome is falling ({', '.join(falling)})")
    if heldout is not None:
        last = heldout.last
        est = last.success.estimate
        src = (f"held-out success {_pct(est)} [{_pct(last.success.low)}, {_pct(last.success.high)}] "
               f"at step {last.step}")
        if heldout.fell:
            return Outcome("falling", est, src, train_level,
                           f"held-out success fell from {_pct(heldout.first.success.estimate)} at step "
                           f"{heldout.first.step}")
        if est < HIGH:
            return Outcome("stalled", est, src, train_level, f"held-out success below {_pct(HIGH)}")
        if train_level is not None and train_level - est > GAP:
            return Outcome("stalled", est, src, train_level,
                           f"{train[1] if train else ''} is more than {GAP:g} above it")
        return Outcome("converged", est, src, train_level)
    if train is None or math.isnan(train[0]):
        return Outcome("unknown", None, "", None, "no success rate or reward in [0, 1]")
    if train[0] >= HIGH:
        return Outcome("converged", train[0], train[1], train[0])
    return Outcome("stalled", train[0], train[1], train[0], f"below {_pct(HIGH)}")


def apply_severity(findings: list[Finding], outcome: Outcome) -> list[Finding]:
    """``findings`` with each convergence sign's severity set by ``outcome`` (module docstring)."""
    out = []
    for f in findings:
        if f.kind not in CONVERGENCE_SIGNS or outcome.state in ("unknown", "stalled"):
            out.append(f)
        elif outcome.state == "converged":
            # convergence is nothing to fix: no remedies ("add an entropy bonus") beside it
            out.append(dataclasses.replace(
                f, severity="info", actions=(),
                text=f"{f.text} — with {outcome.source}, this is convergence, not a failure",
                evidence={**f.evidence, "outcome": outcome.state, "outcome_level": outcome.level}))
        else:
            out.append(dataclasses.replace(
                f, severity="critical", text=f"{f.text} — while {outcome.why}",
                evidence={**f.evidence, "outcome": outcome.state, "outcome_level": outcome.level}))
    return out
