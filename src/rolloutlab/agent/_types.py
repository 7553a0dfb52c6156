"""The seams of the agent loop: policies, tokenizers, and what an episode yields for training.

Token-in, token-out is an invariant: the loop keeps the exact token ids a policy sampled
and the sampler's log-probabilities, appends observation tokens with loss mask 0, and never
re-tokenises decoded text to rebuild the history.  A policy that cannot give token ids
(a hosted API without them) still runs episodes for evaluation, but its episodes carry no
:class:`TokenSample` and cannot be trained on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rolloutlab.envs import Message, ToolInvocation
from rolloutlab.schema import FinishReason, Trajectory


@runtime_checkable
class ChatTokenizer(Protocol):
    """Renders chat messages to token ids (a chat template) and decodes ids to text."""

    eos_token_id: int
    """The token that ends an assistant turn."""

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool) -> list[int]:
        """Token ids of ``messages`` under the chat template; with ``add_generation_prompt``
        the ids end where the assistant's reply begins."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids`` (special tokens removed)."""
        ...


@dataclass(frozen=True)
class GenerateRequest:
    """One call to a policy: continue this conversation."""

    messages: tuple[Message, ...]
    """The conversation so far (for text-only backends and for logging)."""
    prompt_ids: tuple[int, ...] | None
    """Token-in: the exact ids to continue.  ``None`` for policies without a tokenizer."""
    max_tokens: int
    """Per-turn token cap (the trainer may change it per step)."""
    temperature: float = 1.0
    top_p: float = 1.0
    tools: tuple[dict[str, Any], ...] = ()
    """OpenAI tool schemas offered to the model."""
    stop: tuple[str, ...] = ()
    seed: int | None = None
    """Sent to endpoints that take one (derived from the environment's seed and the turn)."""
    sample_key: str | None = None
    """Names this draw: ``"{traj_id}/{turn}"`` (set by the agent loop).  A local sampler
    seeds the draw from its own seed and this key, so a reply does not depend on which
    batch it landed in, its row there, or the order in which episodes asked; ``None``: the
    policy's shared generator (order-dependent)."""
    available_actions: tuple[str, ...] | None = None
    """Admissible actions the environment listed for this state (``Info.available_actions``),
    for policies that choose among them (random, scripted); ``None`` when it lists none."""


@dataclass(frozen=True)
class Generation:
    """What a policy produced for one request."""

    text: str
    """The reply as text (decoded from ``token_ids`` when those exist)."""
    token_ids: tuple[int, ...] | None
    """Token-out: the exact sampled ids, ending with EOS when the reply stopped there."""
    logprobs: tuple[float, ...] | None
    """The sampler's log-probability of each sampled id (same length as ``token_ids``)."""
    finish_reason: FinishReason
    tool_calls: tuple[ToolInvocation, ...] = ()
    """Tool calls the endpoint parsed itself (OpenAI ``tool_calls``); empty otherwise."""
    policy_version: int | None = None
    """Version of the weights that sampled it (the trainer's step), when known."""


@runtime_checkable
class Policy(Protocol):
    """Anything that answers a conversation: an endpoint, a local model, a script."""

    name: str
    tokenizer: ChatTokenizer | None
    """Present when the policy works in token ids (required for training)."""

    async def generate(self, request: GenerateRequest) -> Generation: ...

    async def close(self) -> None: ...


class TrainablePolicy(Policy, Protocol):
    """What the trainer samples with (the local :class:`~rolloutlab.agent.HFPolicy`, or
    ``train``'s server client): a policy in token ids that keeps a generation clock, can be
    reseeded, and hears of each checkpoint — declared here so that the trainer needs no
    ``hasattr``."""

    policy_version: int | None
    """Stamped on every generation (the step whose weights sampled it, minus one)."""
    gen_seconds: float
    """Wall time spent generating so far (the trainer's ``timing/generation_s``)."""

    def reseed(self, seed: int) -> None:
        """Seed sampling (deterministic runs reseed every step); a no-op where sampling runs
        elsewhere."""
        ...

    def after_save(self, checkpoint: Path) -> None:
        """A checkpoint was written to ``checkpoint`` (a server reloads its weights); a no-op
        for a local model, which already samples with the trained weights."""
        ...

    def sampler_state(self) -> Any:
        """What a checkpoint keeps of the sampler (a local generator's state), or None."""
        ...


@dataclass
class TokenSample:
    """One training sample: prompt ids, then response ids with a loss mask.

    Invariants (checked by the loop, relied on by the trainer):
    ``len(response_ids) == len(loss_mask) == len(sampler_logprobs) == len(turn_index)``;
    ``loss_mask[i] == 1`` exactly for tokens the policy sampled; observation tokens (what the
    environment said, and template tokens around it) have mask 0 and logprob 0.0.
    An episode is one sample unless the chat template rewrote earlier turns (then a new
    sample starts at that turn, its prompt being the re-rendered history)."""

    prompt_ids: list[int]
    response_ids: list[int]
    loss_mask: list[int]
    sampler_logprobs: list[float]
    turn_index: list[int]
    """Per response token: the turn it belongs to (per-turn advantages, GiGPO step groups)."""
    first_turn: int = 0
    """Index of the first turn in this sample."""


@dataclass
class Episode:
    """One finished episode: its record in the run format, plus the token data only
    training needs.

    The record is the one source of everything per turn: per-turn rewards are
    ``trajectory.turns[t].reward`` and GiGPO's anchor states ``trajectory.turns[t].anchor_obs``
    (``None`` where the environment gave none), read there by the trainer as by the
    analysis of a written run."""

    trajectory: Trajectory
    samples: list[TokenSample] = field(default_factory=list)
    """Token-level samples; empty when the policy has no tokenizer or the episode failed."""
