"""Recall and false alarms of the training-health signatures on generated runs, per
signature and per naming convention.

Healthy runs, converging runs (success climbing to 0.93–0.99 with entropy falling to
5–20 % of its start and groups going all-solved) and runs with one planted pathology come
from ``rolloutlab.analysis._health_gen`` (random length 60–300 steps, random onset in
20–80 % of the run, random size and noise).  Every run is renamed into each naming
convention of ``CONVENTIONS`` (verl, TRL, SkyRL, OpenRLHF, prime-rl, NeMo-RL, ART, the
Tinker cookbook, snake_case, dotted camelCase) before it is checked.  Recall: the planted
signature is found with its onset within ±10 % of the run length.  False alarm: a healthy
(or converging) run with any finding at warning or above.  Prints the tables for the
README.

``--runs DIR ...`` also checks real runs (a run directory, or any path ``analyze`` reads)
exactly as ``rolloutlab analyze`` reports them — held-out evaluations weighed in — and
prints one row per run: its outcome and every finding at warning or above (a healthy run
should have none).  ``--make-runs DIR`` first makes
those real runs: the demo (``rolloutlab demo``: train, evaluate every checkpoint on the test
split) for seeds 0, 1 and 2, and every training preset's tiny run (``model.tiny=true``, cut to
a CPU budget by ``TINY``: few tasks, short replies, few turns and steps; the presets' own
algorithm, estimator, clip and KL settings kept), then checks them as ``--runs``.

    python benchmarks/bench_health.py [--seeds 100] [--conventions verl,trl] [--runs DIR ...]
    python benchmarks/bench_health.py --seeds 0 --make-runs out/health-runs   # real runs only
    python benchmarks/bench_health.py --seeds 0 --make-runs out/h --make presets --runs out/d/run
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rolloutlab.analysis._health_gen import CONVENTIONS, converging_run, recall_false_alarms


def _alarms(h: dict[str, float]) -> str:
    flagged = {k: v for k, v in h.items() if k not in ("runs", "false_alarms", "rate")}
    which = f" ({', '.join(f'{k} {v:.0f}' for k, v in sorted(flagged.items()))})" if flagged else ""
    return f"{h['false_alarms']:.0f}/{h['runs']:.0f}{which}"


def real_runs(paths: list[str]) -> list[str]:
    """One Markdown row per run: its outcome and its findings at warning or above."""
    from rolloutlab.analysis import analyze_run, at_least
    from rolloutlab.cli.analyze import resolve

    rows = []
    for path in paths:
        st, rid = resolve(path, None)
        a = analyze_run(st, rid)
        bad = at_least(a.findings, "warning")
        held = (f"held-out {100 * a.heldout.last.success.estimate:.0f}%" if a.heldout is not None
                else f"{a.outcome.source or 'no outcome'}")
        flagged = ", ".join(f"{f.kind} ({f.severity})" for f in bad) or "none"
        where = Path(path).parent.name if Path(path).name == "run" else Path(path).name
        rows.append(f"| {where} ({len(a.steps)} steps) | {a.outcome.state}, {held} | {flagged} |")
    return rows


TINY = ["model.tiny=true", "rollout.tasks_per_step=4", "rollout.n=4", "rollout.max_tokens_per_turn=8",
        "rollout.max_turns=2", "trainer.total_steps=10", "trainer.save_every=0", "trainer.threads=2",
        "logging.tensorboard=false", "logging.progress=false"]
"""A preset's tiny run: its algorithm on the tiny model, cut to a few minutes of CPU (the byte
tokenizer makes multi-turn prompts long: alfworld_gigpo at 8 tasks x 4 samples x 4 turns took
3.5 minutes a step on two shared cores)."""


def make_runs(out: Path, which: str = "demo,presets") -> list[str]:
    """The demo over three seeds and each preset's tiny run (``which``: either or both), under
    ``out``; their paths."""
    from rich.progress import Progress

    from rolloutlab.train._config import presets_dir

    presets = sorted(q.stem for q in presets_dir().glob("*.yaml") if q.stem != "demo" and not q.stem.startswith("sft"))
    jobs = []
    if "demo" in which:
        jobs += [(f"demo-seed{s}", ["demo", "--out", f"{out}/demo-seed{s}", "--no-report", f"seed={s}"]) for s in (0, 1, 2)]
    if "presets" in which:
        jobs += [(p, ["train", p, *TINY, "--out", f"{out}/{p}"]) for p in presets]
    paths = []
    with Progress() as bar:
        task = bar.add_task("runs", total=len(jobs))
        for name, args in jobs:
            shutil.rmtree(out / name, ignore_errors=True)
            bar.update(task, description=name)
            p = subprocess.run([sys.executable, "-m", "rolloutlab", *args], capture_output=True, text=True, check=False)
            if p.returncode != 0:
                raise SystemExit(f"{name} failed (exit {p.returncode}):\n{p.stderr[-2000:]}")
            # the demo folder holds the run and its store; the run directory is what analyze reads
            run = out / name / "run" if (out / name / "run").is_dir() else out / name
            paths.append(str(run))
            bar.advance(task)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=100, help="runs per signature and healthy runs, per convention")
    ap.add_argument("--seed0", type=int, default=0)
    ap.add_argument("--conventions", default=",".join(CONVENTIONS), help="comma-separated; default: all")
    ap.add_argument("--runs", nargs="*", default=[], help="real runs to check as analyze reports them")
    ap.add_argument("--make-runs", metavar="DIR", help="train the demo (3 seeds) and each preset's tiny run here, then check them")
    ap.add_argument("--make", default="demo,presets", help="with --make-runs: demo, presets or both (default)")
    args = ap.parse_args()
    if args.make_runs:
        args.runs = [*args.runs, *make_runs(Path(args.make_runs), args.make)]
    if args.runs:
        print("| run | outcome | findings at warning or above |\n|---|---|---|")
        print("\n".join(real_runs(args.runs)) + "\n")
    if args.seeds == 0:
        return
    convs = [c.strip() for c in args.conventions.split(",") if c.strip()]
    t0 = time.perf_counter()
    recall, healthy, converging = {}, {}, {}
    for conv in convs:
        table, healthy[conv] = recall_false_alarms(args.seeds, seed0=args.seed0, convention=conv)
        recall[conv] = table
        _, converging[conv] = recall_false_alarms(args.seeds, kinds=(), seed0=args.seed0 + 500_000, convention=conv,
                                                  make_healthy=converging_run)
    took = time.perf_counter() - t0
    first = recall[convs[0]]
    print("| signature | " + " | ".join(convs) + " |")
    print("|---|" + "---|" * len(convs))
    for kind in first.index:
        print(f"| {kind} | " + " | ".join(f"{100 * recall[c].loc[kind, 'recall']:.0f}%" for c in convs) + " |")
    print("| **healthy: false alarms** | " + " | ".join(_alarms(healthy[c]) for c in convs) + " |")
    print("| **converging: false alarms** | " + " | ".join(_alarms(converging[c]) for c in convs) + " |")
    low = min((recall[c]["recall"].min(), c) for c in convs)
    print(f"\nlowest recall {100 * low[0]:.0f}% ({low[1]}); {args.seeds} runs per cell; {took:.0f} s")


if __name__ == "__main__":
    main()
