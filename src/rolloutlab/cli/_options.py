"""Command options generated from a config dataclass: one ``--flag`` per setting, its help the
field's docstring, its type and default the field's (cleanrl's ``tyro.cli(Args)``, done here
for typer).

A setting is a field as :func:`rolloutlab.agent.settings` lists it: the fields of an
inline section (``EvalConfig.loop``) read as the holder's own.  The flag is the field's name
in kebab case without a seconds suffix (``env_timeout_s`` → ``--env-timeout``) unless the
command names it otherwise (``max_tokens_per_turn`` → ``--max-tokens``).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, get_args, get_origin

import typer

from rolloutlab.agent import settings

__all__ = ["config_command", "field_docs", "flag_of"]


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of the dataclass ``cls`` (and of its bases), as one line."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0]
        assert isinstance(body, ast.ClassDef)
        for stmt, nxt in zip(body.body, body.body[1:], strict=False):
            if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                    and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                    and isinstance(nxt.value.value, str)):
                docs[stmt.target.id] = " ".join(nxt.value.value.split()).replace("``", "`")
    return docs


def flag_of(name: str, renamed: Mapping[str, str]) -> str:
    """``--kebab-case`` of a field name, a trailing ``_s`` (seconds) dropped, unless renamed."""
    if name in renamed:
        return renamed[name]
    return "--" + re.sub(r"_s$", "", name).replace("_", "-")


def _option_type(tp: Any) -> Any:
    """The type typer parses: a closed choice (``Literal``) as a string, checked by the config."""
    if get_origin(tp) is Literal:
        return str
    if get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return _option_type(args[0]) | None
    return tp


def config_command(cls: type, *, renamed: Mapping[str, str], extra: list[inspect.Parameter],
                   body: Callable[..., None]) -> Callable[..., None]:
    """A command function whose parameters are ``cls``'s settings (plus ``extra``); it calls
    ``body(settings: dict, **extra)`` with the settings given (all of them, defaults included)."""
    docs: dict[str, str] = {}
    for klass in [*_inline_types(cls), cls]:  # the holder's last: its ``split`` is a setting, the loop's is not
        docs.update(field_docs(klass))
    defaults = _defaults(cls)
    params: list[inspect.Parameter] = []
    names: list[str] = []
    for name, _, tp in settings(cls):
        flag = flag_of(name, renamed)
        if tp is bool:  # a switch: on and off (a default of True must be turned off somehow)
            flag = f"{flag}/--no-{flag.removeprefix('--')}"
        opt = typer.Option(flag, help=docs.get(name, ""))
        default = defaults.get(name, inspect.Parameter.empty)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=Annotated[_option_type(tp), opt]))
        names.append(name)
    params.extend(extra)

    def command(**kwargs: Any) -> None:
        body({n: kwargs.pop(n) for n in names}, **kwargs)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = body.__doc__
    return command


def _inline_types(cls: type) -> list[type]:
    hints = typing.get_type_hints(cls)
    return [typing.cast(type, hints[f.name]) for f in dataclasses.fields(cls) if f.metadata.get("inline")]


def _defaults(cls: type) -> dict[str, Any]:
    """Each setting's default: the field's, an inline section's from the holder's default for it."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.metadata.get("inline"):
            start = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            out.update({name: getattr(start, name) for name, _, _ in settings(type(start))})
        elif f.default is not dataclasses.MISSING:
            out[f.name] = f.default
    return out

