"""Advantage replay speed on a synthetic run (outcome estimators, no turns).

Builds a 100-step × 512-trajectory run in groups of 8 with ``frame_from_records`` (about
2% ungraded), then times :func:`rolloutlab.analysis._replay.replay_advantages` over the
five outcome estimators: best of ``--repeat`` runs, after one warm-up.

Usage: ``python benchmarks/bench_replay.py [--steps 100 --trajs 512 --group 8]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from rolloutlab.analysis._data import frame_from_records
from rolloutlab.analysis._replay import OUTCOME_ESTIMATORS, replay_advantages


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--trajs", type=int, default=512)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    records = []
    for step in range(1, args.steps + 1):
        p = min(0.9, 0.2 + 0.6 * step / args.steps)
        for i in range(args.trajs):
            ungraded = rng.random() < 0.02
            records.append({
                "step": step, "group_id": f"g{i // args.group}", "sample_idx": i % args.group,
                "traj_id": f"s{step}-{i}", "reward": None if ungraded else float(rng.random() < p),
            })
    frame = frame_from_records(records)

    replay_advantages(frame, estimators=OUTCOME_ESTIMATORS)  # warm-up
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        rep = replay_advantages(frame, estimators=OUTCOME_ESTIMATORS)
        times.append(time.perf_counter() - t)
    n = len(frame.traj)
    print(f"replay of {n} trajectories ({args.steps} steps × {args.trajs}, groups of {args.group}), "
          f"{len(rep.estimators)} outcome estimators: best {min(times) * 1e3:.0f} ms, "
          f"median {np.median(times) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
