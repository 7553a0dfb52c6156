"""Metric names by family: which quantity a logged column holds, read from its name's tokens.

Trainers name the same quantity differently (``actor/ppo_kl``, ``ppo_kl``,
``losses/approx_kl``; ``response_length/clip_ratio``, ``completions/clipped_ratio``,
``is_truncated/mean``).  The exact names of the frameworks we know are listed in
:data:`rolloutlab.analysis._health.HEALTH_SCALARS` and tried first; a column none of them
names is read here.  A name is split into lower-case tokens at ``/ . _ -``, spaces and
camelCase humps (``train/rewardStd`` → ``train reward std``); each :class:`Family` states
the tokens a name must hold (one of each group) and those it must not.  Families are
tried in :data:`FAMILIES` order and a column belongs to the first that matches, so the
narrow ones (truncated share, policy-update KL, sampler/trainer KL) come before the broad
ones they would otherwise fall into (clip fraction, KL to the reference).  Names under an
evaluation prefix (``val``, ``validation``, ``eval``, ``test``) are never read as training
quantities.  When several columns match one family, a ``mean``/``avg`` one, then the
shortest name, wins.

The token rules were written from the metric names these frameworks log (read in their
sources): verl ``verl/trainer/ppo/metric_utils.py`` and ``verl/workers/actor/dp_actor.py``;
TRL ``trl/trainer/grpo_trainer.py`` and ``ppo_trainer.py``; SkyRL
``skyrl_train/trainer.py``; OpenRLHF ``openrlhf/trainer/ppo_utils/experience_maker.py``
and ``openrlhf/models/actor.py`` (``ppo_kl``, ``ppo_clip_ratio``); prime-rl's orchestrator
and trainer (``seq_len/mean``, ``is_truncated/mean``, ``mismatch_kl/mean``,
``optim/grad_norm``); NeMo-RL ``nemo_rl/algorithms/grpo.py`` (``train/approx_entropy``,
``train/gen_kl_error``, ``train/mean_gen_tokens_per_sample``); ART (``train/reward_std_dev``,
``train/exception_rate``, ``train/kl_div``); the Tinker cookbook (``env/all/reward/total``,
``env/all/frac_all_good``, ``optim/kl_sample_train_v1``); and plain snake_case.  The
name tables in ``tests/analysis/test_names.py`` are those names; a name not seen there
may still be misread, so ``--metric QUANTITY=COLUMN`` overrides any choice, and every
column read by no family is listed as not understood.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["FAMILIES", "QUANTITIES", "Family", "classify", "parse_overrides", "recognise", "tokens"]

_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT = re.compile(r"[^a-z0-9@]+")
EVAL_TOKENS = frozenset({"val", "validation", "eval", "evaluation", "test"})
"""Tokens that mark a held-out split: such names are never read as training quantities."""
_STATS = frozenset({"std", "stdev", "dev", "min", "max", "var", "sum", "median", "p50", "p90", "p95", "p99"})
_MEAN = frozenset({"mean", "avg", "average"})


def tokens(name: str) -> tuple[str, ...]:
    """Lower-case tokens of a metric name: ``"train/rewardStd_mean"`` → ``("train", "reward", "std", "mean")``."""
    return tuple(t for t in _SPLIT.split(_HUMP.sub("_", str(name)).lower()) if t)


@dataclass(frozen=True)
class Family:
    """One quantity's names: every group in one of ``all_of`` must share a token with the
    name (alternatives: any one entry of ``all_of`` may match), none of ``none_of`` may
    appear, and unless ``stat`` the name may carry no statistic other than a mean."""

    quantity: str
    all_of: tuple[tuple[frozenset[str], ...], ...]
    none_of: frozenset[str] = frozenset()
    stat: bool = False
    """The quantity is itself a statistic (a std, a max): statistic tokens are allowed."""

    def matches(self, toks: tuple[str, ...]) -> bool:
        have = set(toks)
        if have & self.none_of or have & EVAL_TOKENS:
            return False
        if not self.stat and have & _STATS:
            return False
        return any(all(have & group for group in alt) for alt in self.all_of)


def _f(quantity: str, *alts: tuple[Iterable[str], ...], none: Iterable[str] = (), stat: bool = False) -> Family:
    return Family(quantity, tuple(tuple(frozenset(g) for g in alt) for alt in alts), frozenset(none), stat)


_KL = {"kl", "kld", "kldiv", "approxkl"}
_LENGTH = {"length", "len", "lengths"}
_RESPONSE = {"response", "responses", "completion", "completions", "seq", "sequence", "gen", "generate",
             "generation", "generated", "output", "sample", "ac"}
_CLIP = {"clip", "clipped", "clipfrac", "clipping"}
_SHARE = {"frac", "fraction", "ratio", "rate", "share", "pct", "percent"}
_REWARD = {"reward", "rewards", "score", "scores"}
_TIME = {"time", "timing", "s", "sec", "secs", "seconds", "duration"}
_SOLVED = {"solved", "correct", "good", "right", "pass", "passed", "success"}
_UNSOLVED = {"wrong", "bad", "failed", "incorrect", "fail", "zero"}

FAMILIES: tuple[Family, ...] = (
    _f("truncation_rate", ({"truncated", "truncation", "trunc", "overlong", "overflow"},),
       (_CLIP, _LENGTH | _RESPONSE), none={"terminated", "time"}),
    _f("sampler_trainer_kl", (_KL, {"sample", "sampler", "sampling", "mismatch", "vllm", "rollout", "inference",
                                    "gen", "generation", "engine"}),
       ({"probs", "prob", "logp", "logprob", "logprobs"}, {"diff", "difference", "error", "mult", "mismatch"}),
       ({"sampler"}, {"trainer"}),  # rolloutlab's rollout/sampler_trainer_k3 (the k3 estimate)
       none={"coef", "coeff"}),
    _f("logprob_diff", ({"probs", "prob", "logp", "logprob", "logprobs"}, {"absdiff", "diff", "difference"}),
       stat=True),
    _f("policy_kl", (_KL, {"ppo", "approx", "old", "update"}), ({"approxkl"},),
       none={"ref", "reference", "coef", "coeff", "target", "entropy"}),
    _f("clipfrac_high", (_CLIP, {"high", "upper"}), none=_LENGTH | _RESPONSE | {"grad", "dual"}),
    _f("clipfrac_low", (_CLIP, {"low"}), none=_LENGTH | _RESPONSE | {"grad", "dual"}),
    # verl's actor/pg_clipfrac_lower: the dual-clip bound (A < 0), not the lower ratio bound
    _f("dual_clipfrac", (_CLIP, {"lower", "dual"}), ({"clipfrac"}, {"lower", "dual"}),
       none=_LENGTH | _RESPONSE | {"grad"}),
    _f("clipfrac", ({"clipfrac"},), (_CLIP, _SHARE | {"region"}),
       none=_LENGTH | _RESPONSE | {"grad", "high", "low", "upper", "lower", "dual", "importance", "is"}),
    _f("importance_ratio", ({"ratio", "ratios"}, {"importance", "is", "ppo", "probs", "prob", "policy"}),
       none=_CLIP | {"clamped", "ref", "kl"} | _LENGTH),
    # rolloutlab's success/rate_all (success over all rollouts, ungraded counted) is a
    # success rate, not a share of all-solved groups
    _f("correctness", ({"success"}, {"rate"}, {"all"}), none={"frac", "groups", "group"}),
    # "all" alone is Tinker's all-environments prefix (env/all/correct): a share token is needed
    _f("all_solved_frac", ({"all"}, _SOLVED, _SHARE), ({"solve"}, {"all"}), none=_UNSOLVED | {"none", "mixed"}),
    _f("none_solved_frac", ({"none"}, _SOLVED | {"solve"}), ({"all"}, _UNSOLVED, _SHARE), none={"mixed"}),
    _f("zero_variance_frac", ({"zero"}, {"std", "variance", "var", "signal"}), ({"zerovar", "degenerate"},),
       stat=True),
    _f("reward_std", (_REWARD, {"std", "stdev"}), none={"zero", "frac", "advantage", "advantages"}, stat=True),
    _f("zero_advantage_frac", ({"advantage", "advantages", "adv"}, {"zero"}), stat=True),
    _f("advantage_abs_mean", ({"advantage", "advantages", "adv"}, {"abs"}), stat=True),
    # rolloutlab's adv/label_frac: the share of turns whose reward is a process-reward label
    _f("label_frac", ({"advantage", "advantages", "adv", "label", "labels"}, {"label", "labels"}, _SHARE), stat=True),
    _f("advantage_std", ({"advantage", "advantages", "adv"}, {"std", "stdev"}), stat=True),
    _f("advantage_max", ({"advantage", "advantages", "adv"}, {"max"}), stat=True),
    _f("advantage_min", ({"advantage", "advantages", "adv"}, {"min"}), stat=True),
    _f("advantage_mean", ({"advantage", "advantages", "adv"},), none={"zero", "abs", "frac", "share"}),
    _f("explained_var", ({"explained"}, {"var", "variance"}), stat=True),
    _f("value_loss", ({"value", "vf", "critic", "values"}, {"loss"})),
    _f("policy_loss", ({"pg", "policy", "actor", "surrogate"}, {"loss"}),
       none={"kl", "entropy", "value", "vf", "critic"}),
    _f("grad_norm", ({"grad", "gradient", "grads"}, {"norm"}), ({"gradnorm"},), none={"clip"}),
    _f("nonfinite", ({"nonfinite", "nan", "inf", "non"}, {"steps", "grad", "grads", "skipped", "finite", "count"})),
    _f("lr", ({"lr"},), ({"learning"}, {"rate"})),
    _f("generation_time", (_TIME, {"gen", "generate", "generation", "rollout", "rollouts", "sampling"}),
       none={"token", "tokens"}),
    _f("throughput", ({"tokens", "token", "samples"}, {"per"}, _TIME), ({"throughput"},)),
    _f("step_time", (_TIME, {"step", "iteration", "iter"}), ({"time", "timing"}, {"total"}), none={"token", "tokens"}),
    _f("update_time", (_TIME, {"update", "backward", "forward", "optimizer", "train", "training"}),
       none={"token", "tokens"}),
    _f("env_time", (_TIME, {"env", "environment", "tool", "tools"}), none={"token", "tokens"}),
    _f("response_length", (_LENGTH, _RESPONSE), (_RESPONSE, {"tokens", "num"}),
       none={"prompt", "total", "clip", "terminated", "time", "throughput"}),
    _f("tokens", ({"tokens"}, {"num", "total", "sum", "count", "sampled"}), stat=True),
    # rolloutlab's perf/update_tokens, perf/padding_share and perf/peak_memory_gb
    _f("update_tokens", ({"tokens"}, {"update"}), stat=True),
    _f("padding_share", ({"padding", "pad", "padded"}, _SHARE), stat=True),
    _f("peak_memory", ({"memory", "mem"}, {"peak", "max", "allocated", "reserved"}), stat=True),
    _f("repetition", ({"repetition", "repeat", "repeated", "repetitive", "repetitions"},)),
    _f("ungraded_rate", ({"ungraded"},), ({"exception", "error", "errors", "ungradable"}, _SHARE)),
    _f("format", ({"format", "formatted"},)),
    _f("correctness", ({"acc", "accuracy", "correct", "correctness", "success", "solved", "solve"},)),
    _f("entropy", ({"entropy", "entropies"},), none={"coef", "coeff", "bonus"}),
    _f("kl_ref", (_KL,), none={"coef", "coeff", "target", "beta", "ctl"}),
    _f("reward", (_REWARD,), none={"kl", "penalty", "model", "baseline", "pass", "at"}),
    _f("turns", ({"turns", "turn"},), none={"token", "tokens", "time"}),
    _f("tool_calls", ({"tool", "tools"}, {"calls", "call"})),
    _f("invalid_actions", ({"invalid"}, {"actions", "action"})),
    # the step's bookkeeping: rollouts collected and graded, groups trained, retried,
    # dropped, set aside and refilled
    _f("group_counts", ({"groups", "group", "refills", "refill"},)),
    _f("rollout_counts", ({"episodes", "graded"},)),
)
"""Every family, narrowest first (a column belongs to the first that matches)."""

QUANTITIES = tuple(dict.fromkeys(f.quantity for f in FAMILIES))
"""The quantities a name can be read as (and ``--metric`` may name)."""


def classify(name: str) -> str | None:
    """The quantity a column name holds, or None when no family reads it."""
    toks = tokens(name)
    for fam in FAMILIES:
        if fam.matches(toks):
            return fam.quantity
    return None


def recognise(columns: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """(quantity → the column read for it, the columns no family reads).  Among columns
    of one quantity a ``mean``/``avg`` name, then the one with fewest tokens, then the
    first, wins."""
    best: dict[str, tuple[tuple[int, int, int], str]] = {}
    unknown: list[str] = []
    for i, col in enumerate(columns):
        q = classify(col)
        if q is None:
            unknown.append(str(col))
            continue
        toks = tokens(col)
        key = (0 if set(toks) & _MEAN else 1, len(toks), i)
        if q not in best or key < best[q][0]:
            best[q] = (key, str(col))
    return {q: col for q, (_, col) in best.items()}, unknown


def parse_overrides(pairs: Iterable[str], columns: Iterable[str] | None = None,
                    known: Iterable[str] = QUANTITIES) -> dict[str, str]:
    """``["policy_kl=my/kl", ...]`` → ``{"policy_kl": "my/kl"}``; a pair without ``=``, an
    unknown quantity or (when ``columns`` is given) a column the run did not log raises
    ``ValueError`` naming it and what is allowed."""
    allowed = tuple(known)
    out: dict[str, str] = {}
    cols = None if columns is None else [str(c) for c in columns]
    for pair in pairs:
        name, sep, column = pair.partition("=")
        name, column = name.strip(), column.strip()
        if not sep or not name or not column:
            raise ValueError(f"--metric {pair!r}: expected QUANTITY=COLUMN, e.g. policy_kl=actor/ppo_kl")
        if name not in allowed:
            raise ValueError(f"--metric {pair!r}: unknown quantity {name!r}; known: {', '.join(allowed)}")
        if cols is not None and column not in cols:
            raise ValueError(f"--metric {pair!r}: the run logged no column {column!r}; it logged: "
                             f"{', '.join(cols[:30])}{', …' if len(cols) > 30 else ''}")
        out[name] = column
    return out


def _families_markdown() -> str:
    """The families as a Markdown table (for ``docs/analysis.md``)."""
    rows = ["", "| quantity | a name holds one token of each group (alternatives: or) | and none of |", "|---|---|---|"]
    for fam in FAMILIES:
        alts = " **or** ".join(" + ".join("{" + ", ".join(sorted(g)) + "}" for g in alt) for alt in fam.all_of)
        rows.append(f"| ``{fam.quantity}`` | {alts} | {', '.join(sorted(fam.none_of)) or '—'} |")
    rows.append("")
    rows.append(f"Statistic tokens ({', '.join(sorted(_STATS))}) bar a name from every family but those of a "
                "statistic (``reward_std``, ``advantage_*``, ``zero_variance_frac``, ``explained_var``, ``tokens``).")
    return "\n".join(rows)


__doc__ = (__doc__ or "") + _families_markdown() + "\n"
