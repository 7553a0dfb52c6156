"""Training-health signatures: numerics against slow obvious code, hand-built cases,
missing scalars, and the hook into analyze (with and without trajectories)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rolloutlab.analysis import analyze, frame_from_records
from rolloutlab.analysis._health import (
    SIGNATURES,
    at_least,
    health_check,
    health_findings,
    hinge_break,
    robust_sigma,
    two_lines_split,
)
from rolloutlab.analysis._health_gen import PLANTED, healthy_run, planted_run


def _slow_two_lines(x: np.ndarray, y: np.ndarray, m: int) -> int:
    best, arg = math.inf, -1
    for k in range(m, len(x) - m + 1):
        rss = 0.0
        for xs, ys in ((x[:k], y[:k]), (x[k:], y[k:])):
            coef = np.polyfit(xs, ys, 1)
            rss += float(((np.polyval(coef, xs) - ys) ** 2).sum())
        if rss < best - 1e-9:
            best, arg = rss, k
    return arg


def _slow_hinge(x: np.ndarray, y: np.ndarray, m: int) -> int:
    best, arg = math.inf, -1
    for j in range(m, len(x) - 2):
        design = np.column_stack([np.ones_like(x), x, np.maximum(0.0, x - x[j])])
        beta, *_ = np.linalg.lstsq(design, y, rcond=None)
        rss = float(((design @ beta - y) ** 2).sum())
        if rss < best - 1e-9:
            best, arg = rss, j
    return arg


@pytest.mark.parametrize("seed", range(5))
def test_split_and_hinge_match_slow_search(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 40
    x = np.arange(1, n + 1, dtype=float) * 3
    y = np.where(x > 60, 0.05 * (x - 60), 0.0) + 0.3 * np.where(x > 90, 1.0, 0.0) + rng.normal(0, 0.1, n)
    assert two_lines_split(x, y, 3)[0] == _slow_two_lines(x, y, 3)
    assert hinge_break(x, y, 3) == _slow_hinge(x, y, 3)


def test_robust_sigma_hand_case() -> None:
    # differences 1, 1, 1, 5: median 1, |d − 1| = 0, 0, 0, 4 → MAD 0 → SD of differences √3, / √2
    assert robust_sigma(np.array([0.0, 1, 2, 3, 8])) == pytest.approx(math.sqrt(3) / math.sqrt(2))
    # differences −1, 1, −1, 1: median 0, MAD 1 → 1.4826 / √2
    assert robust_sigma(np.array([1.0, 0, 1, 0, 1])) == pytest.approx(1.4826 / math.sqrt(2))


def _table(n: int = 100, **cols: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(cols, index=pd.RangeIndex(1, n + 1, name="step"))


def test_kl_step_change_hand_case() -> None:
    rng = np.random.default_rng(0)
    kl = 0.01 * np.exp(rng.normal(0, 0.1, 100))
    kl[60:] *= 100  # steps 61… at 1.0
    rep = health_check(_table(**{"actor/kl_loss": kl}))
    (f,) = [f for f in rep.findings if f.kind == "kl_blowup"]
    assert f.severity == "critical"
    assert abs(f.onset - 61) <= 1
    assert f.evidence["ratio"] == pytest.approx(100, rel=0.15)
    assert 0 < f.confidence <= 1 and len(f.actions) >= 2
    assert rep.scalars["kl_ref"] == "actor/kl_loss"


def test_kl_leaving_zero_is_no_blowup_until_it_matters() -> None:
    """A tiny run's KL to the reference leaving 0 (textcraft_scalinginter, 10 steps:
    6e-6 -> 2.3e-4, a 15x 'rise') is no blow-up; the same shape 100x larger is."""
    kl = np.array([0.0, 1e-5, 2e-5, 3e-5, 5e-5, 8e-5, 1.1e-4, 1.5e-4, 1.9e-4, 2.3e-4])
    assert not [f for f in health_check(_table(n=10, **{"actor/kl_loss": kl})).findings if f.kind == "kl_blowup"]
    (f,) = [f for f in health_check(_table(n=10, **{"actor/kl_loss": 100 * kl})).findings if f.kind == "kl_blowup"]
    assert f.severity in ("warning", "critical") and f.evidence["late"] >= 1e-3


def test_missing_scalars_are_named() -> None:
    rep = health_check(_table(**{"actor/entropy": np.linspace(1, 0.8, 100)}))
    assert "entropy_collapse" in rep.checked
    assert "kl_blowup" in rep.missing and "actor/kl_loss" in rep.missing["kl_blowup"]
    assert "length_hacking" in rep.missing and "correctness" in rep.missing["length_hacking"]
    assert rep.findings == []


def test_too_few_steps_is_not_checked() -> None:
    rep = health_check(_table(n=5, **{"actor/kl_loss": np.array([0.01, 0.01, 1, 1, 1])}))
    assert rep.findings == [] and "needs 10" in rep.missing["kl_blowup"]


def test_framework_aliases_and_train_prefix() -> None:
    rng = np.random.default_rng(1)
    vf = np.exp(rng.normal(0, 0.1, 100))
    vf[50:] *= np.exp(np.linspace(0, 4, 50))  # ×55 by the end
    clip = 0.01 + rng.normal(0, 0.002, 100)
    clip[40:] += 0.4
    f = health_findings(_table(**{"critic/vf_loss": vf, "train/clip_ratio/region_mean": clip}))
    kinds = {x.kind: x for x in f}
    assert kinds["value_divergence"].severity == "critical" and abs(kinds["value_divergence"].onset - 51) <= 5
    assert kinds["clip_saturation"].severity == "critical" and abs(kinds["clip_saturation"].onset - 41) <= 2


def test_nonfinite_counted_from_counter_and_infinities() -> None:
    g = np.ones(100)
    g[70] = np.inf
    skipped = np.zeros(100)
    skipped[[30, 31]] = [2, 1]
    (f,) = [x for x in health_findings(_table(**{"actor/grad_norm": g, "actor/skipped_nonfinite": skipped}))
            if x.kind == "grad_nonfinite"]
    assert f.onset == 31 and f.evidence["steps_affected"] == 3 and f.evidence["events"] == 4
    assert f.severity == "warning" and "nan" not in f.text.lower()


def test_length_hacking_needs_flat_correctness() -> None:
    n = 120
    rng = np.random.default_rng(2)
    ln = 300 * np.exp(rng.normal(0, 0.03, n))
    ln[60:] *= np.linspace(1, 2.5, 60)
    reward = 0.5 + rng.normal(0, 0.02, n)
    reward[60:] += np.linspace(0, 0.2, 60)
    flat = 0.5 + rng.normal(0, 0.02, n)
    hacked = health_findings(_table(n, **{"response/length_mean": ln, "reward/mean": reward, "success/rate": flat}))
    assert [x.kind for x in hacked if x.kind == "length_hacking"] == ["length_hacking"]
    rising = flat.copy()
    rising[60:] += np.linspace(0, 0.2, 60)  # correctness rose with the reward: honest gains
    honest = health_findings(_table(n, **{"response/length_mean": ln, "reward/mean": reward, "success/rate": rising}))
    assert "length_hacking" not in {x.kind for x in honest}


def test_every_signature_has_actions_and_a_generator() -> None:
    assert {s.kind for s in SIGNATURES} == set(PLANTED)
    for s in SIGNATURES:
        assert 2 <= len(s.actions) <= 3, s.kind


def test_at_least() -> None:
    rng = np.random.default_rng(5)
    run, _ = planted_run("grad_nonfinite", rng)
    f = health_findings(run)
    assert at_least(f, "warning") and all(x.severity in ("warning", "critical") for x in at_least(f, "warning"))


def _traj_run(metrics: dict[int, dict[str, float]], steps: int = 40) -> object:
    rng = np.random.default_rng(0)
    recs = []
    for s in range(1, steps + 1):
        for g in range(6):
            for i in range(4):
                recs.append({"step": s, "group_id": f"{s}:{g}", "task_id": f"t{g}", "sample_idx": i,
                             "reward": float(rng.random() < 0.3 + 0.01 * s), "num_turns": 1, "response_tokens": 50})
    return frame_from_records(recs, metrics=metrics)


def test_analyze_with_trajectories_adds_health_findings_and_json_fields() -> None:
    from rolloutlab.analysis._json import plain

    ent = {s: {"actor/entropy": 1.0 if s < 20 else 0.02, "actor/kl_loss": 0.01 if s < 25 else 2.0} for s in range(1, 41)}
    a = analyze(_traj_run(ent), replay=False, breakpoint_intervals=False)
    kinds = [f.kind for f in a.findings]
    assert kinds.count("entropy_collapse") == 1  # the health finding supersedes the older one
    assert "kl_blowup" in kinds
    d = plain(a.to_dict())
    kl = next(f for f in d["findings"] if f["kind"] == "kl_blowup")
    assert kl["severity"] == "critical" and abs(kl["onset"] - 25) <= 2
    assert 0 <= kl["confidence"] <= 1 and kl["actions"] and kl["evidence"]["ratio"] > 50
    assert "health:throughput_rot" in a.skipped


def test_healthy_run_has_no_warning() -> None:
    for seed in range(5):
        assert at_least(health_findings(healthy_run(np.random.default_rng(seed))), "warning") == []


VERL_NAMES = {"reward/mean": "critic/score/mean", "actor/entropy": "actor/entropy", "actor/kl_loss": "actor/kl_loss",
              "timing/step_s": "timing_s/step", "response_length/clip_ratio": "response_length/clip_ratio",
              "actor/grad_norm": "actor/grad_norm", "actor/pg_clipfrac": "actor/pg_clipfrac"}
TRL_NAMES = {"reward/mean": "train/reward", "actor/entropy": "train/entropy", "actor/kl_loss": "train/kl",
             "actor/pg_clipfrac": "train/clip_ratio/region_mean", "actor/grad_norm": "train/grad_norm"}


def _planted_frame(kind: str, names: dict[str, str], seed: int) -> tuple[pd.DataFrame, int]:
    run, onset = planted_run(kind, np.random.default_rng(seed), n=90)
    return run[list(names)].rename(columns=names), onset


def _only(a: object, kind: str, onset: int) -> None:
    warn = at_least(a.findings, "warning")  # type: ignore[attr-defined]
    assert [f.kind for f in warn] == [kind], [f.text for f in warn]
    assert abs((warn[0].onset or 0) - onset) <= 9


def test_verl_console_log_through_analyze(tmp_path: Path) -> None:
    import rolloutlab
    from rolloutlab.analysis import analyze_run

    df, onset = _planted_frame("throughput_rot", VERL_NAMES, 11)
    lines = ["(main_task pid=1) Training Progress:   1%|▎ 1/90"]
    for step, row in df.iterrows():
        lines.append(f"(main_task pid=1) step:{step} - " + " - ".join(f"{k}:{v:.6g}" for k, v in row.items()))
    p = tmp_path / "verl_run" / "train.log"
    p.parent.mkdir()
    p.write_text("\n".join(lines) + "\n")
    rolloutlab.ingest([p], tmp_path / "store")
    st = rolloutlab.open_store(tmp_path / "store")
    _only(analyze_run(st, next(iter(st.manifest["runs"]))), "throughput_rot", onset)


def test_wandb_csv_trl_names_through_analyze(tmp_path: Path) -> None:
    import rolloutlab
    from rolloutlab.analysis import analyze_run

    df, onset = _planted_frame("clip_saturation", TRL_NAMES, 12)
    p = tmp_path / "wandb_export.csv"
    df.to_csv(p, index_label="_step")
    rolloutlab.ingest([p], tmp_path / "store")
    _only(analyze_run(rolloutlab.open_store(tmp_path / "store"), "wandb_export"), "clip_saturation", onset)


def test_tensorboard_through_analyze(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    import rolloutlab
    from rolloutlab.analysis import analyze_run
    from tests.importers.test_tensorboard import _write_events

    df, onset = _planted_frame("entropy_collapse", VERL_NAMES, 13)
    scalars = [(int(s), str(k), float(v)) for s, row in df.iterrows() for k, v in row.items()]
    _write_events(tmp_path / "tb" / "run1", scalars)
    rolloutlab.ingest([tmp_path / "tb" / "run1"], tmp_path / "store")
    _only(analyze_run(rolloutlab.open_store(tmp_path / "store"), "run1"), "entropy_collapse", onset)


@pytest.mark.parametrize(("late_p", "severity"), [(0.0, "critical"), (1.0, "info")])
def test_zero_variance_groups_from_the_ledger_with_onset(late_p: float, severity: str) -> None:
    rng = np.random.default_rng(7)
    recs = []
    for s in range(1, 61):
        for g in range(10):
            # from step 35 every group is all-wrong (a failure) or all-correct (convergence): no GRPO signal
            p = 0.5 if s < 35 else late_p
            for i in range(4):
                recs.append({"step": s, "group_id": f"{s}:{g}", "task_id": f"t{g}", "sample_idx": i,
                             "reward": float(rng.random() < p), "num_turns": 1, "response_tokens": 50})
    a = analyze(frame_from_records(recs), replay=False, breakpoint_intervals=False)
    (f,) = [x for x in a.findings if x.kind == "zero_variance_groups"]
    # the outcome decides (analysis._severity): all solved is convergence, all failed is critical
    assert f.severity == severity and abs((f.onset or 0) - 35) <= 2
    assert ("convergence" in f.text) == (severity == "info")
    assert f.evidence["late"] == pytest.approx(1.0)
    assert "signal" not in {x.kind for x in a.findings}  # superseded, not stated twice


def test_clip_side_fractions_read_from_new_and_old_trainer_names() -> None:
    """The trainer logs the one-sided clip fractions as ``actor/pg_clipfrac_ratio_low`` /
    ``_high`` (verl's ``actor/pg_clipfrac_lower`` is the dual-clip fraction, a different
    quantity); runs written before the rename still read, and verl's name never stands in."""
    from rolloutlab.analysis._health import resolve_scalars

    idx = pd.Index([1, 2, 3], name="step")
    new = pd.DataFrame({"actor/pg_clipfrac_ratio_low": [0.1, 0.2, 0.3], "actor/pg_clipfrac_ratio_high": [0.3, 0.2, 0.1],
                        "actor/pg_clipfrac_lower": [0.9, 0.9, 0.9]}, index=idx)
    _, names = resolve_scalars(new)
    assert names["clipfrac_low"] == "actor/pg_clipfrac_ratio_low"
    assert names["clipfrac_high"] == "actor/pg_clipfrac_ratio_high"
    old = pd.DataFrame({"actor/pg_clipfrac_low": [0.1, 0.2, 0.3], "actor/pg_clipfrac_high": [0.3, 0.2, 0.1]}, index=idx)
    _, names = resolve_scalars(old)
    assert (names["clipfrac_low"], names["clipfrac_high"]) == ("actor/pg_clipfrac_low", "actor/pg_clipfrac_high")
    _, names = resolve_scalars(pd.DataFrame({"actor/pg_clipfrac_lower": [0.9, 0.9, 0.9]}, index=idx))
    assert "clipfrac_low" not in names


def _verl_ppo_kl_run(peak: float, *, n: int = 120, onset: int = 70, seed: int = 3) -> pd.DataFrame:
    """A run logged with verl's names whose ``actor/ppo_kl`` sits near 0.005 and, from
    ``onset``, climbs geometrically to ``peak`` (the issue's case: 0.005 → 77)."""
    rng = np.random.default_rng(seed)
    i = np.arange(n)
    climb = np.clip((i - onset) / 15, 0.0, 1.0)
    ppo_kl = 0.005 * np.exp(np.log(peak / 0.005) * climb) * np.exp(rng.normal(0.0, 0.2, n))
    return pd.DataFrame({
        "critic/score/mean": 0.3 + 0.4 * (1 - np.exp(-i / 40)) + rng.normal(0.0, 0.02, n),
        "actor/entropy": 1.0 - 0.3 * i / n + rng.normal(0.0, 0.01, n),
        "actor/kl_loss": 1e-3 * (1 + i / n) * np.exp(rng.normal(0.0, 0.1, n)),
        "actor/pg_clipfrac": 0.01 + (0.2 if peak > 1 else 0.0) * climb + np.abs(rng.normal(0.0, 0.002, n)),
        "actor/ppo_kl": ppo_kl,
        "actor/grad_norm": 0.5 * np.exp(rng.normal(0.0, 0.2, n)),
    }, index=pd.RangeIndex(1, n + 1, name="step"))


def test_policy_update_kl_blowup_under_verl_names_is_critical_with_onset() -> None:
    rep = health_check(_verl_ppo_kl_run(77.0))
    assert rep.scalars["policy_kl"] == "actor/ppo_kl"
    hits = [f for f in rep.findings if f.kind == "policy_update_instability"]
    assert len(hits) == 1 and hits[0].severity == "critical", [f.text for f in rep.findings]
    assert abs((hits[0].onset or 0) - 71) <= 3, hits[0].text
    assert hits[0].evidence["late"] > 10 and hits[0].evidence["before"] < 0.02
    assert hits[0].evidence["clipfrac_after"] > hits[0].evidence["clipfrac_before"]
    assert any("TIS" in a for a in hits[0].actions) and any("PPO epochs" in a for a in hits[0].actions)


def test_policy_update_kl_steady_is_not_flagged() -> None:
    rep = health_check(_verl_ppo_kl_run(0.005))
    assert "policy_update_instability" in rep.checked
    assert at_least(rep.findings, "warning") == [], [f.text for f in rep.findings]


def test_importance_ratio_stands_in_for_the_policy_kl() -> None:
    run = _verl_ppo_kl_run(77.0).drop(columns=["actor/ppo_kl"])
    n = len(run)
    rng = np.random.default_rng(5)
    run["val/ratio"] = 1 + np.where(np.arange(n) >= 70, 0.8, 0.0) + rng.normal(0.0, 0.002, n)
    hits = [f for f in health_check(run).findings if f.kind == "policy_update_instability"]
    assert len(hits) == 1 and hits[0].severity == "critical" and abs((hits[0].onset or 0) - 71) <= 3
