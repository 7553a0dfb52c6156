"""The multi-turn agent loop: one episode of a policy in an environment, recorded exactly.

``run_episode`` resets the environment, then per turn asks the policy for a reply, parses
the action, steps the environment, and records the turn, until the environment ends the
episode (``terminated`` / ``truncated``) or the horizon ``max_turns`` is reached.  It
returns an :class:`Episode`: the :class:`rolloutlab.schema.Trajectory` in the run format
(per-turn rewards and anchors in its turns) and — when the policy works in token ids — the
training samples.  ``run_episodes`` runs many concurrently (asyncio, bounded by a semaphore) and
returns them in job order.

Token-in, token-out (the invariant, ``_tokens.TokenTrack``)
-----------------------------------------------------------
With ``policy.tokenizer`` set, the loop keeps a *running* id sequence ``R`` and the policy
continues exactly ``R`` each turn:

1. Turn 0: ``R = render(messages, add_generation_prompt=True)``; a sample opens with that
   prompt.
2. The policy samples ids ``S`` (with log-probabilities).  ``S`` is appended to the
   sample's response as is — mask 1, the sampler's log-probs — never decoded and
   re-encoded.  ``R = R + S``.  The reply's text (decoded from ``S``) goes into the message
   history for the parser and the record.
3. The environment answers with messages ``M``.  Render ``A = render(history incl. the
   reply, add_generation_prompt=False)`` and ``B = render(history + M,
   add_generation_prompt=True)``, and check, token for token, that ``A`` starts with ``R``
   (the template re-renders the earlier turns and the sampled ids identically) and ``B``
   starts with ``A`` (the new messages do not rewrite earlier turns).  If both hold, the
   ids ``B[len(R):]`` — template tokens that close the reply but were not sampled (a
   newline after ``<|im_end|>``), the observation, the next generation prompt — are
   appended with mask 0 and log-prob 0.0, and ``R = B``.  The sampled ids are thus part
   of ``R`` verbatim and ``R == prompt + sampled + observation deltas`` exactly.
4. If a check fails, the current sample is closed (it keeps ``S`` as sampled) and a new
   sample opens at the next turn with prompt ``B``: ``template_rewrite`` when rendering
   changed tokens before ``S`` or a later message rewrote earlier turns (Qwen3's template
   strips ``<think>`` from earlier assistant turns), ``retokenization_drift`` when the
   decoded reply re-encodes to other ids than ``S``.  Training on the merged sequence
   would train on a prompt the model never saw (verl#3960, prime-rl#1334); the breaks are
   recorded in ``Trajectory.extras["token_breaks"]``.

Mask-0 tokens carry the index of the turn they follow in ``turn_index``.

Invalid actions
---------------
A reply the parser cannot read is *not* sent to the environment: the environment's state
does not change for a formatting slip, so its own action-validity rules stay its own.
The loop answers with a corrective ``user`` message (the parser's error, then the
environment's ``EnvSpec.invalid_action_message`` naming the format it expects, or else the
parser's format hint), records the turn with ``action_valid = False`` and ``reward =
invalid_action_penalty`` (``None`` when no penalty is set), and the turn counts toward
``max_turns``.  An action the environment itself rejects comes back with
``info.action_valid = False`` and is recorded as such.

Failure semantics
-----------------
- Environment: ``reset``/``step`` raising, taking longer than ``env_timeout_s``, or
  returning malformed data (not an Observation/StepResult, messages that are not chat
  messages, a non-finite reward, ``info.metrics`` / ``info.reward_components`` values that
  are not finite numbers, ``info.extras`` that is not plain JSON), or step rewards whose sum
  falls outside ``spec.reward_range`` (the bound ``env check`` applies) restarts the whole episode with a fresh environment
  (nothing is replayed), up to ``env_retries`` times; then the episode ends with
  ``termination = "error"``, ``graded = False``, ``reward = None`` and the reason in
  ``error``.  ``close()`` is always called (bounded by ``env_timeout_s``; a failing close
  is recorded in ``extras["close_errors"]``, it does not fail a finished episode), except
  after a call that timed out (below).  In-process environments run on a thread of their
  own, one per running episode (an idle one is kept for a later episode;
  :class:`~rolloutlab.envs._thread.EnvThread`), so one that blocks inside ``async def``
  (``time.sleep``, a long computation) is cut at ``env_timeout_s`` too, while the other
  episodes and signal handling go on (its ``close()`` is then not called: the timed-out call
  still runs there; ``extras["close_errors"]`` says so); classes marked
  :func:`~rolloutlab.envs._thread.async_io_only` (the remote clients) stay on this loop.
- Policy: an exception, a timeout (``policy_timeout_s``) or a malformed generation is
  retried ``policy_retries`` times with exponential backoff; then the episode ends as an
  error as above.  Every failed call is listed in ``extras["policy_errors"]``, also when a
  retry succeeded.  A prompt that no longer fits the model's context
  (:class:`~rolloutlab.errors.PromptTooLong`) is not retried: that episode alone ends as an
  error.  Episodes are never dropped and never scored 0 for a failure.
- Replay: a recorded prefix (:class:`ReplayPrefix`) whose observations differ from the
  recorded ones raises :class:`~rolloutlab.envs.ReplayDiverged` out of ``run_episode``
  (never retried: a nondeterministic environment cannot be continued from a state).
- Interrupts (SIGINT / SIGTERM, :class:`~rolloutlab.errors.Interrupted`) are never caught
  here: they stop the run.

Episode reward
--------------
The sum of the non-``None`` step rewards (invalid-action penalties included).  When no
step gave a reward: an episode cut by the horizon or truncated gets 0.0 (the task was not
accomplished), one the environment ended without any reward is ungraded (its grader gave
nothing).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from rolloutlab.agent._parsers import Parsed, format_hint, get_parser
from rolloutlab.agent._settings import LoopConfig
from rolloutlab.agent._tokens import TokenTrack, turn_tokens
from rolloutlab.agent._types import Episode, GenerateRequest, Generation, Policy, TokenSample
from rolloutlab.envs import (
    ASYNC_IO_ONLY,
    NEVER_BLOCKS,
    Action,
    Env,
    EnvSpec,
    EnvThread,
    Info,
    Message,
    Observation,
    StepResult,
    Task,
    ToolInvocation,
    check_observation,
    observation_text,
    termination_of,
)
from rolloutlab.errors import PromptTooLong
from rolloutlab.outcomes import rule_for_range
from rolloutlab.schema import ToolCall, Trajectory, Turn

__all__ = ["EpisodeJob", "LoopConfig", "ReplayPrefix", "run_episode", "run_episodes"]


@dataclass(frozen=True)
class ReplayPrefix:
    """Recorded turns played back before the policy takes over: an episode continued from
    the middle (Monte-Carlo step values, ``rolloutlab label --method mc``).

    The environment is reset on the recorded ``(task, seed)`` and stepped with the actions
    parsed from the recorded replies, exactly as the loop did when it recorded them; the
    observation before each replayed turn is checked against the recorded one and the first
    difference raises :class:`~rolloutlab.envs.ReplayDiverged` (not retried: the
    environment, not the attempt, is at fault).  With a tokenizer, a replayed reply's ids
    are the chat template's rendering of its text (log-prob 0.0: it was not sampled here)."""

    replies: tuple[Generation, ...]
    """Each recorded reply (its text, and the tool calls an endpoint parsed, if any)."""
    observations: tuple[str | None, ...]
    """``Turn.observation`` of each replayed turn (``None``: not checked)."""
    sample_seed: int | None = None
    """Seeds the policy's sampling after the prefix (each continuation its own), in place
    of the episode seed, which stays the environment's reset seed."""


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to run (the arguments of :func:`run_episode` besides policy and config)."""

    env_factory: Callable[[], Env]
    """Builds a fresh environment (called again for each retry)."""
    task: Task
    seed: int | None
    """Seed of ``reset`` (and of the policy's sampling, per turn)."""
    step: int
    """``Trajectory.step``: the optimizer step or checkpoint step."""
    traj_id: str
    group_id: str | None = None
    sample_idx: int | None = None
    policy_version: int | None = None
    prefix: ReplayPrefix | None = None
    """Recorded turns to play back before the policy acts (see :class:`ReplayPrefix`)."""


class _EnvFailure(Exception):
    """The environment raised, hung or returned malformed data (the episode restarts)."""


class _PolicyFailure(Exception):
    """The policy failed after its retries (the episode ends as an error)."""


_ROLES = frozenset({"system", "user", "assistant", "tool"})


def _check_messages(messages: Any, where: str) -> tuple[Message, ...]:
    if not isinstance(messages, tuple | list):
        raise _EnvFailure(f"{where} returned malformed data: messages is {type(messages).__name__}, not a list")
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or m.get("role") not in _ROLES or not isinstance(m.get("content"), str):
            raise _EnvFailure(
                f"{where} returned malformed data: message {i} is not a chat message "
                f"{{'role': system|user|assistant|tool, 'content': str}} (got {str(m)[:80]!r})"
            )
    return tuple(dict(m) for m in messages)


def _check_step(res: Any) -> StepResult:
    if not isinstance(res, StepResult):
        raise _EnvFailure(f"env.step returned malformed data: {type(res).__name__}, not StepResult")
    _check_messages(res.messages, "env.step")
    r = res.reward
    if r is not None and (isinstance(r, bool) or not isinstance(r, int | float) or not math.isfinite(r)):
        raise _EnvFailure(f"env.step returned malformed data: reward {r!r} is not a finite number or None")
    if not isinstance(res.terminated, bool) or not isinstance(res.truncated, bool):
        raise _EnvFailure("env.step returned malformed data: terminated/truncated must be bool")
    _check_info(res.info, "env.step")
    return res


def _check_info(info: Any, where: str) -> Info:
    """``info`` as the record needs it: numbers where numbers are declared, extras that the
    trajectory writer can serialise (else the step file would fail to write, not the episode)."""
    if not isinstance(info, Info):
        raise _EnvFailure(f"{where} returned malformed data: info is {type(info).__name__}, not Info")
    for name in ("reward_components", "metrics"):
        values = getattr(info, name)
        if not isinstance(values, Mapping):
            raise _EnvFailure(f"{where} returned malformed data: info.{name} is {type(values).__name__}, not a dict")
        for k, v in values.items():
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise _EnvFailure(f"{where} returned malformed data: info.{name}[{str(k)[:40]!r}] = "
                                  f"{str(v)[:40]!r} is not a finite number")
    try:
        orjson.dumps(info.extras)  # what the trajectory writer does with it (io._rundir)
    except TypeError as e:
        raise _EnvFailure(f"{where} returned malformed data: info.extras is not plain JSON ({e})") from None
    return info


def _check_generation(gen: Any, tokenized: bool) -> Generation:
    if not isinstance(gen, Generation):
        raise ValueError(f"policy returned {type(gen).__name__}, not Generation")
    if not isinstance(gen.text, str):
        raise ValueError(f"policy returned text of type {type(gen.text).__name__}")
    if gen.finish_reason == "error":
        raise ValueError("policy reported finish_reason 'error'")
    if tokenized:
        if gen.token_ids is None or gen.logprobs is None:
            raise ValueError("a policy with a tokenizer must return token_ids and logprobs")
        if len(gen.token_ids) != len(gen.logprobs):
            raise ValueError(f"token_ids ({len(gen.token_ids)}) and logprobs ({len(gen.logprobs)}) differ in length")
        if any(not math.isfinite(x) for x in gen.logprobs):
            raise ValueError("policy returned non-finite logprobs")
    return gen


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _clean(text: str) -> str:
    """Text safe to write as JSON: lone surrogates (from binary decoded with surrogateescape)
    become U+FFFD."""
    return text.encode("utf-8", "replace").decode("utf-8") if not text.isascii() else text


_joined = observation_text  # Turn.observation: the one definition, shared with envs' replay check


def _turn_seed(seed: int | None, turn: int) -> int | None:
    return None if seed is None else zlib.crc32(f"{seed}/{turn}".encode()) & 0x7FFFFFFF


def _action_text(a: Action) -> str:
    if isinstance(a, ToolInvocation):
        return f"{a.name}({json.dumps(dict(a.arguments), ensure_ascii=False, default=str)})"
    return _clean(a)


@dataclass
class _State:
    """What one attempt of an episode has gathered so far (also recorded when it fails)."""

    prompt: list[Message] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    timings: list[dict[str, float]] = field(default_factory=list)
    policy_versions: list[int] = field(default_factory=list)
    components: dict[str, float] = field(default_factory=dict)
    env_extras: dict[str, Any] = field(default_factory=dict)
    env_metrics: dict[str, float] = field(default_factory=dict)
    policy_errors: list[str] = field(default_factory=list)
    """Each failed policy call of this attempt (``turn N: reason``), retried or not."""
    env_reward: float | None = None
    """The sum of the environment's step rewards (no invalid-action penalties): what
    ``EnvSpec.reward_range`` bounds; None while it gave none."""
    terminated: bool = False
    truncated: bool = False
    stop_reason: str | None = None
    success: bool | None = None
    invalid: int = 0
    tool_calls: int = 0
    response_tokens: int = 0
    response_counted: bool = True
    last_text: str | None = None
    tokens: TokenTrack | None = None


class _Episode:
    """Runs one attempt of one episode; the caller owns retries and the record."""

    def __init__(self, env: Env, policy: Policy, task: Task, seed: int | None, config: LoopConfig,
                 prefix: ReplayPrefix | None = None, *, key: str, thread: EnvThread | None) -> None:
        self.env, self.policy, self.task, self.seed, self.config = env, policy, task, seed, config
        self.prefix = prefix
        self.sample_seed = prefix.sample_seed if prefix is not None and prefix.sample_seed is not None else seed
        self.key = key
        """The episode's id: each turn's draw is ``GenerateRequest.sample_key = f"{key}/{turn}"``."""
        self.thread = thread
        """Where the environment's coroutines run (``None``: on this loop)."""
        self.inline = type(env) in NEVER_BLOCKS
        spec: EnvSpec = env.spec
        self.max_turns = config.max_turns or spec.max_turns
        self.parser_name = config.parser or spec.action_format
        self.parser = get_parser(self.parser_name)
        self.tools = _tool_schemas(spec)
        self.state = _State()

    async def _env(self, what: str, coro: Any) -> Any:
        try:
            if self.inline:  # a timeout could never fire: the call does not await
                return await coro
            async with asyncio.timeout(self.config.env_timeout_s):  # no extra task, unlike wait_for
                return await (coro if self.thread is None else self.thread.run(coro))
        except TimeoutError:
            raise _EnvFailure(f"env.{what} did not answer within {self.config.env_timeout_s:g}s") from None
        except _EnvFailure:
            raise
        except Exception as e:
            raise _EnvFailure(f"env.{what} raised {type(e).__name__}: {_clean(str(e))[:500]}") from e

    async def _generate(self, request: GenerateRequest) -> Generation:
        c = self.config
        delay = c.policy_backoff_s
        errors: list[str] = []
        for attempt in range(c.policy_retries + 1):
            try:
                async with asyncio.timeout(c.policy_timeout_s):
                    gen = await self.policy.generate(request)
                return _check_generation(gen, self.state.tokens is not None)
            except TimeoutError:
                errors.append(f"timed out after {c.policy_timeout_s:g}s")
            except PromptTooLong as e:  # the same prompt would fail again: not retried
                raise _PolicyFailure(f"the conversation outgrew the model: {e}") from None
            except Exception as e:
                errors.append(f"{type(e).__name__}: {_clean(str(e))[:300]}")
            # every failed call is kept, also when a retry then succeeds (a flaky endpoint shows)
            self.state.policy_errors.append(f"turn {len(self.state.turns)}: {errors[-1]}")
            if attempt < c.policy_retries:
                await asyncio.sleep(delay)
                delay = min(delay * 2, c.policy_backoff_max_s)
        raise _PolicyFailure(f"policy failed {_times(len(errors))}; last: {errors[-1]}")

    async def run(self) -> None:
        st = self.state
        obs = await self._env("reset", self.env.reset(task=self.task, seed=self.seed))
        if not isinstance(obs, Observation):
            raise _EnvFailure(f"env.reset returned malformed data: {type(obs).__name__}, not Observation")
        history = list(_check_messages(obs.messages, "env.reset"))
        _check_info(obs.info, "env.reset")
        st.prompt = [dict(m) for m in history]
        # what the environment says at reset (task type, gold sets) counts even if it is never
        # stepped, e.g. when every reply is unparseable; later steps' extras update it
        st.env_extras.update(obs.info.extras)
        if self.policy.tokenizer is not None:
            st.tokens = TokenTrack(self.policy.tokenizer, history)
        seen, anchor, admissible = list(history), obs.anchor, obs.info.available_actions
        for t in range(self.max_turns):
            t0 = time.perf_counter()
            if self.prefix is not None and t < len(self.prefix.replies):
                expected = self.prefix.observations[t] if t < len(self.prefix.observations) else None
                check_observation(self.env.spec.id, self.task.id, t, expected, _joined(seen))
                gen = self._replayed(self.prefix.replies[t], history)
            else:
                request = GenerateRequest(
                    messages=tuple(history), prompt_ids=st.tokens.prompt() if st.tokens else None,
                    max_tokens=self.config.max_tokens_per_turn, temperature=self.config.temperature,
                    top_p=self.config.top_p, tools=self.tools, seed=_turn_seed(self.sample_seed, t),
                    sample_key=f"{self.key}/{t}",
                    available_actions=tuple(admissible) if admissible is not None else None,
                )
                gen = await self._generate(request)
            policy_s = time.perf_counter() - t0
            if st.tokens is not None:
                assert gen.token_ids is not None and gen.logprobs is not None  # _check_generation
                st.tokens.add_sampled(gen.token_ids, gen.logprobs, t)
            history.append(_assistant_message(gen))
            parsed = self.parser(gen)
            t1 = time.perf_counter()
            new, reward, valid, results = await self._act(parsed)
            st.timings.append({"policy_s": round(policy_s, 6), "env_s": round(time.perf_counter() - t1, 6)})
            done = st.terminated or st.truncated
            self._record(t, gen, parsed, seen, anchor, new, reward, valid, done, results)
            if results:
                anchor, admissible = results[-1].anchor, results[-1].info.available_actions
            if done or t + 1 >= self.max_turns:
                break
            if st.tokens is not None:
                st.tokens.add_observation(history, new, t)
            history.extend(new)
            seen = new
        lo, hi = self.env.spec.reward_range
        if st.env_reward is not None and not lo - 1e-9 <= st.env_reward <= hi + 1e-9:  # env check's tolerance
            raise _EnvFailure(f"env.step rewards sum to {st.env_reward:g}, outside the declared reward_range "
                              f"{self.env.spec.reward_range}")

    def _replayed(self, reply: Generation, history: Sequence[Message]) -> Generation:
        """A recorded reply as this run's generation: with a tokenizer, the ids the template
        gives its text after the generation prompt (so the running ids stay the template's)."""
        tok = self.policy.tokenizer
        if tok is None:
            return dataclasses.replace(reply, token_ids=None, logprobs=None)
        before = tok.render(history, add_generation_prompt=True)
        after = tok.render([*history, _assistant_message(reply)], add_generation_prompt=False)
        ids = tuple(after[len(before):])
        return dataclasses.replace(reply, token_ids=ids, logprobs=(0.0,) * len(ids))

    async def _act(self, parsed: Parsed) -> tuple[list[Message], float | None, bool, list[StepResult]]:
        """Step the environment with the parsed actions (not at all when there are none)."""
        st = self.state
        if not parsed.valid:
            st.invalid += 1
            hint = self.env.spec.invalid_action_message or format_hint(self.parser_name)
            msg = {"role": "user", "content": f"Your reply could not be read: {parsed.error}. {hint}".strip()}
            return [msg], self.config.invalid_action_penalty, False, []
        new: list[Message] = []
        rewards: list[float] = []
        valid = True
        results: list[StepResult] = []
        for action in parsed.actions:
            res = _check_step(await self._env("step", self.env.step(action)))
            results.append(res)
            new.extend(dict(m) for m in res.messages)
            if res.reward is not None:
                rewards.append(float(res.reward))
                st.env_reward = (st.env_reward or 0.0) + float(res.reward)
            info = res.info
            if info.action_valid is False:
                valid = False
            if info.success is not None:
                st.success = info.success
            for k, v in info.reward_components.items():
                st.components[k] = st.components.get(k, 0.0) + float(v)
            for k, v in info.metrics.items():  # the last value: metrics may be running counts
                st.env_metrics[k] = float(v)
            st.env_extras.update(info.extras)
            if isinstance(action, ToolInvocation):
                st.tool_calls += 1
            if res.terminated or res.truncated:
                st.terminated, st.truncated, st.stop_reason = res.terminated, res.truncated, res.stop_reason
                break
        if not valid:
            st.invalid += 1
        return new, (sum(rewards) if rewards else None), valid, results

    def _record(
        self, t: int, gen: Generation, parsed: Parsed, seen: Sequence[Message], anchor: str | None,
        new: Sequence[Message], reward: float | None, valid: bool, done: bool, results: list[StepResult],
    ) -> None:
        st = self.state
        if gen.policy_version is not None:
            st.policy_versions.append(gen.policy_version)
        ntok = len(gen.token_ids) if gen.token_ids is not None else None
        if ntok is None:
            st.response_counted = False
        else:
            st.response_tokens += ntok
        st.last_text = _clean(gen.text)
        calls = [a for a in parsed.actions if isinstance(a, ToolInvocation)] if parsed.valid else []
        st.turns.append(Turn(
            turn_idx=t, observation=_joined(seen), anchor_obs=anchor, thought=_clean(parsed.thought) if parsed.thought else None,
            action=_clean(gen.text),
            parsed_action="\n".join(_action_text(a) for a in parsed.actions) if parsed.valid else None,
            tool_calls=[_tool_call_record(c, new) for c in calls],
            action_valid=valid, reward=reward, done=done, tokens=ntok, finish_reason=gen.finish_reason,
        ))


def _assistant_message(gen: Generation) -> Message:
    msg: Message = {"role": "assistant", "content": gen.text}
    if gen.tool_calls:
        msg["tool_calls"] = [
            {"id": c.id or f"call_{i}", "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments), default=str)}}
            for i, c in enumerate(gen.tool_calls)
        ]
    return msg


def _tool_call_record(call: ToolInvocation, new: Sequence[Message]) -> ToolCall:
    result = next((str(m.get("content")) for m in new if m.get("role") == "tool" and call.id is not None
                   and m.get("tool_call_id") == call.id), None)
    return ToolCall(name=call.name, arguments=json.dumps(dict(call.arguments), ensure_ascii=False, default=str),
                    id=call.id, result=_clean(result) if result is not None else None)


def _tool_schemas(spec: EnvSpec) -> tuple[dict[str, Any], ...]:
    """The tools offered to the model: schemas of the spec's functions, then its given schemas."""
    if not spec.tools:
        return tuple(spec.tool_specs)
    from rolloutlab.envs import tool_schema

    return (*(tool_schema(f) for f in spec.tools), *spec.tool_specs)


def _reward(st: _State, termination: str) -> tuple[float | None, str | None]:
    """Episode reward and, when ungraded, why (see the module docstring)."""
    given = [u.reward for u in st.turns if u.reward is not None]
    if given:
        return float(sum(given)), None
    if termination in ("max_turns", "truncated"):
        return 0.0, None
    return None, "the environment ended the episode without giving a reward"


async def run_episode(
    env_factory: Callable[[], Env],
    policy: Policy,
    task: Task,
    *,
    config: LoopConfig,
    seed: int | None,
    step: int,
    traj_id: str,
    group_id: str | None = None,
    sample_idx: int | None = None,
    policy_version: int | None = None,
    prefix: ReplayPrefix | None = None,
) -> Episode:
    """Run one episode; never raises for environment or policy failures (see the module
    docstring): a failed episode comes back with ``termination = "error"``, ungraded."""
    attempt_errors: list[str] = []
    close_errors: list[str] = []
    runner: _Episode | None = None
    error: str | None = None
    env_id: str | None = None
    for _attempt in range(config.env_retries + 1):
        try:
            env = env_factory()
        except Exception as e:
            attempt_errors.append(f"env factory raised {type(e).__name__}: {_clean(str(e))[:300]}")
            continue
        # in-process environment code runs on a thread of its own: one that blocks cannot
        # hold this loop (timeouts, other episodes, signals) past env_timeout_s
        thread = None if type(env) in ASYNC_IO_ONLY else EnvThread.lease()
        try:
            runner = _Episode(env, policy, task, seed, config, prefix, key=traj_id, thread=thread)
            env_id = env.spec.id
            await runner.run()
            error = None
            break
        except _EnvFailure as e:
            error = str(e)
            attempt_errors.append(error)
        except _PolicyFailure as e:
            error = str(e)
            break
        finally:
            if thread is not None and not await thread.settled(min(1.0, config.env_timeout_s)):
                # a call that timed out is still running there: closing it from here would race
                # with that call, and would queue behind it for another env_timeout_s
                close_errors.append("close not called: an environment call that timed out is still running "
                                    "(its thread is abandoned)")
            else:
                try:
                    async with asyncio.timeout(config.env_timeout_s):
                        await (env.close() if thread is None else thread.run(env.close()))
                except Exception as e:  # recorded: a close failure does not undo the episode
                    close_errors.append(f"{type(e).__name__}: {_clean(str(e))[:200]}")
            if thread is not None:
                thread.release()  # a blocked thread is abandoned (daemon): Python cannot stop it
    else:
        error = f"environment failed {_times(len(attempt_errors))}; last: {attempt_errors[-1]}" if attempt_errors else error
    return _episode(runner, config, task=task, seed=seed, step=step, traj_id=traj_id, group_id=group_id,
                    sample_idx=sample_idx, policy_version=policy_version, error=error, env_id=env_id,
                    attempt_errors=attempt_errors, close_errors=close_errors, model=policy.name)


def _episode(
    runner: _Episode | None, config: LoopConfig, *, task: Task, seed: int | None, step: int, traj_id: str,
    group_id: str | None, sample_idx: int | None, policy_version: int | None, error: str | None,
    env_id: str | None, attempt_errors: list[str], close_errors: list[str], model: str | None,
) -> Episode:
    st = runner.state if runner is not None else _State()
    max_turns = runner.max_turns if runner is not None else (config.max_turns or 0)
    termination = termination_of(terminated=st.terminated, truncated=st.truncated, turns=len(st.turns),
                                 max_turns=max_turns, error=error is not None)
    reward, ungraded_why = (None, error) if error is not None else _reward(st, termination)
    if policy_version is None and st.policy_versions:
        policy_version = min(st.policy_versions)
    extras: dict[str, Any] = dict(st.env_extras)
    extras.update({
        "env_id": env_id, "env_seed": seed, "task_category": task.category, "parser": runner.parser_name if runner else config.parser,
        "max_turns": max_turns, "stop_reason": st.stop_reason,
        "timings": st.timings, "policy_version": policy_version,
    })
    if st.env_metrics:
        extras["env_metrics"] = st.env_metrics
    if attempt_errors:
        extras["attempt_errors"] = attempt_errors  # each failed attempt's reason, also when a retry succeeded
    if close_errors:
        extras["close_errors"] = close_errors
    if st.policy_errors:
        extras["policy_errors"] = st.policy_errors
    success = st.success if reward is not None else None
    if reward is not None and success is None and runner is not None:
        # the environment reported no success: decide it now by the one rule, from the
        # declared reward range, so every later reader sees the same answer (outcomes._success)
        rule = rule_for_range(*runner.env.spec.reward_range)
        success = rule.decide(reward, None)
        extras["success_rule"] = rule.text
    samples: list[TokenSample] = []
    if st.tokens is not None:
        extras["token_breaks"] = st.tokens.breaks
        if error is None:
            samples = st.tokens.finish()
            if config.record_tokens:
                for t, data in turn_tokens(samples, st.tokens.tokenizer).items():
                    if t < len(st.turns):
                        st.turns[t].token_data = data
    traj = Trajectory(
        traj_id=traj_id, step=step, split=config.split, group_id=group_id, sample_idx=sample_idx,
        task_id=task.id, data_source=env_id, model=model, prompt=st.prompt or None, response=st.last_text,
        reward=reward, reward_components=st.components, success=success,
        graded=reward is not None, termination=termination, error=ungraded_why,
        num_turns=len(st.turns), prompt_tokens=st.tokens.prompt_tokens if st.tokens else None,
        response_tokens=st.response_tokens if st.response_counted and st.turns else None,
        tool_calls=st.tool_calls, invalid_actions=st.invalid, turns=st.turns, extras=extras,
    )
    return Episode(trajectory=traj, samples=samples)


async def run_episodes(
    jobs: Sequence[EpisodeJob],
    policy: Policy,
    *,
    config: LoopConfig,
    progress: Callable[[Episode], None] | None = None,
) -> list[Episode]:
    """Run ``jobs`` with at most ``config.concurrency`` episodes at once; results in job order.
    ``progress(episode)`` is called as each episode finishes (in completion order).

    The one way many episodes are run: the trainer's step, the evaluation and each Ray
    worker (:func:`rolloutlab.agent._executor.run_ray`) all call it."""
    sem = asyncio.Semaphore(config.concurrency)

    async def one(job: EpisodeJob) -> Episode:
        async with sem:
            ep = await run_episode(
                job.env_factory, policy, job.task, config=config, seed=job.seed, step=job.step,
                traj_id=job.traj_id, group_id=job.group_id, sample_idx=job.sample_idx,
                policy_version=job.policy_version, prefix=job.prefix,
            )
        if progress is not None:
            progress(ep)
        return ep

    return list(await asyncio.gather(*(one(j) for j in jobs)))
