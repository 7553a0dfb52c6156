"""The loop settings (:class:`LoopConfig`) and the tiny model's shape (:class:`TinyModelConfig`):
the one declaration of each, held by the trainer's and the evaluation's configs.

Both are *inline* sections of their holders (``field(metadata=INLINE)``): their fields read
as the holder's own, so the trainer's keys stay ``rollout.max_turns`` and
``model.hidden_size`` and the evaluation's flags stay ``--max-turns``.  :func:`settings`
lists a config's settable fields that way, :func:`from_flat` builds one from them.

This module imports nothing heavy: the command line builds its options from it.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["INLINE", "NOT_A_SETTING", "LoopConfig", "TinyModelConfig", "from_flat", "settings"]

INLINE: Mapping[str, bool] = {"inline": True}
"""Field metadata: a nested config whose fields read as the holder's own."""
NOT_A_SETTING: Mapping[str, bool] = {"setting": False}
"""Field metadata: set by the code holding the config, not by a config file or a flag."""


@dataclass(frozen=True)
class LoopConfig:
    """How episodes are run: horizon, parsing, sampling, concurrency, timeouts and retries.

    Frozen: change a field per call with ``dataclasses.replace``.  The trainer holds one as
    ``rollout`` (keys ``rollout.max_turns``, ...), the evaluation as ``loop`` (flags
    ``--max-turns``, ...); the defaults here are the evaluation's, the trainer declares its own
    (``rolloutlab.train.RolloutConfig``)."""

    max_turns: int | None = None
    """Horizon: the most agent turns per episode (``None``: the environment spec's
    ``max_turns``).  The trainer may change it per step (ScalingInter-RL)."""
    max_tokens_per_turn: int = 512
    """Per-turn token cap passed to the policy (``GenerateRequest.max_tokens``)."""
    parser: str | None = None
    """Action parser name (``text``, ``xml``, ``react``, ``search_r1``, ``tool_call``,
    ``hermes``); ``None``: the environment spec's ``action_format``.  A local model writes
    tool calls in its text, so tool-calling environments take ``hermes`` there."""
    invalid_action_penalty: float | None = None
    """Reward of a turn whose reply could not be parsed (verl-agent uses -0.1); ``None``: no
    reward for that turn."""
    temperature: float = 1.0
    """Sampling temperature (the trainer scores log-probs at the same temperature)."""
    top_p: float = 1.0
    """Nucleus sampling threshold."""
    concurrency: int = 16
    """Episodes run at once (a local model batches their requests, so this also bounds its
    batch)."""
    env_timeout_s: float = 60.0
    """Longest wait for one ``reset``/``step``/``close`` before the environment counts as hung."""
    env_retries: int = 2
    """How many times a failed episode restarts with a fresh environment before it is an error."""
    policy_timeout_s: float = 600.0
    """Longest wait for one policy call before it counts as failed (and is retried)."""
    policy_retries: int = 3
    """Retries of a failed policy call (exception, timeout, malformed generation)."""
    policy_backoff_s: float = 0.5
    """First wait before a policy retry; doubles each retry, up to ``policy_backoff_max_s``."""
    policy_backoff_max_s: float = 30.0
    """Longest wait between policy retries."""
    record_tokens: bool = True
    """Write each turn's tokens into its record (``Turn.token_data``: ids, text pieces, loss
    mask, sampler log-probs; the trainer adds its log-probs, entropies and advantages), for
    the viewer's token view.  About 50 bytes per token with the trainer's fields (the demo's step
    files grow 1.5x); only a policy in token ids has any."""
    split: Literal["train", "eval"] = field(default="train", metadata=NOT_A_SETTING)
    """``Trajectory.split`` of the records: the trainer writes ``train``, the evaluation
    ``eval``."""

    def __post_init__(self) -> None:
        from rolloutlab.io import RolloutlabError

        if self.max_turns is not None and self.max_turns < 1:
            raise RolloutlabError(f"max_turns must be >= 1, got {self.max_turns}")
        if self.max_tokens_per_turn < 1:
            raise RolloutlabError(f"max_tokens_per_turn must be >= 1, got {self.max_tokens_per_turn}")
        if self.concurrency < 1:
            raise RolloutlabError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.env_retries < 0 or self.policy_retries < 0:
            raise RolloutlabError(f"env_retries and policy_retries must be >= 0, got {self.env_retries} and "
                                  f"{self.policy_retries}")
        if self.env_timeout_s <= 0 or self.policy_timeout_s <= 0:
            raise RolloutlabError(f"env_timeout_s and policy_timeout_s must be > 0, got {self.env_timeout_s} and "
                                  f"{self.policy_timeout_s}")
        if self.parser is not None:
            from rolloutlab.agent._parsers import get_parser

            get_parser(self.parser)


@dataclass(frozen=True)
class TinyModelConfig:
    """Shape of the tiny randomly initialised ``Qwen2ForCausalLM`` (``rolloutlab.agent._hf.
    tiny_model``; the trainer's ``model.tiny``): about 75k parameters at vocabulary 16."""

    hidden_size: int = 64
    """Width of the residual stream."""
    num_layers: int = 2
    """Transformer blocks."""
    num_heads: int = 4
    """Attention heads (key/value heads: the same number)."""
    intermediate_size: int = 128
    """Width of the MLP."""
    max_positions: int = 4096
    """Longest sequence (prompt + every turn) the model accepts.  4096, the trainer's need: a
    multi-turn episode of a byte-tokenised environment (one id per byte) passes 512 ids within
    a few turns, and the sampler refuses a sequence longer than this.  The positions are
    rotary, so the number adds no parameters and does not change the initialisation."""


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def settings(cls: type, prefix: str = "") -> Iterator[tuple[str, dataclasses.Field[Any], Any]]:
    """The settable leaf fields of the config class ``cls``: ``(name, field, type)``, inline
    sections read as their holder's fields, fields marked :data:`NOT_A_SETTING` left out.
    Nested (non-inline) sections are yielded as one field of their dataclass type."""
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init or not f.metadata.get("setting", True):
            continue
        if f.metadata.get("inline"):
            yield from settings(typing.cast(type, hints[f.name]), prefix)
        else:
            yield prefix + f.name, f, hints[f.name]


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def from_flat(cls: type, values: Mapping[str, Any]) -> Any:
    """An instance of ``cls`` from flat ``values`` (a field of an inline section by its own
    name); an inline section starts from its default in ``cls``, so the holder's own defaults
    for it stay (the trainer's ``concurrency=1024`` when a preset sets only
    ``max_tokens_per_turn``).  Unknown names raise ``KeyError``."""
    hints = _hints(cls)
    left = dict(values)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.metadata.get("inline"):
            own = {name for name, _, _ in settings(typing.cast(type, hints[f.name]))}
            picked = {k: left.pop(k) for k in list(left) if k in own}
            kwargs[f.name] = dataclasses.replace(_default(f), **picked)
        elif f.name in left:
            kwargs[f.name] = left.pop(f.name)
    if left:
        raise KeyError(", ".join(sorted(left)))
    return cls(**kwargs)
