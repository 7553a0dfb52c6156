"""The environment contract: what an environment is, what ``reset`` and ``step`` return.

It follows Gymnasium's ``Env`` (``gymnasium/core.py``) where that fits text agents:
``terminated`` (the task ended by its own rules: solved, failed, gave up) is kept apart from
``truncated`` (a limit outside the task cut it: max turns, a time limit), seeding is part
of the contract, and ids are versioned (``textcraft-v0``).  It departs from Gymnasium in
three ways that multi-turn LLM agents need:

- **async**: ``reset``, ``step`` and ``close`` are coroutines, so hundreds of episodes run
  concurrently in one process and a remote environment is the same object as a local one;
- **messages, not arrays**: an observation is a list of chat messages to append to the
  conversation (``role`` ``user`` or ``tool``), plus ``anchor`` — the state described without
  history, which GiGPO groups identical states by (verl-agent's ``anchor`` observation);
- **reward may be unknown**: ``reward is None`` means the environment gave none for this
  step (not 0).  An episode whose grader failed is *ungraded*, never scored 0.

``close()`` is always called, also after an exception (the agent loop guarantees it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from rolloutlab.schema import Termination

Message = dict[str, Any]
"""A chat message: ``{"role": "system" | "user" | "assistant" | "tool", "content": str}``
(plus ``tool_call_id`` / ``name`` on tool results)."""

ActionFormat = Literal["text", "xml", "react", "search_r1", "tool_call", "hermes"]
"""How the model is asked to write its action; names the default action parser
(``rolloutlab.agent`` parsers): ``text`` the whole reply is the action, ``xml``
``<action>…</action>`` after optional ``<think>…</think>``, ``react`` ``Action: …``,
``search_r1`` ``<search>…</search>`` / ``<answer>…</answer>``, ``tool_call`` OpenAI tool
calls, ``hermes`` ``<tool_call>{json}</tool_call>`` blocks in the text."""


@dataclass(frozen=True)
class ToolInvocation:
    """A parsed tool call, the action of a tool-using environment."""

    name: str
    """Tool (function) name, one of the environment spec's ``tools``."""
    arguments: Mapping[str, Any]
    """Keyword arguments, already decoded from the model's JSON."""
    id: str | None = None
    """The call id the model or endpoint gave, echoed on the tool result message."""


Action = str | ToolInvocation
"""What ``step`` takes: the parsed action text of a text environment, or a tool call."""


@dataclass(frozen=True)
class Info:
    """What an environment reports besides the observation.  Declared fields only."""

    success: bool | None = None
    """The task was accomplished (by the environment's own rule); ``None`` when not (yet) known."""
    score: float | None = None
    """The environment's own task measure (e.g. WebShop's match score, F1), when it has one."""
    action_valid: bool | None = None
    """The last action was well-formed and admissible; ``None`` on reset."""
    available_actions: tuple[str, ...] | None = None
    """Admissible actions in this state, where the environment enumerates them (ALFWorld, WebShop)."""
    reward_components: Mapping[str, float] = field(default_factory=dict)
    """Named parts of the reward (``format``, ``correct``, ...), recorded on the trajectory."""
    metrics: Mapping[str, float] = field(default_factory=dict)
    """Numeric diagnostics (e.g. ``search_calls``), aggregated per step by the trainer."""
    extras: Mapping[str, Any] = field(default_factory=dict)
    """JSON-serialisable environment-specific data copied to ``Trajectory.extras`` at the end
    (e.g. code search's ``{"predicted": {level: [...]}, "gold": {level: [...]}}``)."""


@dataclass(frozen=True)
class Observation:
    """What ``reset`` returns: the messages that open the episode."""

    messages: tuple[Message, ...]
    """Messages to start the conversation with (a ``system`` and/or ``user`` message)."""
    anchor: str | None = None
    """The current state described without history (GiGPO step groups); ``None`` if the env has none."""
    info: Info = field(default_factory=Info)


@dataclass(frozen=True)
class StepResult:
    """What ``step`` returns."""

    messages: tuple[Message, ...]
    """New messages to append after the agent's action (``user`` or ``tool`` role); may be
    empty when the episode ended."""
    reward: float | None
    """Reward of this step alone (incremental, not cumulative).  ``None``: the environment gave
    none (not 0).  The episode reward is the sum of the non-None step rewards, unless the
    environment reports a final ``info.score``-based reward in its last step."""
    terminated: bool
    """The task ended by its own rules (solved, failed, the agent answered or gave up)."""
    truncated: bool
    """A limit outside the task cut the episode (the environment's own step/time limit)."""
    stop_reason: str | None = None
    """Why the episode ended, in a few words (``answered``, ``solved``, ``out_of_moves``);
    ``None`` while it goes on."""
    anchor: str | None = None
    """The new state without history (GiGPO); ``None`` if the env has none."""
    info: Info = field(default_factory=Info)


@dataclass(frozen=True)
class Task:
    """One task of an environment's split."""

    id: str
    """Stable id, unique within the environment, e.g. ``"test/17"``."""
    split: str
    """``train`` or ``test`` (or another split the spec declares)."""
    category: str | None = None
    """Difficulty, level or task type, for per-category summaries."""


@runtime_checkable
class Env(Protocol):
    """An environment instance: one episode at a time, ``reset`` → ``step``... → ``close``."""

    spec: EnvSpec

    async def reset(self, *, task: Task | str | None = None, seed: int | None = None) -> Observation:
        """Start an episode on ``task`` (a Task or its id; ``None``: one drawn with ``seed``).

        The same ``(task, seed)`` gives the same observation and, for the same actions, the
        same episode (determinism is checked by ``check_env``)."""
        ...

    async def step(self, action: Action) -> StepResult:
        """Apply the agent's action.  A malformed or inadmissible action is not an exception:
        it gives ``info.action_valid = False`` and an observation saying what is wrong."""
        ...

    async def close(self) -> None:
        """Release resources; always called, also after an error.  Idempotent."""
        ...


@dataclass(frozen=True)
class EnvSpec:
    """Declares an environment: id, limits, action format, tools, reward range, task splits."""

    id: str
    """Versioned id, ``name-vN`` (``textcraft-v0``)."""
    factory: Callable[..., Env]
    """Builds a fresh instance: ``factory(**kwargs) -> Env``."""
    description: str
    """One line for ``rolloutlab env list``."""
    max_turns: int
    """Default horizon (the agent loop may lower or raise it, e.g. ScalingInter-RL)."""
    action_format: ActionFormat
    """How actions are written; picks the default action parser."""
    reward_range: tuple[float, float]
    """Bounds of the episode reward (checked by ``check_env``)."""
    tasks: Callable[[str, int], Sequence[Task]]
    """``tasks(split, seed) -> tasks`` of that split, deterministic in ``seed``."""
    splits: tuple[str, ...] = ("train", "test")
    tools: tuple[Callable[..., Any], ...] = ()
    """Plain typed Python functions the agent may call (OpenAI tool schemas come from their
    signatures and docstrings, see :func:`tool_schema`)."""
    tool_specs: tuple[dict[str, Any], ...] = ()
    """OpenAI tool schemas given directly, for tools that are not Python functions here
    (a remote environment's).  The agent offers these plus the schemas of ``tools``."""
    has_anchor: bool = False
    """Observations carry ``anchor`` (GiGPO step-level groups need it)."""
    requires: tuple[str, ...] = ()
    """Optional packages or programs it needs (e.g. ``("scienceworld", "java")``)."""
    invalid_action_message: str | None = None
    """What the environment answers an action it cannot read, naming the format it expects;
    the agent loop sends it, after the parser's error, when a reply could not be parsed
    (``None``: the parser's own format hint)."""
    original: str | None = None
    """The benchmark or code it follows, with the version (``WebShop master 64fa2a5``);
    ``None`` for an environment of its own."""
    replayable: bool = True
    """Resetting on the same ``(task, seed)`` and stepping the recorded actions brings the
    environment back to any recorded state (what ``check_env``'s ``determinism`` checks);
    ``rolloutlab label --method mc`` continues episodes from such states.  ``False`` for an
    environment that cannot promise it (a live website): it is refused there with a message."""
    comparable: bool = False
    """Whether its scores are comparable to the original's published ones (same tasks, same
    scoring).  ``rolloutlab env list`` shows it next to ``original``."""

    def make(self, **kwargs: Any) -> Env:
        return self.factory(**kwargs)


EnvFactory = Callable[..., Env]
AsyncCloser = Callable[[], Awaitable[None]]


def termination_of(
    *, terminated: bool, truncated: bool, turns: int, max_turns: int, error: bool = False
) -> Termination:
    """The one mapping from an episode's end to ``Trajectory.termination``.

    ``error`` wins (the episode could not be completed); then the task's own end (``done``);
    then the environment's own limit (``truncated``); then the agent loop's horizon
    (``max_turns``).  An episode cut by the loop's horizon is ``max_turns`` even if the env
    never truncates by itself."""
    if error:
        return "error"
    if terminated:
        return "done"
    if truncated:
        return "truncated"
    if turns >= max_turns:
        return "max_turns"
    return "aborted"


def info_to_json(info: Info) -> dict[str, Any]:
    """``Info`` as plain JSON (tuples become lists), for servers and trajectory extras."""
    d = dataclasses.asdict(info)
    if d["available_actions"] is not None:
        d["available_actions"] = list(d["available_actions"])
    return d
