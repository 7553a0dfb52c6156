"""Checkpoints: ``RUN_DIR/checkpoints/step_NNNNNN/``, written atomically.

A checkpoint folder holds the model in the ``save_pretrained`` layout (so evaluation loads it
with ``hf:PATH`` and no trainer, and any Hugging Face loader or server reads it), the tokenizer
with its chat template, ``generation_config.json`` (the run's token cap per turn, sampling and
stop ids: :mod:`rolloutlab.agent._hf_export`), and ``trainer_state.pt``: optimizer,
scheduler, every RNG (python, numpy, torch), the task sampler's position, the horizon state
and the step — tensors and plain containers only, loaded with ``torch.load(weights_only=True)``
so that a crafted run directory cannot run code on ``--resume``.  Weights and optimizer state are full (unsharded), whatever
``trainer.strategy`` wrote them, so any strategy resumes them.  It is written under a temporary name and renamed when complete, so a killed
run leaves only whole checkpoints; :func:`latest_checkpoint` ignores anything else.
"""

from __future__ import annotations

import os
import pickle
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rolloutlab.agent import ChatTokenizer, LoopConfig, save_model
from rolloutlab.io import RolloutlabError

__all__ = ["CKPT_FMT", "checkpoint_step", "latest_checkpoint", "list_checkpoints", "load_state", "load_weights", "save_checkpoint"]

CKPT_FMT = "step_{:06d}"
_CKPT = re.compile(r"^step_(\d{6,})$")
STATE_FILE = "trainer_state.pt"


def checkpoint_step(path: Path) -> int | None:
    m = _CKPT.match(path.name)
    return int(m.group(1)) if m else None


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    d = Path(run_dir) / "checkpoints"
    if not d.is_dir():
        return []
    found = [p for p in d.iterdir() if p.is_dir() and checkpoint_step(p) is not None and (p / STATE_FILE).exists()]
    return sorted(found, key=lambda p: checkpoint_step(p) or 0)


def latest_checkpoint(run_dir: Path) -> Path | None:
    c = list_checkpoints(run_dir)
    return c[-1] if c else None


def rng_state() -> dict[str, Any]:
    """Every RNG's state in types ``torch.load(weights_only=True)`` accepts: numpy's key
    array becomes a tensor (an ndarray would need numpy's pickled reconstructor)."""
    name, key, pos, has_gauss, cached = np.random.get_state()
    return {
        "python": random.getstate(),  # (version, tuple of ints, float | None)
        "numpy": {"name": str(name), "key": torch.from_numpy(np.asarray(key, dtype=np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "torch": torch.get_rng_state(),
    }


def set_rng_state(s: dict[str, Any]) -> None:
    random.setstate(s["python"])
    n = s["numpy"]
    np.random.set_state((n["name"], n["key"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"]))
    torch.set_rng_state(s["torch"])


def save_checkpoint(run_dir: Path, step: int, model: Any, tokenizer: ChatTokenizer, state: dict[str, Any], *,
                    sampling: LoopConfig | None = None) -> Path:
    """Write checkpoint ``step`` atomically; returns its folder.  ``sampling``: the run's
    rollout settings, written as ``generation_config.json`` (what ``eval`` reuses)."""
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / CKPT_FMT.format(step)
    tmp = root / f".{final.name}.tmp{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        save_model(model, tokenizer, tmp, sampling=sampling)
        torch.save({**state, "rng": rng_state(), "step": step}, tmp / STATE_FILE)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except Exception as e:  # OSError, and safetensors' own error for the same full disk
        shutil.rmtree(tmp, ignore_errors=True)
        why = getattr(e, "strerror", None) or str(e)
        raise RolloutlabError(
            f"could not write checkpoint {final}: {why}; earlier checkpoints are intact "
            "(free space, then continue with rolloutlab train --resume RUN_DIR)"
        ) from None
    return final


def load_weights(path: Path, model: Any) -> None:
    """Load the weights of checkpoint ``path`` into the unsharded ``model`` (the trainer
    shards it afterwards under FSDP)."""
    from safetensors.torch import load_file

    adapter = path / "adapter_model.safetensors"
    if adapter.exists():
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(model, load_file(str(adapter)))
        return
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise RolloutlabError(f"{path}: checkpoint has no weights (*.safetensors)")
    sd: dict[str, torch.Tensor] = {}
    for f in files:
        sd.update(load_file(str(f)))
    missing, unexpected = model.load_state_dict(sd, strict=False)
    tied = {k for k in missing if k.endswith("lm_head.weight")}
    if set(missing) - tied or unexpected:
        raise RolloutlabError(f"{path}: weights do not fit the model (missing {sorted(set(missing) - tied)[:5]}, unexpected {list(unexpected)[:5]})")
    if tied and hasattr(model, "tie_weights"):
        model.tie_weights()


def load_state(path: Path) -> dict[str, Any]:
    """The trainer state of checkpoint ``path`` (RNGs already restored); its ``optimizer`` is
    the full state keyed by parameter name (:func:`rolloutlab.train._parallel.optimizer_state`)."""
    f = path / STATE_FILE
    try:
        # tensors and plain containers only: a run directory may come from anyone, and a
        # pickle can run code when loaded
        state: dict[str, Any] = torch.load(f, weights_only=True)
    except pickle.UnpicklingError as e:
        raise RolloutlabError(
            f"{f}: refused to load, it holds more than tensors and plain data ({str(e).splitlines()[0][:200]}); "
            "checkpoints this version writes hold nothing else (one written before weights-only loading "
            "pickled numpy's RNG state and cannot be resumed): resume from a checkpoint written by this version"
        ) from None
    set_rng_state(state["rng"])
    return state
