"""``outcomes.length_cut_rate``: by hand, and against a plain loop."""

from __future__ import annotations

import random

import pytest

from rolloutlab.outcomes import length_cut_rate


def test_by_hand() -> None:
    # counts 4 (cut at 4), 3 (not), None with "length" (cut), None with "stop" (not), None with none (left out)
    tokens = [4, 3, None, None, None]
    reasons = ["stop", "length", "length", "stop", None]  # a count wins over the reason
    assert length_cut_rate(tokens, 4, reasons) == pytest.approx(2 / 4)
    assert length_cut_rate(tokens, 4) == pytest.approx(1 / 2)  # counts only: the trainer's call
    assert length_cut_rate([None, None], 4) is None and length_cut_rate([], 4, []) is None


def test_against_a_plain_loop() -> None:
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(0, 8)
        tokens = [rng.choice([None, 0, 1, 2, 3]) for _ in range(n)]
        reasons = [rng.choice([None, "stop", "length"]) for _ in range(n)]
        known = cut = 0
        for c, r in zip(tokens, reasons, strict=True):
            if c is not None:
                known, cut = known + 1, cut + (c >= 2)
            elif r is not None:
                known, cut = known + 1, cut + (r == "length")
        assert length_cut_rate(tokens, 2, reasons) == (cut / known if known else None)
