"""Typed records of the data model (DESIGN.md §1), as written to disk.

Everything a run directory holds is one of these pydantic models, so that a bad field is
refused with its name and value where it is read.  The store keeps the same fields as
Arrow columns (see ``_arrow.py``); text lives in the ``texts`` table apart from numbers.

Ungraded is not zero: ``Trajectory.graded`` is false when the grader or the environment
failed, and then ``reward`` is ``None`` — never a silent 0.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rolloutlab.schema._constants import FORMAT_VERSION

Split = Literal["train", "val", "eval"]
Termination = Literal["done", "truncated", "max_turns", "error", "aborted"]
RunStatus = Literal["running", "finished", "aborted", "unknown"]
FinishReason = Literal["stop", "length", "tool_calls", "error"]
"""Why the policy stopped writing a turn: it ended its reply (``stop``, EOS or a stop
string), it hit the per-turn token cap (``length``), it handed over tool calls
(``tool_calls``), or the endpoint reported a failure (``error``)."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class ToolCall(_Record):
    """One tool call an agent made in a turn."""

    name: str
    arguments: str | None = Field(None, description="Arguments as the model wrote them (usually JSON).")
    id: str | None = None
    result: str | None = Field(None, description="What the tool returned, when it is known.")


class TurnTokens(_Record):
    """The tokens of one turn as the trainer saw them (every array has one entry per token).

    The turn's tokens are the ones the policy sampled (``loss_mask`` 1), then the tokens
    that follow them up to the next reply and that were not sampled (``loss_mask`` 0: the
    template tokens closing the reply, the environment's answer, the next generation
    prompt).  The arrays are aligned: entry ``i`` of each describes token ``i``.  Log-probs,
    advantages and entropies are 0.0 on mask-0 tokens (nothing was sampled or trained
    there), as in the trainer's tensors.  Writers may round the floats (rolloutlab writes 4
    decimal places)."""

    ids: list[int] | None = Field(default=None, description="Token ids, in order.")
    text: list[str] | None = Field(
        default=None, description="Each token's text piece (special tokens may be empty; a piece may hold part of a character).")
    loss_mask: list[int] | None = Field(
        default=None, description="1 for a token the policy sampled and the trainer trains on, 0 for the others; null: unknown.")
    logprobs: list[float] | None = Field(default=None, description="The sampler's log-probability of each token (0.0 on mask 0).")
    trainer_logprobs: list[float] | None = Field(
        default=None, description="The trainer's log-probability of each token under the weights that sampled it (before the "
                          "step's update; 0.0 on mask 0).")
    advantages: list[float] | None = Field(default=None, description="The advantage each token was trained with (0.0 on mask 0).")
    entropies: list[float] | None = Field(
        default=None, description="Entropy of the trainer's next-token distribution at each token, in nats (0.0 on mask 0).")

    @model_validator(mode="after")
    def _aligned(self) -> TurnTokens:
        if self.ids is None and self.text is None:
            raise ValueError("token data needs the token ids or their text pieces (ids or text)")
        n: int | None = None
        for name in ("ids", "text", "loss_mask", "logprobs", "trainer_logprobs", "advantages", "entropies"):
            v = getattr(self, name)
            if v is None:
                continue
            if n is None:
                n, first = len(v), name
            elif len(v) != n:
                raise ValueError(f"token arrays must be aligned: len({name}) = {len(v)} but len({first}) = {n}")
        for i, m in enumerate(self.loss_mask or ()):
            if m not in (0, 1):
                raise ValueError(f"loss_mask[{i}] must be 0 or 1, got {m!r}")
        for name in ("logprobs", "trainer_logprobs", "advantages", "entropies"):
            for i, x in enumerate(getattr(self, name) or ()):
                if not math.isfinite(x):
                    raise ValueError(f"{name}[{i}] must be finite, got {x!r}")
        return self

    @property
    def size(self) -> int:
        """Number of tokens."""
        return len(self.ids if self.ids is not None else self.text or ())


class Turn(_Record):
    """One agent action and what the environment answered."""

    turn_idx: int = Field(ge=0, description="Position of the turn in its trajectory, from 0.")
    observation: str | None = Field(None, description="What the agent saw before acting, incl. tool results.")
    anchor_obs: str | None = Field(None, description="The observation without history (GiGPO step groups).")
    thought: str | None = None
    action: str | None = Field(None, description="The raw text the agent produced.")
    parsed_action: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    action_valid: bool | None = None
    reward: float | None = Field(None, description="Per-turn (process) reward; null when none was given.")
    done: bool | None = None
    tokens: int | None = Field(None, ge=0, description="Tokens the agent generated in this turn.")
    entropy: float | None = None
    finish_reason: FinishReason | None = Field(default=None, description="Why the policy stopped writing this turn.")
    token_data: TurnTokens | None = Field(
        default=None, description="The turn's tokens, loss mask, log-probs and advantages (written when the loop records "
                          "tokens; see TurnTokens).")
    extras: dict[str, Any] | None = Field(
        default=None, description="Per-turn annotations, e.g. a process-reward label (`label`) and the environment's own "
        "reward it replaced (`env_reward`), written by `rolloutlab label`.")

    @field_validator("reward", "entropy")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError(f"must be finite, got {v!r}")
        return v


class Trajectory(_Record):
    """One episode: a prompt, what the agent did, and how it was graded."""

    traj_id: str
    step: int = Field(ge=0, description="Optimizer step (or checkpoint) that produced it.")
    split: Split = "train"
    group_id: str | None = Field(None, description="GRPO group: the same task sampled n times.")
    sample_idx: int | None = Field(None, ge=0)
    task_id: str | None = None
    data_source: str | None = None
    model: str | None = Field(None, description="The model that produced it, when known (one run may mix models).")
    prompt: str | list[dict[str, Any]] | None = Field(None, description="Text, or chat messages.")
    response: str | None = None
    reward: float | None = Field(None, description="Final reward; null when ungraded.")
    reward_components: dict[str, float] = Field(default_factory=dict)
    success: bool | None = None
    graded: bool = True
    termination: Termination | None = None
    error: str | None = None
    num_turns: int | None = Field(None, ge=0)
    prompt_tokens: int | None = Field(None, ge=0)
    response_tokens: int | None = Field(None, ge=0)
    tool_calls: int | None = Field(None, ge=0)
    invalid_actions: int | None = Field(None, ge=0)
    turns: list[Turn] = Field(default_factory=list)
    extras: dict[str, Any] = Field(default_factory=dict)

    @field_validator("reward")
    @classmethod
    def _finite_reward(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError(f"reward must be finite, got {v!r} (an unscorable episode is ungraded: reward null, graded false)")
        return v

    @field_validator("reward_components")
    @classmethod
    def _finite_components(cls, v: dict[str, float]) -> dict[str, float]:
        for k, x in v.items():
            if not math.isfinite(x):
                raise ValueError(f"reward component {k!r} must be finite, got {x!r}")
        return v

    @model_validator(mode="after")
    def _graded_has_reward(self) -> Trajectory:
        if self.graded and self.reward is None:
            raise ValueError("a graded trajectory needs a reward; set graded=false when the grader failed")
        if not self.graded and self.reward is not None:
            raise ValueError("an ungraded trajectory has no reward (got reward with graded=false)")
        return self


class MetricsRecord(_Record):
    """One line of ``metrics.jsonl``: the trainer's scalars at one step."""

    step: int = Field(ge=0)
    split: Split = "train"
    metrics: dict[str, float | None]


class Run(_Record):
    """Identity, configuration and status of a run (``run.json``)."""

    format_version: str = FORMAT_VERSION
    run_id: str
    name: str
    source: str = Field("rolloutlab", description="Which format it came from.")
    config: dict[str, Any] = Field(default_factory=dict)
    model: str | None = None
    algorithm: str | None = None
    env: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    status: RunStatus = "running"
    last_step: int | None = None
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


class EvalSummary(_Record):
    """``eval/<checkpoint>/summary.json``: aggregates of a trainer-free evaluation."""

    checkpoint: str
    step: int | None = None
    episodes: int
    graded: int
    mean_reward: float | None
    success_rate: float | None = None
    pass_at_k: dict[str, float] = Field(default_factory=dict)
    per_category: dict[str, dict[str, float]] = Field(default_factory=dict)
    mean_turns: float | None = Field(None, description="Mean number of turns over all episodes.")
    ungraded_rate: float | None = Field(None, description="Share of episodes without a grade (errors included).")
    zero_variance_frac: float | None = Field(
        None, description="Share of tasks with two or more graded samples whose rewards are equal (rolloutlab.outcomes).")
    terminations: dict[str, int] = Field(default_factory=dict, description="Episodes per termination.")
    env: str | None = None
    policy: str | None = None
    split: str | None = Field(None, description="The environment's task split evaluated (e.g. test).")
    samples: int | None = Field(None, ge=1, description="K: episodes per task.")
    invalid_action_rate: float | None = Field(
        None, description="Invalid actions per turn, over the episodes that record both (rolloutlab.outcomes).")
    length_cut_rate: float | None = Field(
        None, description="Share of the turns whose reply reached the token cap per turn (cut by length; rolloutlab.outcomes).")
    max_tokens_per_turn: int | None = Field(
        None, ge=1, description="The token cap per turn the episodes were sampled with (a checkpoint's own, unless given).")
    temperature: float | None = Field(None, ge=0, description="The sampling temperature of the episodes (0: greedy).")
