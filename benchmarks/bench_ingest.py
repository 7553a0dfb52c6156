"""Ingest throughput vs bare parsing, vs native one-liners and vs a pandas pipeline.

Generates a verl-style dump (100 steps × 512 trajectories × ~4 KB), then measures in one
run, so that the ratios hold on a noisy shared machine:

- as whole processes (interpreter start and imports included), the best of ``--reps``
  runs each, interleaved: ``rolloutlab ingest`` (the CLI), the polars one-liner
  ``polars.read_ndjson(files).write_parquet(...)`` and DuckDB's
  ``COPY (SELECT * FROM read_json(...)) TO '...parquet'``, with each one's peak memory;
- ``rolloutlab --help`` start time (best of 5);
- bare parse: the faster of orjson line by line and ``polars.read_ndjson`` over the files;
- pandas: ``pd.read_json(lines=True)`` + ``DataFrame.to_parquet`` per file;
- the per-step reward/length table read back from the store.

The headline is ``ingest / polars one-liner`` (target <= 1.0): ingest does more (checks,
groups, turns, four tables) but reads natively too (rolloutlab.io._ndjson: polars, with
the ``fast`` extra; else rolloutlab.io._fastpath, pyarrow's reader).

Usage: ``python benchmarks/bench_ingest.py [--steps 100 --trajs 512 --reps 3]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
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


_LAUNCHER = """
import json, os, subprocess, sys, time
for line in sys.stdin:
    cmd = json.loads(line)
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.stdout.read(), p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    print(json.dumps({"wall": time.perf_counter() - t, "peak_mb": usage.ru_maxrss / 1024,
                      "rc": os.waitstatus_to_exitcode(status), "out": out.decode(), "err": err.decode()[-2000:]}),
          flush=True)
"""


class Launcher:
    """Starts the timed processes from a small interpreter started first: a child's peak
    resident size (``wait4``) counts what it inherited at fork, so children of this
    process, grown by pandas and the data, would all read at least its size."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _LAUNCHER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)

    def run(self, cmd: list[str]) -> tuple[float, float, str]:
        """Wall seconds, peak resident MB of that process alone, and its stdout."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        res = json.loads(self.proc.stdout.readline())
        if res["rc"] != 0:
            raise RuntimeError(f"{cmd[:4]} failed ({res['rc']}): {res['err']}")
        return res["wall"], res["peak_mb"], res["out"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


POLARS = "import polars as pl, sys; pl.read_ndjson(sys.argv[2:]).write_parquet(sys.argv[1])"
DUCKDB = ("import duckdb, sys; fs = ', '.join(repr(f) for f in sys.argv[2:]); duckdb.execute("
          "f\"COPY (SELECT * FROM read_json([{fs}], format = 'newline_delimited')) TO '{sys.argv[1]}' (FORMAT parquet)\")")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--trajs", type=int, default=512)
    ap.add_argument("--reps", type=int, default=3, help="whole-process runs of each contender (best kept)")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rl-bench-"))
    # Timed processes run with byte-code caching, as an installed package does (pip
    # compiles it): a checkout run with PYTHONDONTWRITEBYTECODE would compile every
    # module of rolloutlab at each start.  The first, untimed run of each fills the cache.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    launcher = Launcher(env)  # before anything large is imported or read

    import orjson
    import pandas as pd

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

        # Whole processes, interleaved, best of --reps: the CLI as users run it (worker
        # processes chosen automatically), the polars one-liner, DuckDB's COPY.
        names = [str(f) for f in files]
        launcher.run([sys.executable, "-m", "rolloutlab", "ingest", str(files[0]), "--store", str(work / "warm")])
        launcher.run([sys.executable, "-m", "rolloutlab", "--help"])
        for warm in (POLARS, DUCKDB):
            with contextlib.suppress(RuntimeError):  # not installed: reported below
                launcher.run([sys.executable, "-c", warm, str(work / "warm.parquet"), names[0]])
        best: dict[str, tuple[float, float]] = {}
        rep: dict[str, object] = {}
        for r in range(a.reps):
            store = work / f"store{r}"
            runs = {
                "ingest": [sys.executable, "-m", "rolloutlab", "ingest", str(dump), "--store", str(store), "--json"],
                "polars": [sys.executable, "-c", POLARS, str(work / f"pl{r}.parquet"), *names],
                "duckdb": [sys.executable, "-c", DUCKDB, str(work / f"dd{r}.parquet"), *names],
            }
            for name, cmd in runs.items():
                if name != "ingest" and r and name not in best:
                    continue  # not installed
                try:
                    wall, peak, stdout = launcher.run(cmd)
                except RuntimeError as e:
                    if name == "ingest":
                        raise
                    print(f"({name} one-liner unavailable: {str(e).splitlines()[0][:100]})")
                    continue
                if name == "ingest":
                    rep = json.loads(stdout)
                old = best.get(name)
                best[name] = (min(wall, old[0]) if old else wall, max(peak, old[1]) if old else peak)
            if r < a.reps - 1:
                shutil.rmtree(store, ignore_errors=True)
        store = work / f"store{a.reps - 1}"
        t_ingest, peak_ingest = best["ingest"]
        t_pl, peak_pl = best.get("polars", (float("nan"), float("nan")))
        t_dd, peak_dd = best.get("duckdb", (float("nan"), float("nan")))
        n_traj = sum(s["counts"]["trajectories"] for s in rep["sources"])  # type: ignore[index]
        t_help = min(launcher.run([sys.executable, "-m", "rolloutlab", "--help"])[0] for _ in range(5))
        t_startup = launcher.run([sys.executable, "-c", "import rolloutlab.io._ingest"])[0]

        import rolloutlab

        st = rolloutlab.open_store(store)
        t0 = time.perf_counter()
        steps = st.steps().arrow().read_all()
        t_steps = time.perf_counter() - t0
        t0 = time.perf_counter()
        rolloutlab.ingest([dump], store)
        t_reingest = time.perf_counter() - t0

        print(f"input: {len(files)} files, {n_traj} trajectories, {mb:.0f} MB")
        print("whole processes (start + imports included), best of", a.reps)
        print(f"  rolloutlab ingest (CLI)              {t_ingest:6.2f} s  {mb / t_ingest:5.0f} MB/s  peak {peak_ingest:5.0f} MB")
        print(f"  polars read_ndjson + write_parquet   {t_pl:6.2f} s  {mb / t_pl:5.0f} MB/s  peak {peak_pl:5.0f} MB")
        print(f"  DuckDB COPY read_json -> parquet     {t_dd:6.2f} s  {mb / t_dd:5.0f} MB/s  peak {peak_dd:5.0f} MB")
        print(f"  rolloutlab --help                    {t_help:6.2f} s  (import of the ingest modules alone {t_startup:.2f} s)")
        print(f"bare parse   orjson {t_orjson:6.2f} s   polars {t_polars:6.2f} s   -> best {t_parse:.2f} s ({mb / t_parse:.0f} MB/s)")
        print(f"pandas read_json + to_parquet        {t_pandas:6.2f} s")
        print(f"floor: orjson + Arrow + Parquet      {t_floor:6.2f} s  (no checks, no grouping, one thread)")
        print(f"re-ingest (nothing changed)          {t_reingest:6.2f} s")
        print(f"per-step table from the store        {t_steps:6.3f} s  ({steps.num_rows} steps)")
        print(f"RATIO ingest time / polars one-liner    = {t_ingest / t_pl:.2f}  (target <= 1.0)")
        print(f"RATIO ingest time / DuckDB COPY         = {t_ingest / t_dd:.2f}")
        print(f"RATIO ingest speed / bare parse speed   = {t_parse / t_ingest:.2f}  (target >= 0.5)")
        print(f"RATIO ingest speed / pandas speed       = {t_pandas / t_ingest:.2f}  (target >= 3)")
        print(f"RATIO ingest speed / floor speed        = {t_floor / t_ingest:.2f}")
        print(f"peak memory {peak_ingest:.0f} MB (target < 1024); --help {t_help:.2f} s (target < 0.3); "
              f"per-step table {t_steps:.3f} s (target < 0.5)")
    finally:
        launcher.close()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
