"""``rolloutlab runs``: the runs in a store, with their size and mean reward."""

from __future__ import annotations

import typer

from rolloutlab.cli._app import JsonOpt, StoreOpt, app, store_path


@app.command()
def runs(store: StoreOpt = None, json_: JsonOpt = False) -> None:
    """List runs: steps, trajectories, graded-only mean reward, ungraded share."""
    import orjson
    from rich.console import Console
    from rich.table import Table

    from rolloutlab.io import open_store

    st = open_store(store_path(store))
    rows = st.sql(
        """
        SELECT r.run_id, r.name, r.source, r.model, r.status, r.last_step,
               map_entries(r.labels) AS labels,
               count(DISTINCT (t.split, t.step)) FILTER (WHERE t.traj_id IS NOT NULL) AS steps,
               count(t.traj_id) AS trajectories,
               avg(t.reward) AS mean_reward,
               avg(CASE WHEN t.graded THEN 0.0 ELSE 1.0 END) AS ungraded_rate
        FROM runs r LEFT JOIN trajectories t USING (run_id)
        GROUP BY ALL ORDER BY r.run_id
        """
    ).fetchall()
    cols = ["run_id", "name", "source", "model", "status", "last_step", "labels", "steps", "trajectories", "mean_reward", "ungraded_rate"]
    recs = [dict(zip(cols, r, strict=True)) for r in rows]
    for r in recs:
        r["labels"] = {e["key"]: e["value"] for e in r["labels"] or []}
    if json_:
        typer.echo(orjson.dumps(recs, default=str).decode())
        return
    t = Table("run", "source", "model", "labels", "steps", "trajectories", "mean reward (graded)", "ungraded", title=f"runs in {st.path}")
    for r in recs:
        t.add_row(
            r["run_id"], r["source"] or "", r["model"] or "",
            " ".join(f"{k}={v}" for k, v in r["labels"].items()),
            str(r["steps"]), str(r["trajectories"]),
            "—" if r["mean_reward"] is None else f"{r['mean_reward']:.4f}",
            "—" if r["ungraded_rate"] is None else f"{100 * r['ungraded_rate']:.1f}%",
        )
    Console().print(t)
