"""The report's optional dependencies (the ``report`` extra), checked where they are used."""

from __future__ import annotations

import importlib.util

from rolloutlab.io import RolloutlabError

_WHAT = {"plotly": "the interactive figures", "jinja2": "the HTML page", "matplotlib": "--png figures"}


def require(*modules: str) -> None:
    """Raise a clear error naming the extra when one of ``modules`` is not installed."""
    absent = [m for m in modules if importlib.util.find_spec(m) is None]
    if absent:
        needs = ", ".join(f"{m} ({_WHAT.get(m, 'the report')})" for m in absent)
        raise RolloutlabError(f"the report needs {needs}: install the extra with  pip install 'rolloutlab[report]'")
