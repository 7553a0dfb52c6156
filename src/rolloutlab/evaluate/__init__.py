"""Trainer-free evaluation of a policy or of every checkpoint of a run (``rolloutlab eval``).

Reuses :mod:`rolloutlab.agent` and :mod:`rolloutlab.envs`; never imports ``train``.
"""

from rolloutlab.evaluate._checkpoints import Checkpoint, find_checkpoints
from rolloutlab.evaluate._config import IDENTITY_FIELDS, EvalConfig
from rolloutlab.evaluate._run import PARTIAL, Progress, episode_seed, run_eval
from rolloutlab.evaluate._summary import successes, summarize

__all__ = [
    "IDENTITY_FIELDS",
    "PARTIAL",
    "Checkpoint",
    "EvalConfig",
    "Progress",
    "episode_seed",
    "find_checkpoints",
    "run_eval",
    "successes",
    "summarize",
]
