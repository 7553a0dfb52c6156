"""Early and late windows of a run: the first and last 10% of its steps (at least one).

One rule for every "early vs late" number (entropy levels, transfer changes, set-F1
cardinality check), so that they describe the same stretches of a run.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

EDGE_FRAC = 0.1
"""Share of the steps in each of the early and late windows."""


def edge_count(n: int) -> int:
    """Steps in each edge window of a run of ``n`` steps: ceil(0.1·n), at least 1."""
    return max(1, math.ceil(EDGE_FRAC * n))


def edge_windows(steps: npt.ArrayLike, edge_steps: int | None, *, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``(early, late)`` step arrays of the sorted distinct ``steps``.

    ``edge_steps`` overrides the window size; it must leave the windows disjoint.  ``what``
    names the series in the errors (e.g. ``"arm 'a'"``).
    """
    s = np.sort(np.unique(np.asarray(steps)))
    if len(s) < 2:
        raise ValueError(f"{what} has {len(s)} step(s); an early → late change needs 2")
    e = edge_steps if edge_steps is not None else edge_count(len(s))
    if not 1 <= e <= len(s) // 2:
        raise ValueError(f"edge_steps must be in [1, {len(s) // 2}] for {what}, got {e}")
    return s[:e], s[-e:]
