"""Full ``analyze`` of a 100-step × 512-trajectory run vs a straightforward pandas script.

Measured in one run: (a) the per-step table computed the way a one-off script does it —
``pd.read_json(lines=True)`` over every step file, then ``groupby("step")``; (b)
``rolloutlab analyze`` of the same run from the store (load + every section + findings;
the ingest itself is measured by ``bench_ingest.py`` and not counted here); (c) the same
analyze through the CLI with ``--json`` (process start-up included).

Usage: ``python benchmarks/bench_analyze.py [--steps 100 --trajs 512]``
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

    import pandas as pd

    import rolloutlab
    from rolloutlab.analysis import analyze_run

    work = Path(tempfile.mkdtemp(prefix="rl-bench-analyze-"))
    try:
        dump = make_verl_dump(work / "dump", steps=a.steps, trajs=a.trajs, group=8)
        rolloutlab.ingest([dump], work / "store")
        files = sorted(dump.glob("*.jsonl"), key=lambda p: int(p.stem))

        t0 = time.perf_counter()
        df = pd.concat([pd.read_json(f, lines=True) for f in files], ignore_index=True)
        df["group"] = df.groupby("step")["input"].transform(lambda s: pd.factorize(s)[0])
        table = df.groupby("step").agg(mean_reward=("score", "mean"), std_reward=("score", "std"),
                                       success=("acc", "mean"), resp_chars=("output", lambda s: s.str.len().mean()))
        zero_var = df.groupby(["step", "group"])["score"].std().eq(0).groupby(level=0).mean()
        table["frac_zero_variance"] = zero_var
        t_pandas = time.perf_counter() - t0

        st = rolloutlab.open_store(work / "store")
        t0 = time.perf_counter()
        res = analyze_run(st, "dump")
        t_cold = time.perf_counter() - t0  # first call: lazy imports and first-use costs included
        t0 = time.perf_counter()
        res = analyze_run(rolloutlab.open_store(work / "store"), "dump")
        t_analyze = time.perf_counter() - t0

        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "rolloutlab", "analyze", "dump", "--store", str(work / "store"), "--json"],
                       check=True, capture_output=True)
        t_cli = time.perf_counter() - t0

        print(f"run: {a.steps} steps x {a.trajs} trajectories (groups of 8), {len(res.findings)} findings")
        print(f"pandas read_json + groupby (per-step table only)  {t_pandas:6.2f} s")
        print(f"rolloutlab analyze (all sections, from the store)  {t_analyze:6.2f} s  (target < 5 s; "
              f"first call in the process {t_cold:.2f} s)")
        print(f"rolloutlab analyze --json via the CLI              {t_cli:6.2f} s")
        print(f"RATIO pandas time / analyze time = {t_pandas / t_analyze:.1f}  (target >= 5; "
              f"{t_pandas / t_cold:.1f} against the first call)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
