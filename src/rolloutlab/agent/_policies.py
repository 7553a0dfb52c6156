"""Policy backends: an OpenAI-compatible endpoint, scripted and random policies, and
``make_policy(spec)`` for the command line.

``OpenAIPolicy`` speaks the ``openai`` async client's chat-completions API to any
OpenAI-compatible server (vLLM, SGLang, a hosted API).  With a :class:`ChatTokenizer` it
works token-in/token-out through the completions API instead: the prompt is sent as token
ids and the sampled ids come back through vLLM's extensions (``return_token_ids`` gives
``choices[i].token_ids``; ``return_tokens_as_token_ids`` spells each logprob token
``token_id:N``).  A server that offers neither gives a clear error; without a tokenizer the
policy is text-only (evaluation, no training samples).  The client's own retries are off:
the agent loop retries with backoff and records the failure.
"""

from __future__ import annotations

import importlib
import json
import math
import random
import ssl
from collections.abc import Callable, Sequence
from typing import Any

from rolloutlab.agent._types import ChatTokenizer, FinishReason, GenerateRequest, Generation, Policy
from rolloutlab.envs import Message, ToolInvocation
from rolloutlab.io import RolloutlabError

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


class PolicyError(RolloutlabError):
    """A policy backend answered with something that is not a generation (retried by the loop)."""


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
    with a tokenizer and ``vocab_size``, random token ids ending with EOS."""

    def __init__(self, *, seed: int = 0, parser: str = "text", tokenizer: ChatTokenizer | None = None,
                 vocab_size: int | None = None) -> None:
        if tokenizer is not None and not vocab_size:
            raise RolloutlabError("RandomPolicy with a tokenizer needs vocab_size")
        self.name = "random"
        self.rng = random.Random(seed)
        self.parser, self.tokenizer, self.vocab_size = parser, tokenizer, vocab_size

    async def generate(self, request: GenerateRequest) -> Generation:
        if self.tokenizer is not None and self.vocab_size:
            n = self.rng.randint(0, max(0, request.max_tokens - 1))
            ids = [self.rng.randrange(self.vocab_size) for _ in range(n)]
            ids.append(self.tokenizer.eos_token_id)
            return Generation(text=self.tokenizer.decode(ids), token_ids=tuple(ids),
                              logprobs=tuple(-math.log(self.vocab_size) for _ in ids),
                              finish_reason="stop")
        if request.available_actions:
            action = self.rng.choice(list(request.available_actions))
        else:
            last = next((str(m["content"]) for m in reversed(request.messages) if m["role"] != "assistant"), "")
            words = last.split() or ["noop"]
            action = self.rng.choice(words)
        return Generation(text=format_action(self.parser, action), token_ids=None, logprobs=None, finish_reason="stop")

    async def close(self) -> None:
        pass


_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length", "tool_calls": "tool_calls",
                                    "function_call": "tool_calls", "eos": "stop", "abort": "error"}


class OpenAIPolicy:
    """A model behind an OpenAI-compatible endpoint (see the module docstring)."""

    def __init__(self, base_url: str, model: str, *, api_key: str = "EMPTY", tokenizer: ChatTokenizer | None = None,
                 timeout_s: float = 600.0, logprobs: bool = True, extra_body: dict[str, Any] | None = None,
                 clients: int = 8) -> None:
        import openai

        self.name = f"openai:{model}"
        self.model, self.tokenizer = model, tokenizer
        self.logprobs = logprobs
        self.extra_body = dict(extra_body or {})
        # Several clients, used in turn: httpx's connection pool scans every connection on
        # each request, so one pool of 64 busy connections costs more CPU per request than
        # eight pools of eight (benchmarks/bench_agent.py).
        # One TLS context for all of them (building one costs about 0.2 s of CPU).
        tls = ssl.create_default_context()
        self.clients = [openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout_s,
                                           http_client=openai.DefaultAsyncHttpxClient(verify=tls))
                        for _ in range(max(1, clients))]
        self._next = 0

    @property
    def client(self) -> Any:
        """The next client, round robin."""
        self._next = (self._next + 1) % len(self.clients)
        return self.clients[self._next]

    async def generate(self, request: GenerateRequest) -> Generation:
        if self.tokenizer is not None and request.prompt_ids is not None:
            return await self._complete(request)
        return await self._chat(request)

    async def _chat(self, request: GenerateRequest) -> Generation:
        from openai.types.chat import ChatCompletion

        body: dict[str, Any] = {
            "model": self.model, "messages": [dict(m) for m in request.messages], "max_tokens": request.max_tokens,
            "temperature": request.temperature, "top_p": request.top_p,
        }
        if request.tools:
            body["tools"] = list(request.tools)
        if request.stop:
            body["stop"] = list(request.stop)
        if request.seed is not None:
            body["seed"] = request.seed
        if self.logprobs:
            body["logprobs"] = True
        # The client's low-level post: its transport, auth and typed errors, without the
        # recursive TypedDict transform of create(), which re-walks the whole history each
        # turn and cost most of the loop's CPU per turn (benchmarks/bench_agent.py).
        resp = await self.client.post("/chat/completions", cast_to=ChatCompletion, body={**body, **self.extra_body})
        choices = getattr(resp, "choices", None)
        if not choices:
            raise PolicyError(f"endpoint returned no choices: {str(resp)[:200]!r}")
        ch = choices[0]
        msg = ch.message
        if msg is None:
            raise PolicyError("endpoint returned a choice without a message")
        text = msg.content or ""
        calls = tuple(_tool_call(c) for c in (msg.tool_calls or []))
        lps = None
        if ch.logprobs is not None and ch.logprobs.content:
            lps = tuple(float(x.logprob) for x in ch.logprobs.content)
        ids = _extra_ids(ch) or _ids_from_tokens([x.token for x in ch.logprobs.content] if ch.logprobs and ch.logprobs.content else [])
        if ids is not None and lps is not None and len(ids) != len(lps):
            ids = None
        return Generation(text=text, token_ids=ids, logprobs=lps,
                          finish_reason=_FINISH.get(str(ch.finish_reason), "stop"), tool_calls=calls)

    async def _complete(self, request: GenerateRequest) -> Generation:
        assert self.tokenizer is not None and request.prompt_ids is not None
        body: dict[str, Any] = {"return_token_ids": True, "return_tokens_as_token_ids": True,
                                "skip_special_tokens": False, **self.extra_body}
        from openai.types import Completion

        body.update(model=self.model, prompt=list(request.prompt_ids), max_tokens=request.max_tokens,
                    temperature=request.temperature, top_p=request.top_p, logprobs=1)
        if request.seed is not None:
            body["seed"] = request.seed
        resp = await self.client.post("/completions", cast_to=Completion, body=body)
        choices = getattr(resp, "choices", None)
        if not choices:
            raise PolicyError(f"endpoint returned no choices: {str(resp)[:200]!r}")
        ch = choices[0]
        lp = ch.logprobs
        if lp is None or lp.token_logprobs is None:
            raise PolicyError("endpoint returned no logprobs; token-in/token-out needs a vLLM/SGLang-style server")
        ids = _extra_ids(ch) or _ids_from_tokens(lp.tokens or [])
        if ids is None:
            raise PolicyError(
                "endpoint returned no token ids (needs vLLM's return_token_ids or return_tokens_as_token_ids); "
                "use the policy without a tokenizer for text-only evaluation"
            )
        lps = tuple(float(x) if x is not None else 0.0 for x in lp.token_logprobs)
        if len(lps) != len(ids):
            raise PolicyError(f"endpoint returned {len(ids)} token ids but {len(lps)} logprobs")
        return Generation(text=self.tokenizer.decode(ids), token_ids=ids, logprobs=lps,
                          finish_reason=_FINISH.get(str(ch.finish_reason), "stop"))

    async def close(self) -> None:
        for c in self.clients:
            await c.close()


def _tool_call(c: Any) -> ToolInvocation:
    fn = c.function
    try:
        args = json.loads(fn.arguments) if fn.arguments else {}
    except ValueError:
        args = {"_raw": fn.arguments}  # the env reports the bad arguments as an invalid action
    if not isinstance(args, dict):
        args = {"_raw": fn.arguments}
    return ToolInvocation(name=fn.name, arguments=args, id=c.id)


def _extra_ids(choice: Any) -> tuple[int, ...] | None:
    """``choices[i].token_ids`` (vLLM ``return_token_ids``), when present."""
    extra = getattr(choice, "model_extra", None) or {}
    ids = extra.get("token_ids")
    if isinstance(ids, list) and all(isinstance(i, int) for i in ids):
        return tuple(ids)
    return None


def _ids_from_tokens(tokens: Sequence[str]) -> tuple[int, ...] | None:
    """Ids from logprob tokens spelled ``token_id:N`` (vLLM ``return_tokens_as_token_ids``)."""
    if not tokens:
        return None
    out: list[int] = []
    for t in tokens:
        head, sep, num = t.partition(":")
        if head != "token_id" or not sep or not num.isdigit():
            return None
        out.append(int(num))
    return tuple(out)


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
