"""Names of a package imported on first use (PEP 562), so that importing the package, or
the command line's ``--help``, does not pay for what a name's module imports."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(package: str, where: Mapping[str, str], names: Iterable[str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: a name in ``where`` is taken from
    the module ``where[name]`` (relative to the package, or absolute when it starts with
    ``rolloutlab.``) when first asked for, then kept in the package."""
    listed = frozenset(names)

    def __getattr__(name: str) -> Any:
        mod = where.get(name)
        if mod is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(mod if mod.startswith("rolloutlab.") else f"{package}.{mod}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *listed})

    return __getattr__, __dir__
