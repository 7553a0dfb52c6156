"""Token-in, token-out bookkeeping of one episode (the algorithm is in ``_loop``'s docstring).

:class:`TokenTrack` holds the running token sequence the policy continues and the
:class:`TokenSample` list of the episode.  Sampled ids are appended exactly as the sampler
returned them and are never re-encoded; everything else (observation and template tokens)
comes from rendering the conversation with the chat template and taking the part beyond
the running sequence, after checking that the rendering extends it token for token.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rolloutlab.agent._types import ChatTokenizer, TokenSample
from rolloutlab.envs import Message
from rolloutlab.schema import TurnTokens

__all__ = ["TOKEN_DIGITS", "TokenTrack", "check_token_sample", "turn_positions", "turn_tokens"]

TOKEN_DIGITS = 4
"""Decimal places of the floats written into ``Turn.token_data`` (1e-4 nats is far below the
sampler/trainer gaps worth seeing, and keeps a token's record near 50 bytes)."""


def turn_positions(samples: Sequence[TokenSample]) -> dict[int, list[tuple[int, int]]]:
    """Per turn index, the ``(sample, position)`` pairs of its response tokens, in order.

    A turn's tokens are its sampled ids, then the mask-0 tokens that follow them in the same
    sample (``turn_index`` gives each token's turn); a sample break after a turn leaves that
    turn only its sampled ids (the observation is in the next sample's prompt)."""
    out: dict[int, list[tuple[int, int]]] = {}
    for k, s in enumerate(samples):
        for i, t in enumerate(s.turn_index):
            out.setdefault(t, []).append((k, i))
    return out


def turn_tokens(samples: Sequence[TokenSample], tokenizer: ChatTokenizer) -> dict[int, TurnTokens]:
    """``Turn.token_data`` of each turn that has tokens: ids, each id's text piece
    (``tokenizer.decode([id])``), loss mask and sampler log-probs (rounded to :data:`TOKEN_DIGITS`)."""
    pieces: dict[int, str] = {}
    out: dict[int, TurnTokens] = {}
    for t, pos in turn_positions(samples).items():
        ids = [samples[k].response_ids[i] for k, i in pos]
        for x in ids:
            if x not in pieces:
                pieces[x] = tokenizer.decode([x])
        out[t] = TurnTokens(
            ids=ids, text=[pieces[x] for x in ids], loss_mask=[samples[k].loss_mask[i] for k, i in pos],
            logprobs=[round(samples[k].sampler_logprobs[i], TOKEN_DIGITS) + 0.0 for k, i in pos],
        )
    return out


def check_token_sample(s: TokenSample) -> None:
    """Raise ``ValueError`` naming the broken invariant of ``s`` (see :class:`TokenSample`)."""
    n = len(s.response_ids)
    for name in ("loss_mask", "sampler_logprobs", "turn_index"):
        if len(getattr(s, name)) != n:
            raise ValueError(f"TokenSample: len({name}) = {len(getattr(s, name))} != len(response_ids) = {n}")
    for i, (m, lp) in enumerate(zip(s.loss_mask, s.sampler_logprobs, strict=True)):
        if m not in (0, 1):
            raise ValueError(f"TokenSample: loss_mask[{i}] = {m!r}, must be 0 or 1")
        if m == 0 and lp != 0.0:
            raise ValueError(f"TokenSample: sampler_logprobs[{i}] = {lp!r} on a mask-0 token, must be 0.0")
        if not math.isfinite(lp) or lp > 0.0:
            raise ValueError(f"TokenSample: sampler_logprobs[{i}] = {lp!r}, must be finite and <= 0")
    if any(t < s.first_turn for t in s.turn_index) or s.turn_index != sorted(s.turn_index):
        raise ValueError(f"TokenSample: turn_index must be non-decreasing from first_turn {s.first_turn}")


class TokenTrack:
    """The running ids of one episode and its samples.

    Invariant: before each generation, ``running == render(history, add_generation_prompt=True)``
    for the current sample (true by construction at a sample's start, kept by
    :meth:`add_observation`), and ``running == prompt_ids + response_ids`` of that sample."""

    def __init__(self, tokenizer: ChatTokenizer, messages: Sequence[Message]) -> None:
        self.tokenizer = tokenizer
        self.samples: list[TokenSample] = []
        self.breaks: list[dict[str, object]] = []
        """Where a new sample started and why (``template_rewrite`` / ``retokenization_drift``)."""
        self.running: list[int] = []
        self._gen_start = 0
        self._open(tokenizer.render(list(messages), add_generation_prompt=True), turn=0)

    @property
    def prompt_tokens(self) -> int:
        """Length of the episode's first prompt."""
        return len(self.samples[0].prompt_ids)

    def _open(self, prompt_ids: list[int], turn: int) -> None:
        self.samples.append(TokenSample(list(prompt_ids), [], [], [], [], first_turn=turn))
        self.running = list(prompt_ids)

    def prompt(self) -> tuple[int, ...]:
        """The exact ids the policy continues this turn."""
        return tuple(self.running)

    def add_sampled(self, ids: Sequence[int], logprobs: Sequence[float], turn: int) -> None:
        """Append the sampled ids exactly, mask 1, with the sampler's log-probabilities."""
        s = self.samples[-1]
        self._gen_start = len(self.running)
        s.response_ids.extend(ids)
        s.loss_mask.extend([1] * len(ids))
        s.sampler_logprobs.extend(float(x) for x in logprobs)
        s.turn_index.extend([turn] * len(ids))
        self.running.extend(ids)

    def add_observation(self, history: Sequence[Message], new: Sequence[Message], turn: int) -> str | None:
        """Extend the running ids with what follows the assistant turn ``turn``.

        ``history`` ends with that assistant message; ``new`` are the messages that answer it.
        Returns ``None`` when the ids were extended in place, else the reason a new sample
        was started (its prompt is the re-rendered ``history + new``)."""
        after = self.tokenizer.render(list(history), add_generation_prompt=False)
        nxt = self.tokenizer.render([*history, *new], add_generation_prompt=True)
        n = len(self.running)
        reason: str | None = None
        if after[: self._gen_start] != self.running[: self._gen_start]:
            reason = "template_rewrite"  # rendering the reply changed what came before it
        elif after[:n] != self.running:
            reason = "retokenization_drift"  # the sampled ids do not re-render identically
        elif nxt[: len(after)] != after:
            reason = "template_rewrite"  # a later message rewrote earlier turns (Qwen3 <think>)
        if reason is not None:
            self.breaks.append({"turn": turn + 1, "reason": reason})
            self._open(nxt, turn=turn + 1)
            return reason
        delta = nxt[n:]  # template tokens closing the reply, the observation, the next generation prompt
        s = self.samples[-1]
        s.response_ids.extend(delta)
        s.loss_mask.extend([0] * len(delta))
        s.sampler_logprobs.extend([0.0] * len(delta))
        s.turn_index.extend([turn] * len(delta))
        self.running.extend(delta)
        return None

    def finish(self) -> list[TokenSample]:
        """The samples, each checked; a sample with no response (a break after the last
        turn cannot happen, but an episode that failed before sampling can) is dropped."""
        out = [s for s in self.samples if s.response_ids]
        for s in out:
            check_token_sample(s)
        return out
