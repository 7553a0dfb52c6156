"""Unbiased pass@k / pass^k estimators from n samples with c successes per task.

``n``, ``c`` (and ``k``) broadcast against each other; all-scalar input returns a
Python ``float``, anything else an array of the broadcast shape.  Inputs must be
integral (integral floats are accepted) with ``0 <= c <= n`` and ``k >= 1``.

==========  ==========================  ======================================
estimator   closed form                 stable form used
==========  ==========================  ======================================
pass@k      1 - C(n-c, k) / C(n, k)     -expm1(sum_{i=n-c+1}^{n} log1p(-k/i))
pass^k      C(c, k) / C(n, k)           exp(sum_{j=0}^{k-1} log1p(-(n-c)/(n-j)))
mean@k      c / n                       (independent of k)
==========  ==========================  ======================================

``k > n`` has no unbiased estimate (k distinct draws cannot be taken from n
samples) and yields NaN in every estimator.  The log-sum form never builds a
binomial coefficient, so n in the millions neither overflows nor loses precision,
and ``-expm1`` keeps full relative precision when pass@k is tiny.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Any, Literal, NamedTuple, overload

import numpy as np
import numpy.typing as npt

from ._advantages import FloatArray

__all__ = [
    "PassAtKCI",
    "mean_at_k",
    "pass_at_k",
    "pass_at_k_ci",
    "pass_at_k_curve",
    "pass_hat_k",
]

_Int = int | np.integer[Any]
_I64 = npt.NDArray[np.int64]


def _as_int(x: npt.ArrayLike, name: str) -> _I64:
    a = np.asarray(x)
    if a.dtype.kind == "f":
        if not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
            raise ValueError(f"{name} must be integral")
    elif a.dtype.kind not in "iub":
        raise ValueError(f"{name} must be an integer array, got dtype {a.dtype}")
    return a.astype(np.int64)


def _nck(n: npt.ArrayLike, c: npt.ArrayLike, k: npt.ArrayLike) -> tuple[_I64, _I64, _I64, bool]:
    scalar = np.ndim(n) == 0 and np.ndim(c) == 0 and np.ndim(k) == 0
    nn, cc, kk = np.broadcast_arrays(_as_int(n, "n"), _as_int(c, "c"), _as_int(k, "k"))
    if np.any(cc < 0) or np.any(cc > nn):
        raise ValueError("need 0 <= c <= n")
    if np.any(kk < 1):
        raise ValueError("need k >= 1")
    return nn, cc, kk, scalar


def _finish(out: FloatArray, scalar: bool) -> Any:
    return float(out) if scalar else out


def _segment_log_sum(start: _I64, length: _I64, term: Any) -> FloatArray:
    """sum_{i=start}^{start+length-1} term(i, e) for each element e, as one flat pass.

    Elements are laid out back to back (np.repeat), so memory is sum(length) and
    there is no Python loop over elements.
    """
    m = start.shape[0]
    seg = np.repeat(np.arange(m), length)  # (sum(length),) owning element
    offsets = np.cumsum(length) - length  # (m,) exclusive prefix sum
    i = np.repeat(start - offsets, length) + np.arange(seg.shape[0])
    logs = term(i.astype(np.float64), seg)
    return np.bincount(seg, weights=logs, minlength=m).astype(np.float64)


@overload
def pass_at_k(n: _Int, c: _Int, k: _Int) -> float: ...
@overload
def pass_at_k(n: npt.ArrayLike, c: npt.ArrayLike, k: npt.ArrayLike) -> FloatArray: ...
def pass_at_k(n: npt.ArrayLike, c: npt.ArrayLike, k: npt.ArrayLike) -> Any:
    """Unbiased pass@k = P(at least one of k draws without replacement succeeds).

    Reference: Chen et al. 2021, "Evaluating Large Language Models Trained on Code"
    (Codex), Fig. 3 numpy estimator ``1 - prod(1 - k / arange(n - c + 1, n + 1))``.
    Same product, taken as a log-sum with ``-expm1`` for precision and vectorised
    over elements; departs only in returning NaN for ``k > n`` (Chen et al. assume
    ``k <= n``).  Edge cases: ``c == 0`` -> 0; ``n - c < k`` (includes ``c == n``) -> 1.

    Shapes: broadcast of ``n, c, k`` (typically ``(G,)`` per task).
    Example: ``n=5, c=2, k=2`` -> ``1 - C(3,2)/C(5,2) = 0.7``.
    """
    nn, cc, kk, scalar = _nck(n, c, k)
    out = np.zeros(nn.shape, dtype=np.float64)
    undefined = kk > nn
    certain = ~undefined & (nn - cc < kk)
    regular = ~undefined & ~certain & (cc > 0)
    out[undefined] = np.nan
    out[certain] = 1.0
    nr, cr, kr = nn[regular], cc[regular], kk[regular]
    log_q = _segment_log_sum(nr - cr + 1, cr, lambda i, e: np.log1p(-kr[e] / i))
    out[regular] = -np.expm1(log_q)
    return _finish(out, scalar)


@overload
def pass_hat_k(n: _Int, c: _Int, k: _Int) -> float: ...
@overload
def pass_hat_k(n: npt.ArrayLike, c: npt.ArrayLike, k: npt.ArrayLike) -> FloatArray: ...
def pass_hat_k(n: npt.ArrayLike, c: npt.ArrayLike, k: npt.ArrayLike) -> Any:
    """Unbiased pass^k = P(all k draws without replacement succeed) = C(c,k) / C(n,k).

    Reference: Yao et al. 2024, "tau-bench: A Benchmark for Tool-Agent-User
    Interaction in Real-World Domains" (pass^k as a reliability metric).  Computed
    as ``exp(sum_{j<k} log1p(-(n - c) / (n - j)))`` instead of the ratio of binomials
    (which overflows float64 near n ~ 1030); departs from tau-bench only in that.
    Edge cases: ``k > n`` -> NaN; ``c < k`` -> 0; ``c == n`` -> 1.

    Example: ``n=5, c=3, k=2`` -> ``C(3,2)/C(5,2) = 0.3``.
    """
    nn, cc, kk, scalar = _nck(n, c, k)
    out = np.zeros(nn.shape, dtype=np.float64)
    undefined = kk > nn
    regular = ~undefined & (cc >= kk)
    out[undefined] = np.nan
    nr, cr, kr = nn[regular], cc[regular], kk[regular]
    log_p = _segment_log_sum(
        np.zeros_like(kr), kr, lambda j, e: np.log1p(-(nr[e] - cr[e]) / (nr[e] - j))
    )
    out[regular] = np.exp(log_p)
    return _finish(out, scalar)


@overload
def mean_at_k(n: _Int, c: _Int, k: _Int) -> float: ...
@overload
def mean_at_k(n: npt.ArrayLike, c: npt.ArrayLike, k: npt.ArrayLike) -> FloatArray: ...
def mean_at_k(n: npt.ArrayLike, c: npt.ArrayLike, k: npt.ArrayLike) -> Any:
    """Expected fraction of successes among k draws without replacement: ``c / n``.

    By linearity of expectation each draw succeeds with probability c/n, so the
    value does not depend on k; ``k`` is kept so mean@k / pass@k / pass^k share a
    signature and the same domain (``k > n`` -> NaN, hence ``n == 0`` -> NaN).
    No external reference beyond that identity.
    """
    nn, cc, kk, scalar = _nck(n, c, k)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(kk > nn, np.nan, cc / nn).astype(np.float64)
    return _finish(out, scalar)


def pass_at_k_curve(n: npt.ArrayLike, c: npt.ArrayLike, *, per_group: bool = False) -> FloatArray:
    """pass@k for every k = 1..min(n): mean over groups ``(K,)`` or ``(G, K)``.

    Uses the equivalent k-term product ``C(n-c,k)/C(n,k) = prod_{j<k} (1 - c/(n-j))``
    so one cumulative sum along k yields the whole curve in O(G K) (same estimator
    as :func:`pass_at_k`, Chen et al. 2021; agrees to rounding).  K = min over groups
    of n so every group is defined at every k; ``n == 0`` anywhere gives K = 0.

    Shapes: ``n, c`` broadcast to ``(G,)`` (scalars give G = 1).
    """
    nn, cc, _, _ = _nck(n, c, 1)
    nn, cc = np.atleast_1d(nn).ravel(), np.atleast_1d(cc).ravel()
    n_k = int(nn.min()) if nn.size else 0
    j = np.arange(n_k)[None, :]  # (1, K)
    remaining = nn[:, None] - j  # (G, K), >= 1 because j < min(n)
    with np.errstate(divide="ignore"):
        ratio = np.minimum(cc[:, None] / remaining, 1.0)
        # once fewer than one failure is left the product is exactly 0 -> pass@k = 1
        terms = np.where(remaining - cc[:, None] > 0, np.log1p(-ratio), -np.inf)
    curve: FloatArray = -np.expm1(np.cumsum(terms, axis=1)).astype(np.float64)  # (G, K)
    if per_group:
        return curve
    return np.asarray(curve.mean(axis=0), dtype=np.float64) if nn.size else np.zeros(0)


class PassAtKCI(NamedTuple):
    mean: float  # mean pass@k over groups
    low: float
    high: float
    se: float  # standard error of the mean
    n_groups: int  # groups used (k > n groups are dropped)


def pass_at_k_ci(
    n: npt.ArrayLike,
    c: npt.ArrayLike,
    k: npt.ArrayLike,
    *,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    method: Literal["bootstrap", "normal"] = "bootstrap",
) -> PassAtKCI:
    """Confidence interval for the mean over tasks (groups) of per-task pass@k.

    ``"bootstrap"``: resample groups with replacement ``n_boot`` times (tasks are
    the sampling unit; the per-task estimate is kept fixed), percentile interval,
    ``se`` = std (ddof=1) of the bootstrap means.  ``"normal"``: ``mean +- z *
    s / sqrt(G)`` with the sample std ``s`` (ddof=1), clipped to [0, 1].  This ignores
    the within-task sampling noise of each estimate, which is usually small next to
    the between-task spread (Miller 2024, "Adding Error Bars to Evals", clustered
    SE, is the reference for the framing; no code is followed).

    Edge cases: groups with ``k > n`` are dropped; no group -> all NaN; one group ->
    bootstrap gives a zero-width interval with se 0, ``"normal"`` gives NaN bounds.
    """
    if not 0.0 < level < 1.0:
        raise ValueError("level must be in (0, 1)")
    if n_boot < 1:
        raise ValueError("n_boot must be >= 1")
    v = np.atleast_1d(pass_at_k(n, c, k)).ravel()
    v = v[~np.isnan(v)]  # (G,)
    g = int(v.shape[0])
    if g == 0:
        return PassAtKCI(np.nan, np.nan, np.nan, np.nan, 0)
    mean = float(v.mean())
    alpha = 1.0 - level
    if method == "normal":
        se = float(v.std(ddof=1) / np.sqrt(g)) if g > 1 else np.nan
        z = NormalDist().inv_cdf(1.0 - alpha / 2.0)
        lo, hi = max(0.0, mean - z * se), min(1.0, mean + z * se)
        if g == 1:
            lo = hi = np.nan
        return PassAtKCI(mean, lo, hi, se, g)
    if method != "bootstrap":
        raise ValueError(f"unknown method {method!r}")
    if g == 1:
        return PassAtKCI(mean, mean, mean, 0.0, 1)
    rng = np.random.default_rng(seed)
    boot = np.empty(n_boot)
    chunk = max(1, (1 << 22) // g)  # bounds the (chunk, G) index matrix to ~32 MiB
    for s in range(0, n_boot, chunk):
        rows = min(chunk, n_boot - s)
        boot[s : s + rows] = v[rng.integers(0, g, size=(rows, g))].mean(axis=1)
    lo, hi = np.quantile(boot, [alpha / 2.0, 1.0 - alpha / 2.0])
    se = float(boot.std(ddof=1)) if n_boot > 1 else 0.0
    return PassAtKCI(mean, float(lo), float(hi), se, g)
