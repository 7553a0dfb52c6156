"""Per-turn (process-reward) advantage variants and estimator diagnostics.

These variants are named in published multi-turn agent runs but have no public
reference implementation, so the definitions below *are* the specification.
Inputs are flat per-turn arrays ``(T,)``: ``turn_rewards``, ``group_ids`` (the
prompt/task group of the turn's trajectory), ``traj_ids``, ``turn_idx`` (0-based
position of the turn in its trajectory); each returns a per-turn advantage ``(T,)``.

===============  ======================  ===================================================
variant          statistics pooled over  advantage of turn t of trajectory i in group g
===============  ======================  ===================================================
per_turn_norm    (g, turn_idx) cell:     (r_it - mean_{g,t}) / (std_{g,t} + eps)
                 same turn position of
                 every trajectory in g
center_mean_std  all turns of all        (r_it - mean_g) / (std_g + eps)
                 trajectories in g
center_mean      all turns of all        r_it - mean_g
                 trajectories in g
std_sum          trajectory returns      (R_i - mean_g(R)) / (std_g(R) + eps), R_i = sum_t r_it,
                 R_i of g                broadcast to every turn of trajectory i
===============  ======================  ===================================================

Shared conventions: unbiased std (ddof=1) with ``eps`` (default 1e-6) added to
the std, as in GRPO/verl; a pool with a single graded entry gets advantage 0 (a
value centred on itself carries no signal; unlike verl's GRPO group-of-one rule);
a pool whose graded entries are all equal gets exactly 0.  Ungraded turns (NaN
reward or ``mask`` False) are excluded and get NaN; for ``std_sum`` one ungraded
turn makes the whole trajectory's return, hence all its turns, NaN.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

from ._advantages import (
    FloatArray,
    IntArray,
    _as_1d_float,
    _check_nested,
    _combine_codes,
    _dense_codes,
    _normalise_in_groups,
    _valid_mask,
)

__all__ = [
    "center_mean",
    "center_mean_std",
    "estimator_disagreement",
    "estimator_disagreement_by_group",
    "per_turn_norm",
    "process_advantages",
    "std_sum",
    "zero_advantage_fraction",
]

ProcessVariant = Literal["per_turn_norm", "center_mean_std", "center_mean", "std_sum"]


def per_turn_norm(
    turn_rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    turn_idx: npt.ArrayLike,
    *,
    eps: float = 1e-6,
    mask: npt.ArrayLike | None = None,
) -> FloatArray:
    """Normalise each turn reward within its (group, turn position) cell.

    Statistics over the trajectories of the group that reached this ``turn_idx``;
    a cell reached by one trajectory gets 0.  See the module table.
    Shapes: ``(T,)`` each -> ``(T,)``.
    """
    r = _as_1d_float(turn_rewards, "turn_rewards")
    g, _ = _dense_codes(group_ids, "group_ids", r.shape[0])
    pos, n_pos = _dense_codes(turn_idx, "turn_idx", r.shape[0])
    cell, n_cell = _combine_codes(g, pos, n_pos)
    valid = _valid_mask(r, mask)
    return _normalise_in_groups(r, cell, n_cell, valid, norm_std=True, eps=eps, singleton="zero")


def center_mean_std(
    turn_rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    *,
    eps: float = 1e-6,
    mask: npt.ArrayLike | None = None,
) -> FloatArray:
    """Normalise each turn reward by the mean/std pooled over all turns of its group.

    Long trajectories weigh more in the pooled statistics (one entry per turn).
    See the module table.  Shapes: ``(T,)`` each -> ``(T,)``.
    """
    r = _as_1d_float(turn_rewards, "turn_rewards")
    g, n_g = _dense_codes(group_ids, "group_ids", r.shape[0])
    valid = _valid_mask(r, mask)
    return _normalise_in_groups(r, g, n_g, valid, norm_std=True, eps=eps, singleton="zero")


def center_mean(
    turn_rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    *,
    mask: npt.ArrayLike | None = None,
) -> FloatArray:
    """Subtract the mean pooled over all turns of the group (no std division).

    See the module table.  Shapes: ``(T,)`` each -> ``(T,)``.
    """
    r = _as_1d_float(turn_rewards, "turn_rewards")
    g, n_g = _dense_codes(group_ids, "group_ids", r.shape[0])
    valid = _valid_mask(r, mask)
    return _normalise_in_groups(r, g, n_g, valid, norm_std=False, eps=0.0, singleton="zero")


def std_sum(
    turn_rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    traj_ids: npt.ArrayLike,
    *,
    eps: float = 1e-6,
    mask: npt.ArrayLike | None = None,
) -> FloatArray:
    """GRPO-normalise the summed (undiscounted) trajectory return, broadcast to its turns.

    Differs from :func:`~rolloutlab.algos.grpo_advantages` on returns only in the
    group-of-one rule (0 here).  Each trajectory must lie in one group.  See the
    module table.  Shapes: ``(T,)`` each -> ``(T,)``.
    """
    r = _as_1d_float(turn_rewards, "turn_rewards")
    t = r.shape[0]
    g, n_g = _dense_codes(group_ids, "group_ids", t)
    traj, n_traj = _dense_codes(traj_ids, "traj_ids", t)
    _check_nested(traj, n_traj, g)
    rv = np.where(_valid_mask(r, mask), r, np.nan)
    # bincount of NaN weights is NaN, so one ungraded turn voids the trajectory
    ret = np.bincount(traj, weights=rv, minlength=n_traj).astype(np.float64)  # (M,)
    traj_group = np.zeros(n_traj, dtype=np.intp)
    traj_group[traj] = g
    a = _normalise_in_groups(
        ret, traj_group, n_g, ~np.isnan(ret), norm_std=True, eps=eps, singleton="zero"
    )
    return a[traj]


def process_advantages(
    variant: ProcessVariant,
    turn_rewards: npt.ArrayLike,
    group_ids: npt.ArrayLike,
    traj_ids: npt.ArrayLike,
    turn_idx: npt.ArrayLike,
    *,
    eps: float = 1e-6,
    mask: npt.ArrayLike | None = None,
) -> FloatArray:
    """Dispatch by variant name with one uniform signature (unused inputs ignored)."""
    if variant == "per_turn_norm":
        return per_turn_norm(turn_rewards, group_ids, turn_idx, eps=eps, mask=mask)
    if variant == "center_mean_std":
        return center_mean_std(turn_rewards, group_ids, eps=eps, mask=mask)
    if variant == "center_mean":
        return center_mean(turn_rewards, group_ids, mask=mask)
    if variant == "std_sum":
        return std_sum(turn_rewards, group_ids, traj_ids, eps=eps, mask=mask)
    raise ValueError(f"unknown process variant {variant!r}")


# ---------------------------------------------------------------------- diagnostics


def zero_advantage_fraction(adv: npt.ArrayLike, *, tol: float = 1e-9) -> float:
    """Fraction of non-NaN advantages with ``|A| <= tol`` (no gradient signal).

    E.g. the share of GRPO samples in all-correct / all-wrong groups (the quantity
    DAPO's dynamic sampling filters, Yu et al. 2025).  Empty / all-NaN -> NaN.
    """
    a = np.asarray(adv, dtype=np.float64).ravel()
    a = a[~np.isnan(a)]
    return float(np.mean(np.abs(a) <= tol)) if a.size else float("nan")


def _average_ranks(x: FloatArray) -> FloatArray:
    """1-based ranks with ties sharing their mean rank (as for Spearman's rho)."""
    _, inv, counts = np.unique(x, return_inverse=True, return_counts=True)
    first = np.cumsum(counts) - counts  # 0-based rank of each distinct value's first copy
    return (first + (counts + 1) / 2.0)[inv.reshape(-1)].astype(np.float64)


def _pearson(x: FloatArray, y: FloatArray) -> float:
    dx, dy = x - x.mean(), y - y.mean()
    sx, sy = float(np.max(np.abs(dx))), float(np.max(np.abs(dy)))
    if sx == 0 or sy == 0:
        return float("nan")
    dx, dy = dx / sx, dy / sy  # rescale first so tiny spreads do not underflow when squared
    r = float(np.sum(dx * dy)) / float(np.sqrt(np.sum(dx * dx) * np.sum(dy * dy)))
    return max(-1.0, min(1.0, r))


def estimator_disagreement(
    a: npt.ArrayLike, b: npt.ArrayLike, *, tol: float = 1e-9
) -> dict[str, float]:
    """Compare two advantage estimates of the same samples.

    Pairs where either value is NaN are dropped.  Returns:

    - ``n``: pairs compared;
    - ``sign_disagreement``: fraction of pairs whose signs differ, with ``|x| <= tol``
      counted as sign 0 (so 0 vs +0.3 disagrees: one estimator pushes, one does not);
    - ``opposite_sign``: fraction with strictly opposite nonzero signs;
    - ``pearson``, ``spearman`` (Pearson on average ranks, ties averaged): NaN if
      either side is constant or fewer than 2 pairs;
    - ``mean_abs_diff``, ``max_abs_diff``: of ``a - b``.

    Empty comparison -> ``n = 0`` and NaN elsewhere.
    """
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"a and b must have the same size, got {x.shape} and {y.shape}")
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    nan = float("nan")
    if x.size == 0:
        keys = (
            "sign_disagreement",
            "opposite_sign",
            "pearson",
            "spearman",
            "mean_abs_diff",
            "max_abs_diff",
        )
        return {"n": 0.0, **dict.fromkeys(keys, nan)}
    sx = np.where(np.abs(x) <= tol, 0, np.sign(x))
    sy = np.where(np.abs(y) <= tol, 0, np.sign(y))
    diff = np.abs(x - y)
    two = x.size >= 2
    return {
        "n": float(x.size),
        "sign_disagreement": float(np.mean(sx != sy)),
        "opposite_sign": float(np.mean(sx * sy < 0)),
        "pearson": _pearson(x, y) if two else nan,
        "spearman": _pearson(_average_ranks(x), _average_ranks(y)) if two else nan,
        "mean_abs_diff": float(diff.mean()),
        "max_abs_diff": float(diff.max()),
    }


def _grouped_average_ranks(x: FloatArray, g: IntArray) -> FloatArray:
    """1-based average ranks of ``x`` within each group ``g`` (ties share their mean rank)."""
    if x.shape[0] == 0:
        return np.empty(0, dtype=np.float64)
    order = np.lexsort((x, g))
    gs, xs = g[order], x[order]
    n = x.shape[0]
    new_group = np.r_[True, gs[1:] != gs[:-1]]
    group_start = np.maximum.accumulate(np.where(new_group, np.arange(n), 0))
    pos = np.arange(n) - group_start + 1.0  # rank within the group, before ties
    new_run = new_group | np.r_[True, xs[1:] != xs[:-1]]
    run = np.cumsum(new_run) - 1
    avg = np.bincount(run, weights=pos) / np.bincount(run)
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = avg[run]
    return ranks


def _grouped_pearson(x: FloatArray, y: FloatArray, g: IntArray, n_groups: int) -> FloatArray:
    cnt = np.bincount(g, minlength=n_groups).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        dx = x - (np.bincount(g, weights=x, minlength=n_groups) / cnt)[g]
        dy = y - (np.bincount(g, weights=y, minlength=n_groups) / cnt)[g]
        sx = np.zeros(n_groups)
        sy = np.zeros(n_groups)
        np.maximum.at(sx, g, np.abs(dx))
        np.maximum.at(sy, g, np.abs(dy))
        ok = (sx > 0) & (sy > 0)
        dx = dx / np.where(ok, sx, 1.0)[g]  # rescaled as in _pearson, so tiny spreads do not underflow
        dy = dy / np.where(ok, sy, 1.0)[g]
        num = np.bincount(g, weights=dx * dy, minlength=n_groups)
        den = np.sqrt(np.bincount(g, weights=dx * dx, minlength=n_groups) * np.bincount(g, weights=dy * dy, minlength=n_groups))
        r = np.clip(num / den, -1.0, 1.0)
    return np.where(ok & (cnt >= 2), r, np.nan)


def estimator_disagreement_by_group(
    a: npt.ArrayLike, b: npt.ArrayLike, groups: npt.ArrayLike, n_groups: int, *, tol: float = 1e-9
) -> dict[str, FloatArray]:
    """:func:`estimator_disagreement` for every group at once (e.g. per step).

    ``groups``: ``(N,)`` ints in ``[0, n_groups)``.  Returns one ``(n_groups,)`` array per
    key of :func:`estimator_disagreement`, with the same definitions and edge cases (a
    group with no complete pair has ``n = 0`` and NaN elsewhere).
    """
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    g = np.asarray(groups, dtype=np.int64).ravel()
    if not (x.shape == y.shape == g.shape):
        raise ValueError(f"a, b and groups must have the same size, got {x.shape}, {y.shape}, {g.shape}")
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y, g = x[keep], y[keep], g[keep]
    cnt = np.bincount(g, minlength=n_groups).astype(np.float64)
    sx = np.where(np.abs(x) <= tol, 0, np.sign(x))
    sy = np.where(np.abs(y) <= tol, 0, np.sign(y))
    diff = np.abs(x - y)
    mx = np.full(n_groups, -np.inf)
    np.maximum.at(mx, g, diff)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {
            "n": cnt,
            "sign_disagreement": np.bincount(g, weights=(sx != sy).astype(np.float64), minlength=n_groups) / cnt,
            "opposite_sign": np.bincount(g, weights=(sx * sy < 0).astype(np.float64), minlength=n_groups) / cnt,
            "pearson": _grouped_pearson(x, y, g, n_groups),
            "spearman": _grouped_pearson(_grouped_average_ranks(x, g), _grouped_average_ranks(y, g), g, n_groups),
            "mean_abs_diff": np.bincount(g, weights=diff, minlength=n_groups) / cnt,
            "max_abs_diff": np.where(cnt > 0, mx, np.nan),
        }
    return out
