"""Every SQL statement the viewer runs: fixed text, values bound as parameters.

The only parts of a statement built at run time are picked from the fixed tables below
(``TRAJ_SORTS``, ``GROUP_SORTS``, the text column names, the cut lengths) and the ``?`` placeholders of the
filters; nothing a request sends is ever pasted into SQL.  Every query is bounded: pages
use ``LIMIT``/``OFFSET``, and long texts come back cut to ``substr(…, 1, n)`` with their
full length beside them, so a 10 MB observation costs what its first screen costs.

The numbers (``trajectories``, ``turns``, ``runs``) are tables in memory (see
:mod:`._live`); texts are read only for the rows a page shows, from only the Parquet
files that can hold that step (their list is bound to the ``?`` of :data:`TEXTS_IN`),
always narrowed by ``run_id, split, step``.  ``success`` in the in-memory
``trajectories`` table is the run's one success rule already applied (see :mod:`._live`;
the source's own value is ``recorded_success``), so every query here — step rows, group
rates, cards, the ``success=`` filter, task history — agrees with the analysis.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, Protocol, TypeVar

import orjson

from rolloutlab.io import RolloutlabError
from rolloutlab.outcomes import step_sql


class Source(Protocol):
    """Where the queries run (:class:`~rolloutlab.viewer._live.StoreView`)."""

    def query(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        """Rows as dicts; ``trajectories``, ``turns`` and ``runs`` are tables."""
        ...

    def text_files(self, run_id: str, split: str, step: int | None) -> list[str]:
        """The Parquet files of ``texts`` that can hold that step's rows."""
        ...


TEXTS_IN = "read_parquet(?, union_by_name = true)"
"""The texts table, narrowed to the files bound to its ``?`` (a list from the manifest)."""


class BadRequest(RolloutlabError):
    """A request parameter the viewer cannot use; the message names it and what is allowed."""


_P = ParamSpec("_P")
_T = TypeVar("_T")


def _resolve_again(fn: Callable[_P, _T]) -> Callable[_P, _T]:
    """Run a query function once more when reading a store file failed: the second run
    resolves the list of text files again (an ingest may have replaced one between the
    list and the read; its commit holds the new list), where a retry of the same
    statement would read the stale list again (issue 12 § 5)."""

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return fn(*args, **kwargs)
        except BadRequest:
            raise
        except RolloutlabError:
            return fn(*args, **kwargs)

    return wrapper


_NAT_DIGITS = 5
"""Width of the length prefix of a digit run in a natural sort key (numbers up to 99999 digits)."""


def natural_key(s: str | None) -> str | None:
    """A key that sorts ids naturally as plain text: each run of digits becomes its length
    (zero-padded to ``_NAT_DIGITS``) and its digits without leading zeros, so ``g2`` sorts
    before ``g10`` and ``test/13`` before ``test/101``.  :func:`natural_sql` computes the
    same key inside SQL (the tests check that both agree)."""
    if s is None:
        return None

    def digits(m: re.Match[str]) -> str:
        d = m.group().lstrip("0")
        return f"{len(d):0{_NAT_DIGITS}d}{d}"

    return re.sub(r"[0-9]+", digits, s)


def _lambda_prefix() -> str:
    """DuckDB's lambda syntax: ``lambda x:`` from 1.3 (2.0 refuses the older arrow), ``x ->`` before."""
    import duckdb

    try:
        major, minor = (int(p) for p in duckdb.__version__.split(".")[:2])
    except ValueError:
        return "lambda x:"
    return "lambda x:" if (major, minor) >= (1, 3) else "x ->"


_LAMBDA = _lambda_prefix()


def natural_sql(col: str) -> str:
    """:func:`natural_key` of column ``col`` as a DuckDB expression (``col`` is one of this
    module's fixed column names, never request text)."""
    return (f"array_to_string(list_transform(regexp_extract_all(CAST({col} AS VARCHAR), '[0-9]+|[^0-9]+'), "
            f"{_LAMBDA} CASE WHEN regexp_full_match(x, '[0-9]+') THEN lpad(CAST(length(ltrim(x, '0')) AS VARCHAR), "
            f"{_NAT_DIGITS}, '0') || ltrim(x, '0') ELSE x END), '')")


TRAJ_SORTS: dict[str, str] = {
    "sample": f"{natural_sql('group_id')}, sample_idx, {natural_sql('traj_id')}",
    "reward": "reward",
    "success": "success",
    "termination": "termination",
    "turns": "num_turns",
    "tokens": "response_tokens",
    "tools": "tool_calls",
    "invalid": "invalid_actions",
    "step": f"step, {natural_sql('group_id')}, sample_idx",
}
"""Table-view sort keys → ORDER BY text (the only way a sort reaches SQL)."""

GROUP_SORTS: dict[str, str] = {
    "group": natural_sql("group_key"),
    "mean": "mean_reward",
    "std": "std_reward",
    "success": "success_rate",
    "turns": "mean_turns",
    "size": "n",
}
"""Group-view sort keys → ORDER BY text."""

SUCCESS_VALUES = ("any", "true", "false", "unknown")
GRADED_VALUES = ("any", "graded", "ungraded")
TEXT_PREVIEW = 20_000
"""Characters of one text shown inline; the rest is one click away (``/text``)."""
SNIPPET = 360
"""Characters of a response shown on a sample card: its end, where the final answer is."""
PROMPT_TAIL = 4_000
"""Characters read from the end of a prompt to find its last user turn (:func:`user_turn`)."""
USER_SHOWN = 600
"""Characters of that user turn shown above a group or on the task page."""

_USER_TURN = (
    re.compile(r"<\|im_start\|>user[ \t]*\n(.*?)(?:<\|im_end\|>|$)", re.S),  # ChatML (Qwen)
    re.compile(r"<\|start_header_id\|>user<\|end_header_id\|>\s*(.*?)(?:<\|eot_id\|>|$)", re.S),  # Llama 3
    re.compile(r"\[INST\](.*?)(?:\[/INST\]|$)", re.S),  # Llama 2 / Mistral
    re.compile(r"(?:^|\n)user\n(.*?)(?=\n(?:assistant|system|user|tool)\n|\nassistant\s*$|$)", re.S),  # ChatML, specials stripped
)


_JSON_USER = re.compile(
    r'\{\s*"role"\s*:\s*"user"\s*,\s*"content"\s*:\s*("(?:[^"\\]|\\.)*")'
    r'|"content"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"role"\s*:\s*"user"\s*[,}]')
"""A user message of a chat prompt stored as JSON (``[{"role": "user", "content": "…"}]``,
either key first): its content as a JSON string literal, decoded by :func:`_json_user`."""


def _json_user(prompt: str) -> str | None:
    """The content of the last user message of a JSON chat prompt (also of the end of one,
    cut at its start), decoded — so pages show its text, not JSON with literal ``\n``."""
    if '"role"' not in prompt or '"user"' not in prompt:
        return None
    found = [m.group(1) or m.group(2) for m in _JSON_USER.finditer(prompt)]
    for lit in reversed(found):
        try:
            text = orjson.loads(lit)
        except orjson.JSONDecodeError:
            continue
        if isinstance(text, str) and text.strip():
            return text.strip()
    return None


def user_turn(prompt: str | None) -> str | None:
    """The last user turn of a prompt: a JSON chat prompt's last user message, or of a
    rendered prompt (ChatML, Llama 3, ``[INST]``, or ChatML with its special tokens
    stripped, as verl's dumps decode it), or None when no template is recognised — then
    pages show the prompt's end instead."""
    if not prompt:
        return None
    if prompt.lstrip()[:1] in ("[", "{") or prompt.rstrip().endswith(("]", "}")):
        text = _json_user(prompt)
        if text is not None:
            return text
    for pat in _USER_TURN:
        found = [m.strip() for m in pat.findall(prompt)]
        if found and found[-1]:
            return found[-1]
    return None


def _task_text(row: dict[str, Any]) -> None:
    """``task_text`` — the prompt's last user turn (its start), else the prompt's end — with
    ``…`` where it is cut (``task_text_cut``), on a row carrying ``prompt_tail``."""
    tail = row.pop("prompt_tail", None)
    user = user_turn(tail)
    if user is not None:
        row["task_text_kind"], cut = "user", len(user) > USER_SHOWN
        row["task_text"] = user[:USER_SHOWN] + ("…" if cut else "")
    else:
        row["task_text_kind"], cut = "prompt end", bool(tail) and len(tail) > USER_SHOWN
        row["task_text"] = ("…" + tail[-USER_SHOWN:]) if cut else tail
    row["task_text_cut"] = cut

_TEXT_FIELDS = ("observation", "thought", "action", "parsed_action", "tool_calls")
_TOP_FIELDS = ("prompt", "response", "error", "extras")
_SEARCH_FIELDS = ("prompt", "response", "error", "observation", "thought", "action", "tool_calls")
TEXT_FIELDS = frozenset(_TEXT_FIELDS + _TOP_FIELDS)


def float_arg(name: str, raw: str | None) -> float | None:
    if raw is None or raw.strip() == "":
        return None
    try:
        return float(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a number, got {raw[:40]!r}") from None


INT_LIMIT = 2**62
"""Whole numbers from a request stay within ±this (SQL's integers are 64-bit)."""


def int_arg(name: str, raw: str | None, *, lo: int | None = None, hi: int | None = None) -> int | None:
    if raw is None or raw.strip() == "":
        return None
    if len(raw.strip()) > 24:
        raise BadRequest(f"{name} must be a whole number of at most 19 digits, got {raw[:40]!r}…")
    try:
        v = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number, got {raw[:40]!r}") from None
    return check_int(name, v, lo=lo, hi=hi)


def check_int(name: str, v: int, *, lo: int | None = None, hi: int | None = None) -> int:
    """``v``, or BadRequest naming the range it must lie in (at most ±``INT_LIMIT``)."""
    lo_ = -INT_LIMIT if lo is None else lo
    hi_ = INT_LIMIT if hi is None else hi
    if not lo_ <= v <= hi_:
        raise BadRequest(f"{name} must lie in [{lo_}, {hi_}], got {str(v)[:40]}")
    return v


def choice_arg(name: str, raw: str | None, allowed: tuple[str, ...] | list[str], default: str) -> str:
    if raw is None or raw == "":
        return default
    if raw not in allowed:
        raise BadRequest(f"{name} must be one of {', '.join(allowed)}; got {raw[:40]!r}")
    return raw


@dataclass(frozen=True)
class Filters:
    """Which trajectories of a step a page shows.  Parsed from the query string."""

    reward_min: float | None = None
    reward_max: float | None = None
    success: str = "any"
    graded: str = "any"
    termination: str = ""
    turns_min: int | None = None
    turns_max: int | None = None
    q: str = ""

    @classmethod
    def parse(cls, args: dict[str, str]) -> Filters:
        return cls(
            reward_min=float_arg("reward_min", args.get("reward_min")),
            reward_max=float_arg("reward_max", args.get("reward_max")),
            success=choice_arg("success", args.get("success"), SUCCESS_VALUES, "any"),
            graded=choice_arg("graded", args.get("graded"), GRADED_VALUES, "any"),
            termination=(args.get("termination") or "")[:40],
            turns_min=int_arg("turns_min", args.get("turns_min"), lo=0),
            turns_max=int_arg("turns_max", args.get("turns_max"), lo=0),
            q=(args.get("q") or "")[:200],
        )

    @property
    def active(self) -> bool:
        return self != Filters()

    def args(self) -> dict[str, str]:
        """The non-default filters as query-string values (for links that keep them)."""
        out: dict[str, str] = {}
        for k, v in self.__dict__.items():
            if v not in (None, "", "any"):
                out[k] = f"{v:g}" if isinstance(v, float) else str(v)
        return out

    def where(self, src: Source, run_id: str, split: str, step: int) -> tuple[str, list[Any]]:
        cond = ["run_id = ?", "split = ?", "step = ?"]
        params: list[Any] = [run_id, split, step]
        if self.reward_min is not None:
            cond.append("reward >= ?")
            params.append(self.reward_min)
        if self.reward_max is not None:
            cond.append("reward <= ?")
            params.append(self.reward_max)
        if self.success != "any":
            cond.append({"true": "success", "false": "NOT success", "unknown": "success IS NULL"}[self.success])
        if self.graded != "any":
            cond.append("graded" if self.graded == "graded" else "NOT graded")
        if self.termination:
            cond.append("termination = ?")
            params.append(self.termination)
        if self.turns_min is not None:
            cond.append("num_turns >= ?")
            params.append(self.turns_min)
        if self.turns_max is not None:
            cond.append("num_turns <= ?")
            params.append(self.turns_max)
        if self.q:
            files = src.text_files(run_id, split, step)
            if not files:
                cond.append("FALSE")
            else:
                hits = " OR ".join(f"contains(lower({f}), ?)" for f in _SEARCH_FIELDS)
                cond.append(f"traj_id IN (SELECT traj_id FROM {TEXTS_IN} "
                            f"WHERE run_id = ? AND split = ? AND step = ? AND ({hits}))")
                params += [files, run_id, split, step] + [self.q.lower()] * len(_SEARCH_FIELDS)
        return " AND ".join(cond), params


# -- runs and steps ---------------------------------------------------------------------


def runs_overview(src: Source) -> list[dict[str, Any]]:
    """One row per run for the runs page: the run's record (``config`` as JSON text), and
    over its main split (:func:`default_split`): ``split``, ``steps`` (distinct steps),
    ``first_step``, ``last_step_seen``, ``trajectories`` (all splits), ``ungraded_rate``,
    and :func:`reward_windows`' ``reward_first`` / ``reward_last`` / ``window``; and
    :func:`final_eval`'s ``final_eval`` (the last held-out result, or None)."""
    runs = src.query(
        f"""
        SELECT r.run_id, r.name, r.source, r.model, r.algorithm, r.env, r.status, r.last_step,
               r.created_at, r.labels, r.config, t.splits, t.trajectories, t.ungraded_rate
        FROM runs r LEFT JOIN (
            SELECT run_id, string_agg(DISTINCT split, ', ' ORDER BY split) AS splits, count(*) AS trajectories,
                   avg(CASE WHEN graded THEN 0.0 ELSE 1.0 END) AS ungraded_rate
            FROM trajectories GROUP BY run_id
        ) t USING (run_id)
        ORDER BY {natural_sql('r.name')}, {natural_sql('r.run_id')}
        """,
        [],
    )
    cells = src.query(
        "SELECT run_id, split, step, count(*) AS n, count(*) FILTER (WHERE graded) AS graded, "
        "sum(reward) FILTER (WHERE graded) AS reward_sum, "
        "count(success) FILTER (WHERE graded) AS judged, count(*) FILTER (WHERE graded AND success) AS successes "
        "FROM trajectories GROUP BY run_id, split, step ORDER BY run_id, split, step",
        [],
    )
    by_run: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for c in cells:
        by_run.setdefault(c["run_id"], {}).setdefault(c["split"], []).append(c)
    for r in runs:
        per_split = by_run.get(r["run_id"], {})
        split = default_split({k: sum(c["n"] for c in v) for k, v in per_split.items()})
        main = per_split.get(split, [])
        r["split"] = split if main else None
        r["steps"] = len(main) if main else None
        r["first_step"] = main[0]["step"] if main else None
        r["last_step_seen"] = main[-1]["step"] if main else None
        r.update(reward_windows(main))
        r["final_eval"] = final_eval(per_split, split)
    return runs


EDGE_FRAC = 0.1
"""Share of a run's steps in its first and its last window: the analysis' early/late rule
(``rolloutlab.analysis`` edge windows; a test checks the two agree), so the runs table's
"first → last" is the headline's "Reward a → b"."""


def edge_steps(n: int) -> int:
    """Steps in each of the first and last windows of ``n`` steps: ceil(10 % of n), at least one."""
    return max(1, math.ceil(EDGE_FRAC * n))


def reward_windows(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """``reward_first`` and ``reward_last``: the mean reward over the graded trajectories of
    the first and of the last ``window`` steps (the analysis' edge windows: ceil(10 %) of
    the steps, at least one; with one step both are that step), pooled over trajectories.
    ``cells``: one dict per step in step order with ``graded`` and ``reward_sum``."""
    if not cells:
        return {"reward_first": None, "reward_last": None, "window": None}
    k = edge_steps(len(cells))

    def pooled(part: list[dict[str, Any]]) -> float | None:
        n = sum(c["graded"] for c in part)
        return sum(c["reward_sum"] or 0.0 for c in part) / n if n else None

    return {"reward_first": pooled(cells[:k]), "reward_last": pooled(cells[-k:]), "window": k}


def final_eval(per_split: dict[str, list[dict[str, Any]]], main: str) -> dict[str, Any] | None:
    """The last held-out result: over the splits other than ``train`` (for a run without
    train, its main split), the one with the most trajectories; at its last step, the
    mean reward over graded trajectories and the success rate over judged ones
    (``{split, step, reward, success, n, graded}``), or None when there is none."""
    held = {k: v for k, v in per_split.items() if k != "train"}
    if not held:
        return None
    split = max(held, key=lambda k: (sum(c["n"] for c in held[k]), k == main, k))
    last = held[split][-1]
    return {"split": split, "step": last["step"], "n": last["n"], "graded": last["graded"],
            "reward": (last["reward_sum"] or 0.0) / last["graded"] if last["graded"] else None,
            "success": last["successes"] / last["judged"] if last["judged"] else None}


def splits(src: Source, run_id: str) -> dict[str, int]:
    rows = src.query("SELECT split, count(*) AS n FROM trajectories WHERE run_id = ? GROUP BY split ORDER BY split", [run_id])
    return {r["split"]: r["n"] for r in rows}


def default_split(counts: dict[str, int]) -> str:
    """train when the run has it, else the split with the most trajectories (as analyze)."""
    if "train" in counts or not counts:
        return "train"
    return max(counts, key=lambda s: counts[s])


def step_list(src: Source, run_id: str, split: str) -> list[int]:
    rows = src.query("SELECT DISTINCT step FROM trajectories WHERE run_id = ? AND split = ? ORDER BY step",
                     [run_id, split])
    return [r["step"] for r in rows]


def step_table(src: Source, run_id: str, split: str, step: int | None = None) -> list[dict[str, Any]]:
    """One row per step (or only ``step``'s): :class:`rolloutlab.outcomes.StepOutcome` (reward
    over graded and with ungraded as 0, success, ungraded rate, zero-variance share, turns,
    tokens — defined there once), plus ``trajectories`` (= ``rollouts``), ``tasks``,
    ``ungraded`` (a count), ``mean_response_chars`` and ``zero_var_groups`` (=
    ``zero_variance_frac``, the templates' name)."""
    one = "" if step is None else " AND step = ?"
    params = [run_id, split] if step is None else [run_id, split, step]
    source = ("SELECT step, group_id, graded, reward, success, num_turns, response_tokens, invalid_actions "
              "FROM trajectories "
              f"WHERE run_id = ? AND split = ?{one}")
    return src.query(
        f"""
        SELECT o.*, o.rollouts AS trajectories, o.rollouts - o.graded AS ungraded,
               o.zero_variance_frac AS zero_var_groups, x.tasks, x.mean_response_chars
        FROM ({step_sql(source)}) o JOIN (
            SELECT step, count(DISTINCT task_id) AS tasks, avg(response_chars) AS mean_response_chars
            FROM trajectories WHERE run_id = ? AND split = ?{one} GROUP BY step
        ) x USING (step) ORDER BY step
        """,
        params + params,
    )


def step_rewards(src: Source, run_id: str, split: str, step: int) -> list[dict[str, Any]]:
    """Every trajectory of a step with what its advantage needs: ``traj_id, group_id,
    reward, graded, response_tokens`` (numbers only; the whole step, whatever a page's
    filters show)."""
    return src.query(
        "SELECT traj_id, group_id, reward, graded, response_tokens FROM trajectories WHERE run_id = ? AND split = ? AND step = ? "
        "ORDER BY traj_id",
        [run_id, split, step],
    )


def terminations(src: Source, run_id: str, split: str, step: int) -> list[str]:
    rows = src.query(
        "SELECT DISTINCT termination FROM trajectories WHERE run_id = ? AND split = ? AND step = ? "
        "AND termination IS NOT NULL ORDER BY termination",
        [run_id, split, step],
    )
    return [r["termination"] for r in rows]


# -- a step's trajectories ----------------------------------------------------------------

_CARD_COLUMNS = (
    "traj_id, step, group_id, sample_idx, task_id, reward, success, graded, termination, "
    "num_turns, response_tokens, tool_calls, invalid_actions"
)


@_resolve_again
def texts(src: Source, run_id: str, split: str, step: int, select: str, where: str,
          params: list[Any]) -> list[dict[str, Any]]:
    """``SELECT {select} FROM texts WHERE run_id, split, step AND {where}`` over only the
    files that can hold that step (none: no rows)."""
    files = src.text_files(run_id, split, step)
    if not files:
        return []
    return src.query(f"SELECT {select} FROM {TEXTS_IN} WHERE run_id = ? AND split = ? AND step = ? AND {where}",
                     [files, run_id, split, step, *params])


def _with_snippets(src: Source, run_id: str, split: str, step: int, rows: list[dict[str, Any]]) -> None:
    """Add ``snippet`` (the END of the response, where the final answer is),
    ``response_len`` and the task's text (:func:`_task_text`) to trajectory rows."""
    if not rows:
        return
    ids = [r["traj_id"] for r in rows]
    found = texts(src, run_id, split, step,
                  f"traj_id, right(response, {SNIPPET}) AS snippet, length(response) AS response_len, "
                  f"right(prompt, {PROMPT_TAIL}) AS prompt_tail",
                  "turn_idx = -1 AND list_contains(?, traj_id)", [ids])
    by_id = {t["traj_id"]: t for t in found}
    for r in rows:
        t = by_id.get(r["traj_id"], {})
        r["snippet"] = t.get("snippet")
        r["response_len"] = t.get("response_len")
        r["prompt_tail"] = t.get("prompt_tail")
        _task_text(r)


@_resolve_again
def step_table_page(src: Source, run_id: str, split: str, step: int, f: Filters, *, sort: str, desc: bool,
                    page: int, per_page: int) -> tuple[int, list[dict[str, Any]]]:
    """(matching trajectories, one page of them) for the table view."""
    where, params = f.where(src, run_id, split, step)
    total = src.query(f"SELECT count(*) AS n FROM trajectories WHERE {where}", params)[0]["n"]
    order = ", ".join(f"{c} {'DESC' if desc else 'ASC'} NULLS LAST" for c in _sort_terms(TRAJ_SORTS[sort]))
    rows = src.query(
        f"SELECT {_CARD_COLUMNS} FROM trajectories WHERE {where} ORDER BY {order}, traj_id LIMIT ? OFFSET ?",
        [*params, per_page, (page - 1) * per_page],
    )
    _with_snippets(src, run_id, split, step, rows)
    return total, rows


@_resolve_again
def step_groups_page(src: Source, run_id: str, split: str, step: int, f: Filters, *, sort: str, desc: bool,
                     page: int, per_page: int) -> tuple[int, list[dict[str, Any]]]:
    """(matching groups, one page of groups with their matching samples) for the group view.

    A group is shown when at least one of its samples passes the filters; its statistics
    (mean, std, success rate) are over the whole group, since the group — not the
    filtered subset — is what produced the advantage."""
    where, params = f.where(src, run_id, split, step)
    key = "coalesce(group_id, traj_id)"
    groups_sql = f"""
        WITH m AS (SELECT DISTINCT {key} AS group_key FROM trajectories WHERE {where}),
        g AS (
            SELECT {key} AS group_key, any_value(task_id) AS task_id, count(*) AS n,
                   avg(reward) AS mean_reward, stddev_pop(reward) AS std_reward,
                   avg(CAST(success AS DOUBLE)) AS success_rate, avg(num_turns) AS mean_turns,
                   sum(CASE WHEN graded THEN 0 ELSE 1 END) AS ungraded
            FROM trajectories WHERE run_id = ? AND split = ? AND step = ? GROUP BY group_key
        )
        SELECT g.* FROM g JOIN m USING (group_key)
    """
    gparams = [*params, run_id, split, step]
    total = src.query(f"SELECT count(*) AS n FROM ({groups_sql})", gparams)[0]["n"]
    groups = src.query(
        f"{groups_sql} ORDER BY {GROUP_SORTS[sort]} {'DESC' if desc else 'ASC'} NULLS LAST, {natural_sql('group_key')} "
        "LIMIT ? OFFSET ?",
        [*gparams, per_page, (page - 1) * per_page],
    )
    if not groups:
        return total, []
    keys = [g["group_key"] for g in groups]
    members = src.query(
        f"SELECT {_CARD_COLUMNS}, {key} AS group_key FROM trajectories WHERE {where} "
        f"AND list_contains(?, {key}) ORDER BY sample_idx NULLS LAST, {natural_sql('traj_id')}",
        [*params, keys],
    )
    _with_snippets(src, run_id, split, step, members)
    by_key: dict[str, list[dict[str, Any]]] = {k: [] for k in keys}
    for m in members:
        by_key[m["group_key"]].append(m)
    for g in groups:
        g["samples"] = by_key[g["group_key"]]
    return total, groups


# -- one trajectory -----------------------------------------------------------------------


def _sort_terms(order_by: str) -> list[str]:
    """The comma-separated terms of an ORDER BY text, commas inside parentheses kept."""
    terms, depth, cur = [], 0, ""
    for ch in order_by:
        if ch == "," and depth == 0:
            terms.append(cur.strip())
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    terms.append(cur.strip())
    return terms


def _cut(fields: tuple[str, ...], limit: int) -> str:
    return ", ".join(f"substr({c}, 1, {limit}) AS {c}, length({c}) AS {c}_len" for c in fields)


def locate(src: Source, run_id: str, traj_id: str, split: str | None = None, step: int | None = None,
           columns: str = "*") -> dict[str, Any] | None:
    """The trajectory's row.  ``split`` and ``step`` (which the viewer's links carry) pick
    one where a source reused a trajectory id across splits or steps."""
    cond = ["run_id = ?", "traj_id = ?"]
    params: list[Any] = [run_id, traj_id]
    if split is not None:
        cond.append("split = ?")
        params.append(split)
    if step is not None:
        cond.append("step = ?")
        params.append(step)
    rows = src.query(f"SELECT {columns} FROM trajectories WHERE {' AND '.join(cond)} ORDER BY split, step LIMIT 1",
                     params)
    return rows[0] if rows else None


def trajectory(src: Source, run_id: str, traj_id: str, split: str | None = None,
               step: int | None = None) -> dict[str, Any] | None:
    """The trajectory row, its own texts (cut), its turns with their texts (cut), and the
    other samples of its group."""
    t = locate(src, run_id, traj_id, split, step)
    if t is None:
        return None
    t["reward_components"] = dict(t.get("reward_components") or {})
    key = [run_id, t["split"], t["step"], traj_id]
    top = texts(src, run_id, t["split"], t["step"], _cut(_TOP_FIELDS, TEXT_PREVIEW),
                "traj_id = ? AND turn_idx = -1 LIMIT 1", [traj_id])
    t["texts"] = top[0] if top else {}
    turns = src.query(
        "SELECT turn_idx, reward, action_valid, done, tokens, num_tool_calls, entropy, finish_reason FROM turns "
        "WHERE run_id = ? AND split = ? AND step = ? AND traj_id = ? ORDER BY turn_idx",
        key,
    )
    ttexts = texts(src, run_id, t["split"], t["step"], f"turn_idx, {_cut(_TEXT_FIELDS, TEXT_PREVIEW)}",
                   "traj_id = ? AND turn_idx >= 0 ORDER BY turn_idx", [traj_id])
    by_turn = {x["turn_idx"]: x for x in ttexts}
    for u in turns:
        u["texts"] = by_turn.get(u["turn_idx"], {})
    t["turns"] = turns
    _show_once(t)
    t["siblings"] = (
        src.query(
            "SELECT traj_id, sample_idx, reward, success, graded FROM trajectories "
            "WHERE run_id = ? AND split = ? AND step = ? AND group_id = ? ORDER BY sample_idx NULLS LAST, "
            f"{natural_sql('traj_id')}",
            [run_id, t["split"], t["step"], t["group_id"]],
        )
        if t["group_id"] is not None
        else []
    )
    return t


@_resolve_again
def token_data(src: Source, run_id: str, split: str, step: int, traj_id: str,
               turn_idx: int | None = None) -> dict[int, str]:
    """turn_idx → the turn's stored ``token_data`` JSON (one turn, or every turn of the
    trajectory), where recorded; nothing from a store written before the column existed."""
    files = src.text_files(run_id, split, step)
    if not files or not src.query("SELECT 1 FROM parquet_schema(?) WHERE name = 'token_data' LIMIT 1", [files]):
        return {}
    where = "traj_id = ? AND turn_idx >= 0 AND token_data IS NOT NULL"
    params: list[Any] = [traj_id]
    if turn_idx is not None:
        where, params = "traj_id = ? AND turn_idx = ? AND token_data IS NOT NULL", [traj_id, turn_idx]
    return {r["turn_idx"]: r["token_data"] for r in texts(src, run_id, split, step, "turn_idx, token_data", where, params)}


def _whole(x: dict[str, Any], field: str) -> str | None:
    """A text field of a row when it was read whole (not cut to the preview), else None."""
    text = x.get(field)
    return text if isinstance(text, str) and x.get(f"{field}_len") == len(text) else None


def _show_once(t: dict[str, Any]) -> None:
    """Each text once on the trajectory page, for transcripts that record it twice.

    Agent-log importers (Inspect, …) keep a tool's result with its call *and* in the next
    turn's observation (the run format's observation is everything the model saw before
    the turn, and the trainer's input stays whole in the store), and the response is the
    last turn's action.  The page shows a result under its call only: a turn's
    observation loses the leading results of the previous turn's calls (what is left — a
    user message — stays); and the trajectory's response is not repeated after the last
    turn when it is that turn's action (``response_in_last_turn``).  Only whole texts are
    compared; a cut one is shown as stored."""
    turns = t["turns"]
    for prev, u in itertools.pairwise(turns):
        raw = _whole(prev["texts"], "tool_calls")
        obs = _whole(u["texts"], "observation")
        if not raw or obs is None:
            continue
        try:
            calls = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        results = [c["result"] for c in calls if isinstance(c, dict) and isinstance(c.get("result"), str)] \
            if isinstance(calls, list) else []
        shown = "\n".join(results)
        if results and obs.startswith(shown):
            rest = obs[len(shown):].lstrip("\n")
            u["texts"]["observation"] = rest or None
            u["texts"]["observation_len"] = len(rest)
            u["observation_deduped"] = True
    t["response_in_last_turn"] = False
    if turns:
        last = _whole(turns[-1]["texts"], "action")
        resp = _whole(t["texts"], "response")
        if last is not None and resp is not None and last.strip() == resp.strip() and resp.strip():
            t["texts"]["response"] = None
            t["response_in_last_turn"] = True


def full_text(src: Source, run_id: str, traj_id: str, turn_idx: int, field: str, split: str | None = None,
              step: int | None = None) -> str | None:
    """One whole text field (for the "full text" link); ``field`` is checked against the
    fixed set of text columns before it names one."""
    if field not in TEXT_FIELDS:
        raise BadRequest(f"field must be one of {', '.join(sorted(TEXT_FIELDS))}; got {field[:40]!r}")
    loc = locate(src, run_id, traj_id, split, step, columns="split, step")
    if loc is None:
        return None
    rows = texts(src, run_id, loc["split"], loc["step"], f"{field} AS text", "traj_id = ? AND turn_idx = ?",
                 [traj_id, turn_idx])
    return rows[0]["text"] if rows else None


# -- one task across training ------------------------------------------------------------


def task_history(src: Source, run_id: str, split: str, task_id: str) -> list[dict[str, Any]]:
    return src.query(
        "SELECT step, count(*) AS n, avg(reward) AS mean_reward, avg(CAST(success AS DOUBLE)) AS success_rate "
        "FROM trajectories WHERE run_id = ? AND split = ? AND task_id = ? GROUP BY step ORDER BY step",
        [run_id, split, task_id],
    )


def task_at_step(src: Source, run_id: str, split: str, task_id: str, step: int, *, limit: int = 64) -> list[dict[str, Any]]:
    """The task's trajectories at one step, with the start of each response and of each action."""
    rows = src.query(
        f"SELECT {_CARD_COLUMNS} FROM trajectories WHERE run_id = ? AND split = ? AND step = ? AND task_id = ? "
        f"ORDER BY {natural_sql('group_id')}, sample_idx NULLS LAST, {natural_sql('traj_id')} LIMIT ?",
        [run_id, split, step, task_id, limit],
    )
    if not rows:
        return rows
    ids = [r["traj_id"] for r in rows]
    found = texts(src, run_id, split, step,
                  "traj_id, turn_idx, substr(response, 1, 4000) AS response, length(response) AS response_len, "
                  f"right(response, {SNIPPET}) AS response_end, right(prompt, {PROMPT_TAIL}) AS prompt_tail, "
                  "substr(action, 1, 300) AS action", "list_contains(?, traj_id) ORDER BY traj_id, turn_idx", [ids])
    by_id: dict[str, dict[str, Any]] = {i: {"actions": []} for i in ids}
    for x in found:
        d = by_id[x["traj_id"]]
        if x["turn_idx"] == -1:
            d["response"], d["response_len"], d["response_end"] = x["response"], x["response_len"], x["response_end"]
            d["prompt_tail"] = x["prompt_tail"]
            _task_text(d)
        elif x["action"] is not None:
            d["actions"].append(x["action"])
    for r in rows:
        r.update(by_id[r["traj_id"]])
    return rows


# -- an evaluation: scores by checkpoint and task -----------------------------------------

EXPLANATION_CHARS = 600
"""Characters of one grader explanation shown in the score table."""
SAMPLES_SHOWN = 8
"""Samples (epochs) of one task at one checkpoint listed in its score-table row."""


def eval_scores_page(src: Source, run_id: str, split: str, *, page: int,
                     per_page: int) -> tuple[int, list[dict[str, Any]]]:
    """(rows, one page of rows) of the score table: one row per (checkpoint step, task),
    with its samples (epochs), mean score over the graded ones, success (the run's rule),
    and each sample's score and grader explanation (cut to ``EXPLANATION_CHARS``)."""
    key = "coalesce(task_id, traj_id)"
    base = f"SELECT step, {key} AS task_key FROM trajectories WHERE run_id = ? AND split = ?"
    total = src.query(f"SELECT count(*) AS n FROM (SELECT DISTINCT * FROM ({base}))", [run_id, split])[0]["n"]
    rows = src.query(
        f"""
        SELECT step, {key} AS task_key, any_value(task_id) AS task_id, count(*) AS n,
               count(*) FILTER (WHERE graded) AS graded, avg(reward) AS mean_reward,
               avg(CAST(success AS DOUBLE)) AS success_rate
        FROM trajectories WHERE run_id = ? AND split = ? GROUP BY step, task_key
        ORDER BY step, {natural_sql('task_key')} LIMIT ? OFFSET ?
        """,
        [run_id, split, per_page, (page - 1) * per_page],
    )
    if not rows:
        return total, rows
    samples = src.query(
        f"""
        SELECT * FROM (
            SELECT traj_id, step, {key} AS task_key, sample_idx, reward, success, graded, termination,
                   row_number() OVER (PARTITION BY step, {key} ORDER BY sample_idx NULLS LAST,
                                      {natural_sql('traj_id')}) AS k
            FROM trajectories WHERE run_id = ? AND split = ?
                AND list_contains(?, struct_pack(s := step, t := {key}))
        ) WHERE k <= ? ORDER BY step, {natural_sql('task_key')}, k
        """,
        [run_id, split, [{"s": r["step"], "t": r["task_key"]} for r in rows], SAMPLES_SHOWN],
    )
    notes: dict[str, dict[str, Any]] = {}
    for step in sorted({s["step"] for s in samples}):
        ids = [s["traj_id"] for s in samples if s["step"] == step]
        for x in texts(src, run_id, split, step,
                       "traj_id, CAST(json_extract(extras, '$.scores') AS VARCHAR) AS scores, "
                       "json_extract_string(extras, '$.ungraded_reason') AS ungraded_reason, "
                       f"substr(error, 1, {EXPLANATION_CHARS}) AS error",
                       "turn_idx = -1 AND list_contains(?, traj_id)", [ids]):
            notes[x["traj_id"]] = x
    by_row: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for s in samples:
        s["grader"] = grader_notes(notes.get(s["traj_id"], {}))
        by_row.setdefault((s["step"], s["task_key"]), []).append(s)
    for r in rows:
        r["samples"] = by_row.get((r["step"], r["task_key"]), [])
    return total, rows


def grader_notes(x: dict[str, Any]) -> list[str]:
    """What the grader said about one sample: each scorer's value and explanation (Inspect's
    ``scores``), else why it is ungraded, else its error."""
    out: list[str] = []
    raw = x.get("scores")
    try:
        scores = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        scores = None
    if isinstance(scores, dict):
        for name, sc in scores.items():
            if not isinstance(sc, dict):
                continue
            value = sc.get("value")
            why = sc.get("explanation")
            line = f"{name} = {value if isinstance(value, str) else orjson.dumps(value).decode()}"
            if why not in (None, ""):
                text = why if isinstance(why, str) else orjson.dumps(why).decode()
                cut = text[:EXPLANATION_CHARS] + ("…" if len(text) > EXPLANATION_CHARS else "")
                line += f": {cut}"
            out.append(line)
    if x.get("ungraded_reason"):
        out.append(f"ungraded: {x['ungraded_reason']}")
    elif not out and x.get("error"):
        out.append(f"error: {x['error']}")
    return out
