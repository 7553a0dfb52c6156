"""Which trajectories the report shows per step, and their texts, cut to size.

Per step, a few groups are chosen round-robin over their outcome (``mixed`` first — best
and worst of one prompt side by side is where the learning signal is — then ``all
wrong``, ``all correct``, ``no variance``, ``single``, ``ungraded``), in a fixed
pseudo-random order within each outcome (a hash of the group id and step), so that
reports are reproducible and do not always show the same prompt.  Of each group the
best, median and worst graded member (by reward, ties by ``sample_idx``) are shown, and
one ungraded member when there is one.  A run without group ids is one pool per step.

Texts are model output and are kept as plain strings; HTML escaping is the renderer's
job (autoescape).  Each text field is cut at ``max_chars`` characters *in the query*
(so a 10 MB observation is never read whole into Python), and the cut is recorded so the
page says how much is missing; of a long trajectory the first and last turns are kept
(``max_turns`` in all) and the number left out between them is recorded.  When the
texts of all steps together exceed ``max_total_chars`` (a long multi-turn run), every
k-th step is kept (the smallest k that fits, the last step always), so the page stays
small enough to open; clicking a step that was left out shows the nearest one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pandas as pd

from rolloutlab.analysis import RunFrame

KINDS = ("mixed", "all wrong", "all correct", "no variance", "single", "ungraded")
"""Group outcomes, in the order the report picks them."""
TURN_FIELDS = ("observation", "thought", "action", "parsed_action")
_NO_GROUP = "\x00(no group)"
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@dataclass(frozen=True)
class Text:
    """A text as shown: at most ``max_chars`` characters, and how many were cut off."""

    text: str
    cut: int = 0
    """Characters not shown (0: the whole text is shown)."""


def visible(s: str) -> str:
    """Control characters and bidi overrides made visible as ``\\xNN`` / ``\\uNNNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                        else f"\\u{ord(m.group()):04x}", s)


def visible_str(v: Any) -> str:
    return visible(str(v))


def _text(value: Any, length: Any) -> Text | None:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    s = str(value)
    n = int(length) if length is not None and not pd.isna(length) else len(s)
    return Text(visible(s), max(n - len(s), 0))


@dataclass
class TurnSample:
    turn_idx: int
    reward: float | None
    action_valid: bool | None
    fields: list[tuple[str, Text]] = field(default_factory=list)
    """(field name, text) for observation, thought, action, parsed_action, tool calls."""


@dataclass
class TrajSample:
    label: str
    """best | median | worst | only | ungraded"""
    traj_id: str
    sample_idx: int | None
    reward: float | None
    graded: bool
    success: bool | None
    termination: str | None
    num_turns: int | None
    tool_calls: int | None
    response: Text | None = None
    error: Text | None = None
    head: list[TurnSample] = field(default_factory=list)
    """The first turns shown."""
    tail: list[TurnSample] = field(default_factory=list)
    """The last turns shown (after the omitted ones)."""
    omitted_turns: int = 0


@dataclass
class GroupSample:
    group_id: str | None
    task_id: str | None
    kind: str
    members: int
    graded: int
    reward_min: float | None
    reward_max: float | None
    prompt: Text | None = None
    picks: list[TrajSample] = field(default_factory=list)


@dataclass
class StepSamples:
    step: int
    groups: list[GroupSample] = field(default_factory=list)


def _opt(v: Any, kind: Callable[[Any], Any]) -> Any:
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return None
    return kind(v)


def pick_samples(traj: pd.DataFrame, *, groups_per_step: int = 3) -> pd.DataFrame:
    """The trajectories to show (numbers only): ``step, group_key, kind, label, traj_id``.

    ``traj`` has the columns of :class:`RunFrame.traj`; see the module docstring for the rule.
    """
    if groups_per_step < 1:
        raise ValueError(f"groups_per_step must be >= 1, got {groups_per_step}")
    cols = ["traj_id", "step", "group_id", "sample_idx", "reward", "graded", "success"]
    t = traj[cols].copy()
    t["group_key"] = t["group_id"].astype(object).where(t["group_id"].notna(), _NO_GROUP).astype(str)
    t["success_f"] = t["success"].astype("Float64").astype(float)
    g = t.groupby(["step", "group_key"], sort=False)
    gs = pd.DataFrame({"graded": g["graded"].sum(), "rmin": g["reward"].min(), "rmax": g["reward"].max(),
                       "smin": g["success_f"].min(), "smax": g["success_f"].max()}).reset_index()
    kind = np.select(
        [gs["graded"] == 0, gs["graded"] == 1, (gs["rmax"] - gs["rmin"]) > 1e-6,
         gs["smin"] == 1, gs["smax"] == 0],
        ["ungraded", "single", "mixed", "all correct", "all wrong"], "no variance")
    gs["kind"] = kind
    gs["prio"] = gs["kind"].map({k: i for i, k in enumerate(KINDS)})
    gs["hash"] = pd.util.hash_pandas_object(gs[["step", "group_key"]], index=False).to_numpy()
    gs = gs.sort_values(["step", "prio", "hash"], kind="stable")
    gs["rank"] = gs.groupby(["step", "kind"]).cumcount()
    gs = gs.sort_values(["step", "rank", "prio"], kind="stable")
    chosen = gs[gs.groupby("step").cumcount() < groups_per_step]

    members = t.merge(chosen[["step", "group_key", "kind", "rank", "prio"]], on=["step", "group_key"])
    members = members.sort_values(["step", "rank", "prio", "group_key", "reward", "sample_idx", "traj_id"],
                                  ascending=[True, True, True, True, False, True, True], na_position="last",
                                  kind="stable")
    rows: list[dict[str, Any]] = []
    for (step, key), m in members.groupby(["step", "group_key"], sort=False):
        graded = m[m["graded"]]
        n = len(graded)
        picks: list[tuple[str, int]] = []
        if n == 1:
            picks = [("only", 0)]
        elif n == 2:
            picks = [("best", 0), ("worst", 1)]
        elif n >= 3:
            picks = [("best", 0), ("median", (n - 1) // 2), ("worst", n - 1)]
        for label, pos in picks:
            rows.append({"step": step, "group_key": key, "kind": m["kind"].iloc[0], "label": label,
                         "traj_id": graded["traj_id"].iloc[pos]})
        ungraded = m[~m["graded"]]
        if len(ungraded):
            rows.append({"step": step, "group_key": key, "kind": m["kind"].iloc[0], "label": "ungraded",
                         "traj_id": ungraded["traj_id"].iloc[0]})
    return pd.DataFrame(rows, columns=["step", "group_key", "kind", "label", "traj_id"])


def _cut_cols(fields: tuple[str, ...], max_chars: int) -> str:
    return ", ".join(f"substr({f}, 1, {max_chars}) AS {f}, length({f}) AS {f}_len" for f in fields)


def _tool_calls(value: Any, length: Any, max_chars: int) -> list[tuple[str, Text]]:
    """Tool calls as ``name(arguments)`` and result, each cut; raw JSON when it was cut."""
    t = _text(value, length)
    if t is None:
        return []
    if not t.cut:
        try:
            calls = orjson.loads(t.text)
        except orjson.JSONDecodeError:
            calls = None
        if isinstance(calls, list) and all(isinstance(c, dict) for c in calls):
            out = []
            for c in calls:
                call = f"{c.get('name')}({c.get('arguments') or ''})"
                out.append(("tool call", _text(call[:max_chars], len(call)) or Text("")))
                if c.get("result") is not None:
                    res = str(c["result"])
                    out.append(("tool result", _text(res[:max_chars], len(res)) or Text("")))
            return out
    return [("tool calls", t)]


def sample_trajectories(frame: RunFrame, *, groups_per_step: int = 3, max_chars: int = 2000,
                        max_turns: int = 12, max_total_chars: int = 20_000_000) -> list[StepSamples]:
    """The sampled trajectories of every step with their texts (see the module docstring).

    Texts come from ``frame.store``; a frame without a store (synthetic) gets numbers only.
    """
    if max_chars < 1 or max_turns < 1:
        raise ValueError(f"max_chars and max_turns must be >= 1, got {max_chars} and {max_turns}")
    picks = pick_samples(frame.traj, groups_per_step=groups_per_step)
    t = frame.traj.set_index("traj_id")
    ids = picks["traj_id"].drop_duplicates().tolist()
    head_n = (max_turns + 1) // 2
    tail_n = max_turns - head_n
    top: dict[str, dict[str, Any]] = {}
    turn_texts: dict[tuple[str, int], dict[str, Any]] = {}
    turn_nums: dict[tuple[str, int], dict[str, Any]] = {}
    n_turns: dict[str, int] = {}
    if frame.store is not None and ids:
        st = frame.store
        fields = ("prompt", "response", "error", *TURN_FIELDS)
        rel = st.sql(
            f"""SELECT traj_id, turn_idx, {_cut_cols(fields, max_chars)},
                       substr(tool_calls, 1, {4 * max_chars}) AS tool_calls, length(tool_calls) AS tool_calls_len,
                       count(*) FILTER (WHERE turn_idx >= 0) OVER (PARTITION BY traj_id) AS n_turns
                FROM texts WHERE run_id = ? AND split = ? AND traj_id IN (SELECT unnest(?::VARCHAR[]))
                QUALIFY turn_idx < 0 OR turn_idx < ? OR turn_idx >= n_turns - ?""",
            params=[frame.run_id, frame.split, ids, head_n, tail_n])
        for rec in rel.df().to_dict(orient="records"):
            tid, idx = rec["traj_id"], int(rec["turn_idx"])
            if idx < 0:
                top[tid] = rec
            else:
                turn_texts[tid, idx] = rec
                n_turns[tid] = int(rec["n_turns"])
        nums = st.sql(
            """SELECT traj_id, turn_idx, reward, action_valid FROM turns
               WHERE run_id = ? AND split = ? AND traj_id IN (SELECT unnest(?::VARCHAR[]))""",
            params=[frame.run_id, frame.split, ids]).df()
        count = nums.groupby("traj_id").size().to_dict()
        for tid, c in count.items():
            n_turns[tid] = max(n_turns.get(tid, 0), int(c))
        for rec in nums.to_dict(orient="records"):
            tid, idx = rec["traj_id"], int(rec["turn_idx"])
            if idx < head_n or idx >= n_turns.get(tid, 0) - tail_n:
                turn_nums[tid, idx] = rec

    def turn(tid: str, idx: int) -> TurnSample:
        x, u = turn_texts.get((tid, idx), {}), turn_nums.get((tid, idx), {})
        fields = [(f, tx) for f in TURN_FIELDS if (tx := _text(x.get(f), x.get(f"{f}_len"))) is not None]
        fields += _tool_calls(x.get("tool_calls"), x.get("tool_calls_len"), max_chars)
        return TurnSample(idx, _opt(u.get("reward"), float), _opt(u.get("action_valid"), bool), fields)

    def traj_sample(label: str, tid: str) -> TrajSample:
        r = t.loc[tid]
        x = top.get(tid, {})
        idxs = sorted({i for (k, i) in turn_texts if k == tid} | {i for (k, i) in turn_nums if k == tid})
        total = n_turns.get(tid, 0)
        head = [turn(tid, i) for i in idxs if i < head_n]
        tail = [turn(tid, i) for i in idxs if i >= head_n]
        return TrajSample(
            label=label, traj_id=visible(str(tid)), sample_idx=_opt(r["sample_idx"], int),
            reward=_opt(r["reward"], float) if bool(r["graded"]) else None, graded=bool(r["graded"]),
            success=_opt(r["success"], bool), termination=_opt(r["termination"], str),
            num_turns=_opt(r["num_turns"], int), tool_calls=_opt(r["tool_calls"], int),
            response=_text(x.get("response"), x.get("response_len")),
            error=_text(x.get("error"), x.get("error_len")),
            head=head, tail=tail, omitted_turns=max(total - len(head) - len(tail), 0))

    sizes = frame.traj.assign(
        group_key=frame.traj["group_id"].astype(object).where(frame.traj["group_id"].notna(), _NO_GROUP).astype(str)
    ).groupby(["step", "group_key"]).agg(members=("traj_id", "size"), graded=("graded", "sum"),
                                         rmin=("reward", "min"), rmax=("reward", "max"),
                                         task_id=("task_id", "first"))
    out: dict[int, StepSamples] = {int(s): StepSamples(int(s)) for s in frame.steps}
    for (step, key), p in picks.groupby(["step", "group_key"], sort=False):
        info = sizes.loc[(step, key)]
        trajs = [traj_sample(label, tid) for label, tid in zip(p["label"], p["traj_id"], strict=True)]
        first = top.get(trajs[0].traj_id, {}) if trajs else {}
        out[int(step)].groups.append(GroupSample(
            group_id=None if key == _NO_GROUP else visible(str(key)), task_id=_opt(info["task_id"], visible_str),
            kind=str(p["kind"].iloc[0]), members=int(info["members"]), graded=int(info["graded"]),
            reward_min=_opt(info["rmin"], float), reward_max=_opt(info["rmax"], float),
            prompt=_text(first.get("prompt"), first.get("prompt_len")), picks=trajs))
    return thin_steps([out[s] for s in sorted(out)], max_total_chars)


def _chars(s: StepSamples) -> int:
    n = 0
    for g in s.groups:
        n += len(g.prompt.text) if g.prompt else 0
        for p in g.picks:
            n += sum(len(t.text) for t in (p.response, p.error) if t is not None)
            n += sum(len(x.text) for turn in (*p.head, *p.tail) for _, x in turn.fields)
    return n


def thin_steps(steps: list[StepSamples], max_total_chars: int) -> list[StepSamples]:
    """Every k-th step (and the last), for the smallest k whose texts fit ``max_total_chars``."""
    sizes = [_chars(s) for s in steps]
    for k in range(1, len(steps) + 1):
        keep = [i for i in range(len(steps)) if i % k == 0 or i == len(steps) - 1]
        if sum(sizes[i] for i in keep) <= max_total_chars or len(keep) == 1:
            return [steps[i] for i in keep]
    return steps
