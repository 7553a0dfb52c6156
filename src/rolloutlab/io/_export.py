"""``rolloutlab export``: a run's trajectories as supervised data, in Act-PRM's row layout.

One row per turn (``think-act``, ``policy``, ``rejection``) or per pair of trajectories
(``preference``), written twice: ``DIR/data.parquet`` and ``DIR/dataset/`` (Hugging Face
``datasets``' ``save_to_disk`` layout, read back by ``datasets.load_from_disk`` and by TRL's
``SFTTrainer`` / ``DPOTrainer`` as it is), plus ``DIR/export.json`` (what was exported and
how).  The folder is written under a temporary name and renamed when complete: a failed
export leaves nothing.

The row layout follows Act-PRM's ``think_act_policy`` rows (``act-prm-tinker``; ACTING.md
§ Act-PRM): ``state`` (the chat messages before the action: system + history without the
last action), ``action`` (thought + action, the text the model wrote), ``next_obs``,
``reward``, ``return_``, ``advantage``, ``done``, ``truncated``, ``timestep``, ``batch_id``
(the optimizer step), ``unique_data_sample_id`` (the trajectory), ``generation_id`` (its
sample index in its group), ``split``, ``tools`` (JSON).  Two columns are added for TRL's
conversational prompt-completion format: ``prompt`` (= ``state``) and ``completion`` (the
action as one assistant message).

Where the run directory cannot give back what the model saw, the rebuilt state departs from
it: observation messages are stored as joined text per turn (``Turn.observation``), so each
becomes one ``user`` message (a tool result's role and call id are not kept).

Rewards: a turn's ``reward`` is its per-turn reward (a ``label``-led run's process reward,
or the environment's); a trajectory whose turns carry none gets its final reward on its last
turn and 0 before (the outcome-reward convention).  Ungraded trajectories are left out and
counted — an ungraded episode is not a zero.

Rejection sampling selects by the outcome (``by="reward"``: whole trajectories whose reward
passes) or by the process reward (``by="label"``: the *steps* whose label passes, each with
its full state).  Selecting steps, not trajectories, is what Act-PRM does: its SFT set is
``think_act_policy`` rows, one per step, kept by that step's reward (ACTING.md § Act-PRM), so
a good step of a failed episode is kept and a poor step of a lucky one is not.  A step's
label is ``extras.label.value`` as ``rolloutlab label`` wrote it; a trajectory without labels
(outside ``label --steps`` or ``--limit``) is left out and counted, never read as 0, and so is
a labelled step whose value is null (its continuations all failed, or its reply had no action).
"""

from __future__ import annotations

import json
import os
import shutil
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from rolloutlab.errors import InputError, RolloutlabError
from rolloutlab.schema import Trajectory

__all__ = ["EXPORT_KINDS", "ROW_FIELDS", "SELECT_BY", "ExportOptions", "ExportResult", "export_rows", "export_run",
           "step_labels", "write_rows"]

ExportKind = Literal["think-act", "policy", "rejection", "preference"]
EXPORT_KINDS: tuple[str, ...] = ("think-act", "policy", "rejection", "preference")
SelectBy = Literal["reward", "label"]
SELECT_BY: tuple[str, ...] = ("reward", "label")

ROW_FIELDS: tuple[str, ...] = (
    "state", "action", "next_obs", "reward", "return_", "advantage", "done", "truncated", "timestep",
    "batch_id", "unique_data_sample_id", "generation_id", "split", "tools",
)
"""Act-PRM's ``think_act_policy`` columns, in its order (``prompt`` and ``completion`` follow)."""

HIDDEN_OBS = "[observation hidden]"
"""What replaces an earlier observation in the state when observations are hidden."""


@dataclass(frozen=True)
class ExportOptions:
    """How a run becomes rows."""

    kind: ExportKind = "think-act"
    """``think-act``: every turn, the target is thought + action (the text the model wrote);
    ``policy``: every turn, the target is the parsed action alone (no thought);
    ``rejection``: ``think-act`` rows of the trajectories whose reward >= ``threshold`` only;
    ``preference``: within each group, every (higher, lower) reward pair of trajectories as
    ``prompt`` / ``chosen`` / ``rejected`` conversations (TRL's DPO format)."""
    gamma: float = 1.0
    """Discount of ``return_ = reward + gamma * next return_`` within a trajectory."""
    center: bool = False
    """``advantage = return_ - mean(return_ over the rows of its batch_id)`` (Act-PRM's
    mean-centred returns); off: ``advantage = return_``."""
    hide_observations: bool = False
    """Replace every observation in the state but the last (the one the action answers) by
    ``[observation hidden]``, as Act-PRM hides observations from the trained text."""
    threshold: float = 1.0
    """``rejection``: the smallest trajectory reward (``by="reward"``) or step label
    (``by="label"``) kept."""
    by: SelectBy = "reward"
    """``rejection``: ``reward`` keeps every step of the trajectories whose outcome reward
    >= ``threshold``; ``label`` keeps the steps whose process-reward label (``rolloutlab
    label``) >= ``threshold``, Act-PRM's per-step selection (unlabelled ones left out, counted)."""
    split: str | None = None
    """Export only trajectories of this split (``train``, ``val``, ``eval``); None: all."""

    def __post_init__(self) -> None:
        if self.kind not in EXPORT_KINDS:
            raise RolloutlabError(f"--as {self.kind!r} is not one of: {', '.join(EXPORT_KINDS)}")
        if self.by not in SELECT_BY:
            raise RolloutlabError(f"--by {self.by!r} is not one of: {', '.join(SELECT_BY)} (reward: the trajectory's "
                                  "outcome; label: each step's process reward from `rolloutlab label`)")
        if self.by != "reward" and self.kind != "rejection":
            raise RolloutlabError(f"--by {self.by} selects rows for --as rejection only, not --as {self.kind}; "
                                  "add --as rejection or drop --by")


@dataclass
class ExportResult:
    """What an export wrote."""

    out: Path
    rows: int
    trajectories: int
    """Trajectories that gave rows."""
    skipped_ungraded: int
    skipped_below_threshold: int = 0
    """``rejection``: trajectories (``by="reward"``) or steps (``by="label"``) under the threshold."""
    skipped_unlabelled: int = 0
    """``by="label"``: trajectories without process-reward labels, left out (not read as 0)."""
    skipped_null_labels: int = 0
    """``by="label"``: steps of labelled trajectories whose label has no value, left out."""
    options: dict[str, Any] = field(default_factory=dict)
    source: str = ""

    def left_out(self, opts: ExportOptions) -> str:
        """What was left out, in words (``export.json``'s summary and the command's message)."""
        text = f"{self.skipped_ungraded} ungraded left out"
        if opts.kind == "rejection" and opts.by == "label":
            text += (f", {self.skipped_unlabelled} unlabelled skipped, {self.skipped_below_threshold} steps below "
                     f"label {opts.threshold:g}")
            if self.skipped_null_labels:
                text += f", {self.skipped_null_labels} steps without a label value"
        elif opts.kind == "rejection":
            text += f", {self.skipped_below_threshold} below reward {opts.threshold:g}"
        return text


def _messages(t: Trajectory) -> list[dict[str, str]]:
    if isinstance(t.prompt, list):
        return [{"role": str(m.get("role", "user")), "content": str(m.get("content") or "")} for m in t.prompt]
    if isinstance(t.prompt, str):
        return [{"role": "user", "content": t.prompt}]
    first = t.turns[0].observation if t.turns else None
    return [{"role": "user", "content": first or ""}]


def _turn_rewards(t: Trajectory) -> list[float]:
    """Per-turn rewards (see the module docstring); the trajectory is graded."""
    given = [x.reward for x in t.turns]
    if any(r is not None for r in given):
        return [float(r) if r is not None else 0.0 for r in given]
    assert t.reward is not None
    return [0.0] * (len(t.turns) - 1) + [float(t.reward)]


def _returns(rewards: Sequence[float], gamma: float) -> list[float]:
    out, running = [0.0] * len(rewards), 0.0
    for i in range(len(rewards) - 1, -1, -1):
        running = rewards[i] + gamma * running
        out[i] = running
    return out


def _target(turn: Any, kind: str) -> str:
    if kind == "policy":
        return turn.parsed_action if turn.parsed_action is not None else (turn.action or "")
    return turn.action or ""


def turn_rows(t: Trajectory, opts: ExportOptions, tools: str) -> list[dict[str, Any]]:
    """The rows of one graded trajectory, one per turn."""
    base = _messages(t)
    rewards = _turn_rewards(t)
    returns = _returns(rewards, opts.gamma)
    last = len(t.turns) - 1
    rows = []
    history: list[dict[str, str]] = list(base)
    for i, turn in enumerate(t.turns):
        if i > 0:
            history.append({"role": "user", "content": turn.observation or ""})
        state = [dict(m) for m in history]
        if opts.hide_observations:
            # keep system messages, the opening prompt, and the observation the action answers
            n_obs = [k for k, m in enumerate(state) if m["role"] != "assistant" and k >= len(base)]
            for k in n_obs[:-1]:
                state[k] = {"role": state[k]["role"], "content": HIDDEN_OBS}
        action = _target(turn, opts.kind)
        nxt = t.turns[i + 1].observation if i < last else (t.extras.get("final_observation") if t.extras else None)
        rows.append({
            "state": state,
            "action": action,
            "next_obs": str(nxt) if nxt is not None else "",
            "reward": rewards[i],
            "return_": returns[i],
            "advantage": returns[i],
            "done": i == last and t.termination == "done",
            "truncated": i == last and t.termination in ("truncated", "max_turns"),
            "timestep": turn.turn_idx,
            "batch_id": t.step,
            "unique_data_sample_id": t.traj_id,
            "generation_id": t.sample_idx if t.sample_idx is not None else 0,
            "split": t.split,
            "tools": tools,
            "prompt": state,
            "completion": [{"role": "assistant", "content": action}],
        })
        history.append({"role": "assistant", "content": turn.action or ""})
    return rows


def _center(rows: list[dict[str, Any]]) -> None:
    by_batch: dict[int, list[float]] = defaultdict(list)
    for r in rows:
        by_batch[r["batch_id"]].append(r["return_"])
    means = {b: sum(v) / len(v) for b, v in by_batch.items()}
    for r in rows:
        r["advantage"] = r["return_"] - means[r["batch_id"]]


def _conversation(t: Trajectory) -> list[dict[str, str]]:
    """What follows the prompt: the assistant's replies and the observations between them."""
    out: list[dict[str, str]] = []
    for i, turn in enumerate(t.turns):
        if i > 0:
            out.append({"role": "user", "content": turn.observation or ""})
        out.append({"role": "assistant", "content": turn.action or ""})
    return out


def preference_rows(trajs: Sequence[Trajectory], tools: str) -> list[dict[str, Any]]:
    """Every (higher, lower) reward pair of graded trajectories of one group."""
    rows = []
    ranked = sorted(trajs, key=lambda t: (-(t.reward or 0.0), t.sample_idx or 0, t.traj_id))
    for i, a in enumerate(ranked):
        for b in ranked[i + 1:]:
            assert a.reward is not None and b.reward is not None
            if a.reward <= b.reward:
                continue
            rows.append({
                "prompt": _messages(a), "chosen": _conversation(a), "rejected": _conversation(b),
                "chosen_reward": a.reward, "rejected_reward": b.reward,
                "chosen_id": a.traj_id, "rejected_id": b.traj_id,
                "group_id": a.group_id or "", "batch_id": a.step, "split": a.split, "tools": tools,
            })
    return rows


def step_labels(t: Trajectory) -> list[float | None] | None:
    """Each turn's process-reward label (``extras.label.value``, None where it has no value),
    or None when no turn of ``t`` was labelled."""
    labs = [u.extras.get("label") if u.extras else None for u in t.turns]
    if all(lab is None for lab in labs):
        return None
    return [None if not isinstance(lab, dict) or lab.get("value") is None else float(lab["value"]) for lab in labs]


def export_rows(trajs: Iterable[Trajectory], opts: ExportOptions, *, tools: str = "[]") -> tuple[list[dict[str, Any]], ExportResult]:
    """The rows of ``trajs`` (any rolloutlab trajectories) and counts of what was left out."""
    res = ExportResult(out=Path(), rows=0, trajectories=0, skipped_ungraded=0, options=asdict(opts))
    rows: list[dict[str, Any]] = []
    groups: dict[tuple[str, int, str], list[Trajectory]] = defaultdict(list)
    for t in trajs:
        if opts.split is not None and t.split != opts.split:
            continue
        if not t.turns:
            continue
        if not t.graded or t.reward is None:
            res.skipped_ungraded += 1
            continue
        if opts.kind == "preference":
            groups[(t.split, t.step, t.group_id or t.traj_id)].append(t)
            continue
        if opts.kind == "rejection" and opts.by == "label":
            labels = step_labels(t)
            if labels is None:
                res.skipped_unlabelled += 1
                continue
            kept = []
            for row, value in zip(turn_rows(t, opts, tools), labels, strict=True):
                if value is None:
                    res.skipped_null_labels += 1
                elif value < opts.threshold:
                    res.skipped_below_threshold += 1
                else:
                    kept.append(row)
            rows.extend(kept)
            res.trajectories += bool(kept)
            continue
        if opts.kind == "rejection" and t.reward < opts.threshold:
            res.skipped_below_threshold += 1
            continue
        rows.extend(turn_rows(t, opts, tools))
        res.trajectories += 1
    if opts.kind == "preference":
        for g in groups.values():
            got = preference_rows(g, tools)
            rows.extend(got)
            res.trajectories += len({r["chosen_id"] for r in got} | {r["rejected_id"] for r in got})
    elif opts.center:
        _center(rows)
    res.rows = len(rows)
    return rows, res


def _run_trajectories(run: Path) -> tuple[list[Trajectory], int]:
    """Every trajectory of a run directory's step files (then its eval episodes), and how
    many had turns."""
    from rolloutlab.io._rundir import read_trajectories

    if not run.is_dir():
        raise InputError("not a run directory (a folder with run.json and rollouts/)", path=run)
    files = sorted((run / "rollouts").glob("step_*.jsonl")) + sorted(run.glob("eval/*/episodes.jsonl"))
    if not files:
        raise InputError("run directory has no rollouts/step_*.jsonl nor eval/*/episodes.jsonl to export", path=run)
    out: list[Trajectory] = []
    for f in files:
        out.extend(t for _, t in read_trajectories(f))
    with_turns = sum(1 for t in out if t.turns)
    if not with_turns:
        raise InputError(
            f"none of its {len(out)} trajectories has turns (nothing to export: a turn is one action and its "
            "observation); export a run written by `rolloutlab train` / `eval`, or ingest the source and re-run",
            path=run,
        )
    return out, with_turns


def write_rows(rows: list[dict[str, Any]], out: Path, manifest: dict[str, Any]) -> None:
    """``out/data.parquet``, ``out/dataset/`` (``save_to_disk``) and ``out/export.json``,
    all or nothing: written under a temporary name, renamed when complete."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if out.exists() and any(out.iterdir()):
        raise RolloutlabError(f"{out} exists and is not empty; give a new --out folder (nothing was written)")
    if not rows:
        raise RolloutlabError(f"nothing to export to {out}: no rows ({manifest.get('summary', '')}); "
                              "nothing was written")
    tmp = out.parent / f".{out.name}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        table = pa.Table.from_pylist(rows)
        pq.write_table(table, tmp / "data.parquet")
        import datasets

        datasets.disable_progress_bars()  # a bar per shard on a write of seconds
        datasets.Dataset(table).save_to_disk(str(tmp / "dataset"))
        (tmp / "export.json").write_text(json.dumps(manifest, indent=2, default=str) + "\n")
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def export_run(run: Path, out: Path, opts: ExportOptions) -> ExportResult:
    """Export the run directory ``run`` to ``out`` (see the module docstring)."""
    from rolloutlab.io._rundir import read_run

    trajs, _ = _run_trajectories(run)
    meta: dict[str, Any] = {}
    if (run / "run.json").exists():
        r = read_run(run)
        meta = {"run_id": r.run_id, "name": r.name, "env": r.env, "model": r.model,
                "labels": r.config.get("labels") if isinstance(r.config, dict) else None}
    env = meta.get("env") or next((str(t.extras.get("env_id")) for t in trajs if t.extras.get("env_id")), None)
    rows, res = export_rows(trajs, opts)
    res.out, res.source = out, str(run)
    manifest = {"kind": opts.kind, "rows": res.rows, "trajectories": res.trajectories,
                "skipped_ungraded": res.skipped_ungraded, "skipped_below_threshold": res.skipped_below_threshold,
                "skipped_unlabelled": res.skipped_unlabelled, "skipped_null_labels": res.skipped_null_labels,
                "options": asdict(opts), "env": env, "run": meta, "summary": f"{res.trajectories} trajectories, {res.left_out(opts)}",
                "columns": list(rows[0]) if rows else []}
    write_rows(rows, out, manifest)
    return res
