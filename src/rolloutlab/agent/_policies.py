"""Policy backends: scripted and random policies, and ``make_policy(spec)`` for the command
line (``OpenAIPolicy`` lives in ``_openai``, the local Hugging Face policy in ``_hf``).

Scripts for ``scripted:NAME`` are functions from the message history to the reply,
registered with :func:`register_script` (``echo``, ``guess-number``) or named as
``module:function``.
"""

from __future__ import annotations

import importlib
import math
import random
from collections.abc import Callable, Sequence

from rolloutlab.agent._openai import OpenAIPolicy, PolicyError
from rolloutlab.agent._types import ChatTokenizer, GenerateRequest, Generation, Policy
from rolloutlab.envs import Message
from rolloutlab.errors import RolloutlabError

__all__ = [
    "SCRIPTS",
    "OpenAIPolicy",
    "PolicyError",
    "RandomPolicy",
    "ScriptedPolicy",
    "format_action",
    "make_policy",
    "register_script",
]


Script = Callable[[Sequence[Message]], str]

SCRIPTS: dict[str, Script] = {}
"""Named scripts for ``scripted:NAME``: functions from the message history to the reply."""


def register_script(name: str) -> Callable[[Script], Script]:
    """Register the decorated function as the script ``name``."""

    def deco(fn: Script) -> Script:
        SCRIPTS[name] = fn
        return fn

    return deco


def format_action(parser: str, action: str) -> str:
    """``action`` written the way parser ``parser`` reads it (used by scripted and random policies)."""
    return {
        "xml": f"<action>{action}</action>",
        "react": f"Thought: acting.\nAction: {action}",
        "search_r1": action if action.startswith(("<search>", "<answer>")) else f"<answer>{action}</answer>",
    }.get(parser, action)


@register_script("echo")
def _echo(messages: Sequence[Message]) -> str:
    """Repeat the last user message (a smoke test of any text environment)."""
    return next((str(m["content"]) for m in reversed(messages) if m["role"] in ("user", "tool")), "")


@register_script("guess-number")
def _guess_number(messages: Sequence[Message]) -> str:
    """Binary search for ``guess-number-v0`` (reads ``guess a number from 0 to N`` and the
    ``higher`` / ``lower`` feedback)."""
    lo, hi, last = 0, 7, None
    for m in messages:
        text = str(m.get("content", "")).strip()
        if m["role"] == "assistant":
            last = int(text) if text.lstrip("-").isdigit() else None
        elif text.startswith("guess a number from 0 to ") and text.rsplit(" ", 1)[-1].isdigit():
            lo, hi = 0, int(text.rsplit(" ", 1)[-1])
        elif last is not None and text == "higher":
            lo = last + 1
        elif last is not None and text == "lower":
            hi = last - 1
    return str((lo + hi) // 2)


class ScriptedPolicy:
    """Answers by a function of the message history (the policy behind the tests).

    ``ScriptedPolicy(fn)`` or ``ScriptedPolicy.named("echo")``; ``parser`` wraps the script's
    action in that parser's format (``<action>…</action>`` for ``xml``)."""

    tokenizer: ChatTokenizer | None = None

    def __init__(self, answer: Script, *, name: str = "scripted", parser: str = "text") -> None:
        self.answer, self.name, self.parser = answer, name, parser

    @classmethod
    def named(cls, script: str, *, parser: str = "text") -> ScriptedPolicy:
        """The script registered as ``script``, or ``module:function`` (imported)."""
        if script in SCRIPTS:
            return cls(SCRIPTS[script], name=f"scripted:{script}", parser=parser)
        if ":" in script:
            mod, _, fn = script.partition(":")
            try:
                obj = getattr(importlib.import_module(mod), fn)
            except (ImportError, AttributeError) as e:
                raise RolloutlabError(f"scripted policy {script!r}: cannot import it ({e})") from None
            return cls(obj, name=f"scripted:{script}", parser=parser)
        raise RolloutlabError(
            f"unknown script {script!r}; known: {', '.join(sorted(SCRIPTS))} (or module:function)"
        )

    async def generate(self, request: GenerateRequest) -> Generation:
        text = format_action(self.parser, self.answer(request.messages))
        return Generation(text=text, token_ids=None, logprobs=None, finish_reason="stop")

    async def close(self) -> None:
        pass


class RandomPolicy:
    """A uniformly random admissible action when the environment lists them
    (``GenerateRequest.available_actions``), else a random word of the last observation;
    with a tokenizer and ``vocab_size``, random token ids ending with EOS.

    A request with a ``sample_key`` draws from ``random.Random(f"{seed}/{sample_key}")``, so
    its answer does not depend on the order in which episodes asked; one without draws from
    the policy's shared generator."""

    def __init__(self, *, seed: int = 0, parser: str = "text", tokenizer: ChatTokenizer | None = None,
                 vocab_size: int | None = None) -> None:
        if tokenizer is not None and not vocab_size:
            raise RolloutlabError("RandomPolicy with a tokenizer needs vocab_size")
        self.name = "random"
        self.seed = seed
        self.rng = random.Random(seed)
        self.parser, self.tokenizer, self.vocab_size = parser, tokenizer, vocab_size

    async def generate(self, request: GenerateRequest) -> Generation:
        rng = self.rng if request.sample_key is None else random.Random(f"{self.seed}/{request.sample_key}")
        if self.tokenizer is not None and self.vocab_size:
            n = rng.randint(0, max(0, request.max_tokens - 1))
            ids = [rng.randrange(self.vocab_size) for _ in range(n)]
            ids.append(self.tokenizer.eos_token_id)
            return Generation(text=self.tokenizer.decode(ids), token_ids=tuple(ids),
                              logprobs=tuple(-math.log(self.vocab_size) for _ in ids),
                              finish_reason="stop")
        if request.available_actions:
            action = rng.choice(list(request.available_actions))
        else:
            last = next((str(m["content"]) for m in reversed(request.messages) if m["role"] != "assistant"), "")
            words = last.split() or ["noop"]
            action = rng.choice(words)
        return Generation(text=format_action(self.parser, action), token_ids=None, logprobs=None, finish_reason="stop")

    async def close(self) -> None:
        pass


def make_policy(spec: str, *, parser: str = "text", seed: int = 0, api_key: str | None = None) -> Policy:
    """A policy from its command-line spelling: ``random``, ``scripted:NAME``,
    ``openai:BASE_URL:MODEL`` (the model is after the last ``:``), ``hf:PATH``."""
    kind, _, rest = spec.partition(":")
    if kind == "random" and not rest:
        return RandomPolicy(seed=seed, parser=parser)
    if kind == "scripted" and rest:
        return ScriptedPolicy.named(rest, parser=parser)
    if kind == "openai" and rest:
        base_url, sep, model = rest.rpartition(":")
        if not sep or not base_url or not model or "://" not in base_url:
            raise RolloutlabError(f"--policy {spec!r}: expected openai:BASE_URL:MODEL, e.g. openai:http://127.0.0.1:8000/v1:qwen")
        import os

        return OpenAIPolicy(base_url, model, api_key=api_key or os.environ.get("OPENAI_API_KEY", "EMPTY"))
    if kind == "hf" and rest:
        try:
            hf = importlib.import_module("rolloutlab.agent._hf")
        except ImportError as e:
            raise RolloutlabError(
                f"--policy {spec!r}: the local Hugging Face policy is not available ({e}); "
                "install the train extra (pip install 'rolloutlab[train]')"
            ) from None
        policy: Policy = hf.HFPolicy.from_pretrained(rest, seed=seed)
        return policy
    raise RolloutlabError(
        f"unknown policy {spec!r}; expected random, scripted:NAME, openai:BASE_URL:MODEL or hf:PATH"
    )
