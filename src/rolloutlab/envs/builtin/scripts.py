"""Scripted policies for the simulated environments: functions of the message history that
return the next action, for ``rolloutlab eval --policy scripted:rolloutlab.envs.builtin.scripts:NAME``.

They see only what a model sees (no oracle): ``household`` is a hand-written explorer in
the spirit of ALFWorld's hand-coded expert (visit receptacles in the order the room lists
them, open what is closed, take an object of the goal type, treat it, put it away);
``shopping`` searches the instruction, opens the first result, clicks the options the
instruction names, and buys; ``code_search`` greps for the definitions of the names the issue
mentions, reads the files to find their classes, and names them all (it writes Hermes
``<tool_call>`` blocks: run it with ``--parser hermes``).  They are baselines and smoke tests, not upper bounds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from rolloutlab.envs._core import Message

__all__ = ["code_search", "household", "shopping"]

_VERB = {"clean": "clean", "hot": "heat", "heat": "heat", "cool": "cool"}
_STATION = {"clean": "sinkbasin", "heat": "microwave", "cool": "fridge"}


def _action_of(text: str) -> str:
    m = re.findall(r"<action>(.*?)</action>", text, re.DOTALL)
    return (m[-1] if m else text).strip()


def _kind(name: str) -> str:
    return name.rsplit(" ", 1)[0]


def _goal(task: str) -> tuple[str, str, str | None, str | None]:
    """(kind, object type, target receptacle type, treatment verb) of an ALFWorld task."""
    if m := re.search(r"(?:look at|examine the) (\w+) (?:under|with) the desklamp", task):
        return "look", m.group(1), None, None
    if m := re.search(r"(?:put two|find two) (\w+) (?:and put them )?(?:in|on) (\w+)", task):
        return "two", m.group(1), m.group(2), None
    if m := re.search(r"put a (clean|hot|cool) (\w+) (?:in|on) (\w+)", task):
        return "treat", m.group(2), m.group(3), _VERB[m.group(1)]
    if m := re.search(r"(clean|heat|cool) some (\w+) and put it (?:in|on) (\w+)", task):
        return "treat", m.group(2), m.group(3), _VERB[m.group(1)]
    if m := re.search(r"put (?:a|some) (\w+) (?:in|on) (\w+)", task):
        return "place", m.group(1), m.group(2), None
    return "place", "", None, None


def household(messages: Sequence[Message]) -> str:
    """The next command in ``household-v0`` from the conversation so far (the environment
    must list admissible actions, its default)."""
    users = [str(m.get("content", "")) for m in messages if m.get("role") == "user"]
    if not users:
        return "look"
    first = users[0]
    task = re.search(r"Your task is to: (.*)", first)
    kind, obj, target, verb = _goal(task.group(1) if task else "")
    room = re.search(r"Looking quickly around you, you see (.*?)\.\n", first)
    receptacles = (
        [r.strip().removeprefix("and ").removeprefix("a ") for r in room.group(1).split(",")]
        if room
        else []
    )
    admissible_m = re.search(
        r"admissible actions of the current situation are: \[(.*)\]", users[-1], re.DOTALL
    )
    admissible = [a.strip() for a in admissible_m.group(1).split(",")] if admissible_m else []

    # Replay what happened: what is held, treated, placed; where goal objects were seen.
    holding: str | None = None
    treated: set[str] = set()
    placed: dict[str, str] = {}
    seen: dict[str, str] = {}
    lamp_at: str | None = None
    visited: set[str] = set()
    here: str | None = None
    for obs in users[1:]:
        if m := re.match(r"You arrive at (.+?)\.", obs):
            here = m.group(1)
            visited.add(here)
        if m := re.match(r"You pick up the (.+?) from", obs):
            holding = m.group(1)
            seen.pop(holding, None)
        if m := re.match(r"You put the (.+?) in/on the (.+?)\.", obs):
            placed[m.group(1)] = m.group(2)
            holding = None
        if m := re.match(r"You (?:clean|heat|cool) the (.+?) using", obs):
            treated.add(m.group(1))
        if here and (m := re.search(r"you see (.*?)\.(?:\n|$)", obs)):
            for item in m.group(1).split(","):
                item = item.strip().removeprefix("and ").removeprefix("a ").strip()
                if _kind(item) == obj and item not in placed and item != holding:
                    seen[item] = here
                if _kind(item) == "desklamp":
                    lamp_at = here

    def go(recep: str) -> str:
        return f"go to {recep}" if f"go to {recep}" in admissible else f"open {recep}"

    targets = [r for r in receptacles if _kind(r) == target]
    dest = next((r for o, r in placed.items() if _kind(o) == obj and _kind(r) == target), None)
    dest = dest or (targets[0] if targets else None)
    if holding is not None and _kind(holding) == obj:
        if kind == "look":
            lamp = next((a for a in admissible if a.startswith("use desklamp")), None)
            if lamp:
                return lamp
            if lamp_at:
                return go(lamp_at)
        elif verb and holding not in treated:
            station = next((r for r in receptacles if _kind(r) == _STATION[verb]), None)
            act = f"{verb} {holding} with {station}"
            if act in admissible:
                return act
            if station:
                return go(station)
        elif dest:
            put = f"put {holding} in/on {dest}"
            if put in admissible:
                return put
            if f"open {dest}" in admissible:
                return f"open {dest}"
            return go(dest)
    if holding is None:
        take = next(
            (
                a
                for a in admissible
                if a.startswith(f"take {obj} ") and a.split(" from ")[0][5:] not in placed
            ),
            None,
        )
        if take:
            return take
        opener = next((a for a in admissible if a.startswith("open ")), None)
        if opener and here and opener == f"open {here}":
            return opener
        if seen:
            return go(next(iter(seen.values())))
    for r in receptacles:  # explore: the next receptacle not visited yet
        if r not in visited and f"go to {r}" in admissible:
            return f"go to {r}"
    return "look"


def shopping(messages: Sequence[Message]) -> str:
    """The next action in ``shopping-v0``: search the instruction (up to its options), open
    the first result, click each option value the instruction names, buy."""
    users = [str(m.get("content", "")) for m in messages if m.get("role") == "user"]
    if not users:
        return "search[]"
    instruction = re.search(r"Instruction: \[SEP\] (.*?) \[SEP\]", users[0])
    text = instruction.group(1) if instruction else ""
    last = users[-1]
    clickables = re.findall(r"'click\[(.*?)\]'", last)
    if "'search[<your query>]'" in last:
        return f"search[{re.split(r' with |, and price', text)[0]}]"
    if "buy now" in clickables:
        wanted = (
            dict(re.findall(r"(\w[\w ]*?): ([^,]+?)(?:,|$)", text.split(" with ", 1)[1]))
            if " with " in text
            else {}
        )
        clicked = {
            _action_of(str(m.get("content", ""))) for m in messages if m.get("role") == "assistant"
        }
        for value in wanted.values():
            value = value.strip()
            if value in clickables and f"click[{value}]" not in clicked:
                return f"click[{value}]"
        return "click[buy now]"
    product = next((c for c in clickables if re.fullmatch(r"b0[a-z0-9]{8}", c)), None)
    return f"click[{product}]" if product else "click[back to search]"


def _call(name: str, **arguments: object) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def code_search(messages: Sequence[Message]) -> str:
    """The next tool call in ``code-search-v0``: grep the definitions of the names the issue
    mentions (``name(`` and ``.name(``), cat each file with a method hit to find its class,
    then finish with every definition found outside ``tests/``."""
    first = next((str(m.get("content", "")) for m in messages if m.get("role") == "user"), "")
    issue = re.search(r"<issue>(.*)</issue>", first, re.DOTALL)
    names = sorted(set(re.findall(r"\b([A-Za-z_]\w*)\(", issue.group(1) if issue else "")))
    tool_out = [str(m.get("content", "")) for m in messages if m.get("role") == "tool"]
    if not tool_out:
        if not names:
            return _call("finish", locations=[])
        return _call("grep", pattern=rf"^\s*def ({'|'.join(names)})\b", path=".")
    hits: list[tuple[str, int, str]] = []
    for h in tool_out[0].splitlines():
        if (m := re.match(r"^([\w./-]+):(\d+):(.*)$", h)) and not m.group(1).startswith("tests/"):
            hits.append((m.group(1), int(m.group(2)), m.group(3)))
    read: dict[str, dict[int, str]] = {}
    for out in tool_out[1:]:
        lines = re.findall(r"^\s*(\d+)  (.*)$", out, re.MULTILINE)
        path = next((p for p, n, t in hits if any(int(k) == n and v == t for k, v in lines)), None)
        if path:
            read[path] = {int(k): v for k, v in lines}
    for path, _, text in hits:
        if text.startswith((" ", "\t")) and path not in read:
            return _call("cat", path=path)
    locations = []
    for path, n, text in hits:
        name = re.search(r"def (\w+)", text)
        if not name:
            continue
        if not text.startswith((" ", "\t")):
            locations.append(f"{path}::{name.group(1)}")
            continue
        cls = next(
            (
                m.group(1)
                for k in range(n - 1, 0, -1)
                if (m := re.match(r"class (\w+)", read[path].get(k, "")))
            ),
            None,
        )
        locations.append(f"{path}::{cls}.{name.group(1)}" if cls else path)
    return _call("finish", locations=sorted(set(locations)))
