"""``rolloutlab demo``: train the tiny policy on guess-number, evaluate, ingest, analyse, report.

The orchestration of the packages, so it lives with the command line: ``train`` trains,
``evaluate`` evaluates the checkpoints (:func:`rolloutlab.evaluate.run_eval`, as ``rolloutlab
eval --checkpoints`` does), ``io`` ingests, ``analysis`` and ``report`` explain.

Everything lands under one folder::

    DIR/run/                 the training run (run.json, metrics.jsonl, rollouts/, checkpoints/,
                             eval/<checkpoint>/{episodes.jsonl, summary.json})
    DIR/store/               the store the run was ingested into
    DIR/report.html          the self-contained report
    DIR/figures/*.png        its figures

Checkpoints are evaluated without the trainer: each is loaded from its folder like any
``hf:PATH`` model, on the test split, the initial model as step 0 — the same as
``rolloutlab eval --env guess-number-v0 --checkpoints DIR/run/checkpoints --out DIR/run
--episodes 128 --samples 2 --concurrency 256`` (each checkpoint's ``generation_config.json``
gives the one-token cap and the temperature).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rolloutlab.agent import LoopConfig
from rolloutlab.evaluate import EvalConfig, run_eval
from rolloutlab.io import RolloutlabError
from rolloutlab.schema import EvalSummary
from rolloutlab.train import TrainConfig, load_config

__all__ = ["DemoResult", "demo_eval_config", "run_demo"]


@dataclass
class DemoResult:
    out: Path
    run_dir: Path
    store: Path
    report: Path | None
    figures: list[Path]
    evals: list[EvalSummary]
    train_seconds: float
    total_seconds: float
    run_id: str
    notes: list[str] = field(default_factory=list)


def demo_eval_config(run_dir: Path, cfg: TrainConfig, *, episodes: int = 128, samples: int = 2, split: str = "test",
                     seed: int = 0) -> EvalConfig:
    """The evaluation of every checkpoint of ``run_dir`` on ``split`` (``episodes`` tasks ×
    ``samples``), written into the run directory: the training's horizon, parser, per-turn
    token cap and sampling, the evaluation's defaults for the rest (timeouts, retries, no
    invalid-action penalty), and every episode of a checkpoint at once
    (the local model answers them in one batch per turn)."""
    r = cfg.rollout.loop
    if cfg.env.kwargs:
        raise RolloutlabError(f"the demo evaluates {cfg.env.id} as registered; env.kwargs {cfg.env.kwargs} "
                              "would make its evaluation another environment than the training's: drop them")
    loop = LoopConfig(max_turns=r.max_turns, max_tokens_per_turn=r.max_tokens_per_turn, parser=r.parser,
                      temperature=r.temperature, top_p=r.top_p, concurrency=episodes * samples, split="eval")
    return EvalConfig(env=cfg.env.id, out=run_dir, checkpoints=run_dir / "checkpoints", episodes=episodes,
                      samples=samples, split=split, seed=seed, loop=loop)


def run_demo(
    out: Path,
    *,
    quick: bool = False,
    overrides: Sequence[str] = (),
    report: bool = True,
    echo: Callable[[str], None] = print,
    progress: bool = True,
) -> DemoResult:
    """The whole demo (see the module docstring); ``quick`` trains fewer steps."""
    from rolloutlab.train import Trainer

    t_all = time.perf_counter()
    ovs = list(overrides)
    if quick:
        ovs = ["trainer.total_steps=40", "trainer.save_every=10", *ovs]
    cfg = load_config("demo", ovs)
    out = Path(out)
    run_dir = out / "run"
    if run_dir.exists() and any(run_dir.iterdir()):
        raise RolloutlabError(f"{run_dir} is not empty: choose another --out or remove it")
    out.mkdir(parents=True, exist_ok=True)
    echo(f"training the tiny policy on {cfg.env.id}: {cfg.model.tiny_shape.hidden_size}-wide Qwen2, "
         f"{cfg.algorithm.adv_estimator}, {cfg.trainer.total_steps} steps of {cfg.batch_size} episodes")
    t0 = time.perf_counter()
    trainer = Trainer(cfg, run_dir, progress=progress)
    trainer.save()  # the initial model, evaluated as step 0
    res = trainer.run()
    train_s = time.perf_counter() - t0
    hist = res.history
    if hist:
        first, last = hist[0].get("success/rate"), hist[-1].get("success/rate")
        echo(f"trained {res.last_step} steps in {train_s:.1f} s; training success {first:.2f} -> {last:.2f}"
             if first is not None and last is not None else f"trained {res.last_step} steps in {train_s:.1f} s")
    echo("evaluating each checkpoint on the test split (no trainer: loaded from its folder) ...")
    evals = run_eval(demo_eval_config(run_dir, cfg))
    for s in evals:
        echo(f"  {s.checkpoint}: success {s.success_rate:.3f}" if s.success_rate is not None
             else f"  {s.checkpoint}: ungraded")
    from rolloutlab.io import ingest

    store = out / "store"
    rep = ingest([run_dir], store, name="demo", labels={"estimator": cfg.algorithm.adv_estimator})
    run_id = rep.sources[0].run_id if rep.sources else "demo"
    notes: list[str] = []
    report_path: Path | None = None
    figures: list[Path] = []
    try:
        from rolloutlab.analysis import analyze_run
        from rolloutlab.io import open_store

        st = open_store(store)
        analysis = analyze_run(st, run_id)
        _print_findings(analysis, echo)
    except Exception as e:  # the demo still reports what it has
        notes.append(f"analysis failed: {type(e).__name__}: {e}")
    if report:
        try:
            from rolloutlab.io import open_store
            from rolloutlab.report import ReportConfig, build_report, load_report_run, write_report

            st = open_store(store)
            conf = ReportConfig()
            rr = load_report_run(st, run_id, conf)
            rep_obj = build_report([rr], conf)
            report_path = out / "report.html"
            figures = write_report(rep_obj, report_path, png_dir=out / "figures")
        except Exception as e:
            notes.append(f"report not written: {type(e).__name__}: {e}")
    return DemoResult(
        out=out, run_dir=run_dir, store=store, report=report_path, figures=figures, evals=evals,
        train_seconds=train_s, total_seconds=time.perf_counter() - t_all, run_id=run_id, notes=notes,
    )


def _print_findings(analysis: Any, echo: Callable[[str], None]) -> None:
    findings = getattr(analysis, "findings", None) or []
    if findings:
        echo("what analyze says about the run (most consequential first):")
    import shutil
    import textwrap

    width = min(100, shutil.get_terminal_size((80, 24)).columns) - 1
    for f in list(findings)[:5]:
        text = getattr(f, "text", None) or str(f)
        echo(textwrap.fill(str(text), width=width, initial_indent="  - ", subsequent_indent="    "))
