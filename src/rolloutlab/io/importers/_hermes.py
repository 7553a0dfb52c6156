"""Hermes-style tool calls in flat text: ``<tool_call>{json}</tool_call>`` and
``<tool_response>…</tool_response>``.

This is the tool format of the Qwen 2.5 / Qwen 3 chat templates (and of Hermes-2-Pro,
whence the name) that verl's multi-turn rollouts and verl-agent use: the model writes
each call as a JSON object ``{"name": …, "arguments": {…}}`` between ``<tool_call>``
tags, and the template renders every tool message as a ``user`` turn whose content is
the result between ``<tool_response>`` tags, one block per call, in call order (the
templates carry no call ids).  A dump that strips special tokens keeps the tags, since
they are plain text.

A block whose body is not a JSON object with a string ``name`` is not a call (the
tool was never run); :func:`tool_calls_in` counts it as malformed so the turn's action
can be marked invalid.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from rolloutlab.io._sink import TurnData
from rolloutlab.io.importers._agentlog import args_text


def _blocks(text: str, tag: str) -> list[str]:
    """Bodies of ``<tag>…</tag>`` blocks, in one pass (a lazy regex would rescan the
    rest of the text for every unclosed tag: quadratic on hostile text).  An unclosed
    last tag is no block."""
    open_, close = f"<{tag}>", f"</{tag}>"
    out = []
    i = text.find(open_)
    while i >= 0:
        j = text.find(close, i + len(open_))
        if j < 0:
            break
        out.append(text[i + len(open_) : j])
        i = text.find(open_, j + len(close))
    return out


@dataclass
class HermesCalls:
    """The calls found in one action text."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    """``{name, arguments}`` per well-formed block, arguments as JSON text."""
    malformed: int = 0
    """Blocks whose body is not a JSON object with a string ``name``."""


def tool_calls_in(text: str | None) -> HermesCalls:
    """The ``<tool_call>`` blocks of ``text``, in order."""
    out = HermesCalls()
    if not text or "<tool_call>" not in text:
        return out
    for body in _blocks(text, "tool_call"):
        try:
            obj = orjson.loads(body.strip())
        except orjson.JSONDecodeError:
            out.malformed += 1
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            out.malformed += 1
            continue
        call: dict[str, Any] = {"name": obj["name"]}
        args = obj.get("arguments", obj.get("parameters"))
        if args is not None:
            call["arguments"] = args_text(args)
        out.calls.append(call)
    return out


def tool_responses_in(text: str | None) -> list[str]:
    """The bodies of the ``<tool_response>`` blocks of ``text``, without the newline the
    templates put inside each tag."""
    if not text or "<tool_response>" not in text:
        return []
    return [body.strip("\n") for body in _blocks(text, "tool_response")]


def has_tool_response(text: str | None) -> bool:
    return text is not None and "<tool_response>" in text


def with_calls(turns: list[TurnData], final_observation: str | None) -> list[TurnData]:
    """Give turns split from flat text their Hermes calls: each turn's ``<tool_call>``
    blocks, answered by the ``<tool_response>`` blocks of the next turn's observation
    (the final observation for the last turn); a malformed block marks the action
    invalid.  The turns are changed in place and returned."""
    for i, t in enumerate(turns):
        found = tool_calls_in(t.action)
        if not (found.calls or found.malformed):
            continue
        t.tool_calls = found.calls
        if found.malformed:
            t.action_valid = False
        reply = turns[i + 1].observation if i + 1 < len(turns) else final_observation
        if reply:
            answer_calls(t.tool_calls, reply, role="user")
    return turns


def answer_calls(calls: list[dict[str, Any]], env_text: str, *, role: str) -> None:
    """Give the open calls of a turn (those without a ``result``) their results from one
    environment segment: its ``<tool_response>`` blocks in order, or — for a ``tool``
    segment without tags (a template that keeps the tool role) — the whole text to the
    first open call."""
    open_calls = [c for c in calls if "result" not in c]
    if not open_calls:
        return
    responses = tool_responses_in(env_text)
    if not responses and role == "tool":
        responses = [env_text]
    for c, r in zip(open_calls, responses, strict=False):
        c["result"] = r
