"""Ingest throughput vs bare parsing and vs a straightforward pandas pipeline.

Generates a verl-style dump (100 steps × 512 trajectories × ~4 KB), then measures in one
run, so that the ratios hold on a noisy shared machine:

- bare parse: the faster of orjson line by line and ``polars.read_ndjson`` over the files;
- pandas: ``pd.read_json(lines=True)`` + ``DataFrame.to_parquet`` per file;
- rolloutlab ingest (in a subprocess, to read its peak memory);
- the per-step reward/length table read back from the store.

Usage: ``python benchmarks/bench_ingest.py [--steps 100 --trajs 512]``
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _gen import make_verl_dump


def timed(fn: object) -> float:
    t = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--trajs", type=int, default=512)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()

    import orjson
    import pandas as pd

    work = Path(tempfile.mkdtemp(prefix="rl-bench-"))
    try:
        dump = make_verl_dump(work / "dump", steps=a.steps, trajs=a.trajs)
        files = sorted(dump.glob("*.jsonl"))
        mb = sum(f.stat().st_size for f in files) / 1e6
        for f in files:  # warm the page cache for everyone alike
            f.read_bytes()

        def parse_orjson() -> None:
            for f in files:
                with open(f, "rb") as fh:
                    for line in fh:
                        orjson.loads(line)

        t_orjson = timed(parse_orjson)
        t_polars = float("inf")
        try:
            import polars as pl

            t_polars = timed(lambda: [pl.read_ndjson(f) for f in files])
        except ImportError:
            pass
        t_parse = min(t_orjson, t_polars)

        # The floor of any JSONL → Parquet ingest in Python: parse, convert to Arrow, write
        # (lz4), with none of rolloutlab's checks, grouping, turn splitting or text/number split.
        floor_dir = work / "floor"
        floor_dir.mkdir()

        def floor() -> None:
            import pyarrow as pa
            import pyarrow.parquet as pq

            for f in files:
                with open(f, "rb") as fh:
                    recs = [orjson.loads(line) for line in fh]
                pq.write_table(pa.Table.from_pylist(recs), floor_dir / f"{f.stem}.parquet", compression="lz4")

        t_floor = timed(floor)

        out = work / "pandas"
        out.mkdir()
        t_pandas = timed(lambda: [pd.read_json(f, lines=True).to_parquet(out / f"{f.stem}.parquet") for f in files])

        store = work / "store"
        # The CLI, as users run it (worker processes chosen automatically), process start included.
        cli = [sys.executable, "-m", "rolloutlab", "ingest", str(dump), "--store", str(store), "--json"]
        t0 = time.perf_counter()
        res = subprocess.run(cli, capture_output=True, text=True, check=True)
        t_ingest = time.perf_counter() - t0
        rep = json.loads(res.stdout)
        child = {"trajectories": sum(s["counts"]["trajectories"] for s in rep["sources"]),
                 # largest resident set of any one process (the CLI or one of its workers)
                 "peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}
        t_startup = timed(lambda: subprocess.run([sys.executable, "-c", "import rolloutlab.io"], check=True))

        import rolloutlab

        st = rolloutlab.open_store(store)
        t0 = time.perf_counter()
        steps = st.steps().arrow().read_all()
        t_steps = time.perf_counter() - t0
        t0 = time.perf_counter()
        rolloutlab.ingest([dump], store)
        t_reingest = time.perf_counter() - t0

        print(f"input: {len(files)} files, {child['trajectories']} trajectories, {mb:.0f} MB")
        print(f"bare parse   orjson {t_orjson:6.2f} s   polars {t_polars:6.2f} s   -> best {t_parse:.2f} s ({mb / t_parse:.0f} MB/s)")
        print(f"pandas read_json + to_parquet        {t_pandas:6.2f} s")
        print(f"floor: orjson + Arrow + Parquet      {t_floor:6.2f} s  (no checks, no grouping, one thread)")
        print(f"rolloutlab ingest (CLI, incl. start) {t_ingest:6.2f} s  ({mb / t_ingest:.0f} MB/s, peak RSS {child['peak_mb']:.0f} MB; "
              f"interpreter + import alone {t_startup:.2f} s)")
        print(f"re-ingest (nothing changed)          {t_reingest:6.2f} s")
        print(f"per-step table from the store        {t_steps:6.3f} s  ({steps.num_rows} steps)")
        print(f"RATIO ingest speed / bare parse speed   = {t_parse / t_ingest:.2f}  (target >= 0.5)")
        print(f"RATIO ingest speed / pandas speed       = {t_pandas / t_ingest:.2f}  (target >= 3)")
        print(f"RATIO ingest speed / floor speed        = {t_floor / t_ingest:.2f}")
        print(f"peak memory {child['peak_mb']:.0f} MB (target < 1024); per-step table {t_steps:.3f} s (target < 0.5)")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
