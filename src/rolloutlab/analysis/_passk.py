"""pass@k vs mean reward: did the run become more capable, or only more reliable?

Per step, over groups whose graded members all have a known success (n = graded members,
c = successes): unbiased pass@k (Chen et al. 2021, stable product form, see
:func:`rolloutlab.algos.pass_at_k`) for k = 1..K, mean@k (= c/n, the expected success of
one draw), and pass^k (all k draws succeed; Yao et al. 2024, τ-bench).  K is the most
common group size; a group with n < k is left out of pass@k (never extrapolated).

The verdict compares an early window (the first ``w`` steps) with a late one (the last
``w``), ``w = max(1, min(10, steps // 5))``, by percentile bootstrap over groups:

- **capability**: pass@K rose (its CI lies above 0): the policy solves, at K samples,
  tasks it could not solve before;
- **reliability**: mean success (pass@1) or mean reward rose but pass@K did not (its CI
  covers 0): the policy became more reliable at what it could already do;
- **no change** / **regressed**: pass@1 and mean reward did not rise / fell.
When early pass@K is already ≥ 0.95 the verdict says that capability growth cannot be
seen at this K.  Caveat: early and late windows hold different prompts unless the data
cycles; :func:`solve_rate_breakdown` follows the same tasks instead.

The breakdown groups tasks (``task_id``) by their solve rate at their first appearance
(never solved c = 0 / sometimes / always c = n) and reports each bucket's success at
its tasks' last appearance: gains in the "never" bucket are capability.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rolloutlab.algos import pass_at_k, pass_hat_k
from rolloutlab.analysis._bootstrap import BootstrapCI, diff_ci
from rolloutlab.analysis._data import RunFrame
from rolloutlab.analysis._ledger import group_table


def _groups(frame: RunFrame) -> pd.DataFrame:
    gt = group_table(frame).reset_index()
    return gt[(gt["n"] > 0) & (gt["known"] == gt["n"])]


def passk_table(frame: RunFrame, ks: list[int] | None = None) -> pd.DataFrame:
    """Per step: ``pass@k``, ``pass^k`` for each k, ``mean@1`` and the number of groups."""
    g = _groups(frame)
    if g.empty:
        return pd.DataFrame()
    if ks is None:
        ks = list(range(1, int(g["n"].mode().iloc[0]) + 1))
    n, c = g["n"].to_numpy(), g["c"].to_numpy()
    cols: dict[str, Any] = {"step": g["step"].to_numpy()}
    for k in ks:
        ok = n >= k
        cols[f"pass@{k}"] = np.where(ok, pass_at_k(np.maximum(n, k), c, k), np.nan)
        cols[f"pass^{k}"] = np.where(ok, pass_hat_k(np.maximum(n, k), c, k), np.nan)
    cols["mean@1"] = c / n
    per_group = pd.DataFrame(cols)
    out = per_group.groupby("step").mean()
    out["groups"] = per_group.groupby("step").size()
    return out


@dataclass(frozen=True)
class PassKVerdict:
    """Early-vs-late comparison of mean reward, pass@1 and pass@K (see module docstring)."""

    verdict: str
    """capability | reliability | no change | regressed | insufficient data"""
    explanation: str
    k: int
    early_steps: tuple[int, int]
    late_steps: tuple[int, int]
    mean_reward: BootstrapCI | None
    pass1: BootstrapCI | None
    passk: BootstrapCI | None
    early_passk: float | None
    late_passk: float | None
    ceiling: bool = False
    breakdown: list[dict[str, Any]] = field(default_factory=list)


def _ci(late: np.ndarray, early: np.ndarray, seed: int) -> BootstrapCI | None:
    late, early = late[np.isfinite(late)], early[np.isfinite(early)]
    if len(late) < 2 or len(early) < 2:
        return None
    return diff_ci(late, early, n_boot=1000, seed=seed)


def _sig(ci: BootstrapCI | None) -> int:
    if ci is None:
        return 0
    return 1 if ci.low > 0 else (-1 if ci.high < 0 else 0)


def verdict_window(n_steps: int) -> int:
    """Steps in each of the verdict's early and late windows: ``max(1, min(10, n // 5))``.

    The report's "last window" column and the headline's first → last numbers use it
    too, so that every early-vs-late number on a page covers the same steps."""
    return max(1, min(10, n_steps // 5))


def passk_verdict(frame: RunFrame) -> PassKVerdict:
    g = _groups(frame)
    steps = np.sort(frame.traj["step"].unique())
    if g.empty or len(steps) < 2:
        why = "no groups with known success" if g.empty else "only one step"
        return PassKVerdict("insufficient data", f"no verdict: {why}", 0, (0, 0), (0, 0), None, None, None, None, None)
    k = int(g["n"].mode().iloc[0])
    w = verdict_window(len(steps))
    early_s, late_s = steps[:w], steps[-w:]
    early, late = g[g["step"].isin(early_s)], g[g["step"].isin(late_s)]

    def pk(d: pd.DataFrame, kk: int) -> np.ndarray:
        d = d[d["n"] >= kk]
        return np.asarray(pass_at_k(d["n"].to_numpy(), d["c"].to_numpy(), kk), dtype=float)

    mr = _ci(late["reward_mean"].to_numpy(float), early["reward_mean"].to_numpy(float), 1)
    p1 = _ci(pk(late, 1), pk(early, 1), 2)
    pK = _ci(pk(late, k), pk(early, k), 3) if k > 1 else None
    e_pk = float(np.mean(pk(early, k))) if len(pk(early, k)) else None
    l_pk = float(np.mean(pk(late, k))) if len(pk(late, k)) else None
    ceiling = e_pk is not None and e_pk >= 0.95
    rose = max(_sig(mr), _sig(p1))
    fell = min(_sig(mr), _sig(p1))
    span = f"steps {early_s[0]}–{early_s[-1]} vs {late_s[0]}–{late_s[-1]}"
    if k <= 1:
        verdict, why = "insufficient data", "groups of one sample: pass@k for k > 1 is undefined"
    elif _sig(pK) > 0:
        verdict = "capability"
        why = f"pass@{k} rose {_fmt(pK)} ({span}): more tasks are solved at {k} samples"
    elif rose > 0:
        verdict = "reliability"
        lead = p1 if _sig(p1) > 0 else mr
        name = "pass@1" if lead is p1 else "mean reward"
        why = (f"{name} rose {_fmt(lead)} while pass@{k} stayed flat {_fmt(pK)} ({span}): more reliable at "
               "what it could already do, not more capable")
    elif fell < 0:
        verdict, why = "regressed", f"mean reward {_fmt(mr)}, pass@1 {_fmt(p1)} ({span})"
    else:
        verdict, why = "no change", f"neither mean reward {_fmt(mr)} nor pass@{k} {_fmt(pK)} changed significantly ({span})"
    if ceiling and verdict != "capability":
        why += f"; early pass@{k} = {e_pk:.2f} is at its ceiling, so capability growth cannot be seen at k = {k}"
    return PassKVerdict(verdict, why, k, (int(early_s[0]), int(early_s[-1])), (int(late_s[0]), int(late_s[-1])),
                        mr, p1, pK, e_pk, l_pk, ceiling, solve_rate_breakdown(g))


def _fmt(ci: BootstrapCI | None) -> str:
    if ci is None:
        return "(n/a)"
    return f"by {ci.estimate:+.3f} [{ci.low:+.3f}, {ci.high:+.3f}]"


def solve_rate_breakdown(groups: pd.DataFrame) -> list[dict[str, Any]]:
    """Tasks bucketed by solve rate at first appearance; their success at last appearance."""
    g = groups[groups["task_id"].notna()].sort_values("step")
    if g.empty:
        return []
    first = g.groupby("task_id").first()
    last = g.groupby("task_id").last()
    bucket = np.where(first["c"] == 0, "never", np.where(first["c"] == first["n"], "always", "sometimes"))
    again = g.groupby("task_id")["step"].nunique() > 1
    df = pd.DataFrame({"bucket": bucket, "first": first["c"] / first["n"], "last": last["c"] / last["n"],
                       "again": again.reindex(first.index)}, index=first.index)
    rows = []
    for b in ("never", "sometimes", "always"):
        d = df[df["bucket"] == b]
        seen = d[d["again"]]
        rows.append({"bucket": b, "tasks": len(d), "seen_again": len(seen),
                     "first_success": float(d["first"].mean()) if len(d) else None,
                     "last_success": float(seen["last"].mean()) if len(seen) else None})
    return rows
