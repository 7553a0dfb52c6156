"""Tools are plain typed Python functions; their OpenAI schema comes from the signature.

:func:`tool_schema` turns ``def grep(pattern: str, path: str = ".") -> str`` with a
Google-style (``Args:``) or reST (``:param x:``) docstring into the OpenAI function-tool
schema (``{"type": "function", "function": {name, description, parameters}}``), as
verifiers and TRL derive theirs from the function.  :func:`call_tool` runs a parsed
:class:`ToolInvocation` against the environment's tools after checking the arguments
against the same signature: an unknown tool, a missing or unexpected argument, a value
of the wrong type, or an exception inside the tool becomes an error *result* (text for the
observation, ``ok = False``), never an exception in the agent loop.

Type mapping: ``str`` string, ``int`` integer, ``float`` number (ints accepted), ``bool``
boolean, ``list[X]`` / ``tuple[X, ...]`` / ``Sequence[X]`` array of X, ``dict`` object,
``Literal[...]`` and ``Enum`` subclasses an ``enum``, ``X | None`` ``{"type": [X, "null"]}``
(required unless it has a default).  An unannotated parameter accepts any JSON value.
Departure from strict JSON Schema validators: ``bool`` is not accepted as an integer, and
a whole float (``3.0``) is not coerced to ``int``.
"""

from __future__ import annotations

import enum
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from rolloutlab.envs._core import Message, ToolInvocation

__all__ = ["ToolResult", "call_tool", "tool_message", "tool_schema"]

_SCALARS: dict[type, str] = {str: "string", bool: "boolean", int: "integer", float: "number"}


def _type_schema(tp: Any) -> dict[str, Any]:
    """JSON Schema of annotation ``tp`` (see the module docstring for the mapping)."""
    if tp is inspect.Parameter.empty or tp is Any:
        return {}
    origin = get_origin(tp)
    if origin is typing.Annotated:
        return _type_schema(get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        members = [a for a in get_args(tp) if a is not type(None)]
        if len(members) == len(get_args(tp)):
            return {"anyOf": [_type_schema(a) for a in members]}
        inner = _type_schema(members[0]) if len(members) == 1 else {"anyOf": [_type_schema(a) for a in members]}
        if isinstance(inner.get("type"), str) and "enum" not in inner:
            return {**inner, "type": [inner["type"], "null"]}
        return {"anyOf": [inner, {"type": "null"}]}
    if origin is Literal:
        values = list(get_args(tp))
        kinds = {_SCALARS.get(type(v)) for v in values}
        out: dict[str, Any] = {"enum": values}
        if len(kinds) == 1 and None not in kinds:
            out["type"] = kinds.pop()
        return out
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    if tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    if origin in (list, tuple, set, frozenset, Sequence) or tp in (list, tuple, set, frozenset):
        args = [a for a in get_args(tp) if a is not Ellipsis]
        return {"type": "array", "items": _type_schema(args[0])} if len(args) == 1 else {"type": "array"}
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        return {"type": "object"}
    raise TypeError(f"tool parameter type {tp!r} has no JSON Schema mapping; use str, int, float, bool, list, dict, Literal or an Enum")


_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?)\s*:\s*$")
_GOOGLE_ARG = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST_ARG = re.compile(r"^\s*:param\s+(?:[\w\[\], |.]+\s+)?(\w+)\s*:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """``(description, {param: description})`` from a Google-style or reST docstring."""
    lines = inspect.cleandoc(doc or "").splitlines()
    desc: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in lines:
        head = _SECTION.match(line)
        if head:
            section, current = head.group(1).lower(), None
            continue
        rest = _REST_ARG.match(line)
        if rest:
            current = rest.group(1)
            params[current] = rest.group(2).strip()
            section = "rest"
            continue
        if line.strip().startswith(":"):  # :returns:, :raises: ...
            section, current = "other", None
            continue
        if section in ("args", "arguments", "parameters"):
            m = _GOOGLE_ARG.match(line)
            if m and (len(line) - len(line.lstrip())) <= 4:
                current = m.group(1)
                params[current] = m.group(2).strip()
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
        elif section == "rest":
            if current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
        elif section is None:
            desc.append(line)
    description = " ".join(" ".join(desc).split())
    return description, params


def tool_schema(fn: Callable[..., Any]) -> dict[str, Any]:
    """The OpenAI function-tool schema of a plain typed function.

    Parameters with a default are optional; the others are ``required``.  ``*args`` and
    ``**kwargs`` are refused (a model cannot fill them reliably).  Raises ``TypeError`` for an
    annotation without a JSON Schema mapping (the message names the parameter)."""
    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn, include_extras=True)
    description, docs = _parse_docstring(fn.__doc__)
    props: dict[str, Any] = {}
    required: list[str] = []
    for name, p in sig.parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"tool {fn.__name__!r}: *{name} / **{name} cannot be a tool parameter; name each argument")
        try:
            schema = _type_schema(hints.get(name, inspect.Parameter.empty))
        except TypeError as e:
            raise TypeError(f"tool {fn.__name__!r}, parameter {name!r}: {e}") from None
        if name in docs:
            schema = {**schema, "description": docs[name]}
        if p.default is inspect.Parameter.empty:
            required.append(name)
        elif p.default is None or isinstance(p.default, str | int | float | bool):
            schema = {**schema, "default": p.default}
        props[name] = schema
    return {
        "type": "function",
        "function": {
            "name": fn.__name__,
            "description": description,
            "parameters": {"type": "object", "properties": props, "required": required},
        },
    }


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one tool call."""

    content: str
    """Text for the tool message: the tool's return value (``str()`` of it), or the error."""
    ok: bool
    """The call was valid and the tool returned; ``False`` for bad calls and tool errors."""
    value: Any = None
    """The tool's return value as returned (``None`` when not ``ok``)."""


def _check_value(value: Any, schema: Mapping[str, Any]) -> str | None:
    """Why ``value`` does not fit ``schema`` (``None``: it fits)."""
    kind = schema.get("type")
    if isinstance(kind, list):  # [X, "null"]
        if value is None and "null" in kind:
            return None
        whys = [_check_value(value, {**schema, "type": k}) for k in kind if k != "null"]
        return None if None in whys else (whys[0] if len(whys) == 1 else f"expected {' or '.join(kind)}")
    if "anyOf" in schema:
        return None if any(_check_value(value, s) is None for s in schema["anyOf"]) else "matches none of the allowed types"
    if "enum" in schema and value not in schema["enum"]:
        return f"must be one of {schema['enum']!r}"
    ok = {
        None: True,
        "null": value is None,
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "array": isinstance(value, list | tuple),
        "object": isinstance(value, dict),
    }[kind]
    if not ok:
        return f"expected {kind}, got {type(value).__name__} {_short(value)}"
    if kind == "array" and "items" in schema:
        for i, item in enumerate(value):
            why = _check_value(item, schema["items"])
            if why:
                return f"item {i}: {why}"
    return None


def _short(value: Any, limit: int = 40) -> str:
    r = repr(value)
    return r if len(r) <= limit else r[: limit - 1] + "…"


async def call_tool(tools: Sequence[Callable[..., Any]], call: ToolInvocation) -> ToolResult:
    """Validate ``call`` against ``tools`` and run it (sync or async tools).

    Never raises for a bad call: unknown tool, missing/unexpected/mistyped arguments and
    exceptions raised by the tool come back as ``ToolResult(ok=False)`` with a message that
    says what to do (the model reads it as the observation)."""
    by_name = {t.__name__: t for t in tools}
    fn = by_name.get(call.name) if isinstance(call.name, str) else None
    if fn is None:
        return ToolResult(f"error: unknown tool {_short(call.name)}; available tools: {', '.join(sorted(by_name)) or 'none'}", False)
    if not isinstance(call.arguments, Mapping):
        return ToolResult(f"error: arguments of {call.name} must be a JSON object, got {type(call.arguments).__name__}", False)
    params = tool_schema(fn)["function"]["parameters"]
    props: dict[str, Any] = params["properties"]
    problems = [f"missing required argument {a!r}" for a in params["required"] if a not in call.arguments]
    problems += [
        f"unexpected argument {_short(a)} (arguments: {', '.join(props) or 'none'})" for a in call.arguments if a not in props
    ]
    for a, v in call.arguments.items():
        if a in props:
            why = _check_value(v, props[a])
            if why:
                problems.append(f"argument {a!r}: {why}")
    if problems:
        return ToolResult(f"error: bad call to {call.name}: " + "; ".join(problems), False)
    hints = typing.get_type_hints(fn)
    kwargs = {
        a: hints[a](v) if isinstance(hints.get(a), type) and issubclass(hints[a], enum.Enum) else v
        for a, v in call.arguments.items()
    }
    try:
        value = fn(**kwargs)
        if inspect.isawaitable(value):
            value = await value
    except Exception as e:  # the tool refused these arguments: the model should read why
        return ToolResult(f"error: {call.name} failed: {type(e).__name__}: {e}", False)
    return ToolResult(value if isinstance(value, str) else str(value), True, value)


def tool_message(call: ToolInvocation, result: ToolResult) -> Message:
    """The ``tool`` role message that answers ``call``."""
    msg: Message = {"role": "tool", "name": call.name, "content": result.content}
    if call.id is not None:
        msg["tool_call_id"] = call.id
    return msg
