"""Multi-turn agentic RL training: config, loop, loss, checkpoints (``rolloutlab train``)."""

from rolloutlab.train._config import (
    ESTIMATORS,
    ConfigError,
    TrainConfig,
    config_keys,
    load_config,
)
from rolloutlab.train._loop import Trainer, TrainResult, horizon_at, resume, train
from rolloutlab.train._sft import (
    SFTExample,
    SFTResult,
    load_rows,
    sft,
    tokenize_row,
    weighted_ce,
    weighted_ce_slow,
)
from rolloutlab.train._sft_config import SFTConfig, load_sft_config

__all__ = [
    "ESTIMATORS",
    "ConfigError",
    "SFTConfig",
    "SFTExample",
    "SFTResult",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "config_keys",
    "horizon_at",
    "load_config",
    "load_rows",
    "load_sft_config",
    "resume",
    "sft",
    "tokenize_row",
    "train",
    "weighted_ce",
    "weighted_ce_slow",
]
