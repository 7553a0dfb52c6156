"""``rolloutlab runs``: the runs in a store, with their size and mean reward."""

from __future__ import annotations

from typing import Annotated

import typer

from rolloutlab.cli._app import JsonOpt, StoreOpt, app, store_path

WideOpt = Annotated[bool, typer.Option("--wide", help="Show every column (the default fits an 80-column terminal).")]


@app.command()
def runs(store: StoreOpt = None, json_: JsonOpt = False, wide: WideOpt = False) -> None:
    """List runs: steps, trajectories, graded-only mean reward, ungraded share."""
    import orjson
    from rich.console import Console
    from rich.text import Text

    from rolloutlab.cli._tables import Col, cell, legend, make_table, print_table
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
    spec = [Col("run", False), Col("name", False, True), Col("source", False), Col("model", False),
            Col("status", False, True), Col("labels", False), Col("steps"), Col("trajs"), Col("reward"), Col("ungr")]
    shown = [c for c in spec if wide or not c.wide_only]
    t = make_table(shown, title=f"runs in {st.path}")
    for r in recs:
        values: dict[str, Text | str] = {
            "run": cell(r["run_id"]), "name": cell(r["name"]), "source": cell(r["source"]), "model": cell(r["model"]),
            "status": cell(r["status"]), "labels": cell(" ".join(f"{k}={v}" for k, v in r["labels"].items())),
            "steps": str(r["steps"]), "trajs": str(r["trajectories"]),
            "reward": "—" if r["mean_reward"] is None else f"{r['mean_reward']:.4f}",
            "ungr": "—" if r["ungraded_rate"] is None else f"{100 * r['ungraded_rate']:.1f}%",
        }
        t.add_row(*(values[c.header] for c in shown))
    con = Console(highlight=False)
    print_table(con, t, wide=wide)
    note = legend(c.header for c in shown)
    if note is not None:
        con.print(note)
