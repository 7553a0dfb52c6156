"""Recall and false alarms of the training-health signatures on generated runs.

Healthy runs and runs with one planted pathology come from
``rolloutlab.analysis._health_gen`` (random length 60–300 steps, random onset in
20–80 % of the run, random size and noise).  Recall: the planted signature is found with
its onset within ±10 % of the run length.  False alarm: a healthy run with any finding at
warning or above.  Prints the table for the README.

    python benchmarks/bench_health.py [--seeds 100]
"""

from __future__ import annotations

import argparse
import time

from rolloutlab.analysis._health_gen import recall_false_alarms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=100, help="runs per signature and healthy runs")
    ap.add_argument("--seed0", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    table, healthy = recall_false_alarms(args.seeds, seed0=args.seed0)
    took = time.perf_counter() - t0
    print("| signature | recall (onset ±10 %) | found early / late | missed |")
    print("|---|---|---|---|")
    for kind, r in table.iterrows():
        print(f"| {kind} | {100 * r['recall']:.0f}% ({int(r['found'])}/{int(r['runs'])}) | "
              f"{int(r['early'])} / {int(r['late'])} | {int(r['missed'])} |")
    flagged = {k: v for k, v in healthy.items() if k not in ("runs", "false_alarms", "rate")}
    which = f" ({', '.join(f'{k} {v:.0f}' for k, v in flagged.items())})" if flagged else ""
    print(f"\nfalse alarms: {healthy['false_alarms']:.0f} of {healthy['runs']:.0f} healthy runs "
          f"({100 * healthy['rate']:.1f}%) flag anything at warning or above{which}")
    print(f"mean recall {100 * table['recall'].mean():.1f}% over {len(table)} signatures; {took:.1f} s")


if __name__ == "__main__":
    main()
