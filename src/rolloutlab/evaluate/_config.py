"""``EvalConfig``: one typed object for ``rolloutlab eval``, every field documented; the
command's options are generated from it (``rolloutlab.cli.eval``).

The loop settings are the trainer's type, :class:`rolloutlab.agent.LoopConfig`, held inline
as ``loop``: its fields read as the evaluation's own (``--max-turns``, ``--concurrency``).
This module stays light (no environments, no pydantic): the command line imports it to
build its options.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rolloutlab.agent import INLINE, NOT_A_SETTING, LoopConfig
from rolloutlab.io import RolloutlabError

Executor = Literal["asyncio", "ray"]

IDENTITY_FIELDS = ("env", "policy", "parser", "split", "seed", "max_turns", "max_tokens_per_turn",
                   "temperature", "top_p", "invalid_action_penalty")
"""Settings a resumed evaluation must share with the one it continues, by their flat names
(``parser`` and the ones after ``seed`` are ``loop``'s); ``--episodes``, ``--samples``,
``--concurrency``, the executor, timeouts and retries may change: finished episodes are kept."""


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
    episodes: int = 100
    """N: tasks taken from the split (in the split's order under ``seed``)."""
    samples: int = 1
    """K: episodes per task; pass@k is reported for k = 1, 2, 4, ... up to K."""
    split: str = "test"
    """Task split of the environment."""
    seed: int = 0
    """Seeds the task order and each episode's ``reset`` and sampling seeds."""
    executor: Executor = "asyncio"
    """``asyncio`` (one process) or ``ray`` (episodes fanned out over Ray workers)."""
    loop: LoopConfig = field(default_factory=lambda: LoopConfig(split="eval"), metadata=INLINE)
    """The loop settings (horizon, parser, sampling, concurrency, timeouts, retries), shared
    with the trainer; the defaults are :class:`~rolloutlab.agent.LoopConfig`'s."""
    checkpoint_generation: bool = True
    """Sample an ``hf:`` model (and each checkpoint) with its own ``generation_config.json``:
    its token cap per turn, temperature and top-p (a rolloutlab checkpoint records its run's)
    replace the defaults of ``--max-tokens``, ``--temperature`` and ``--top-p``; a flag given
    still wins.  Off: the flags' values, defaults included."""
    given: frozenset[str] = field(default=frozenset(), metadata=NOT_A_SETTING)
    """Loop settings given explicitly (the command line's flags), which a checkpoint's
    generation settings do not replace."""

    def __post_init__(self) -> None:
        if (self.policy is None) == (self.checkpoints is None):
            raise RolloutlabError("give exactly one of --policy and --checkpoints")
        if self.episodes < 1 or self.samples < 1:
            raise RolloutlabError(f"--episodes and --samples must be >= 1, got {self.episodes} and {self.samples}")
        if self.loop.split != "eval":  # the records of an evaluation are eval records, whoever built the loop
            object.__setattr__(self, "loop", dataclasses.replace(self.loop, split="eval"))
        if self.executor not in ("asyncio", "ray"):
            raise RolloutlabError(f"--executor must be asyncio or ray, got {self.executor!r}")

    @property
    def ks(self) -> tuple[int, ...]:
        """The k of pass@k: powers of two below K, and K."""
        ks = [k for k in (1 << i for i in range(self.samples.bit_length())) if k < self.samples]
        return (*ks, self.samples)
