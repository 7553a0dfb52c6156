"""Finding the checkpoints of a training run's output folder."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from rolloutlab.io import InputError

_NAMES = re.compile(r"^(?:checkpoint[-_]|global_step_|step_?)?(\d+)$")
# Where trainers put the Hugging Face weights inside a checkpoint folder (verl: actor/huggingface).
_HF_SUBDIRS = ("", "huggingface", "actor/huggingface", "hf")


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint to evaluate."""

    name: str
    """Folder name, used as ``eval/<name>/``."""
    step: int
    """The step number in the name."""
    path: Path
    """The folder holding the model (``config.json``), given to ``hf:<path>``."""


def find_checkpoints(root: Path) -> list[Checkpoint]:
    """Sub-folders of ``root`` named ``checkpoint-N``, ``global_step_N``, ``step_N``/``stepN``
    or ``N``, by step.  Inside each, the model is the first of the folder itself,
    ``huggingface/``, ``actor/huggingface/`` (verl) or ``hf/`` that has a ``config.json``
    (else the folder itself)."""
    if not root.is_dir():
        raise InputError("--checkpoints is not a folder", path=root)
    found: list[Checkpoint] = []
    for d in root.iterdir():
        m = _NAMES.match(d.name)
        if not (m and d.is_dir()):
            continue
        model = next((d / s for s in _HF_SUBDIRS if (d / s / "config.json").is_file()), d)
        found.append(Checkpoint(name=d.name, step=int(m.group(1)), path=model))
    if not found:
        names = sorted(p.name for p in root.iterdir())[:10]
        raise InputError(
            "no checkpoint folders (checkpoint-N, global_step_N, step_N or N) in it; "
            f"it holds: {', '.join(names) or 'nothing'}",
            path=root,
        )
    return sorted(found, key=lambda c: (c.step, c.name))
