"""In-memory fakes for the agent-loop tests: a guess-a-number environment with fault
injection, character-level chat tokenizers (stable, <think>-stripping, merging), and a
token policy scripted by message history."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from rolloutlab.agent import GenerateRequest, Generation
from rolloutlab.envs import Action, EnvSpec, Info, Message, Observation, StepResult, Task

# ---------------------------------------------------------------------------- environment


def _tasks(split: str, seed: int) -> list[Task]:
    return [Task(id=f"{split}/{i}", split=split, category="easy" if i % 2 else "hard") for i in range(8)]


class FakeGuessEnv:
    """Guess a number in 0..7: ``higher`` / ``lower`` hints, reward 1.0 when guessed (ends),
    0.0 otherwise.  Faults (per instance): ``raise_at`` / ``hang_at`` / ``malformed_at`` a
    step index, ``fail_reset``; ``closed`` counts ``close`` calls."""

    instances: ClassVar[list[FakeGuessEnv]] = []

    def __init__(self, *, raise_at: int | None = None, hang_at: int | None = None,
                 malformed_at: int | None = None, fail_reset: bool = False, max_turns: int = 6,
                 target: int | None = None) -> None:
        self.spec = EnvSpec(id="fake-guess-v0", factory=FakeGuessEnv, description="fake", max_turns=max_turns,
                            action_format="text", reward_range=(0.0, 1.0), tasks=_tasks, has_anchor=True)
        self.raise_at, self.hang_at, self.malformed_at, self.fail_reset = raise_at, hang_at, malformed_at, fail_reset
        self.fixed_target = target
        self.steps = 0
        self.closed = 0
        self.actions: list[Action] = []
        FakeGuessEnv.instances.append(self)

    async def reset(self, *, task: Task | str | None = None, seed: int | None = None) -> Observation:
        if self.fail_reset:
            raise RuntimeError("reset exploded")
        tid = task.id if isinstance(task, Task) else (task or "train/0")
        self.target = self.fixed_target if self.fixed_target is not None else random.Random(f"{tid}/{seed}").randrange(8)
        self.steps = 0
        return Observation(messages=({"role": "system", "content": "Guess a number 0-7."},
                                     {"role": "user", "content": "Your guess?"}), anchor="start")

    async def step(self, action: Action) -> StepResult:
        i = self.steps
        self.steps += 1
        self.actions.append(action)
        if self.raise_at == i:
            raise ValueError("step exploded")
        if self.hang_at == i:
            await asyncio.sleep(3600)
        if self.malformed_at == i:
            return "not a step result"  # type: ignore[return-value]
        try:
            g = int(str(action).strip())
        except ValueError:
            return StepResult(messages=({"role": "user", "content": "Not a number."},), reward=0.0,
                              terminated=False, truncated=False, anchor=f"invalid@{i}",
                              info=Info(action_valid=False))
        if g == self.target:
            return StepResult(messages=(), reward=1.0, terminated=True, truncated=False, stop_reason="solved",
                              anchor="solved", info=Info(success=True, action_valid=True,
                                                         reward_components={"correct": 1.0}, extras={"target": self.target}))
        hint = "higher" if g < self.target else "lower"
        return StepResult(messages=({"role": "user", "content": hint},), reward=0.0, terminated=False,
                          truncated=False, anchor=f"{hint}@{g}", info=Info(action_valid=True))

    async def close(self) -> None:
        self.closed += 1


def bisect_answer(messages: Sequence[Message]) -> str:
    """Binary search on the hints in the history (the scripted policy of the tests)."""
    lo, hi, last = 0, 7, None
    for m in messages:
        if m["role"] == "assistant":
            try:
                last = int(m["content"].split("</think>")[-1].strip())
            except ValueError:
                last = None
        elif m["role"] == "user" and last is not None:
            if m["content"] == "higher":
                lo = last + 1
            elif m["content"] == "lower":
                hi = last - 1
    return str((lo + hi) // 2)


# ---------------------------------------------------------------------------- tokenizers

SPECIAL = ["<pad>", "<|im_start|>", "<|im_end|>", "\n"]
IM_START, IM_END, NL = 1, 2, 3
MERGED = "ab"  # the merging tokenizer encodes "ab" as one token


class CharTokenizer:
    """Chat template ``<|im_start|>ROLE\\nCONTENT<|im_end|>\\n`` per message, one id per
    character.  ``strip_think``: assistant turns before the last user message lose their
    ``<think>…</think>`` (Qwen3).  ``merge``: encoding text turns ``ab`` into one token, so
    sampled ``a``, ``b`` re-encode differently (retokenisation drift)."""

    def __init__(self, *, strip_think: bool = False, merge: bool = False) -> None:
        self.strip_think, self.merge = strip_think, merge
        chars = [chr(c) for c in range(32, 127)]
        self.vocab = [*SPECIAL, *chars, MERGED]
        self.index = {t: i for i, t in enumerate(self.vocab)}
        self.eos_token_id = IM_END

    def encode_chars(self, text: str) -> list[int]:
        return [self.index[c] for c in text]

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        i = 0
        while i < len(text):
            if self.merge and text.startswith(MERGED, i):
                out.append(self.index[MERGED])
                i += 2
            elif text[i] == "\n":
                out.append(NL)
                i += 1
            else:
                out.append(self.index[text[i]])
                i += 1
        return out

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.vocab[i] for i in ids if i not in (0, IM_START, IM_END))

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool) -> list[int]:
        last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
        out: list[int] = []
        for i, m in enumerate(messages):
            content = m["content"]
            if self.strip_think and m["role"] == "assistant" and i < last_user and "</think>" in content:
                content = content.split("</think>", 1)[1].lstrip()
            out += [IM_START, *self.encode(m["role"]), NL, *self.encode(content), IM_END, NL]
        if add_generation_prompt:
            out += [IM_START, *self.encode("assistant"), NL]
        return out


class TokenPolicy:
    """A policy in token ids: the reply text is ``answer(messages)``, sampled as one id per
    character (never merged) plus EOS, with log-prob -0.25 each; records every prompt."""

    name = "token-script"

    def __init__(self, tokenizer: CharTokenizer, answer: Callable[[Sequence[Message]], str] = bisect_answer,
                 think: bool = False) -> None:
        self.tokenizer = tokenizer
        self.answer, self.think = answer, think
        self.prompts: list[tuple[int, ...]] = []
        self.sampled: list[list[int]] = []

    async def generate(self, request: GenerateRequest) -> Generation:
        assert request.prompt_ids is not None
        self.prompts.append(request.prompt_ids)
        text = self.answer(request.messages)
        if self.think:
            text = f"<think>t{len(self.prompts)}</think>{text}"
        ids = [*self.tokenizer.encode_chars(text), IM_END]
        self.sampled.append(ids)
        return Generation(text=self.tokenizer.decode(ids), token_ids=tuple(ids),
                          logprobs=tuple(-0.25 for _ in ids), finish_reason="stop")

    async def close(self) -> None:
        pass


class FlakyPolicy:
    """Text policy that fails ``fail`` times (raise / hang / garbage), then answers by bisection."""

    name = "flaky"
    tokenizer = None

    def __init__(self, fail: int, how: str = "raise") -> None:
        self.fail, self.how, self.calls = fail, how, 0

    async def generate(self, request: GenerateRequest) -> Any:
        self.calls += 1
        if self.calls <= self.fail:
            if self.how == "raise":
                raise ConnectionError("HTTP 500")
            if self.how == "hang":
                await asyncio.sleep(3600)
            return {"garbage": True}
        return Generation(text=bisect_answer(request.messages), token_ids=None, logprobs=None, finish_reason="stop")

    async def close(self) -> None:
        pass
