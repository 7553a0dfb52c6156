"""``rolloutlab report`` of a 100-step × 512-trajectory run: target under 10 s.

Measured in one run, from an already ingested store (``bench_ingest.py`` measures the
ingest): (a) the report in-process — load, every analysis section, trajectory samples,
figures, HTML — split into its stages; (b) the same through the CLI (process start-up
included); (c) the PNG figures alone.

Usage: ``python benchmarks/bench_report.py [--steps 100 --trajs 512]``
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _gen import make_verl_dump


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--trajs", type=int, default=512)
    a = ap.parse_args()

    import rolloutlab
    from rolloutlab.analysis import analyze, load_run
    from rolloutlab.report import (
        ReportConfig,
        ReportRun,
        build_report,
        sample_trajectories,
        write_report,
    )
    from rolloutlab.report._html import plotly_js
    from rolloutlab.report._png import write_pngs

    work = Path(tempfile.mkdtemp(prefix="rl-bench-report-"))
    try:
        dump = make_verl_dump(work / "dump", steps=a.steps, trajs=a.trajs, group=8)
        rolloutlab.ingest([dump], work / "store")
        st = rolloutlab.open_store(work / "store")
        cfg = ReportConfig()
        plotly_js()  # read once per process; counted in the CLI figure below

        t0 = time.perf_counter()
        frame = load_run(st, "dump")
        t1 = time.perf_counter()
        res = analyze(frame)
        t2 = time.perf_counter()
        samples = sample_trajectories(frame, groups_per_step=cfg.groups_per_step, max_chars=cfg.max_chars,
                                      max_turns=cfg.max_turns)
        t3 = time.perf_counter()
        rep = build_report([ReportRun("dump", res, frame, samples, "verl")], cfg)
        write_report(rep, work / "report.html")
        t4 = time.perf_counter()
        t_report = t4 - t0
        stages = f"load {t1 - t0:5.2f} s | analyze {t2 - t1:5.2f} s | samples {t3 - t2:5.2f} s | figures + HTML {t4 - t3:5.2f} s"

        t0 = time.perf_counter()
        write_pngs(rep.figures, work / "png")
        t_png = time.perf_counter() - t0

        t0 = time.perf_counter()
        cli = [sys.executable, "-c", "import sys, rolloutlab.cli.report; from rolloutlab.cli import main; "
               "sys.exit(main(sys.argv[1:]))", "report", "dump", "--store", str(work / "store"), "-o", str(work / "cli.html")]
        subprocess.run(cli, check=True, capture_output=True)
        t_cli = time.perf_counter() - t0

        size = (work / "report.html").stat().st_size
        shown = sum(len(g.picks) for s in samples for g in s.groups)
        print(f"run: {a.steps} steps x {a.trajs} trajectories (groups of 8); {len(rep.figures)} figures, "
              f"{shown} sampled trajectories, page {size / 1e6:.1f} MB ({len(plotly_js()) / 1e6:.1f} MB of it plotly.js)")
        print("  " + stages)
        print(f"rolloutlab report (in-process, from the store)  {t_report:6.2f} s  (target < 10 s)")
        print(f"rolloutlab report via the CLI                   {t_cli:6.2f} s")
        print(f"--png: {len(rep.figures)} PNG figures (matplotlib)        {t_png:6.2f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
