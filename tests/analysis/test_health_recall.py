"""Recall and false alarms of the health signatures over generated runs (100 seeds each).

Recall: the planted signature is found with its onset within ±10 % of the run length.
False alarm: a healthy run with any finding at warning or above; at most 2 % allowed.
The per-signature floor (80 %) is below every figure measured (benchmarks/bench_health.py
prints them); a change that loses recall or adds false alarms fails here."""

from __future__ import annotations

import pytest

from rolloutlab.analysis._health_gen import PLANTED, recall_false_alarms


@pytest.fixture(scope="module")
def figures() -> tuple[object, dict[str, float]]:
    return recall_false_alarms(100)


def test_false_alarms_at_most_two_percent(figures: tuple[object, dict[str, float]]) -> None:
    _, healthy = figures
    assert healthy["runs"] == 100
    assert healthy["rate"] <= 0.02, healthy


@pytest.mark.parametrize("kind", PLANTED)
def test_recall_per_signature(figures: tuple[object, dict[str, float]], kind: str) -> None:
    table, _ = figures
    row = table.loc[kind]  # type: ignore[attr-defined]
    assert row["runs"] == 100
    assert row["recall"] >= 0.8, row.to_dict()


def test_mean_recall(figures: tuple[object, dict[str, float]]) -> None:
    table, _ = figures
    assert table["recall"].mean() >= 0.9  # type: ignore[index]
