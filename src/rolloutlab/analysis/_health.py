"""Training-health signatures: what a person debugging an RL run checks first.

:func:`health_check` reads a wide per-step table of scalars (index = step, one column
per metric, under any framework's name) and returns one :class:`Finding` per signature
it sees, each with a ``severity`` (info / warning / critical), an ``onset`` step, a
``confidence``, the ``evidence`` (numbers and steps) and ``actions`` (what to try).  A
signature whose scalars the run did not log is listed in ``HealthReport.missing`` with
the names looked for (``analyze`` shows them under "skipped").

How a sustained change is found (``_shift``).  Each series is put on the scale where its
noise is roughly constant: log for positive quantities whose noise is multiplicative
(KL, grad norm, step time, losses), raw for shares in [0, 1].  The onset is first
the split that best fits two separate straight lines (least squares over every split
leaving at least ``max(3, n/20)`` steps on each side; computed for all splits at once
from running sums).  That split lands mid-ramp when a ramp ends in a plateau, so the
break of a continuous hinge ``a + b·x + c·max(0, x − τ)`` (Muggeo 2003's broken stick,
by exhaustive search) fitted up to where the series settles (where its running median over
w/2 steps first passes 90 % of the change, from the split on) is taken when it comes earlier, moved forward to the first step whose 3-step
median is a tenth of the way to the late level (a hinge puts a jump's break a step or
two early).  With w = ``max(3, n/10)``, the level before the onset is the median of the
last third of the w steps before it (at least 3; a concave early rise sits lower in the
first two thirds), and the late level is the median of the last w steps of the run.
The change is measured against the larger (for a rise; the smaller for a fall) of the
pre-onset level and the pre-onset OLS line carried forward to the late window — so a
healthy run's steady trend (KL creeping up, entropy easing down) is not a change — with
the carried-forward line allowed at most a doubling (a halving for a fall).  A rising
quantity on the log scale is floored at half its 10th percentile first, so a KL that
starts at 0 is not read as rising 100× in its first steps.  A change counts when it
passes the signature's size threshold and is at least ``Z_MIN`` = 8 noise units, noise
being the robust standard deviation of step-to-step differences (1.4826·MAD/√2, which a
trend or a single jump barely moves; the plain SD of differences / √2 when the MAD is 0).  Bursts that may end before the run does (the
ungraded rate) use ``_excursion`` instead: the first ``3`` consecutive steps whose
centred 3-step median exceeds the median of the first 15 % of steps by the threshold.
Gradient spikes are steps whose norm exceeds 10× the median of the 10 steps before; the
signature needs 3 within a fifth of the run, and its onset is the spike (up to the first such
triple's second) that best splits the run into two spike rates (a Bernoulli change point by
maximum likelihood), so an isolated spike well before the spiky stretch does not start it.

``confidence`` is a heuristic score in [0, 1], not a probability: min(1, z / (2·Z_MIN))
times the share of late-window steps beyond the decision threshold.  Severity is
``warning`` when a signature passes its threshold and ``critical`` past a second,
larger one (stated per signature below); ``analyze`` then weighs the signs a converging
run shows too against the run's outcome and held-out result
(:mod:`rolloutlab.analysis._severity`).  A run shorter than ``MIN_STEPS`` = 10 steps
is not checked (too few steps to tell a change from noise).

Tested on a generator of healthy and planted-pathology runs
(:mod:`rolloutlab.analysis._health_gen`, ``benchmarks/bench_health.py``): recall is the
share of planted runs whose signature is found with an onset within ±10 % of the run
length; a false alarm is a healthy run with any finding at warning or above.  The
generator is this project's model of healthy dynamics (reward rising, entropy easing
down, KL creeping up, length growing with correctness, isolated gradient spikes,
checkpoint steps), not data from real runs; thresholds were set on it, so its figures
are an upper bound on what to expect on real logs.

Non-finite values: a table read from the store holds NaN/inf as missing (the store keeps
no non-finite number), so after import only explicit counters (``actor/skipped_nonfinite``)
and infinities in a table passed in directly are counted.

Which column is read for each quantity: an ``--metric QUANTITY=COLUMN`` override first;
then the names looked for below (each also with a ``train/`` prefix as W&B and
TensorBoard exports of TRL write them, first found wins; step-table columns such as
``mean_reward`` stand in when trajectories exist); then, for a quantity none of them
names, the name families of :mod:`rolloutlab.analysis._names` (any framework's naming,
read from the name's tokens).  ``analyze`` states the column read for each quantity
(``names:read``) and lists the logged columns nothing reads (``names:not_understood``).

Signatures, the scalars each reads, and the thresholds:
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from rolloutlab.analysis._names import classify, recognise
from rolloutlab.analysis._records import Finding
from rolloutlab.analysis._steps import TRAINER_SCALARS

__all__ = [
    "HEALTH_SCALARS",
    "SIGNATURES",
    "HealthReport",
    "Signature",
    "health_check",
    "health_findings",
    "health_table",
]

Severity = Literal["info", "warning", "critical"]
SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "critical": 2}
Z_MIN = 8.0
KL_REF_MIN = 1e-3
"""Nats per token: KL to the reference below this is not a blow-up, however many times it grew
(it starts at 0 and multiplies while the policy takes its first steps away)."""
MIN_STEPS = 10

HEALTH_SCALARS: dict[str, tuple[str, ...]] = {
    "kl_ref": ("actor/kl_loss", "actor/kl_in_reward", "critic/kl", "actor/kl", "kl", "objective/kl",
               "train/kl", "policy/kl", "loss/avg_kl"),
    "entropy": (*TRAINER_SCALARS["entropy"], "objective/entropy"),
    "reward": ("reward/mean", "critic/score/mean", "critic/rewards/mean", "reward", "train/reward",
               "env/reward_mean", "mean_reward"),
    "correctness": ("success/rate", "acc", "critic/acc", "reward/correct", "reward/accuracy",
                    "component/correct", "component/accuracy", "rewards/accuracy_reward/mean",
                    "success_rate"),
    "format": ("reward/format", "component/format", "rewards/format_reward/mean", "format_reward"),
    "response_length": ("response/length_mean", "response_length/mean", "completions/mean_length",
                        "train/response_length", "mean_response_tokens"),
    "clipfrac": (*TRAINER_SCALARS["clipfrac"], "policy/clipfrac_avg"),
    # A < 0 tokens below 1 - eps_low / A > 0 above 1 + eps_high; never verl's
    # actor/pg_clipfrac_lower, which is the dual-clip fraction.  actor/pg_clipfrac_low / _high:
    # what rolloutlab's trainer logged before it took verl's names.
    "clipfrac_low": ("actor/pg_clipfrac_ratio_low", "actor/pg_clipfrac_low", "clip_ratio/low_mean"),
    "clipfrac_high": ("actor/pg_clipfrac_ratio_high", "actor/pg_clipfrac_high", "clip_ratio/high_mean"),
    "zero_variance_frac": ("rollout/zero_variance_frac", "frac_reward_zero_std", "frac_zero_variance"),
    "advantage_max": ("critic/advantages/max",),
    "advantage_min": ("critic/advantages/min",),
    "advantage_std": ("adv/std", "advantages/std", "actor/advantage_std", "critic/advantages/std"),
    "value_loss": ("critic/vf_loss", "value_loss", "loss/value_avg", "train/value_loss"),
    "explained_var": ("critic/vf_explained_var", "explained_variance", "val/explained_variance"),
    "grad_norm": TRAINER_SCALARS["grad_norm"],
    "nonfinite": ("actor/skipped_nonfinite", "train/nonfinite_steps"),
    "truncation_rate": ("response_length/clip_ratio", "completions/clipped_ratio", "rollout/truncated_rate",
                        "term_truncated"),
    "repetition": ("response/repetition_rate", "rollout/repetition", "repetition_rate"),
    "step_time": ("timing/step_s", "timing_s/step", "perf/time_per_step", "train/step_time", "timing/step"),
    "sampler_trainer_kl": ("rollout/sampler_trainer_kl", "rollout_corr/kl", "rollout/sampler_trainer_k3",
                           "training/rollout_probs_diff_mean"),
    "ungraded_rate": ("rollout/ungraded_rate", "ungraded_rate"),
    "policy_kl": ("actor/ppo_kl", "ppo_kl", "policy/approxkl_avg", "losses/approx_kl",
                  "approx_kl"),
    "importance_ratio": ("val/ratio", "policy/ratio"),
}
"""Canonical health scalar → the names frameworks log it under (rolloutlab's trainer
first, then verl, TRL, SkyRL, OpenRLHF; step-table columns last).  ``policy_kl`` is the
KL between the policy that sampled a batch and the one being updated (PPO's approx KL:
verl ``actor/ppo_kl``, ``verl/workers/actor/dp_actor.py``; OpenRLHF ``ppo_kl``,
``openrlhf/models/actor.py``; TRL's PPO ``policy/approxkl_avg``; cleanrl
``losses/approx_kl``), never KL to the reference model (``kl_ref``); ``importance_ratio``
is the mean ratio π_new/π_old over response tokens (TRL's PPO ``val/ratio``)."""

_FALLBACK_PATTERNS: dict[str, re.Pattern[str]] = {
    "correctness": re.compile(r"(^|/)(acc|accuracy|correct|correctness)(_reward)?(/mean)?$", re.IGNORECASE),
    "format": re.compile(r"(^|/)(component/|reward/|rewards/)?format[a-z_]*(/mean)?$", re.IGNORECASE),
}
"""Reward-component names found by pattern when no listed name is present."""


@dataclass
class HealthReport:
    """The findings, the signatures not checked (kind → why) and those checked."""

    findings: list[Finding] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)
    checked: list[str] = field(default_factory=list)
    scalars: dict[str, str] = field(default_factory=dict)
    """Canonical name → the metric name it was read from."""
    unrecognised: list[str] = field(default_factory=list)
    """Logged columns no alias, name family or override reads (see :func:`not_understood`)."""


@dataclass(frozen=True)
class Shift:
    """A sustained change: onset index/step, levels before and late, its size and z."""

    i: int
    onset: float
    pre: float
    late: float
    ref: float
    sigma: float
    z: float
    share: float
    """Share of late-window points beyond ref + half the change (same scale)."""


@dataclass(frozen=True)
class Signature:
    """One health signature: its kind, the scalars it reads, its rule and what to try."""

    kind: str
    title: str
    reads: tuple[str, ...]
    rule: str
    actions: tuple[str, ...]
    detect: Callable[[dict[str, Scalar], int], Finding | None]
    any_of: tuple[str, ...] = ()
    """When set, the signature needs one of these instead of all of ``reads``."""


# ---------------------------------------------------------------- numerics


def robust_sigma(y: npt.NDArray[np.float64]) -> float:
    """Robust noise level: 1.4826·MAD of first differences / √2 (0 for < 3 points)."""
    if y.shape[0] < 3:
        return 0.0
    d = np.diff(y)
    mad = float(np.median(np.abs(d - np.median(d))))
    # a series constant for most steps has MAD 0: fall back to the plain SD of differences
    return (1.4826 * mad if mad > 0 else float(d.std())) / math.sqrt(2.0)


def two_lines_split(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], m: int) -> tuple[int, float, float]:
    """The split k (pre = [0, k), post = [k, n)) minimising the summed RSS of two separate
    OLS lines, each side ≥ m points; returns (k, pre slope, pre intercept)."""
    n = x.shape[0]
    xc = (x - x.mean()) / (x.std() or 1.0)  # centred and scaled: the running sums stay well conditioned

    def sums(a: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.concatenate([[0.0], np.cumsum(a)])

    c0, cx, cy = sums(np.ones(n)), sums(xc), sums(y)
    cxx, cxy, cyy = sums(xc * xc), sums(xc * y), sums(y * y)
    ks = np.arange(m, n - m + 1)

    def rss(s0: Any, sx: Any, sy: Any, sxx: Any, sxy: Any, syy: Any) -> Any:
        vxx = sxx - sx * sx / s0
        vxy = sxy - sx * sy / s0
        vyy = syy - sy * sy / s0
        return vyy - np.where(vxx > 1e-12, vxy * vxy / np.where(vxx > 1e-12, vxx, 1.0), 0.0)

    pre = rss(c0[ks], cx[ks], cy[ks], cxx[ks], cxy[ks], cyy[ks])
    post = rss(c0[n] - c0[ks], cx[n] - cx[ks], cy[n] - cy[ks], cxx[n] - cxx[ks], cxy[n] - cxy[ks],
               cyy[n] - cyy[ks])
    k = int(ks[np.argmin(pre + post)])
    sx, sy, sxx, sxy = cx[k], cy[k], cxx[k], cxy[k]
    vxx = sxx - sx * sx / k
    b = (sxy - sx * sy / k) / vxx if vxx > 1e-12 else 0.0
    a = sy / k - b * sx / k
    scale = x.std() or 1.0
    # back to the original x: y = a + b·(x − mean)/scale
    return k, float(b / scale), float(a - b * x.mean() / scale)


@dataclass(frozen=True)
class Scalar:
    """One scalar over the run's steps: ``x`` the sorted steps, ``y`` the values (NaN =
    not logged at that step; ±inf kept)."""

    x: npt.NDArray[np.float64]
    y: npt.NDArray[np.float64]

    def finite(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        keep = np.isfinite(self.y)
        return self.x[keep], self.y[keep]

    def last(self) -> float:
        logged = ~np.isnan(self.y)
        return float(self.x[logged][-1]) if logged.any() else float(self.x[-1])

    def with_y(self, y: npt.NDArray[np.float64]) -> Scalar:
        return Scalar(self.x, y)


def _shift(s: Scalar, direction: int, *, log: bool, floor: float = 0.0) -> Shift | None:
    """The sustained change of a series (see the module docstring); None when too short."""
    x, y = s.finite()
    n = x.shape[0]
    if n < MIN_STEPS:
        return None
    if log:
        if direction > 0:
            # a quantity that starts at 0 (KL to the reference) is floored at half its 10th
            # percentile, so its first steps' rise from nothing is not read as a 100× jump
            floor = max(floor, 0.5 * float(np.percentile(y, 10)))
        y = np.log(np.maximum(y, floor if floor > 0 else 1e-12))
    m = max(3, n // 20)
    k, slope, icpt = two_lines_split(x, y, m)
    w = max(3, n // 10)
    late = float(np.median(y[-w:]))
    sigma = robust_sigma(y)
    pre, ref = _levels(x, y, k, slope, icpt, w, direction, log)
    onset = float(x[k])
    # The split of two separate lines lands mid-ramp when a ramp ends in a plateau; the
    # onset is the break of a continuous hinge fitted up to where the series settles
    # (first reaches 90 % of the change from the split on, judged on a running median over
    # w/2 steps so one noisy step does not count), which a ramp of any length fits
    # exactly; the levels before are then read at that break.  (Where it *stays* past
    # 90 % is no guide: with the split late in a ramp the 90 % line lies close to the
    # plateau, and the plateau's noise keeps crossing it to the run's end.)
    sm = _median3(y)
    wide = pd.Series(y).rolling(max(3, w // 2), center=True, min_periods=1).median().to_numpy()
    reached = np.flatnonzero(direction * (wide[k:] - (pre + 0.9 * (late - pre))) > 0)
    rising = direction * (late - ref) > 0
    # not rising past the split's levels: the split may sit at the end of a ramp, so the
    # hinge is fitted up to it (a flat-then-ramp prefix)
    end = min(n, k + int(reached[0]) + 2 if reached.shape[0] and rising else k + 1)
    j = hinge_break(x[:end], y[:end], m)
    if j is not None and j < k:
        b, a = np.polyfit(x[:j], y[:j], 1) if j >= 3 else (0.0, float(np.mean(y[:j])))
        pre, ref = _levels(x, y, j, float(b), float(a), w, direction, log)
        # a hinge puts a jump's break a step or two early: the onset is the first step from
        # the break on whose smoothed value is a tenth of the way to the late level
        past = np.flatnonzero(direction * (sm[j:k + 1] - (pre + 0.1 * (late - pre))) > 0)
        onset = float(x[j + int(past[0])]) if past.shape[0] else float(x[j])
    change = direction * (late - ref)
    z = change / sigma if sigma > 0 else (1e6 if change > 0 else 0.0)  # noise-free: any change is sure
    share = float(np.mean(direction * (y[-w:] - ref) > change / 2)) if change > 0 else 0.0
    return Shift(k, onset, pre, late, ref, sigma, z, share)


def _levels(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], k: int, slope: float, icpt: float, w: int,
            direction: int, log: bool) -> tuple[float, float]:
    """(level just before index k, reference level for the late window) — see the module
    docstring; the level before is the median of the last third of the ``w`` steps
    before k (a concave early rise sits lower in the first two thirds)."""
    pre = float(np.median(y[max(0, k - w, k - max(3, k // 3)):k]))
    carried = icpt + slope * float(x[-w:].mean())
    # the pre-onset trend carried forward, but never more than a doubling / halving
    cap = math.log(2.0) if log else abs(pre) / 2
    ref = max(pre, min(carried, pre + cap)) if direction > 0 else min(pre, max(carried, pre - cap))
    return pre, ref


def hinge_break(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], m: int) -> int | None:
    """Index of the break τ = x[j] of the continuous hinge ``y = a + b·x + c·max(0, x − τ)``
    with least squares, over j leaving ≥ m points before and ≥ 2 after; None if too short.
    The normal equations of every candidate are built at once from suffix sums."""
    n = x.shape[0]
    js = np.arange(m, n - 2)
    if js.shape[0] == 0:
        return None
    xc = (x - x.mean()) / (x.std() or 1.0)
    rev = slice(None, None, -1)

    def suffix(a: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:  # sum over i > j
        return np.concatenate([np.cumsum(a[rev])[rev][1:], [0.0]])

    c, sx, sxx, sy, sxy = (suffix(v) for v in (np.ones(n), xc, xc * xc, y, xc * y))
    t = xc[js]
    cj, sxj, sxxj, syj, sxyj = c[js], sx[js], sxx[js], sy[js], sxy[js]
    sh = sxj - t * cj
    shh = sxxj - 2 * t * sxj + t * t * cj
    sxh = sxxj - t * sxj
    syh = sxyj - t * syj
    tot = np.array([n, xc.sum(), (xc * xc).sum()])
    a = np.empty((js.shape[0], 3, 3))
    a[:, 0, 0], a[:, 0, 1], a[:, 1, 1] = tot[0], tot[1], tot[2]
    a[:, 1, 0] = tot[1]
    a[:, 0, 2] = a[:, 2, 0] = sh
    a[:, 1, 2] = a[:, 2, 1] = sxh
    a[:, 2, 2] = shh
    rhs = np.stack([np.full(js.shape[0], y.sum()), np.full(js.shape[0], (xc * y).sum()), syh], axis=1)
    ok = np.abs(np.linalg.det(a)) > 1e-9
    if not ok.any():
        return None
    beta = np.linalg.solve(a[ok], rhs[ok][:, :, None])[:, :, 0]
    rss = (y * y).sum() - (beta * rhs[ok]).sum(axis=1)
    return int(js[ok][int(np.argmin(rss))])


def _median3(y: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Centred 3-point running median (the two ends: the mean of their two points)."""
    out = y.astype(float).copy()
    if y.shape[0] >= 3:
        out[1:-1] = np.median(np.lib.stride_tricks.sliding_window_view(y, 3), axis=1)
        out[0], out[-1] = (y[0] + y[1]) / 2, (y[-1] + y[-2]) / 2
    return out


def _z_text(z: float) -> str:
    return "a noise-free series" if z >= 1e6 else f"{z:.0f} noise units"


def _conf(z: float, share: float) -> float:
    return round(float(min(1.0, z / (2 * Z_MIN)) * share), 3)


def _excursion(s: Scalar, *, delta: float, level: float) -> tuple[int, float, float, float] | None:
    """First 3 consecutive steps whose centred 3-step median exceeds the baseline (median of
    the first 15 % of steps) by ``max(delta, Z_MIN·σ)`` and is ≥ ``level``: (onset step,
    baseline, peak, z); None when there is none."""
    x, y = s.finite()
    n = x.shape[0]
    if n < MIN_STEPS:
        return None
    base = float(np.median(y[: max(5, int(0.15 * n))]))
    sigma = robust_sigma(y)
    sm = _median3(y)
    over = (sm >= base + max(delta, Z_MIN * sigma)) & (sm >= level)
    runs = np.convolve(over.astype(int), np.ones(3, dtype=int), mode="valid") == 3
    if not runs.any():
        return None
    i = int(np.argmax(runs))
    peak = float(sm[i:].max())
    z = (peak - base) / sigma if sigma > 0 else 1e6
    return int(x[i]), base, peak, z


# ---------------------------------------------------------------- resolving scalars


def _column(metrics: pd.DataFrame, name: str) -> npt.NDArray[np.float64] | None:
    y = pd.to_numeric(metrics[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return y if (~np.isnan(y)).any() else None


def resolve_scalars(metrics: pd.DataFrame, overrides: Mapping[str, str] | None = None
                    ) -> tuple[dict[str, Scalar], dict[str, str]]:
    """Canonical series found in a wide step × name table and the name each came from:
    ``overrides`` (quantity → column) first, then the first listed alias with a value,
    then the component patterns, then the name families (:mod:`rolloutlab.analysis._names`)."""
    metrics = metrics.sort_index()
    x = metrics.index.to_numpy(dtype=float)
    out: dict[str, Scalar] = {}
    names: dict[str, str] = {}
    for canon, col in (overrides or {}).items():
        if col not in metrics.columns:
            raise ValueError(f"--metric {canon}={col}: the run logged no column {col!r}; it logged: "
                             + ", ".join(map(str, list(metrics.columns)[:30])))
        if (y := _column(metrics, col)) is None:
            raise ValueError(f"--metric {canon}={col}: column {col!r} holds no number")
        out[canon], names[canon] = Scalar(x, y), col
    for canon, aliases in HEALTH_SCALARS.items():
        if canon in out:
            continue
        for name in (n for a in aliases for n in (a, f"train/{a}")):
            if name in metrics.columns and (y := _column(metrics, name)) is not None:
                out[canon], names[canon] = Scalar(x, y), name
                break
    for canon, pat in _FALLBACK_PATTERNS.items():
        if canon in out:
            continue
        for c in metrics.columns:
            if pat.search(str(c)) and not str(c).startswith("val") and (y := _column(metrics, c)) is not None:
                out[canon], names[canon] = Scalar(x, y), str(c)
                break
    taken = set(names.values())
    logged = [str(c) for c in metrics.columns if str(c) not in taken and _column(metrics, c) is not None]
    found, _ = recognise(logged)
    for canon, col in found.items():
        if canon not in out and canon in HEALTH_SCALARS:
            out[canon], names[canon] = Scalar(x, _column(metrics, col)), col  # type: ignore[arg-type]
    if "advantage_std" in out:
        out["advantage_spread"], names["advantage_spread"] = out["advantage_std"], names["advantage_std"]
    elif "advantage_max" in out and "advantage_min" in out:
        out["advantage_spread"] = Scalar(x, out["advantage_max"].y - out["advantage_min"].y)
        names["advantage_spread"] = f"{names['advantage_max']} − {names['advantage_min']}"
    return out, names


def not_understood(columns: Sequence[str], read: Mapping[str, str]) -> list[str]:
    """The columns no listed alias names and no name family reads (and not read through
    an override): what the health check could not use."""
    listed = [*HEALTH_SCALARS.values(), *TRAINER_SCALARS.values()]  # max_rounds: read by the step table
    aliases = {n for names in listed for a in names for n in (a, f"train/{a}")}
    used = set(read.values())
    return [str(c) for c in columns
            if str(c) not in used and str(c) not in aliases and classify(str(c)) is None]


def health_table(metrics: pd.DataFrame, steps: pd.DataFrame | None = None,
                 ledger: pd.DataFrame | None = None) -> pd.DataFrame:
    """The trainer's metrics joined with the step table and ledger columns that stand in
    for them (``mean_reward``, ``success_rate``, ``mean_response_tokens``,
    ``ungraded_rate``, ``term_truncated``, ``frac_zero_variance``, ``component/*``) when
    a run has trajectories; the trainer's own names win (they are listed first)."""
    parts = [metrics] if metrics is not None and len(metrics.columns) else []
    if steps is not None and len(steps):
        keep = [c for c in ("mean_reward", "success_rate", "mean_response_tokens", "ungraded_rate", "term_truncated")
                if c in steps.columns] + [c for c in steps.columns if str(c).startswith("component/")]
        parts.append(steps[keep])
    if ledger is not None and len(ledger) and "frac_zero_variance" in ledger.columns:
        parts.append(ledger[["frac_zero_variance"]])
    if not parts:
        return pd.DataFrame()
    out = pd.concat(parts, axis=1)
    out = out.loc[:, ~out.columns.duplicated()]
    out.index.name = "step"
    return out.sort_index()


# ---------------------------------------------------------------- signatures


def _finding(sig_kind: str, severity: Severity, onset: float, conf: float, text: str,
             evidence: dict[str, Any], last: float) -> Finding:
    sig = _BY_KIND[sig_kind]
    score = {"info": 40.0, "warning": 78.0, "critical": 95.0}[severity]
    return Finding(sig_kind, score, text, (int(onset), int(last)), evidence, severity=severity, onset=int(onset),
                   confidence=conf, actions=sig.actions)


def _times(ratio: float) -> str:
    """A ratio as people say it: ``3.2×``, ``450×``, ``more than 10,000×``."""
    if ratio < 100:
        return f"{ratio:.1f}×"
    return f"{ratio:,.0f}×" if ratio < 10_000 else "more than 10,000×"


def _rise_log(kind: str, key: str, what: str, warn_ratio: float, crit_ratio: float, floor: float,
              direction: int = 1, min_late: float = 0.0) -> Callable[[dict[str, Scalar], int], Finding | None]:
    """A ratio change on the log scale: warning at ``warn_ratio``×, critical at ``crit_ratio``×;
    for a rise, only once the late level reaches ``min_late`` (a quantity that starts at 0,
    such as KL to the reference, multiplies many times over while it is still negligible)."""

    def detect(sc: dict[str, Scalar], n: int) -> Finding | None:
        s = sc[key]
        sh = _shift(s, direction, log=True, floor=floor)
        if sh is None:
            return None
        ratio = math.exp(direction * (sh.late - sh.ref))
        pre, late = math.exp(sh.pre), math.exp(sh.late)
        if ratio < warn_ratio or sh.z < Z_MIN or sh.share < 0.6 or (direction > 0 and late < min_late):
            return None
        sev: Severity = "critical" if ratio >= crit_ratio else "warning"
        verb = "rose" if direction > 0 else "fell"
        text = (f"{what} {verb} {_times(ratio)} from step {sh.onset:.0f} ({pre:.3g} before, {late:.3g} over the last "
                f"steps; {_z_text(sh.z)})")
        ev = {"onset_step": sh.onset, "before": pre, "late": late, "ratio": ratio, "z": sh.z}
        return _finding(kind, sev, sh.onset, _conf(sh.z, sh.share), text, ev, s.last())

    return detect


def _rise_abs(kind: str, key: str, what: str, delta: float, warn_level: float, crit_level: float,
              direction: int = 1) -> Callable[[dict[str, Scalar], int], Finding | None]:
    """An additive change of a share: at least ``delta`` and past ``warn_level``
    (critical past ``crit_level``); for a fall the levels are upper bounds."""

    def detect(sc: dict[str, Scalar], n: int) -> Finding | None:
        s = sc[key]
        sh = _shift(s, direction, log=False)
        if sh is None:
            return None
        change = direction * (sh.late - sh.ref)
        past = sh.late >= warn_level if direction > 0 else sh.late <= warn_level
        if change < delta or not past or sh.z < Z_MIN or sh.share < 0.6:
            return None
        crit = sh.late >= crit_level if direction > 0 else sh.late <= crit_level
        sev: Severity = "critical" if crit else "warning"
        verb = "rose" if direction > 0 else "fell"
        text = (f"{what} {verb} from {sh.pre:.3f} to {sh.late:.3f} from step {sh.onset:.0f} "
                f"({_z_text(sh.z)})")
        ev = {"onset_step": sh.onset, "before": sh.pre, "late": sh.late, "change": direction * change, "z": sh.z}
        return _finding(kind, sev, sh.onset, _conf(sh.z, sh.share), text, ev, s.last())

    return detect


def _level_change(s: Scalar, onset: float, before_steps: int | None = None) -> tuple[float, float] | None:
    """(late median − median of the ``before_steps`` (default ``max(3, n/10)``) steps
    before ``onset``, robust σ); None when too short or nothing was logged before the onset."""
    x, y = s.finite()
    if x.shape[0] < MIN_STEPS:
        return None
    w = max(3, x.shape[0] // 10)
    before = y[x < onset][-(before_steps or w):]
    if before.shape[0] == 0:
        return None
    return float(np.median(y[-w:]) - np.median(before)), robust_sigma(y)


def _flat_after(s: Scalar, onset: float, rise: float) -> tuple[bool, float]:
    """Did ``s`` stay flat after ``onset``: its late median minus its median over the last
    third of the 10 % of steps before the onset (at least 3: a level still climbing into
    the onset is read where it got to) is below max(0.03, rise / 4, 4σ)?  Returns (flat,
    change)."""
    lc = _level_change(s, onset, max(3, s.x.shape[0] // 30))
    if lc is None:
        return False, math.nan
    change, sigma = lc
    return change < max(0.03, rise / 4, 4 * sigma), change


def _length_hacking(sc: dict[str, Scalar], n: int) -> Finding | None:
    ln = sc["response_length"]
    sh = _shift(ln, 1, log=True, floor=1.0)
    if sh is None:
        return None
    ratio = math.exp(sh.late - sh.ref)
    if ratio < 1.4 or sh.z < Z_MIN or sh.share < 0.6:
        return None
    lc = _level_change(sc["reward"], sh.onset)
    # the gain is a difference of two medians over ≥ 3 steps each, far less noisy than one
    # step: one step's noise (σ) is the bar, not two
    if lc is None or lc[0] < max(0.02, lc[1]):
        return None
    reward_gain = lc[0]
    flat, corr_change = _flat_after(sc["correctness"], sh.onset, reward_gain)
    if not flat:
        return None
    sev: Severity = "critical" if ratio >= 2.0 else "warning"
    text = (f"response length grew {ratio:.1f}× from step {sh.onset:.0f} ({math.exp(sh.pre):.0f} → "
            f"{math.exp(sh.late):.0f}) and reward rose {reward_gain:+.3f}, while correctness moved {corr_change:+.3f}: "
            "the reward is paying for length")
    ev = {"onset_step": sh.onset, "length_before": math.exp(sh.pre), "length_late": math.exp(sh.late),
          "length_ratio": ratio, "reward_gain": reward_gain, "correctness_change": corr_change, "z": sh.z}
    return _finding("length_hacking", sev, sh.onset, _conf(sh.z, sh.share), text, ev, ln.last())


def _format_gaming(sc: dict[str, Scalar], n: int) -> Finding | None:
    fm = sc["format"]
    sh = _shift(fm, 1, log=False)
    if sh is None:
        return None
    rise = sh.late - sh.ref
    if rise < 0.2 or sh.z < Z_MIN or sh.share < 0.6:
        return None
    flat, corr_change = _flat_after(sc["correctness"], sh.onset, rise)
    if not flat:
        return None
    sev: Severity = "critical" if rise >= 0.4 else "warning"
    text = (f"the format reward rose {sh.pre:.2f} → {sh.late:.2f} from step {sh.onset:.0f} while correctness moved "
            f"{corr_change:+.3f}: the policy is learning the format, not the task")
    ev = {"onset_step": sh.onset, "format_before": sh.pre, "format_late": sh.late, "correctness_change": corr_change,
          "z": sh.z}
    return _finding("format_gaming", sev, sh.onset, _conf(sh.z, sh.share), text, ev, fm.last())


def _entropy_collapse(sc: dict[str, Scalar], n: int) -> Finding | None:
    from rolloutlab.analysis._entropy import detect_collapse

    e = sc["entropy"]
    x, y = e.finite()
    if x.shape[0] < MIN_STEPS:
        return None
    col = detect_collapse(x, y, frac=0.25)
    if not col.collapsed or col.initial <= 0:
        return None
    sh = _shift(e, -1, log=True, floor=1e-6)
    late = float(np.median(y[-max(3, x.shape[0] // 10):]))
    crossed = float(col.step or 0.0)
    # onset: where the fall broke from the trend, when that came before the crossing
    onset = sh.onset if sh is not None and sh.onset <= crossed else crossed
    sev: Severity = "critical" if late < 0.1 * col.initial else "warning"
    z = sh.z if sh is not None and math.isfinite(sh.z) else Z_MIN
    text = (f"entropy collapsed from {col.initial:.3f} to {late:.3g} ({100 * late / col.initial:.0f}% of its start); "
            f"the fall began at step {onset:.0f} and crossed 25% of the start at step {crossed:.0f}")
    ev = {"onset_step": onset, "initial": col.initial, "late": late, "crossed_step": crossed,
          "threshold": col.threshold}
    return _finding("entropy_collapse", sev, onset, _conf(max(z, Z_MIN), 1.0), text, ev, e.last())


def _value_divergence(sc: dict[str, Scalar], n: int) -> Finding | None:
    found: list[tuple[float, Severity, str, dict[str, Any], float, float]] = []
    if "value_loss" in sc:
        sh = _shift(sc["value_loss"], 1, log=True, floor=1e-8)
        if sh is not None:
            ratio = math.exp(sh.late - sh.ref)
            if ratio >= 5 and sh.z >= Z_MIN and sh.share >= 0.6:
                sev: Severity = "critical" if ratio >= 20 else "warning"
                found.append((sh.onset, sev, f"value loss rose {ratio:.0f}× from step {sh.onset:.0f}",
                              {"value_loss_before": math.exp(sh.pre), "value_loss_late": math.exp(sh.late)},
                              sh.z, sh.share))
    if "explained_var" in sc:
        sh = _shift(sc["explained_var"], -1, log=False)
        if sh is not None:
            drop = sh.ref - sh.late
            if drop >= 0.3 and sh.late <= 0.2 and sh.z >= Z_MIN and sh.share >= 0.6:
                sev = "critical" if sh.late <= 0.0 else "warning"
                found.append((sh.onset, sev, f"explained variance fell {sh.pre:.2f} → {sh.late:.2f} from step "
                              f"{sh.onset:.0f}", {"explained_var_before": sh.pre, "explained_var_late": sh.late},
                              sh.z, sh.share))
    if not found:
        return None
    onset = min(f[0] for f in found)
    sev = max((f[1] for f in found), key=lambda v: SEVERITY_RANK[v])
    ev: dict[str, Any] = {"onset_step": onset}
    for f in found:
        ev.update(f[3])
    best = max(found, key=lambda f: f[4])
    last = max(sc[k].last() for k in ("value_loss", "explained_var") if k in sc)
    text = "; ".join(f[2] for f in found) + ": the critic no longer tracks the returns"
    return _finding("value_divergence", sev, onset, _conf(best[4], best[5]), text, ev, last)


def _bernoulli_ll(k: npt.NDArray[np.float64], m: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Maximised log-likelihood of ``k`` events in ``m`` trials at one rate (0·ln 0 = 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(m > 0, k / np.maximum(m, 1), 0.0)
        hit = np.where(k > 0, k * np.log(np.where(p > 0, p, 1.0)), 0.0)
        miss = np.where(m - k > 0, (m - k) * np.log(np.where(p < 1, 1 - p, 1.0)), 0.0)
    return np.asarray(hit + miss, dtype=float)


def _spike_regime_start(idx: npt.NDArray[np.int64], upto: int, n: int) -> int:
    """Where the spikes start recurring: among the spike indices ``idx[:upto + 1]`` (up to
    the first spike of the first close triple), the one that best splits the run's ``n``
    steps into a calmer part and a spiky part — the change point of a Bernoulli rate (one
    rate before index s, one from s on, each fitted by maximum likelihood).  An isolated
    spike well before the spiky part is left out, and the spiky part's first spike is
    kept even when the next two come a little more than a fifth of the run later."""
    cands = idx[: upto + 1].astype(float)
    before = np.arange(cands.shape[0], dtype=float)  # spikes before each candidate
    ll = _bernoulli_ll(before, cands) + _bernoulli_ll(idx.shape[0] - before, n - cands)
    return int(idx[int(np.argmax(ll))])


def _grad_spikes(sc: dict[str, Scalar], n: int) -> Finding | None:
    g = sc["grad_norm"]
    x, y = g.finite()
    if x.shape[0] < MIN_STEPS:
        return None
    # median of the (up to) 10 steps before each step, at least 3 of them
    padded = np.concatenate([np.full(10, np.nan), y[:-1]])
    win = np.lib.stride_tricks.sliding_window_view(padded, 10)  # (n, 10): the 10 before step i
    enough = (~np.isnan(win)).sum(axis=1) >= 3
    past = np.full(y.shape[0], np.nan)
    past[enough] = np.nanmedian(win[enough], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(past > 0, y / past, np.nan)
    idx = np.flatnonzero(np.nan_to_num(ratio, nan=0.0) >= 10.0)
    if idx.shape[0] < 3:
        return None
    span = max(3, x.shape[0] // 5)
    ok = idx[2:] - idx[:-2] <= span  # a spike followed by two more within a fifth of the run
    if not ok.any():
        return None
    first = _spike_regime_start(idx, int(np.argmax(ok)) + 1, x.shape[0])
    onset = float(x[first])
    count = int((idx >= first).sum())
    worst = float(np.nanmax(ratio[first:]))
    sev: Severity = "critical" if count >= 10 or worst >= 100 else "warning"
    text = (f"{count} gradient-norm spikes (≥ 10× the median of the 10 steps before) from step {onset:.0f}, "
            f"the largest {worst:.0f}×")
    ev = {"onset_step": onset, "spikes": count, "largest_ratio": worst,
          "spike_steps": [int(v) for v in x[idx[idx >= first]][:20]]}
    return _finding("grad_spikes", sev, onset, round(min(1.0, count / 6), 3), text, ev, g.last())


def _grad_nonfinite(sc: dict[str, Scalar], n: int) -> Finding | None:
    parts = []
    if "nonfinite" in sc:
        parts.append(np.clip(np.nan_to_num(sc["nonfinite"].y, nan=0.0, posinf=1.0, neginf=0.0), 0.0, None))
    if "grad_norm" in sc:
        parts.append(np.isinf(sc["grad_norm"].y).astype(float))
    if not parts:
        return None
    x = next(iter(sc.values())).x
    bad = np.max(np.vstack(parts), axis=0)
    hit = np.flatnonzero(bad > 0)
    if hit.shape[0] == 0:
        return None
    onset = float(x[hit[0]])
    count = int(hit.shape[0])
    total = float(bad[hit].sum())
    sev: Severity = "critical" if count >= 5 or count >= 0.05 * x.shape[0] else "warning"
    text = (f"{count} step(s) logged non-finite gradients or skipped updates ({total:.0f} in all), "
            f"the first at step {onset:.0f}")
    ev = {"onset_step": onset, "steps_affected": count, "events": total, "steps": [int(v) for v in x[hit][:20]]}
    return _finding("grad_nonfinite", sev, onset, 1.0, text, ev, float(x[-1]))


def _asymmetric_drift(sc: dict[str, Scalar], n: int) -> Finding | None:
    hi, lo = sc["clipfrac_high"], sc["clipfrac_low"]
    tot = hi.y + lo.y
    with np.errstate(divide="ignore", invalid="ignore"):
        share = hi.with_y(np.where(tot > 0, hi.y / tot, np.nan))
    best = None
    for direction, side in ((1, "upper"), (-1, "lower")):
        s = _shift(share, direction, log=False)
        if s is None:
            continue
        one_side = s.late if side == "upper" else 1 - s.late
        passes = one_side >= 0.8 and abs(s.late - s.ref) >= 0.2 and s.z >= Z_MIN and s.share >= 0.6
        if passes and (best is None or s.z > best[0].z):
            best = (s, side, one_side)
    if best is None:
        return None
    s, side, one_side = best
    sev: Severity = "critical" if one_side >= 0.95 else "warning"
    what = ("raising the probability of sampled tokens (sharpening, the entropy-collapse side)" if side == "upper"
            else "pushing sampled tokens down (the policy is moving away from what it samples)")
    was = s.pre if side == "upper" else 1 - s.pre
    text = (f"clipping became one-sided from step {s.onset:.0f}: {100 * one_side:.0f}% of clipped tokens hit the "
            f"{side} bound (was {100 * was:.0f}%) — the update keeps {what}")
    ev = {"onset_step": s.onset, "side": side, "share_before": s.pre, "share_late": s.late, "z": s.z}
    return _finding("asymmetric_drift", sev, s.onset, _conf(s.z, s.share), text, ev, share.last())


def _policy_update_instability(sc: dict[str, Scalar], n: int) -> Finding | None:
    """The policy-update KL (or, when it is not logged, |ln ratio|) rising: each update
    moves the policy further from the one that sampled its batch.  The clip fraction over
    the same window is quoted when logged (clip_saturation judges it on its own)."""
    # floors: an on-policy update's KL is rounding noise (~1e-8), and a rise inside it is
    # no instability; PPO's usual approx-KL targets are 0.01-0.02 (cleanrl target_kl)
    floor = 1e-4
    if "policy_kl" in sc:
        s, what = sc["policy_kl"], "the policy-update KL (old → new policy)"
    else:
        floor = 1e-3
        r = sc["importance_ratio"]
        with np.errstate(divide="ignore", invalid="ignore"):
            s = r.with_y(np.abs(np.log(r.y)))
        what = "the importance ratio's distance from 1 (|ln ratio|)"
    sh = _shift(s, 1, log=True, floor=floor)
    if sh is None:
        return None
    ratio = math.exp(sh.late - sh.ref)
    if ratio < 4.0 or sh.z < Z_MIN or sh.share < 0.6:
        return None
    sev: Severity = "critical" if ratio >= 20.0 else "warning"
    pre, late = math.exp(sh.pre), math.exp(sh.late)
    text = (f"{what} rose {_times(ratio)} from step {sh.onset:.0f} ({pre:.3g} before, {late:.3g} over the last "
            f"steps; {_z_text(sh.z)}): each update moves the policy far from the one that sampled the batch")
    ev: dict[str, Any] = {"onset_step": sh.onset, "before": pre, "late": late, "ratio": ratio, "z": sh.z}
    if "clipfrac" in sc:
        cx, cy = sc["clipfrac"].finite()
        before, after = cy[cx < sh.onset], cy[cx >= sh.onset]
        if before.shape[0] and after.shape[0]:
            ev["clipfrac_before"], ev["clipfrac_after"] = float(np.median(before)), float(np.median(after))
            text += (f"; clip fraction {ev['clipfrac_before']:.3f} → {ev['clipfrac_after']:.3f}")
    return _finding("policy_update_instability", sev, sh.onset, _conf(sh.z, sh.share), text, ev, s.last())


def _ungraded_spike(sc: dict[str, Scalar], n: int) -> Finding | None:
    u = sc["ungraded_rate"]
    ex = _excursion(u, delta=0.08, level=0.1)
    if ex is None:
        return None
    onset, base, peak, z = ex
    sev: Severity = "critical" if peak >= 0.3 else "warning"
    text = (f"the ungraded rate jumped from {100 * base:.1f}% to {100 * peak:.0f}% at step {onset}: the environment "
            "or the grader is failing, and ungraded rollouts are missing from the reward")
    ev = {"onset_step": onset, "baseline": base, "peak": peak, "z": z}
    return _finding("ungraded_spike", sev, onset, _conf(min(z, 1e6), 1.0), text, ev, u.last())


def _table_rows(sigs: Sequence[Signature]) -> str:
    """The signature table, the names looked for and what to try, as Markdown."""
    lines = ["", "| signature | reads | rule (warning; critical) |", "|---|---|---|"]
    for s in sigs:
        reads = ", ".join(s.reads) if not s.any_of else " or ".join(s.any_of)
        lines.append(f"| {s.kind} | {reads} | {s.rule} |")
    lines += ["", "Names looked for (canonical: names):", ""]
    for canon, names in HEALTH_SCALARS.items():
        lines.append(f"- ``{canon}``: " + ", ".join(f"``{n}``" for n in names))
    lines.append("- ``correctness`` / ``format`` also: the first metric matching "
                 "``…/acc``, ``…/accuracy``, ``…/correct`` / ``…format…`` (not ``val…``)")
    lines.append("- ``advantage_spread``: ``advantage_std``, else ``advantage_max`` − ``advantage_min``")
    lines += ["", "What to try, per signature:", ""]
    for s in sigs:
        lines.append(f"- **{s.kind}**: " + "; ".join(s.actions) + ".")
    return "\n".join(lines)


SIGNATURES: tuple[Signature, ...] = (
    Signature("kl_blowup", "KL to the reference blowing up", ("kl_ref",),
              "≥ 4× its level before and ≥ 0.001 nats; ≥ 20×",
              ("raise the KL coefficient (or turn on the KL loss) and lower the learning rate",
               "roll back to the last checkpoint before the onset and resume with a smaller step",
               "check the reference model is the one the run started from"),
              # a KL under 0.001 nats per token is no blow-up whatever its ratio: a tiny run's KL
              # leaving 0 went 6e-6 -> 2e-4 in ten steps (textcraft_scalinginter, bench_health)
              _rise_log("kl_blowup", "kl_ref", "KL to the reference", 4.0, 20.0, 1e-6, min_late=KL_REF_MIN)),
    Signature("entropy_collapse", "entropy collapse", ("entropy",),
              "stays < 25% of its start; < 10%",
              ("add an entropy bonus or raise the upper clip bound (DAPO clip-higher, e.g. 0.28)",
               "raise the rollout temperature, or clip/KL-penalise high-covariance tokens (Clip-Cov / KL-Cov)",
               "filter zero-variance groups so fewer updates sharpen already-solved prompts"),
              _entropy_collapse),
    Signature("length_hacking", "reward rising with length, correctness flat",
              ("response_length", "reward", "correctness"),
              "length ≥ 1.4× with reward up, correctness flat; ≥ 2×",
              ("add an overlong / length penalty (DAPO soft overlong punishment) or normalise reward by length",
               "check the reward model or judge for a length bias on a fixed set of answers",
               "grade correctness separately and train on it alone for a while"),
              _length_hacking),
    Signature("format_gaming", "format reward rising, correctness flat", ("format", "correctness"),
              "format +0.2 with correctness flat; +0.4",
              ("lower the format reward's weight or make it a gate (format only counts when correct)",
               "inspect high-format, wrong-answer samples for template exploits",
               "check the correctness grader parses the new format"),
              _format_gaming),
    Signature("clip_saturation", "clip fraction saturating", ("clipfrac",),
              "+0.1 and ≥ 0.15; ≥ 0.4",
              ("lower the learning rate or the number of PPO epochs / mini-batches per rollout",
               "check for stale rollouts (off-policy lag) inflating the ratio",
               "widen the clip range only after the two above"),
              _rise_abs("clip_saturation", "clipfrac", "the PPO clip fraction", 0.1, 0.15, 0.4)),
    Signature("zero_variance_groups", "within-group reward variance dying", ("zero_variance_frac",),
              "+0.2 and ≥ 0.6 of groups; ≥ 0.85",
              ("filter zero-variance groups and oversample (DAPO dynamic sampling)",
               "move to harder prompts (curriculum) or drop the ones every sample solves",
               "raise the group size or the temperature to recover variance"),
              _rise_abs("zero_variance_groups", "zero_variance_frac", "the share of zero-variance groups",
                        0.2, 0.6, 0.85)),
    Signature("advantage_collapse", "advantages collapsing to zero", ("advantage_spread",),
              "spread ≤ 1/5 of before; ≤ 1/20",
              ("check the reward still varies within groups (see zero_variance_groups)",
               "check advantage normalisation is not dividing by a tiny std (add epsilon, or use Dr. GRPO's no-std)",
               "make the task harder or the reward denser"),
              _rise_log("advantage_collapse", "advantage_spread", "the advantage spread", 5.0, 20.0, 1e-8, -1)),
    Signature("value_divergence", "value loss diverging / explained variance falling", ("value_loss", "explained_var"),
              "value loss ≥ 5× or EV −0.3 to ≤ 0.2; ≥ 20× or EV ≤ 0",
              ("lower the critic learning rate and clip the value loss",
               "warm up the critic longer before policy updates, or normalise returns",
               "check the GAE λ/γ and that rewards land on the right tokens"),
              _value_divergence, any_of=("value_loss", "explained_var")),
    Signature("grad_spikes", "gradient-norm spikes", ("grad_norm",),
              "3 spikes ≥ 10× within n/5 steps; 10 spikes or one ≥ 100×",
              ("lower the gradient clipping threshold (e.g. 1.0) and the learning rate",
               "look at the spike steps' batches for extreme advantages or very long responses",
               "use bf16-safe loss aggregation (token-mean) and check for inf log-probs"),
              _grad_spikes),
    Signature("grad_nonfinite", "non-finite gradients", ("grad_norm", "nonfinite"),
              "any step; ≥ 5 steps or ≥ 5% of steps",
              ("find the first bad step's batch and check log-probs of masked or padded tokens",
               "lower the learning rate and turn on gradient clipping",
               "check mixed-precision settings (bf16 logits, loss scaling)"),
              _grad_nonfinite, any_of=("grad_norm", "nonfinite")),
    Signature("grad_vanishing", "gradient norm vanishing", ("grad_norm",),
              "≤ 1/20 of before; ≤ 1/100",
              ("check the loss mask still covers the response tokens",
               "check advantages are not all zero (see advantage_collapse)",
               "check the learning-rate schedule did not decay to zero"),
              _rise_log("grad_vanishing", "grad_norm", "the gradient norm", 20.0, 100.0, 1e-12, -1)),
    Signature("truncation_starvation", "responses hitting the length cap", ("truncation_rate",),
              "+0.1 and ≥ 0.2; ≥ 0.5",
              ("raise the response length cap, or penalise overlong responses softly (DAPO)",
               "mask truncated responses out of the loss instead of scoring them 0",
               "check for repetition loops (see repetition_rising)"),
              _rise_abs("truncation_starvation", "truncation_rate", "the share of truncated responses",
                        0.1, 0.2, 0.5)),
    Signature("repetition_rising", "repetition rising", ("repetition",),
              "+0.1 and ≥ 0.15; ≥ 0.3",
              ("add a repetition penalty at sampling or a penalty in the reward",
               "lower the learning rate / raise the KL coefficient (repetition follows entropy collapse)",
               "inspect the repeated spans: a tool or environment loop can cause them"),
              _rise_abs("repetition_rising", "repetition", "the repetition rate", 0.1, 0.15, 0.3)),
    Signature("asymmetric_drift", "one-sided drift from the sampling policy", ("clipfrac_high", "clipfrac_low"),
              "≥ 80% of clipping on one side, +0.2; ≥ 95%",
              ("decouple the clip bounds (clip-higher) so both directions can move",
               "check advantage sign balance: mostly-negative or mostly-positive batches push one way",
               "raise the KL coefficient to hold the policy near the reference"),
              _asymmetric_drift),
    Signature("throughput_rot", "step time growing", ("step_time",),
              "≥ 1.6× its level before; ≥ 3×",
              ("check response length and truncation (longer rollouts take longer)",
               "look for a leak: growing caches, environment processes not cleaned up, memory fragmentation",
               "profile one slow step: generation, environment or update"),
              _rise_log("throughput_rot", "step_time", "step time", 1.6, 3.0, 1e-6)),
    Signature("offpolicy_mismatch", "sampler/trainer KL rising", ("sampler_trainer_kl",),
              "≥ 4× its level before; ≥ 20×",
              ("apply truncated importance sampling (TIS) or mask tokens with large ratio",
               "check the inference engine and trainer use the same weights, dtype and sampling settings",
               "sync weights every step; reduce asynchronous staleness"),
              _rise_log("offpolicy_mismatch", "sampler_trainer_kl", "sampler/trainer KL", 4.0, 20.0, 1e-9)),
    Signature("ungraded_spike", "ungraded rate spiking", ("ungraded_rate",),
              "3 steps +0.08 and ≥ 0.1; ≥ 0.3",
              ("read the failing rollouts' errors (environment, sandbox, grader timeouts)",
               "raise environment/grader timeouts and retries, or drop those groups from the update",
               "check the grader's service health around the onset step"),
              _ungraded_spike),
    Signature("policy_update_instability", "policy-update KL blowing up", ("policy_kl", "importance_ratio"),
              "policy-update KL (else |ln ratio|) ≥ 4× its level before; ≥ 20×",
              ("lower the learning rate and roll back to the last checkpoint before the onset",
               "run fewer PPO epochs per batch, or fewer mini-batches (fewer optimizer steps on stale samples)",
               "tighten the clip range (or dual-clip) and apply truncated importance sampling (TIS) to bound the ratio"),
              _policy_update_instability, any_of=("policy_kl", "importance_ratio")),
)
"""Every signature, in the order they are checked."""

_BY_KIND = {s.kind: s for s in SIGNATURES}


def health_check(metrics: pd.DataFrame, *, signatures: Sequence[Signature] = SIGNATURES,
                 overrides: Mapping[str, str] | None = None) -> HealthReport:
    """Check every signature on a wide per-step table (index = step, columns = metric names).

    Columns may be any framework's names (``HEALTH_SCALARS``, else the name families of
    :mod:`rolloutlab.analysis._names`); ``overrides`` maps a quantity to the column to read
    for it (``--metric``).  Non-numeric cells are missing.  Findings are sorted most
    severe first, then by onset."""
    rep = HealthReport()
    if metrics is None or metrics.empty:
        rep.missing["all"] = "no per-step scalars"
        return rep
    sc, names = resolve_scalars(metrics, overrides)
    rep.scalars = names
    rep.unrecognised = not_understood([str(c) for c in metrics.columns], names)
    n = len(metrics.index)
    for sig in signatures:
        need = sig.any_of or sig.reads
        have = [k for k in need if k in sc]
        if (sig.any_of and not have) or (not sig.any_of and len(have) < len(need)):
            lacking = [k for k in need if k not in sc]
            looked = "; ".join(f"{k}: {', '.join(HEALTH_SCALARS.get(k, (k,)))}" for k in lacking)
            joiner = " or " if sig.any_of else " and "
            rep.missing[sig.kind] = f"needs {joiner.join(lacking)} (looked for {looked})"
            continue
        steps = max(int((~np.isnan(sc[k].y)).sum()) for k in have)
        if steps < MIN_STEPS:
            rep.missing[sig.kind] = f"{steps} step(s) logged: needs {MIN_STEPS}"
            continue
        rep.checked.append(sig.kind)
        f = sig.detect(sc, n)
        if f is not None:
            rep.findings.append(f)
    rep.findings.sort(key=lambda f: (-SEVERITY_RANK.get(f.severity or "info", 0), f.onset or 0))
    return rep


def health_findings(metrics: pd.DataFrame) -> list[Finding]:
    """The health findings of a per-step table (see :func:`health_check`)."""
    return health_check(metrics).findings


def at_least(findings: Sequence[Finding], severity: str) -> list[Finding]:
    """The findings whose severity is ``severity`` or worse (no severity counts as info)."""
    floor = SEVERITY_RANK[severity]
    return [f for f in findings if SEVERITY_RANK.get(f.severity or "info", 0) >= floor]


__doc__ = (__doc__ or "") + _table_rows(SIGNATURES) + "\n"


REPLACES: dict[str, tuple[str, ...]] = {
    "entropy_collapse": ("entropy_collapse", "entropy_drop"),
    "zero_variance_groups": ("signal",),
    "ungraded_spike": (),
}
"""Older findings a health finding supersedes (the same signature, now with onset and
what to try), so no verdict is stated twice."""


def merge_health(findings: list[Finding], skipped: dict[str, str], table: pd.DataFrame,
                 overrides: Mapping[str, str] | None = None) -> list[Finding]:
    """``findings`` with the health findings of ``table`` added (superseding the kinds in
    ``REPLACES``), sorted by score; each signature not checked is recorded in ``skipped``
    as ``health:<kind>`` with the reason, the column read for each quantity as
    ``names:read`` and the columns not understood as ``names:not_understood``."""
    rep = health_check(table, overrides=overrides)
    for kind, why in rep.missing.items():
        skipped[f"health:{kind}"] = why
    if rep.scalars:
        skipped["names:read"] = "; ".join(f"{k} = {v}" for k, v in rep.scalars.items())
    if rep.unrecognised:
        skipped["names:not_understood"] = (f"{len(rep.unrecognised)} column(s) no name family reads "
                                            "(--metric QUANTITY=COLUMN to use one): " + ", ".join(rep.unrecognised))
    gone = {old for f in rep.findings for old in REPLACES.get(f.kind, ())}
    kept = [f for f in findings if f.kind not in gone]
    return sorted(kept + rep.findings, key=lambda f: -f.score)
