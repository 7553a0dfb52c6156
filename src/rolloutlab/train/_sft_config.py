"""``rolloutlab sft``'s configuration: one frozen :class:`SFTConfig`, every field documented.

Built like :class:`~rolloutlab.train.TrainConfig`: a YAML preset (``configs/sft_*.yaml``)
plus ``key=value`` overrides with dotted keys; unknown keys are refused with the valid ones,
``__post_init__`` refuses impossible values naming the fix.  The model section is the
trainer's own :class:`ModelConfig` (``model.path``, ``model.tiny``, ``model.lora.*``), so an
SFT checkpoint and an RL one describe their model the same way.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rolloutlab.train._config import (
    ConfigError,
    ModelConfig,
    _build,
    _to_dict,
    _unknown,
    apply_overrides,
    config_keys,
    read_preset,
)

__all__ = ["SFTConfig", "load_sft_config"]

Weighting = Literal["mask", "advantage", "return"]


@dataclass(frozen=True)
class SFTConfig:
    """Supervised fine-tuning on an exported dataset (``rolloutlab export``)."""

    name: str = "sft"
    """Run name (``run.json``)."""
    seed: int = 0
    """Seed of the tiny model's init and of the row order."""
    env_id: str | None = None
    """Environment the data came from; picks the tiny model's tokenizer (``model.tiny``).
    ``None``: the dataset's ``export.json`` says (``env``)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """The model to fine-tune (the trainer's section: ``model.path``, ``model.tiny``,
    ``model.lora.enabled``, ``model.lora.r`` ...)."""
    weight: Weighting = "mask"
    """Per-token loss weight on thought + action tokens (state tokens always weigh 0):
    ``mask`` 1; ``advantage`` the row's ``advantage``; ``return`` the row's ``return_``."""
    max_seq_len: int = 4096
    """Tokens per row at most: a longer row loses its oldest state tokens (the action is
    kept; an action alone longer than this is cut at its end).  Counted and reported."""
    epochs: int = 1
    """Passes over the dataset."""
    batch_size: int = 16
    """Rows per optimizer step."""
    micro_batch_size: int = 0
    """Rows per forward/backward (gradient accumulation); 0: the whole batch."""
    lr: float = 1e-5
    """AdamW learning rate (constant after warm-up)."""
    warmup_steps: int = 0
    """Linear warm-up from 0 over this many optimizer steps."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    grad_clip: float | None = 1.0
    """Max global gradient norm; ``None``: no clipping."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, about a third more time)."""
    save_every: int = 0
    """Checkpoint every this many optimizer steps (and at the end); 0: only at the end."""
    save_initial: bool = False
    """Also write the model before training as ``checkpoints/step_000000`` (so that
    ``eval --checkpoints`` compares the start with the fine-tuned model in one table)."""
    threads: int = 2
    """``torch.set_num_threads`` on the CPU."""
    progress: bool = True
    """A progress bar on a terminal, one line per logged step otherwise; ``false``: quiet."""

    def __post_init__(self) -> None:
        for key in ("max_seq_len", "epochs", "batch_size", "threads"):
            if getattr(self, key) < 1:
                raise ConfigError(f"{key} must be >= 1, got {getattr(self, key)}")
        if self.micro_batch_size < 0:
            raise ConfigError(f"micro_batch_size must be >= 0 (0: no accumulation), got {self.micro_batch_size}")
        if self.lr <= 0:
            raise ConfigError(f"lr must be > 0, got {self.lr}")
        if self.warmup_steps < 0 or self.save_every < 0:
            raise ConfigError("warmup_steps and save_every must be >= 0")
        if not self.model.tiny and not self.model.path:
            raise ConfigError("model.path is required (a local model folder), or set model.tiny=true for the CPU tiny model")

    def to_dict(self) -> dict[str, Any]:
        """Plain data, as saved in ``run.json``."""
        out: dict[str, Any] = _to_dict(self)
        return out


def _check_keys(data: Mapping[str, Any], prefix: str, valid: Sequence[str], source: str) -> None:
    for k, v in data.items():
        key = prefix + str(k)
        if isinstance(v, Mapping) and any(x.startswith(key + ".") for x in valid):
            _check_keys(v, key + ".", valid, source)
        elif key not in valid:
            raise _unknown(key, valid, source)


def load_sft_config(path: str | Path | None, overrides: Sequence[str] = ()) -> SFTConfig:
    """A preset (YAML file or ``configs/`` name) plus overrides; ``path`` None: defaults."""
    data, source = read_preset(path)
    merged = apply_overrides(data, overrides, SFTConfig, example="lr=4e-5")
    _check_keys(merged, "", config_keys(SFTConfig), source)
    return typing.cast(SFTConfig, _build(SFTConfig, merged, prefix="", source=source))
