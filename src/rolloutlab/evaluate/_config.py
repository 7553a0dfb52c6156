"""``EvalConfig``: one typed object for ``rolloutlab eval``, every field documented."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rolloutlab.io import RolloutlabError

Executor = Literal["asyncio", "ray"]

IDENTITY_FIELDS = ("env", "policy", "parser", "split", "seed", "max_turns", "max_tokens_per_turn",
                   "temperature", "top_p", "invalid_action_penalty")
"""Fields a resumed evaluation must share with the one it continues (``--episodes``,
``--samples``, ``--concurrency`` and the executor may change: finished episodes are kept)."""


@dataclass(frozen=True)
class EvalConfig:
    """A trainer-free evaluation: N tasks × K samples of one policy or of every checkpoint."""

    env: str
    """Environment reference: a registered id (``guess-number-v0``) or a remote one
    (``agentgym:NAME@URL``, ``openenv@URL``, ``rolloutlab@URL``)."""
    out: Path
    """Run directory to write (``eval/<checkpoint>/episodes.jsonl`` and ``summary.json``);
    re-running into the same directory resumes."""
    policy: str | None = None
    """``random``, ``scripted:NAME``, ``openai:BASE_URL:MODEL`` or ``hf:PATH``; exclusive
    with ``checkpoints``."""
    checkpoints: Path | None = None
    """A folder of checkpoints (``checkpoint-N``, ``global_step_N``, ``step_N`` or ``N``
    sub-folders), each evaluated as ``hf:<folder>``; exclusive with ``policy``."""
    parser: str | None = None
    """Action parser; ``None``: the environment's ``action_format``."""
    episodes: int = 100
    """N: tasks taken from the split (in the split's order under ``seed``)."""
    samples: int = 1
    """K: episodes per task; pass@k is reported for k = 1, 2, 4, ... up to K."""
    split: str = "test"
    """Task split of the environment."""
    seed: int = 0
    """Seeds the task order and each episode's ``reset`` and sampling seeds."""
    concurrency: int = 16
    """Episodes run at once."""
    executor: Executor = "asyncio"
    """``asyncio`` (one process) or ``ray`` (episodes fanned out over Ray workers)."""
    max_turns: int | None = None
    """Horizon; ``None``: the environment's ``max_turns``."""
    max_tokens_per_turn: int = 512
    """Per-turn token cap."""
    temperature: float = 1.0
    """Sampling temperature."""
    top_p: float = 1.0
    """Nucleus sampling threshold."""
    invalid_action_penalty: float | None = None
    """Reward of an unparseable reply (``None``: none)."""
    env_timeout_s: float = 60.0
    """Longest wait for one environment call."""
    env_retries: int = 2
    """Fresh-environment restarts of a failed episode before it is recorded as an error."""
    policy_retries: int = 3
    """Retries of a failed policy call (with exponential backoff)."""

    def __post_init__(self) -> None:
        if (self.policy is None) == (self.checkpoints is None):
            raise RolloutlabError("give exactly one of --policy and --checkpoints")
        if self.episodes < 1 or self.samples < 1:
            raise RolloutlabError(f"--episodes and --samples must be >= 1, got {self.episodes} and {self.samples}")
        if self.concurrency < 1:
            raise RolloutlabError(f"--concurrency must be >= 1, got {self.concurrency}")
        if self.executor not in ("asyncio", "ray"):
            raise RolloutlabError(f"--executor must be asyncio or ray, got {self.executor!r}")

    @property
    def ks(self) -> tuple[int, ...]:
        """The k of pass@k: powers of two below K, and K."""
        ks = [k for k in (1 << i for i in range(self.samples.bit_length())) if k < self.samples]
        return (*ks, self.samples)
