"""A doctor you can trust (issue 17 items 1, 2, 3, 6).

A run written as ``rolloutlab demo`` writes one (rollouts, metrics, ``eval/<checkpoint>/``),
ingested into a store: success climbs to ~0.97 while entropy collapses and groups go
zero-variance — convergence.  Its held-out evaluations (one sample per task) lead the
headline, the report and the dashboard; the convergence signs are info, and the same signs
on a run that stalls or whose held-out result falls are warnings or critical.
"""

from __future__ import annotations

import html as htmllib
import math
import random
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import rolloutlab
from rolloutlab.analysis import analyze, analyze_run, frame_from_records, headline
from rolloutlab.analysis._records import Finding
from rolloutlab.io import RunWriter
from rolloutlab.schema import EvalSummary, Run, Trajectory

pytest.importorskip("jinja2")
pytest.importorskip("plotly")

STEPS = 40


def _p(step: int, top: float) -> float:
    """Success probability at a step: a logistic climb from ~0.1 to ``top``."""
    return top / (1 + math.exp(-(step - 12) / 3))


def _traj(split: str, step: int, task: int, k: int, ok: bool) -> Trajectory:
    return Trajectory(traj_id=f"{split}{step}-{task}-{k}", step=step, group_id=f"{step}:{task}", sample_idx=k,
                      task_id=f"{split}-t{task}", prompt=[{"role": "user", "content": "guess"}], response="42",
                      reward=1.0 if ok else 0.0, graded=True, success=ok, termination="done")


def write_run(root: Path, *, top: float = 0.98, eval_top: float = 0.97, seed: int = 0,
              extra: dict[str, list[float]] | None = None, name: str = "run", run_id: str = "conv") -> Path:
    """A run directory: 40 steps of 16 tasks × 4 samples, entropy 1.2 → ~0.02, and
    checkpoints 0, 20, 40 evaluated on 64 test tasks, one sample each; ``extra``: more
    metrics, one value per step."""
    rng = random.Random(seed)
    d = root / name
    with RunWriter(d, Run(run_id=run_id, name=run_id, algorithm="grpo", model="tiny")) as w:
        for step in range(1, STEPS + 1):
            p = _p(step, top)
            w.write_step(step, [_traj("tr", step, t, k, rng.random() < p) for t in range(16) for k in range(4)])
            w.log_metrics(step, {"actor/entropy": 1.2 * math.exp(-step / 6) + 0.01 * rng.random(),
                                 "actor/grad_norm": 1.0 + 0.1 * rng.random(),
                                 **{k: v[step - 1] for k, v in (extra or {}).items()}})
        for step in (0, 20, 40):
            eps = [_traj("ev", step, t, 0, rng.random() < _p(step, eval_top)) for t in range(64)]
            ok = sum(bool(e.success) for e in eps)
            w.write_eval(f"step_{step}", eps, EvalSummary(checkpoint=f"step_{step}", step=step, episodes=64,
                                                          graded=64, mean_reward=ok / 64, success_rate=ok / 64))
    return d


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLOUTLAB_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("doctor")
    rolloutlab.ingest([write_run(tmp)], tmp / "store")
    return tmp / "store"


@pytest.fixture(scope="module")
def train(store: Path) -> Any:
    return analyze_run(rolloutlab.open_store(store), "conv")


# -- item 1: outcome-aware severity --------------------------------------------------------


def test_convergence_is_info_with_its_figures(train: Any) -> None:
    kinds = {f.kind: f for f in train.findings}
    assert "entropy_collapse" in kinds  # the sign is there ...
    assert train.outcome.state == "converged"
    for f in train.findings:  # ... and no finding of a converged run is a warning
        assert f.severity in (None, "info") or f.kind not in ("entropy_collapse", "zero_variance_groups"), f
    assert headline(train).findings and all(f.severity == "info" for f in headline(train).findings
                                            if f.kind in ("entropy_collapse", "zero_variance_groups", "ceiling",
                                                          "plateau", "signal"))
    text = kinds["entropy_collapse"].text
    last = train.heldout.last.success
    assert f"held-out success {round(100 * last.estimate):.0f}%" in text and "convergence" in text


def _collapse(severity: str = "warning") -> Finding:
    return Finding("entropy_collapse", 80, "entropy collapsed", (10, 40), {}, severity, 10, 0.9, ("add a bonus",))


def _steps(success: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"success_rate": success, "mean_reward": success}, index=range(1, len(success) + 1))


@pytest.mark.parametrize(("success", "state", "severity"), [
    ([0.1] * 10 + [0.95] * 10, "converged", "info"),
    ([0.1] * 10 + [0.4] * 10, "stalled", "warning"),  # stalled below HIGH: its own rule's severity
    ([0.1] * 10 + [0.79] * 10, "stalled", "warning"),  # just under HIGH_OUTCOME = 0.8
])
def test_the_rule_from_training_success(success: list[float], state: str, severity: str) -> None:
    from rolloutlab.analysis import HIGH_OUTCOME, apply_severity, outcome_of

    assert HIGH_OUTCOME == 0.8
    o = outcome_of(_steps(success), [_collapse()], None)
    assert o.state == state
    weighed = apply_severity([_collapse()], o)[0]
    assert weighed.severity == severity
    # convergence is nothing to fix: an info finding carries no remedies
    assert weighed.actions == (() if severity == "info" else ("add a bonus",))


def test_falling_reward_makes_the_sign_critical() -> None:
    from rolloutlab.analysis import apply_severity, outcome_of

    declining = Finding("declining", 85, "mean_reward is declining", (20, 40))
    o = outcome_of(_steps([0.9] * 20), [declining, _collapse()], None)
    assert o.state == "falling"
    assert apply_severity([_collapse()], o)[0].severity == "critical"


def _eval_frame(rates: dict[int, float], tasks: int = 50) -> Any:
    recs = [{"step": s, "group_id": f"{s}:{t}", "task_id": f"t{t}", "reward": float(t < round(r * tasks))}
            for s, r in rates.items() for t in range(tasks)]
    return frame_from_records(recs, split="eval")


def test_the_held_out_result_weighs_the_verdict() -> None:
    from rolloutlab.analysis import apply_severity, heldout_of, outcome_of

    high_train = _steps([0.1] * 10 + [0.97] * 10)
    # training at 97 % but held-out only 50 %: far below, not convergence
    o = outcome_of(high_train, [_collapse()], heldout_of(_eval_frame({0: 0.1, 40: 0.5})))
    assert o.state == "stalled" and apply_severity([_collapse()], o)[0].severity == "warning"
    # held-out fell from 90 % to 20 %: critical whatever training says
    o = outcome_of(high_train, [_collapse()], heldout_of(_eval_frame({0: 0.9, 40: 0.2})))
    assert o.state == "falling" and apply_severity([_collapse()], o)[0].severity == "critical"
    o = outcome_of(high_train, [_collapse()], heldout_of(_eval_frame({0: 0.1, 40: 0.96})))
    assert o.state == "converged"


def test_a_stalled_run_with_the_same_signs_keeps_the_warning(tmp_path: Path) -> None:
    rolloutlab.ingest([write_run(tmp_path, top=0.35, eval_top=0.3)], tmp_path / "s")
    a = analyze_run(rolloutlab.open_store(tmp_path / "s"), "conv")
    col = [f for f in a.findings if f.kind == "entropy_collapse"]
    assert col and col[0].severity in ("warning", "critical") and a.outcome.state == "stalled"
    assert "Worst training-health sign" in headline(a).text


# -- item 3: held-out results first --------------------------------------------------------


def test_held_out_interval_by_hand() -> None:
    from rolloutlab.analysis import heldout_of

    h = heldout_of(_eval_frame({0: 0.2, 40: 0.8}, tasks=50))
    assert [c.step for c in h.checkpoints] == [0, 40]
    assert h.first.success.estimate == pytest.approx(0.2) and h.last.success.estimate == pytest.approx(0.8)
    # 50 Bernoulli(0.8) tasks: the binomial SE is 0.0566, the 95 % interval about ±0.11
    se = math.sqrt(0.8 * 0.2 / 50)
    assert h.last.success.low == pytest.approx(0.8 - 1.96 * se, abs=0.03)
    assert h.last.success.high == pytest.approx(min(1.0, 0.8 + 1.96 * se), abs=0.03)


def test_the_headline_leads_with_the_held_out_result(train: Any) -> None:
    h = headline(train)
    first, last = train.heldout.first, train.heldout.last
    assert h.sentences[0].startswith("Held-out (eval) success ")
    assert f"at step {first.step} → " in h.sentences[0] and f"at step {last.step}" in h.sentences[0]
    assert h.sentences[-1].startswith("No training-health warning")


# -- item 6: findings fit the split --------------------------------------------------------


def test_the_eval_split_gets_no_training_finding_and_no_advantage(store: Path) -> None:
    from rolloutlab.analysis._findings import HELDOUT_KINDS

    a = analyze_run(rolloutlab.open_store(store), "conv", split="eval")
    assert a.replay is None and "replay" in a.skipped
    assert {f.kind for f in a.findings} <= set(HELDOUT_KINDS)
    assert "passk" in a.skipped and a.ledger.empty  # one sample per task: no group statistics


def test_training_only_findings_are_dropped_off_train() -> None:
    recs = [{"step": s, "group_id": f"{s}:{t}", "task_id": f"t{t}", "reward": 1.0, "traj_id": f"{s}-{t}-{k}"}
            for s in range(1, 21) for t in range(8) for k in range(4)]
    a = analyze(frame_from_records(recs, split="eval"))
    assert "signal" not in {f.kind for f in a.findings}  # every group has zero variance: a training concern
    assert analyze(frame_from_records(recs, split="train")).findings  # on train it is said


# -- item 2: no contradictions, on the report and the dashboard ----------------------------


def _text(html: str) -> str:
    return htmllib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))


HELD_OUT_FIGURE = r"[Hh]eld-out (?:\(eval\) )?success (\d+)% \[[^\]]*\] at step (\d+)"


def _no_contradiction(page: str, a: Any) -> None:
    """No finding's figure on the page contradicts the analysis's tables."""
    text = _text(page)
    late = a.steps["mean_reward"].dropna()
    # a predicted ceiling is never printed below the reward the run already reached
    for m in re.finditer(r"top out near ([0-9]+\.[0-9]+)", text):
        assert float(m.group(1)) >= late.iloc[-5:].mean() - 1e-9, m.group(0)
    # "every rollout gets the top reward" only when the table says so
    if "every rollout" in text:
        assert late.iloc[-1] == 1.0
    # one onset for entropy collapse: every "collapse ... step N" on the page names the same N
    onsets = {int(n) for n in re.findall(r"[Ee]ntropy collapse (?:from|at) step (\d+)", text)}
    onsets |= {int(n) for n in re.findall(r"collapse (?:from|at) step (\d+)", page)}
    col = [f for f in a.findings if f.kind == "entropy_collapse"]
    if col:
        assert onsets <= {col[0].onset}, onsets
    # every held-out figure on the page is one of the run's checkpoints, at its own step
    if a.heldout is not None:
        at = {c.step: round(100 * c.success.estimate) for c in a.heldout.checkpoints}
        for pct, step in re.findall(HELD_OUT_FIGURE, text):
            assert at.get(int(step)) == int(pct), (pct, step, at)
    # a converged run shows no warning; a run that is not converged calls nothing "convergence"
    sev = set(re.findall(r'class="sev sev-(\w+)"', page))
    if a.outcome.state == "converged":
        assert not sev & {"warning", "critical"}, sev
    else:
        assert "this is convergence" not in text
    # an info finding offers nothing to fix
    for m in re.finditer(r'<span class="sev sev-info">info</span>(.*?)</li>', page, re.S):
        assert "thing to try" not in m.group(1), m.group(1)[:200]


def test_report_and_dashboard_agree_with_their_tables(store: Path, train: Any) -> None:
    from rolloutlab.report import ReportConfig, build_report, load_report_run

    st = rolloutlab.open_store(store)
    rr = load_report_run(st, "conv", ReportConfig())
    page = build_report([rr]).html
    _no_contradiction(page, rr.analysis)
    head = page[page.index('id="headline-0"'):]
    assert re.findall(r"<p>(.*?)</p>", head)[0].startswith("conv: Held-out (eval) success")
    assert "collapse from step" in page
    for split in ("train", "eval"):
        a = analyze_run(st, "conv", split=split)
        from rolloutlab.report import figure_specs

        specs, _ = figure_specs([a], ["conv"])
        _no_contradiction(" ".join(str(s) for _, s in specs) + " " + " ".join(f.text for f in a.findings), a)


@pytest.mark.parametrize(("top", "eval_top", "state"), [
    (0.98, 0.97, "converged"),  # solves the task: convergence signs are info
    (0.35, 0.30, "stalled"),  # the same signs on a stalled run: warnings
    (0.98, 0.55, "stalled"),  # training success far above the held-out result
])
def test_report_pages_of_a_set_of_runs_agree_with_their_tables(tmp_path: Path, top: float, eval_top: float,
                                                               state: str) -> None:
    from rolloutlab.report import ReportConfig, build_report, load_report_run

    rolloutlab.ingest([write_run(tmp_path, top=top, eval_top=eval_top, seed=5, run_id="r")], tmp_path / "s")
    rr = load_report_run(rolloutlab.open_store(tmp_path / "s"), "r", ReportConfig())
    assert rr.analysis.outcome.state == state
    page = build_report([rr]).html
    _no_contradiction(page, rr.analysis)
    # the held-out figures the check compares are there to compare
    assert re.search(HELD_OUT_FIGURE, _text(page))


def test_dashboard_leads_with_held_out_and_eval_step_has_no_advantage(store: Path) -> None:
    pytest.importorskip("fastapi")
    from tests.viewer.test_viewer import client_for

    with client_for(store) as c:
        page = c.get("/runs/conv").text
        head = page[page.index('id="headline"'):]
        assert re.findall(r"<p>(.*?)</p>", head)[0].startswith("Held-out (eval) success")
        assert "sev warning" not in page and "sev critical" not in page
        _no_contradiction(page, analyze_run(rolloutlab.open_store(store), "conv"))
        ev = c.get("/runs/conv/steps/40?split=eval").text
        assert 'class="adv' not in ev and "No advantages on the eval split" in ev
        tr = c.get("/runs/conv/steps/40?split=train").text
        assert 'class="adv' in tr


@pytest.mark.parametrize("split", ["train", "eval"])
def test_a_ceiling_says_how_close_and_only_train_says_what_is_left(split: str) -> None:
    # 50 tasks × 2 samples; from step 6 one sample in 50 fails: 0.99, within 0.02 of the top
    recs = [{"step": s, "group_id": f"{s}:{t}", "task_id": f"t{t}", "reward": float(not (t == 0 and k == 0)
                                                                                         if s > 5 else t < 25 * k + 5)}
            for s in range(1, 31) for t in range(50) for k in range(2)]
    a = analyze(frame_from_records(recs, split=split), replay=False, breakpoint_intervals=False)
    (f,) = [x for x in headline(a).findings if x.kind == "ceiling"]
    said = f"{f.text} {f.stats}"
    assert "every rollout" not in said and "within 0.010 of the maximum 1" in f.stats
    assert ("left to teach" in said) == (split == "train")
    if split == "eval":  # not stated by an evaluation's headline: its own sentence says it
        assert f.text == "Reward is at its maximum: it is within 0.010 of the top reward."


def test_report_takes_metric_overrides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``report --metric QUANTITY=COLUMN`` reads the column as ``analyze`` does."""
    from rolloutlab.cli import main

    # a policy-update KL under a name no family reads, blowing up 0.005 → 77 from step 25
    q7 = [0.005 * (77 / 0.005) ** min(1.0, max(0.0, (s - 25) / 5)) * (1 + 0.1 * (s % 3)) for s in range(1, STEPS + 1)]
    run = write_run(tmp_path, extra={"q7": q7})
    plain, over = tmp_path / "plain.html", tmp_path / "over.html"
    assert main(["report", str(run), "-o", str(plain)]) == 0
    assert main(["report", str(run), "-o", str(over), "--metric", "policy_kl=q7"]) == 0
    assert "olicy-update KL" not in _text(plain.read_text(encoding="utf-8"))
    assert "olicy-update KL blowing up" in _text(over.read_text(encoding="utf-8"))
    capsys.readouterr()
    assert main(["report", str(run), "-o", str(over), "--metric", "policy_kl=nope"]) == 2
    assert "nope" in capsys.readouterr().err
