"""Multi-turn agentic RL training: config, loop, loss, checkpoints (``rolloutlab train``)."""

from rolloutlab.train._config import (
    ESTIMATORS,
    ConfigError,
    TrainConfig,
    config_keys,
    load_config,
)
from rolloutlab.train._loop import Trainer, TrainResult, horizon_at, resume, train

__all__ = [
    "ESTIMATORS",
    "ConfigError",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "config_keys",
    "horizon_at",
    "load_config",
    "resume",
    "train",
]
