"""Set-valued answers: micro/macro P/R/F1, empty sets, extras reading, cardinality check."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest

from rolloutlab.analysis._sets import (
    SET_COLUMNS,
    cardinality_explains,
    set_scores,
    sets_from_extras,
)


def frame(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    """rows of (step, traj_id, level, predicted, gold)."""
    return pd.DataFrame(rows, columns=list(SET_COLUMNS))


def cell(sets: pd.DataFrame, level: str = "file", step: int = 0) -> pd.Series:
    return set_scores(sets).table.set_index(["level", "step"]).loc[(level, step)]


def test_micro_and_macro_differ_on_a_hand_computed_example() -> None:
    s = frame(
        [
            (0, "t1", "file", ["a", "b"], ["a"]),  # TP 1: P 1/2, R 1, F1 2/3
            (0, "t2", "file", ["c"], ["c", "d", "e", "f"]),
        ]
    )  # TP 1: P 1,   R 1/4, F1 2/5
    c = cell(s)
    assert c["macro_precision"] == pytest.approx(0.75) and c["macro_recall"] == pytest.approx(0.625)
    assert c["macro_f1"] == pytest.approx((2 / 3 + 2 / 5) / 2)
    assert c["micro_precision"] == pytest.approx(2 / 3) and c["micro_recall"] == pytest.approx(
        2 / 5
    )
    assert c["micro_f1"] == pytest.approx(2 * 2 / (3 + 5))  # = harmonic mean of micro P and R = 0.5
    assert (c["n"], c["exact_match"], c["mean_predicted"], c["mean_gold"]) == (2, 0.0, 1.5, 2.5)
    assert c["cardinality_ratio"] == pytest.approx(0.6)


@pytest.mark.parametrize(
    ("predicted", "gold", "prf"),
    [
        ([], [], (1.0, 1.0, 1.0)),  # correctly named nothing
        (None, [], (1.0, 1.0, 1.0)),  # None is the empty prediction
        ([], ["a"], (0.0, 0.0, 0.0)),  # abstaining earns no precision
        (["a"], [], (0.0, 0.0, 0.0)),  # everything named is wrong
        (["a", "a", "b"], ["b", "a"], (1.0, 1.0, 1.0)),  # lists are sets
    ],
)
def test_empty_set_conventions(predicted: Any, gold: Any, prf: tuple[float, float, float]) -> None:
    c = cell(frame([(0, "t", "file", predicted, gold)]))
    for kind in ("micro", "macro"):
        assert (c[f"{kind}_precision"], c[f"{kind}_recall"], c[f"{kind}_f1"]) == prf
    assert c["n_both_empty"] == int(not predicted and not gold)


def test_both_empty_rows_count_in_macro_but_not_in_micro() -> None:
    s = frame([(0, "t1", "file", [], []), (0, "t2", "file", ["a", "x"], ["a"])])
    c = cell(s)
    assert c["macro_f1"] == pytest.approx((1 + 2 / 3) / 2)
    assert c["micro_f1"] == pytest.approx(2 / 3)  # the empty row adds no counts
    assert c["exact_match"] == 0.5 and np.isnan(
        cell(frame([(0, "t", "file", [], [])]))["cardinality_ratio"]
    )


def slow_scores(s: pd.DataFrame) -> dict[tuple[str, int], dict[str, float]]:
    """Plain Python per (level, step) cell, straight from the module's definitions."""

    def ratio(num: float, den: float, both_empty: bool) -> float:
        return num / den if den > 0 else (1.0 if both_empty else 0.0)

    out = {}
    for key in sorted({(lv, st) for lv, st in zip(s["level"], s["step"], strict=True)}):
        rows = [r for r in s.itertuples() if (r.level, r.step) == key]
        per, tp_sum, p_sum, g_sum = [], 0, 0, 0
        for r in rows:
            p, g = set(r.predicted or []), set(r.gold)
            tp, e = len(p & g), not p and not g
            per.append(
                (
                    ratio(tp, len(p), e),
                    ratio(tp, len(g), e),
                    ratio(2 * tp, len(p) + len(g), e),
                    p == g,
                )
            )
            tp_sum, p_sum, g_sum = tp_sum + tp, p_sum + len(p), g_sum + len(g)
        e = p_sum == 0 and g_sum == 0
        out[key] = {
            "micro_precision": ratio(tp_sum, p_sum, e),
            "micro_recall": ratio(tp_sum, g_sum, e),
            "micro_f1": ratio(2 * tp_sum, p_sum + g_sum, e),
            "macro_precision": float(np.mean([x[0] for x in per])),
            "macro_recall": float(np.mean([x[1] for x in per])),
            "macro_f1": float(np.mean([x[2] for x in per])),
            "exact_match": float(np.mean([x[3] for x in per])),
            "n": len(rows),
            "mean_predicted": p_sum / len(rows),
            "mean_gold": g_sum / len(rows),
        }
    return out


def test_matches_a_plain_loop_on_random_sets() -> None:
    rng = np.random.default_rng(0)
    universe = list("abcdefg")
    rows = []
    for i in range(400):
        pred = list(rng.choice(universe, size=rng.integers(0, 5)))  # with repeats, sometimes empty
        gold = list(rng.choice(universe, size=rng.integers(0, 4), replace=False))
        rows.append(
            (
                int(rng.integers(0, 5)),
                f"t{i}",
                str(rng.choice(["file", "module", "entity"])),
                None if rng.random() < 0.05 else pred,
                gold,
            )
        )
    s = frame(rows)
    table = set_scores(s).table.set_index(["level", "step"])
    ref = slow_scores(s)
    assert sorted(ref) == sorted(table.index)
    for key, want in ref.items():
        for col, v in want.items():
            assert table.loc[key, col] == pytest.approx(v, abs=1e-12), (key, col)


def test_bad_rows_name_the_trajectory() -> None:
    with pytest.raises(ValueError, match=r"gold of trajectory 't9' at level 'file'.*drop rows"):
        set_scores(frame([(0, "t9", "file", ["a"], None)]))
    with pytest.raises(ValueError, match=r"predicted of trajectory 't1'.*list of str"):
        set_scores(frame([(0, "t1", "file", "a.py", ["a.py"])]))  # a str is not a set of names
    with pytest.raises(ValueError, match="lacks column"):
        set_scores(pd.DataFrame({"step": [0]}))


# --------------------------------------------------------------- sets_from_extras


def test_sets_from_extras_reads_both_layouts() -> None:
    extras: dict[str, Any] = {
        "a": {
            "predicted": {"file": ["x.py", "y.py"], "module": ["m"]},
            "gold": {"file": ["x.py"], "entity": ["f"]},
        },
        "b": {
            "sets": {"file": {"predicted": ["z.py"], "gold": ["z.py"]}, "entity": {"gold": ["g"]}}
        },
        "c": {"predicted": "free text answer"},  # another task's extras: no rows
        "d": None,
    }
    s = sets_from_extras(extras, {"a": 3, "b": 4})
    got = {(r.traj_id, r.level): (r.step, r.predicted, r.gold) for r in s.itertuples()}
    assert got == {
        ("a", "file"): (3, ["x.py", "y.py"], ["x.py"]),
        ("a", "entity"): (3, [], ["f"]),  # gold without prediction: named nothing
        ("b", "file"): (4, ["z.py"], ["z.py"]),
        ("b", "entity"): (4, [], ["g"]),
    }  # ("a", "module") has no gold set: not scorable, no row
    assert list(s.columns) == list(SET_COLUMNS)
    assert cell(s, "file", 3)["micro_precision"] == 0.5


@pytest.mark.parametrize(
    ("extras", "match"),
    [
        ({"a": {"gold": {"file": ["x"]}}}, "no step"),
        ({"b": {"gold": {"file": "x"}}}, "gold of trajectory 'b'"),
        ({"b": {"sets": {"file": ["x"]}}}, "must be"),
        ({"b": {"gold": {"file": ["x"]}, "sets": {"file": {"gold": ["x"]}}}}, "both"),
    ],
)
def test_sets_from_extras_rejects_malformed_input(extras: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        sets_from_extras(extras, {"b": 0})


# ----------------------------------------------------------- cardinality_explains


def test_naming_more_items_at_the_same_hit_rate_is_cardinality() -> None:
    # gold has 4 items; early the agent names 2 (1 hit), late 4 (2 hits): precision stays 1/2
    rows = [
        (s, f"e{s}-{i}", "file", ["g1", "w1"], ["g1", "g2", "g3", "g4"])
        for s in range(5)
        for i in range(3)
    ]
    rows += [
        (s, f"l{s}-{i}", "file", ["g1", "g2", "w1", "w2"], ["g1", "g2", "g3", "g4"])
        for s in range(5, 10)
        for i in range(3)
    ]
    c = cardinality_explains(frame(rows))
    row = c.summary.set_index("level").loc["file"]
    assert row["early_f1"] == pytest.approx(2 / 6) and row["late_f1"] == pytest.approx(4 / 8)
    assert row["early_precision"] == row["late_precision"] == 0.5
    assert row["f1_cardinality_only"] == pytest.approx(0.5) and row[
        "cardinality_share"
    ] == pytest.approx(1.0)
    assert row["verdict"] == "cardinality"
    assert (row["early_first"], row["early_last"], row["late_first"], row["late_last"]) == (
        0,
        0,
        9,
        9,
    )
    ps = c.per_step.set_index("step")
    assert ps.loc[9, "micro_f1"] == pytest.approx(ps.loc[9, "f1_cardinality_only"])


def test_better_items_at_the_same_cardinality_is_precision() -> None:
    gold = ["g1", "g2"]
    rows = [(s, f"t{s}", "entity", ["g1", "w"] if s < 5 else ["g1", "g2"], gold) for s in range(10)]
    rows += [(s, f"u{s}", "entity", ["w", "v"] if s < 5 else ["g2", "w"], gold) for s in range(10)]
    row = cardinality_explains(frame(rows), edge_steps=5).summary.iloc[0]
    assert row["early_f1"] == pytest.approx(0.25) and row["late_f1"] == pytest.approx(0.75)
    assert row["f1_cardinality_only"] == pytest.approx(0.25) and row[
        "cardinality_share"
    ] == pytest.approx(0.0)
    assert row["verdict"] == "precision"


def test_flat_f1_is_no_gain_and_one_step_is_an_error() -> None:
    rows = [(s, f"t{s}", "file", ["a"], ["a", "b"]) for s in range(4)]
    c = cardinality_explains(frame(rows))
    assert c.summary.iloc[0]["verdict"] == "no_gain" and np.isnan(
        c.summary.iloc[0]["cardinality_share"]
    )
    d = c.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["summary"][0]["cardinality_share"] is None
    with pytest.raises(ValueError, match="needs 2"):
        cardinality_explains(frame(rows[:1]))


def test_scores_to_dict_is_json_ready() -> None:
    d = set_scores(frame([(0, "t", "file", [], []), (1, "u", "file", ["a"], ["a"])])).to_dict()
    json.dumps(d, allow_nan=False)
    assert d["table"][0]["cardinality_ratio"] is None and d["table"][1]["micro_f1"] == 1.0


def test_counterfactual_hits_never_exceed_the_gold_set() -> None:
    # early: 1 name, always right (p0 = 1); late: 4 names for 2 gold items, 1 right
    rows = [
        (s, f"t{s}", "file", ["g1"] if s < 2 else ["g1", "w1", "w2", "w3"], ["g1", "g2"])
        for s in range(4)
    ]
    row = cardinality_explains(frame(rows), edge_steps=2).summary.iloc[0]
    assert row["f1_cardinality_only"] == pytest.approx(2 * 2 / (4 + 2))  # hits capped at |G| = 2
    assert row["late_f1"] == pytest.approx(2 / 6) and row["verdict"] == "no_gain"
