"""Viewer pages of a 100-step × 512-trajectory run, timed at the server (target < 300 ms).

Builds the run with ``_gen.make_verl_dump`` (4,000-character trajectories), ingests it,
and requests every kind of page through the app in-process (Starlette's TestClient: the
whole FastAPI stack, no socket), ``--repeat`` times each after one warm-up request.
Reported per page: median, 95th percentile and maximum in ms, and the page's size.  Also
reported once: the store's first load into the viewer, the first dashboard of the run
(which computes the analysis; later views read it from the cache), and the first page
after one more step was ingested (the live refresh).

Usage: ``python benchmarks/bench_viewer.py [--steps 100 --trajs 512 --repeat 30]``
(``--trajs 1024`` for a 102,400-trajectory run).  Exit status 1 when a page's median is
over the budget.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from _gen import make_verl_dump

BUDGET_MS = 300.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--trajs", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=30)
    a = ap.parse_args()

    import rolloutlab
    from rolloutlab.viewer import create_app

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    work = Path(tempfile.mkdtemp(prefix="rl-bench-viewer-"))
    try:
        dump = make_verl_dump(work / "dump", steps=a.steps, trajs=a.trajs, group=8)
        rolloutlab.ingest([dump], work / "store")
        st = rolloutlab.open_store(work / "store")
        n = st.sql("SELECT count(*) FROM trajectories").fetchall()[0][0]
        mid = a.steps // 2
        task = st.sql("SELECT task_id FROM trajectories WHERE step = ? LIMIT 1", params=[mid]).fetchall()[0][0]
        traj = st.sql("SELECT traj_id FROM trajectories WHERE step = ? ORDER BY traj_id LIMIT 1 OFFSET 17",
                      params=[mid]).fetchall()[0][0]
        last_page = a.trajs // 8 // 20
        pages = {
            "runs list": "/",
            "dashboard (cached analysis)": "/runs/dump",
            "step: groups side by side": f"/runs/dump/steps/{mid}",
            "step: groups by std desc, 50/page": f"/runs/dump/steps/{mid}?sort=std&order=desc&per_page=50",
            f"step: groups, last page ({last_page})": f"/runs/dump/steps/{mid}?page={last_page}",
            "step: table by reward desc": f"/runs/dump/steps/{mid}?view=table&sort=reward&order=desc",
            "step: filtered (success, reward)": f"/runs/dump/steps/{mid}?success=true&reward_min=0.5",
            "step: text search": f"/runs/dump/steps/{mid}?q=cart+buy&view=table",
            "trajectory": f"/runs/dump/traj?id={traj}",
            "whole text (plain)": f"/runs/dump/text?id={traj}&turn=-1&field=response",
            "task at two steps": f"/runs/dump/task?id={task}",
            "live version poll": "/api/runs/dump/version",
        }
        with TestClient(create_app(work / "store"), base_url="http://127.0.0.1:8000") as c:
            t0 = time.perf_counter()
            assert c.get("/api/version").status_code == 200
            t_load = (time.perf_counter() - t0) * 1e3
            t0 = time.perf_counter()
            assert c.get("/runs/dump").status_code == 200
            t_dash = (time.perf_counter() - t0) * 1e3
            rows = []
            for name, path in pages.items():
                r = c.get(path)
                assert r.status_code == 200, (path, r.status_code, r.text[:300])
                ms = []
                for _ in range(a.repeat):
                    t0 = time.perf_counter()
                    c.get(path)
                    ms.append((time.perf_counter() - t0) * 1e3)
                ms.sort()
                rows.append((name, statistics.median(ms), ms[int(0.95 * (len(ms) - 1))], ms[-1], len(r.content)))
            # live: one more step appears and is ingested; the next page refreshes the viewer
            recs = [orjson.loads(x) for x in (dump / f"{a.steps}.jsonl").read_bytes().splitlines()]
            (dump / f"{a.steps + 1}.jsonl").write_bytes(
                b"\n".join(orjson.dumps({**r, "step": a.steps + 1}) for r in recs) + b"\n")
            rolloutlab.ingest([dump], work / "store")
            t0 = time.perf_counter()
            assert c.get(f"/runs/dump/steps/{a.steps + 1}").status_code == 200
            t_live = (time.perf_counter() - t0) * 1e3

        print(f"run: {a.steps} steps x {a.trajs} trajectories = {n:,} (groups of 8, 4,000 chars each); "
              f"{a.repeat} requests per page, in-process (FastAPI + TestClient)")
        print(f"{'page':<40} {'median':>8} {'p95':>8} {'max':>8} {'bytes':>9}")
        slow = []
        for name, med, p95, top, size in rows:
            print(f"{name:<40} {med:8.1f} {p95:8.1f} {top:8.1f} {size:9,}")
            if med > BUDGET_MS:
                slow.append(name)
        print(f"first load of the store into the viewer   {t_load:8.1f} ms (numbers into memory, once per process)")
        print(f"first dashboard of the run                 {t_dash:8.1f} ms (computes the analysis, then cached)")
        print(f"first page after one more step ingested    {t_live:8.1f} ms (incremental refresh)")
        print(f"budget {BUDGET_MS:.0f} ms per page: " + ("all within" if not slow else "OVER: " + ", ".join(slow)))
        return 1 if slow else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
