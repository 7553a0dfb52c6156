"""The viewer's ``/search`` over a 100-step × 512-trajectory run, timed at the server.

Builds the run with ``_gen.make_verl_dump`` (4,000-character trajectories: about 200 MB of
text), ingests it, and requests through the app in-process (Starlette's TestClient):

- a word no trajectory holds (the whole ``texts`` table is scanned);
- a phrase a few trajectories hold (a whole scan too, few snippets);
- a word nearly every trajectory holds (the scan stops after 10,000 matches);
- page 2 of that search (kept: no scan, only the page's snippets);

each ``--repeat`` times on a fresh app (so the search is not cached) but page 2, which is
requested after its page 1.  Beside each: the same question asked of the store in SQL, as
``rolloutlab sql`` runs it (``count(DISTINCT traj_id)`` over ``texts`` with
``contains(lower(…), …)`` on the same seven columns), the peer a user would otherwise reach for.

Usage: ``python benchmarks/bench_search.py [--steps 100 --trajs 512 --repeat 3]``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _gen import make_verl_dump

FIELDS = ("prompt", "observation", "thought", "action", "tool_calls", "response", "error")
"""What the viewer's default (``any text``) searches."""
PEER_SQL = ("SELECT count(DISTINCT (run_id, split, step, traj_id)) FROM texts WHERE "
            + " OR ".join(f"contains(lower({f}), ?)" for f in FIELDS))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--trajs", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()

    import rolloutlab
    from rolloutlab.viewer import create_app

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    work = Path(tempfile.mkdtemp(prefix="rl-bench-search-"))
    try:
        dump = make_verl_dump(work / "dump", steps=a.steps, trajs=a.trajs, group=8)
        rolloutlab.ingest([dump], work / "store")
        st = rolloutlab.open_store(work / "store")
        n = st.sql("SELECT count(*) FROM trajectories").fetchall()[0][0]
        mb = sum(f.stat().st_size for f in st.files("texts")) / 1e6
        print(f"{n:,} trajectories, texts files {mb:.0f} MB on disk")
        cases = [("no match", "zebra crossing"), ("a few", "task 17: "), ("nearly all", "answer")]
        print(f"{'search':<14}{'matches':>12}{'viewer s':>10}{'sql s':>8}")
        for label, q in cases:
            times, count = [], ""
            for _ in range(a.repeat):
                with TestClient(create_app(work / "store"), base_url="http://127.0.0.1:8000") as c:
                    c.get("/")  # the store's first load, not timed
                    t0 = time.perf_counter()
                    r = c.get("/search", params={"q": q})
                    times.append(time.perf_counter() - t0)
                    assert r.status_code == 200, r.text[:500]
                    m = re.search(r'id="search-count">\s*<b>([0-9,+]+)</b>', r.text)
                    count = m.group(1) if m else "?"
                    if label == "nearly all":
                        t0 = time.perf_counter()
                        assert c.get("/search", params={"q": q, "page": 2}).status_code == 200
                        page2 = time.perf_counter() - t0
            peer = []
            for _ in range(a.repeat):
                t0 = time.perf_counter()
                st.sql(PEER_SQL, [q.lower()] * len(FIELDS)).fetchall()
                peer.append(time.perf_counter() - t0)
            print(f"{label:<14}{count:>12}{statistics.median(times):>10.2f}{statistics.median(peer):>8.2f}")
        print(f"{'page 2, kept':<14}{'':>12}{page2:>10.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
