"""Synthetic per-step runs, healthy or with one planted pathology, to test the health check.

A healthy run (:func:`healthy_run`) logs, under rolloutlab's trainer names (verl's for
the critic, advantages and truncation), the scalars of a GRPO/PPO run that is learning:
correctness rising on a logistic curve, a format reward learned in the first steps,
response length drifting by −10 %…+100 %, entropy easing down to 40–80 % of its start,
KL to the reference growing like √t, clip fraction creeping up, a share of
zero-variance groups rising with success, a critic whose loss falls and explained
variance rises, gradient norms with log-normal noise and one or two isolated spikes (up
to 15×), a few ungraded blips, slow checkpoint steps every 50 steps.  Each run draws its
length (60–300 steps), levels and noise at random.

:func:`planted_run` adds one pathology (``PLANTED``: one per signature in
:data:`rolloutlab.analysis._health.SIGNATURES`) from an onset drawn uniformly in
[20 %, 80 %] of the run, with a random size and ramp; it returns the run and the onset
step.  The signs a converging run shows too (entropy collapse, zero-variance groups,
advantages collapsing, gradients vanishing) are planted as the failure they are only when
the outcome does not converge (:mod:`rolloutlab.analysis._severity`), so with them
correctness stalls at its onset level, kept below 0.7.  Everything is vectorised numpy: a run costs well under a millisecond.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pandas as pd

__all__ = ["CONVENTIONS", "PLANTED", "converging_run", "healthy_run", "planted_run", "recall_false_alarms", "renamed"]

F = npt.NDArray[np.float64]


def _lognoise(rng: np.random.Generator, n: int, sd: float) -> F:
    return np.exp(rng.normal(0.0, sd, n))


def _base(rng: np.random.Generator, n: int) -> dict[str, F]:
    t = np.linspace(0.0, 1.0, n)
    c0, c1 = rng.uniform(0.05, 0.35), rng.uniform(0.5, 0.9)
    mid, width = rng.uniform(0.2, 0.5), rng.uniform(0.08, 0.2)
    corr = c0 + (c1 - c0) / (1 + np.exp(-(t - mid) / width))
    f0 = rng.uniform(0.2, 0.6)
    fmt = 1 - (1 - f0) * np.exp(-t / rng.uniform(0.05, 0.15))
    growth = rng.uniform(-0.1, 1.0)
    ent_floor, ent_tau = rng.uniform(0.4, 0.8), rng.uniform(0.2, 0.6)
    kl_scale = rng.uniform(0.002, 0.05)
    clip0 = rng.uniform(0.002, 0.03)
    zv0 = rng.uniform(0.1, 0.3)
    adv = rng.uniform(1.5, 3.0)
    v0 = rng.uniform(0.05, 2.0)
    g0 = rng.uniform(0.1, 1.0)
    grad = g0 * (1 - 0.4 * t) * _lognoise(rng, n, 0.2)
    for _ in range(int(rng.integers(1, 3))):
        if rng.random() < 0.7:
            grad[rng.integers(0, n)] *= rng.uniform(3.0, 15.0)
    step_s = rng.uniform(20.0, 200.0) * (1 + 0.3 * growth * t) * _lognoise(rng, n, 0.05)
    step_s[49::50] *= 2.0  # checkpoint steps
    ungraded = rng.uniform(0.0, 0.02) + np.abs(rng.normal(0.0, 0.005, n))
    if rng.random() < 0.3:
        ungraded[rng.integers(0, n)] += rng.uniform(0.05, 0.15)
    share_high = np.clip(rng.uniform(0.35, 0.65) + rng.normal(0.0, 0.03, n), 0.0, 1.0)
    clip = clip0 * (1 + 0.5 * t) * _lognoise(rng, n, 0.1)
    # the policy-update KL draws from a child stream, so adding it left every other
    # column of a seed's run as it was (the figures measured before stay comparable)
    kl_rng = rng.spawn(1)[0]
    return {
        "success/rate": np.clip(corr + rng.normal(0.0, 0.025, n), 0.0, 1.0),
        "reward/format": np.clip(fmt + rng.normal(0.0, 0.02, n), 0.0, 1.0),
        "response/length_mean": rng.uniform(200.0, 800.0) * (1 + growth * t) * _lognoise(rng, n, 0.03),
        "actor/entropy": rng.uniform(0.3, 1.5) * (ent_floor + (1 - ent_floor) * np.exp(-t / ent_tau))
        * _lognoise(rng, n, 0.03),
        "actor/kl_loss": kl_scale * (1e-3 + np.sqrt(t)) * _lognoise(rng, n, 0.15),
        "actor/pg_clipfrac": clip,
        "actor/pg_clipfrac_ratio_high": clip * share_high,
        "actor/pg_clipfrac_ratio_low": clip * (1 - share_high),
        "rollout/zero_variance_frac": np.clip(zv0 + 0.15 * (corr - c0) + rng.normal(0.0, 0.03, n), 0.0, 1.0),
        "critic/advantages/max": adv * _lognoise(rng, n, 0.05),
        "critic/advantages/min": -adv * rng.uniform(0.8, 1.2) * _lognoise(rng, n, 0.05),
        "critic/vf_loss": v0 * (0.3 + 0.7 * np.exp(-t / 0.3)) * _lognoise(rng, n, 0.1),
        "critic/vf_explained_var": 0.1 + 0.5 * (1 - np.exp(-t / 0.3)) + rng.normal(0.0, 0.04, n),
        "actor/grad_norm": grad,
        "actor/skipped_nonfinite": np.zeros(n),
        "response_length/clip_ratio": np.clip(rng.uniform(0.0, 0.05) + 0.05 * max(growth, 0.0) * t
                                              + rng.normal(0.0, 0.01, n), 0.0, 1.0),
        "response/repetition_rate": np.clip(rng.uniform(0.01, 0.05) + rng.normal(0.0, 0.005, n), 0.0, 1.0),
        "timing/step_s": step_s,
        "rollout/sampler_trainer_kl": rng.uniform(1e-4, 1e-3) * _lognoise(rng, n, 0.2),
        "rollout/ungraded_rate": np.clip(ungraded, 0.0, 1.0),
        "actor/ppo_kl": kl_rng.uniform(2e-4, 5e-3) * (1 + 0.5 * t) * _lognoise(kl_rng, n, 0.3),
        "_corr": corr,
        "_fmt": fmt,
    }


def _frame(cols: dict[str, F], rng: np.random.Generator) -> pd.DataFrame:
    n = cols["_corr"].shape[0]
    corr = np.clip(cols.pop("_corr") + rng.normal(0.0, 0.025, n), 0.0, 1.0)
    fmt = cols.pop("_fmt")
    bonus = cols.pop("_bonus", np.zeros(n))
    cols["success/rate"] = corr
    cols["reward/mean"] = 0.8 * corr + 0.2 * fmt + bonus + rng.normal(0.0, 0.02, n)
    df = pd.DataFrame(cols, index=pd.RangeIndex(1, n + 1, name="step"))
    return df


def healthy_run(rng: np.random.Generator, n: int | None = None) -> pd.DataFrame:
    """A healthy run of ``n`` steps (default: 60–300 at random); see the module docstring."""
    n = int(rng.integers(60, 301)) if n is None else n
    return _frame(_base(rng, n), rng)


def converging_run(rng: np.random.Generator, n: int | None = None) -> pd.DataFrame:
    """A healthy run that converges: success climbs to 0.93–0.99, entropy falls to 5–20 %
    of its start as the policy becomes sure of its answers, and the groups go
    zero-variance (all solved) as success nears 1, so the advantage spread shrinks with
    them.  What a run that solves its task looks like, not a pathology."""
    n = int(rng.integers(60, 301)) if n is None else n
    c = _base(rng, n)
    t = np.linspace(0.0, 1.0, n)
    c0, c1 = rng.uniform(0.05, 0.35), rng.uniform(0.93, 0.99)
    mid, width = rng.uniform(0.2, 0.45), rng.uniform(0.05, 0.12)
    c["_corr"] = c0 + (c1 - c0) / (1 + np.exp(-(t - mid) / width))
    floor = rng.uniform(0.05, 0.2)
    e0 = c["actor/entropy"][0]
    c["actor/entropy"] = e0 * (floor + (1 - floor) / (1 + np.exp((t - mid) / width))) * _lognoise(rng, n, 0.03)
    solved = c["_corr"] ** 8  # a group of 8 is all-solved with probability p^8
    c["rollout/zero_variance_frac"] = np.clip(solved + (1 - c["_corr"]) ** 8 + rng.normal(0.0, 0.02, n), 0.0, 1.0)
    live = np.clip(1 - c["rollout/zero_variance_frac"], 0.05, 1.0)
    c["critic/advantages/max"] *= live
    c["critic/advantages/min"] *= live
    return _frame(c, rng)


def _ramp(n: int, o: int, d: float) -> F:
    return np.clip((np.arange(n) - o) / max(d, 1.0), 0.0, 1.0)


PLANTED = (
    "kl_blowup", "entropy_collapse", "length_hacking", "format_gaming", "clip_saturation",
    "zero_variance_groups", "advantage_collapse", "value_divergence", "grad_spikes", "grad_nonfinite",
    "grad_vanishing", "truncation_starvation", "repetition_rising", "asymmetric_drift", "throughput_rot",
    "offpolicy_mismatch", "ungraded_spike", "policy_update_instability",
)
"""The pathologies :func:`planted_run` can plant (one per health signature)."""

_STALLS = ("entropy_collapse", "zero_variance_groups", "advantage_collapse", "grad_vanishing")
"""Planted with the outcome stalled (see the module docstring)."""


def planted_run(kind: str, rng: np.random.Generator, n: int | None = None) -> tuple[pd.DataFrame, int]:
    """A healthy run with ``kind`` planted from a random onset; returns (run, onset step)."""
    if kind not in PLANTED:
        raise ValueError(f"unknown pathology {kind!r}; known: {', '.join(PLANTED)}")
    n = int(rng.integers(60, 301)) if n is None else n
    c = _base(rng, n)
    o = int(rng.integers(int(0.2 * n), int(0.8 * n) + 1))
    if kind in _STALLS:  # the failure, not convergence: the outcome stops below a high level
        c["_corr"] = np.minimum(np.where(np.arange(n) >= o, c["_corr"][o], c["_corr"]), 0.7)
    i = np.arange(n)
    fast = _ramp(n, o, rng.uniform(0.02, 0.08) * n)
    slow = _ramp(n, o, 0.3 * n)
    after = i >= o
    if kind == "kl_blowup":
        c["actor/kl_loss"] *= np.exp(np.log(rng.uniform(8.0, 200.0)) * (i - o).clip(0) / max(n - 1 - o, 1))
    elif kind == "entropy_collapse":
        floor = rng.uniform(0.02, 0.15)
        c["actor/entropy"] *= np.where(after, floor + (1 - floor) * np.exp(-(i - o).clip(0) / (0.03 * n)), 1.0)
    elif kind == "length_hacking":
        c["response/length_mean"] *= 1 + (rng.uniform(1.6, 3.0) - 1) * slow
        c["_corr"] = np.where(after, c["_corr"][o], c["_corr"])
        c["_bonus"] = rng.uniform(0.1, 0.2) * slow
    elif kind == "format_gaming":
        low, high = rng.uniform(0.1, 0.3), rng.uniform(0.8, 0.98)
        c["_fmt"] = low + (high - low) * fast
        c["reward/format"] = np.clip(c["_fmt"] + rng.normal(0.0, 0.02, n), 0.0, 1.0)
        c["_corr"] = np.where(after, c["_corr"][o], c["_corr"])
    elif kind == "clip_saturation":
        c["actor/pg_clipfrac"] = c["actor/pg_clipfrac"] + rng.uniform(0.25, 0.6) * slow
    elif kind == "zero_variance_groups":
        zv = c["rollout/zero_variance_frac"]
        c["rollout/zero_variance_frac"] = zv + fast * (rng.uniform(0.7, 0.95) - zv)
    elif kind == "advantage_collapse":
        keep = 1 - fast * (1 - rng.uniform(0.01, 0.1))
        c["critic/advantages/max"] *= keep
        c["critic/advantages/min"] *= keep
    elif kind == "value_divergence":
        c["critic/vf_loss"] *= np.exp(np.log(rng.uniform(10.0, 100.0)) * slow)
        ev = c["critic/vf_explained_var"]
        c["critic/vf_explained_var"] = ev * (1 - slow) + slow * rng.uniform(-0.5, 0.1)
    elif kind == "grad_spikes":
        hit = after & (rng.random(n) < rng.uniform(0.15, 0.3))
        hit[o] = True
        c["actor/grad_norm"] = np.where(hit, c["actor/grad_norm"] * rng.uniform(15.0, 200.0, n), c["actor/grad_norm"])
    elif kind == "grad_nonfinite":
        hit = after & (rng.random(n) < rng.uniform(0.1, 0.3))
        hit[o] = True
        c["actor/skipped_nonfinite"] = np.where(hit, rng.integers(1, 5, n), 0).astype(float)
        c["actor/grad_norm"] = np.where(hit, np.inf, c["actor/grad_norm"])
    elif kind == "grad_vanishing":
        c["actor/grad_norm"] *= 1 - fast * (1 - rng.uniform(1e-3, 2e-2))
    elif kind == "truncation_starvation":
        c["response_length/clip_ratio"] = c["response_length/clip_ratio"] + rng.uniform(0.2, 0.6) * slow
    elif kind == "repetition_rising":
        c["response/repetition_rate"] = c["response/repetition_rate"] + rng.uniform(0.15, 0.5) * fast
    elif kind == "asymmetric_drift":
        clip = c["actor/pg_clipfrac"]
        share = c["actor/pg_clipfrac_ratio_high"] / clip
        target = rng.uniform(0.85, 0.98)
        if rng.random() < 0.5:
            target = 1 - target
        share = share + fast * (target - share)
        c["actor/pg_clipfrac_ratio_high"], c["actor/pg_clipfrac_ratio_low"] = clip * share, clip * (1 - share)
    elif kind == "throughput_rot":
        c["timing/step_s"] *= 1 + rng.uniform(1.5, 4.0) * slow
    elif kind == "offpolicy_mismatch":
        c["rollout/sampler_trainer_kl"] *= np.exp(np.log(rng.uniform(8.0, 100.0)) * slow)
    elif kind == "ungraded_spike":
        end = int(rng.integers(o + max(3, int(0.05 * n)), n + 1))
        burst = (i >= o) & (i < end)
        c["rollout/ungraded_rate"] = np.clip(c["rollout/ungraded_rate"] + burst * rng.uniform(0.15, 0.6), 0.0, 1.0)
    elif kind == "policy_update_instability":
        ramp = fast if rng.random() < 0.5 else slow
        c["actor/ppo_kl"] *= np.exp(np.log(rng.uniform(8.0, 20_000.0)) * ramp)
    return _frame(c, rng), o + 1


def recall_false_alarms(seeds: int = 100, *, kinds: tuple[str, ...] = PLANTED, tolerance: float = 0.1,
                        seed0: int = 0, convention: str = "rolloutlab",
                        make_healthy: Callable[..., pd.DataFrame] | None = None,
                        weigh: bool = True) -> tuple[pd.DataFrame, dict[str, float]]:
    """Recall per planted kind and the healthy false-alarm rate, over ``seeds`` runs each.

    A planted run counts as found when the health check reports its kind with an onset
    within ``tolerance`` × run length of the planted one (only the planted kind's
    signature is run on it: what other signatures say does not change its recall).  A
    healthy run is a false alarm when any signature reports warning or worse.  Seeds are
    ``seed0 + i`` for healthy runs and ``seed0 + 10_000·(k + 1) + i`` for kind k.
    Every run is renamed into ``convention`` (:data:`CONVENTIONS`) before it is checked;
    ``make_healthy`` generates the healthy runs (default :func:`healthy_run`; e.g.
    :func:`converging_run`).  Returns (one row per kind: found, early, late, missed,
    recall), and the healthy summary (runs, false_alarms, rate, and each flagged kind's
    count).  ``weigh`` (default): a healthy run's findings are weighed against its own outcome
    first (:func:`rolloutlab.analysis._severity.apply_severity`, as ``analyze`` reports them),
    so a run converging to high success is not a false alarm for showing convergence signs."""
    from rolloutlab.analysis._health import SIGNATURES, at_least, health_check

    by_kind = {s.kind: s for s in SIGNATURES}
    rows = []
    for k, kind in enumerate(kinds):
        found = early = late = 0
        for i in range(seeds):
            run, onset = planted_run(kind, np.random.default_rng(seed0 + 10_000 * (k + 1) + i))
            hits = [f for f in health_check(renamed(run, convention), signatures=[by_kind[kind]]).findings
                    if f.kind == kind]
            if not hits:
                continue
            d = (hits[0].onset or 0) - onset
            if abs(d) <= tolerance * len(run):
                found += 1
            elif d < 0:
                early += 1
            else:
                late += 1
        rows.append({"signature": kind, "runs": seeds, "found": found, "early": early, "late": late,
                     "missed": seeds - found - early - late, "recall": found / seeds})
    flagged: dict[str, float] = {}
    alarms = 0
    for i in range(seeds):
        run = (make_healthy or healthy_run)(np.random.default_rng(seed0 + i))
        named = renamed(run, convention)
        findings = health_check(named).findings
        if weigh:  # as analyze reports them: convergence signs weighed against the run's own outcome
            from rolloutlab.analysis._health import resolve_scalars
            from rolloutlab.analysis._severity import apply_severity, outcome_of

            scal, _ = resolve_scalars(named)
            steps = pd.DataFrame({c: pd.Series(scal[k].y, index=scal[k].x.astype(int))
                                  for k, c in (("correctness", "success_rate"), ("reward", "mean_reward")) if k in scal})
            findings = apply_severity(findings, outcome_of(steps, findings, None))
        bad = at_least(findings, "warning")
        alarms += bool(bad)
        for f in bad:
            flagged[f.kind] = flagged.get(f.kind, 0) + 1
    healthy = {"runs": float(seeds), "false_alarms": float(alarms), "rate": alarms / seeds, **flagged}
    cols = ["signature", "runs", "found", "early", "late", "missed", "recall"]
    return pd.DataFrame(rows, columns=cols).set_index("signature"), healthy


_GEN_NAMES = (
    "reward/mean", "success/rate", "reward/format", "response/length_mean", "actor/entropy", "actor/kl_loss",
    "actor/pg_clipfrac", "actor/pg_clipfrac_ratio_high", "actor/pg_clipfrac_ratio_low", "rollout/zero_variance_frac",
    "critic/advantages/max", "critic/advantages/min", "critic/vf_loss", "critic/vf_explained_var",
    "actor/grad_norm", "actor/skipped_nonfinite", "response_length/clip_ratio", "response/repetition_rate",
    "timing/step_s", "rollout/sampler_trainer_kl", "rollout/ungraded_rate", "actor/ppo_kl",
)


def _names(*names: str) -> dict[str, str]:
    assert len(names) == len(_GEN_NAMES)
    return dict(zip(_GEN_NAMES, names, strict=True))


CONVENTIONS: dict[str, dict[str, str]] = {
    "rolloutlab": {n: n for n in _GEN_NAMES},
    # verl (verl/trainer/ppo/metric_utils.py, verl/workers/actor/dp_actor.py); quantities
    # verl does not log are named in its style
    "verl": _names("critic/score/mean", "critic/acc/mean", "critic/format_score/mean", "response_length/mean",
                   "actor/entropy", "actor/kl_loss", "actor/pg_clipfrac", "actor/pg_clipfrac_ratio_high",
                   "actor/pg_clipfrac_ratio_low", "critic/zero_std_frac", "critic/advantages/max", "critic/advantages/min",
                   "critic/vf_loss", "critic/vf_explained_var", "actor/grad_norm", "actor/nonfinite_steps",
                   "response_length/clip_ratio", "response/repetition_rate", "timing_s/step",
                   "training/rollout_probs_diff_mean", "critic/ungraded_rate", "actor/ppo_kl"),
    # TRL (trl/trainer/grpo_trainer.py; the PPO trainer for approx KL, value loss, EV)
    "trl": _names("reward", "rewards/accuracy_reward/mean", "rewards/format_reward/mean", "completions/mean_length",
                  "entropy", "kl", "clip_ratio/region_mean", "clip_ratio/high_mean", "clip_ratio/low_mean",
                  "frac_reward_zero_std", "advantages/max", "advantages/min", "loss/value_avg",
                  "val/explained_variance", "grad_norm", "nonfinite_steps", "completions/clipped_ratio",
                  "completions/repetition_rate", "step_time", "sampling/sampling_logp_difference/mean",
                  "rewards/ungraded_rate", "policy/approxkl_avg"),
    # SkyRL (skyrl_train/trainer.py)
    "skyrl": _names("reward/avg_raw_reward", "reward/success_rate", "reward/format_score", "generate/avg_num_tokens",
                    "policy/policy_entropy", "policy/policy_kl", "policy/loss_metrics/clip_ratio",
                    "policy/loss_metrics/clip_ratio_high", "policy/loss_metrics/clip_ratio_low",
                    "reward/zero_std_frac", "policy/advantages_max", "policy/advantages_min", "critic/critic_loss",
                    "critic/explained_variance", "policy/grad_norm", "policy/nonfinite_steps",
                    "generate/truncated_ratio", "generate/repetition_rate", "timing/step", "policy/rollout_train_kl",
                    "generate/ungraded_rate", "policy/ppo_kl"),
    # OpenRLHF (openrlhf/models/actor.py: ppo_kl, ppo_clip_ratio, vllm_kl)
    "openrlhf": _names("reward", "acc", "format_reward", "response_length", "entropy", "kl", "ppo_clip_ratio",
                       "ppo_clip_ratio_high", "ppo_clip_ratio_low", "zero_std_ratio", "advantages_max",
                       "advantages_min", "critic_loss", "explained_variance", "actor_grad_norm", "nonfinite_steps",
                       "truncated_ratio", "repetition_rate", "step_time", "vllm_kl", "ungraded_ratio", "ppo_kl"),
    # prime-rl (orchestrator/trainer: reward/mean, seq_len/mean, is_truncated/mean, mismatch_kl/mean)
    "prime-rl": _names("reward/mean", "solved/mean", "format/mean", "seq_len/mean", "entropy/mean", "ref_kl/mean",
                       "clip_frac/mean", "clip_frac_high/mean", "clip_frac_low/mean", "zero_std_frac",
                       "advantage/max", "advantage/min", "value_loss/mean", "explained_var/mean", "optim/grad_norm",
                       "optim/nonfinite_steps", "is_truncated/mean", "repetition/mean", "time/step",
                       "mismatch_kl/mean", "ungraded/mean", "approx_kl/mean"),
    # NeMo-RL (nemo_rl/algorithms/grpo.py)
    "nemo-rl": _names("train/reward", "train/accuracy", "train/format_reward", "train/mean_gen_tokens_per_sample",
                      "train/approx_entropy", "train/kl_penalty", "train/clip_fraction", "train/clip_fraction_high",
                      "train/clip_fraction_low", "train/zero_std_fraction", "train/advantages_max",
                      "train/advantages_min", "train/value_loss", "train/explained_variance", "train/grad_norm",
                      "train/nonfinite_steps", "train/truncated_fraction", "train/repetition_rate",
                      "timing/train/total_step_time", "train/gen_kl_error", "train/ungraded_fraction",
                      "train/approx_kl"),
    # ART (train/reward, train/reward_std_dev, train/exception_rate, train/kl_div)
    "art": _names("train/reward", "train/success", "train/format", "train/completion_tokens", "train/entropy",
                  "train/kl_div", "train/clip_frac", "train/clip_frac_high", "train/clip_frac_low",
                  "train/zero_std_frac", "train/advantage_max", "train/advantage_min", "train/value_loss",
                  "train/explained_variance", "train/grad_norm", "train/nonfinite_steps", "train/truncated_rate",
                  "train/repetition_rate", "train/step_time", "train/sampler_kl", "train/exception_rate",
                  "train/approx_kl"),
    # the Tinker cookbook (env/all/reward/total, env/all/correct, optim/kl_sample_train_v1, time/total)
    "tinker": _names("env/all/reward/total", "env/all/correct", "env/all/format", "env/all/ac_tokens_per_turn",
                     "optim/entropy", "optim/kl_ref", "optim/clip_frac", "optim/clip_frac_high", "optim/clip_frac_low",
                     "env/all/frac_zero_std", "optim/advantage_max", "optim/advantage_min", "optim/value_loss",
                     "optim/explained_variance", "optim/grad_norm", "optim/nonfinite_steps", "env/all/truncated_frac",
                     "env/all/repetition_rate", "time/total", "optim/kl_sample_train_v1", "env/all/ungraded_frac",
                     "optim/ppo_kl"),
    "snake_case": _names("mean_reward", "success_rate", "format_reward", "response_length_mean", "entropy_mean",
                         "kl_to_ref", "clip_frac", "clip_frac_high", "clip_frac_low", "zero_variance_frac",
                         "advantage_max", "advantage_min", "value_loss", "explained_variance", "grad_norm",
                         "nonfinite_steps", "truncated_frac", "repetition_rate", "step_time_s",
                         "sampler_trainer_kl", "ungraded_rate", "approx_kl"),
    "dotted_camel": _names("train.meanReward", "train.successRate", "train.formatReward", "train.responseLengthMean",
                           "train.entropy", "train.klToRef", "train.clipFrac", "train.clipFracHigh",
                           "train.clipFracLow", "train.zeroVarianceFrac", "train.advantageMax", "train.advantageMin",
                           "train.valueLoss", "train.explainedVariance", "train.gradNorm", "train.nonfiniteSteps",
                           "train.truncatedFrac", "train.repetitionRate", "train.stepTime",
                           "train.samplerTrainerKl", "train.ungradedRate", "train.approxKl"),
}
"""The generator's columns renamed into each naming convention: the framework's own name
where it logs that quantity (the file cited), a name in its style where it does not."""


def renamed(run: pd.DataFrame, convention: str) -> pd.DataFrame:
    """``run`` with its columns renamed into ``convention`` (:data:`CONVENTIONS`)."""
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown convention {convention!r}; known: {', '.join(CONVENTIONS)}")
    return run.rename(columns=CONVENTIONS[convention])
