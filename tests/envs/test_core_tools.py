"""tool_schema and call_tool: schemas from typed functions, validation never crashes."""

from __future__ import annotations

import asyncio
import enum
from typing import Any, Literal

import pytest

from rolloutlab.envs import ToolInvocation
from rolloutlab.envs._tools import ToolResult, call_tool, tool_message, tool_schema


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


def grep(pattern: str, path: str = ".", max_hits: int | None = None, files: list[str] | None = None) -> str:
    """Search files for a pattern.

    Prints matching lines.

    Args:
        pattern: Regular expression to search for.
        path: Folder to search,
            recursively.
        max_hits: Stop after this many matches.
        files: Only these files.

    Returns:
        The matching lines.
    """
    return f"grep {pattern} in {path} ({max_hits})"


def paint(colour: Colour, ratio: float, mode: Literal["fast", "slow"] = "fast", opts: dict[str, Any] | None = None, flag: bool = False) -> str:
    """Paint.

    :param colour: The colour.
    :param ratio: Share of the wall, 0..1.
    """
    if ratio > 1:
        raise ValueError("ratio must be at most 1")
    return f"{colour} {ratio} {mode}"


async def slow_echo(text: str) -> str:
    """Echo text."""
    await asyncio.sleep(0)
    return text


def test_schema_google_docstring() -> None:
    s = tool_schema(grep)
    assert s["type"] == "function"
    f = s["function"]
    assert f["name"] == "grep" and f["description"] == "Search files for a pattern. Prints matching lines."
    p = f["parameters"]
    assert p["type"] == "object" and p["required"] == ["pattern"]
    assert p["properties"]["pattern"] == {"type": "string", "description": "Regular expression to search for."}
    assert p["properties"]["path"] == {"type": "string", "description": "Folder to search, recursively.", "default": "."}
    assert p["properties"]["max_hits"]["type"] == ["integer", "null"]
    assert p["properties"]["files"] == {
        "type": ["array", "null"], "items": {"type": "string"}, "description": "Only these files.", "default": None
    }


def test_schema_rest_docstring_enum_literal() -> None:
    f = tool_schema(paint)["function"]
    props = f["parameters"]["properties"]
    assert f["description"] == "Paint." and f["parameters"]["required"] == ["colour", "ratio"]
    assert props["colour"] == {"enum": ["red", "blue"], "description": "The colour."}
    assert props["ratio"] == {"type": "number", "description": "Share of the wall, 0..1."}
    assert props["mode"] == {"enum": ["fast", "slow"], "type": "string", "default": "fast"}
    assert props["opts"] == {"type": ["object", "null"], "default": None} and props["flag"] == {"type": "boolean", "default": False}


def test_schema_refuses_what_a_model_cannot_fill() -> None:
    def star(*args: str) -> str:
        return ""

    def odd(x: complex) -> str:
        return ""

    with pytest.raises(TypeError, match=r"\*args"):
        tool_schema(star)
    with pytest.raises(TypeError, match="parameter 'x'"):
        tool_schema(odd)


def _call(name: str, args: Any, tools: list[Any] | None = None) -> ToolResult:
    return asyncio.run(call_tool(tools or [grep, paint, slow_echo], ToolInvocation(name, args, id="c1")))


def test_valid_calls_sync_and_async() -> None:
    r = _call("grep", {"pattern": "x", "max_hits": None})
    assert r.ok and r.content == "grep x in . (None)" and r.value == r.content
    assert _call("slow_echo", {"text": "hi"}) == ToolResult("hi", True, "hi")
    r = _call("paint", {"colour": "red", "ratio": 1})  # an int is a number; the enum value becomes the member
    assert r.ok and r.content == "Colour.RED 1 fast"


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("nope", {}, "unknown tool 'nope'; available tools: grep, paint, slow_echo"),
        ("grep", {}, "missing required argument 'pattern'"),
        ("grep", {"pattern": 3}, "argument 'pattern': expected string, got int 3"),
        ("grep", {"pattern": "x", "zz": 1}, "unexpected argument 'zz' (arguments: pattern, path, max_hits, files)"),
        ("grep", {"pattern": "x", "files": ["a", 2]}, "argument 'files': item 1: expected string"),
        ("grep", {"pattern": "x", "max_hits": True}, "argument 'max_hits': expected integer, got bool"),
        ("grep", ["x"], "must be a JSON object"),
        ("paint", {"colour": "green", "ratio": 0.5}, "argument 'colour': must be one of ['red', 'blue']"),
        ("paint", {"colour": "red", "ratio": 2.0}, "paint failed: ValueError: ratio must be at most 1"),
    ],
)
def test_bad_calls_become_error_results(name: str, args: Any, message: str) -> None:
    r = _call(name, args)
    assert not r.ok and r.value is None and r.content.startswith("error:") and message in r.content


def test_tool_message() -> None:
    inv = ToolInvocation("grep", {"pattern": "x"}, id="call_1")
    assert tool_message(inv, ToolResult("out", True)) == {"role": "tool", "name": "grep", "content": "out", "tool_call_id": "call_1"}
    assert "tool_call_id" not in tool_message(ToolInvocation("grep", {}), ToolResult("out", True))
