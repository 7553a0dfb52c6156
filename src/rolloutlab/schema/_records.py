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


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class ToolCall(_Record):
    """One tool call an agent made in a turn."""

    name: str
    arguments: str | None = Field(None, description="Arguments as the model wrote them (usually JSON).")
    id: str | None = None
    result: str | None = Field(None, description="What the tool returned, when it is known.")


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
