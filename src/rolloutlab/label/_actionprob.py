"""Action-probability step rewards (Act-PRM, HazyResearch ``act-prm-tinker``,
``src/act_prm/generator/tinker_act_prm.py``).

For step ``t`` with state ``s`` (the conversation before the reply), recorded action ``a``
and G thoughts ``z_1..z_G`` sampled from the model::

    p_g     = exp( (1/|a|) * sum_j log p(a_j | s, z_g, a_<j) )        # per-token geometric mean
    value_t = (1/G) * sum_g p_g                 hard_t = value_t >= hard_threshold

The reply is rebuilt with each sampled thought in place of the recorded one (the recorded
reply's text around it kept: tags, the action, its closing tags), and ``a`` is the tokens
from where the action begins to the end of the reply, the chat template's end-of-turn
tokens excluded.  ``--normalise`` also records p_g / sum_h p_h per thought (Act-PRM's
option, which ranks the thoughts of one state); ``--action-prompted`` samples each thought
from the state followed by a message naming the action (Act-PRM's action-prompted variant).

Departures: a reply without a thought is scored once, without sampling (``g = 0``): there
is nothing to put a sampled thought in.  The state is rebuilt from the record
(:func:`rolloutlab.label._source.history_before`): observations come back as ``user``
messages.  A reply the parser could not read has no action, so no label (value ``None``).
Log-probabilities are those of the distribution the sampler draws from at temperature 1
(``rolloutlab.agent.token_logprobs``, suppressed ids masked).
"""

from __future__ import annotations

import asyncio
import math
import time
import zlib
from collections.abc import Sequence
from typing import Any, Protocol

from rolloutlab.agent import ChatTokenizer, GenerateRequest, Policy, get_parser
from rolloutlab.envs import Message
from rolloutlab.errors import RolloutlabError
from rolloutlab.label._config import LabelConfig
from rolloutlab.label._source import Item, Source, history_before, parser_of, reply_of

__all__ = ["HFScorer", "NoLogprobs", "OpenAIScorer", "Scorer", "action_prob_labels", "action_split", "geo_mean_prob",
           "span_ids"]


class NoLogprobs(RolloutlabError):
    """The model gave no log-probabilities for the tokens asked about."""


class Scorer(Protocol):
    """Log-probabilities of given tokens after a given prompt, under one model."""

    seconds: float
    """Time spent in model calls so far."""

    async def logprobs(self, prompt_ids: Sequence[int], target_ids: Sequence[int]) -> list[float]:
        """``log p(target_j | prompt, target_<j)`` for each ``j``."""
        ...


class HFScorer:
    """A local causal LM (the model of an :class:`~rolloutlab.agent.HFPolicy`): requests that
    arrive together are scored in one padded forward pass."""

    def __init__(self, model: Any, tokenizer: ChatTokenizer) -> None:
        import torch

        from rolloutlab.agent import suppress_mask

        self.model, self.tokenizer = model, tokenizer
        self.device = next(model.parameters()).device
        vocab = int(model.get_output_embeddings().weight.shape[0])
        self.suppress = suppress_mask(tokenizer, vocab, self.device)
        self.seconds = 0.0
        self._torch = torch
        self._pending: list[tuple[list[int], list[int], asyncio.Future[list[float]]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def logprobs(self, prompt_ids: Sequence[int], target_ids: Sequence[int]) -> list[float]:
        fut: asyncio.Future[list[float]] = asyncio.get_running_loop().create_future()
        self._pending.append((list(prompt_ids), list(target_ids), fut))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush())
        return await fut

    async def _flush(self) -> None:
        seen, quiet = -1, 0
        while quiet < 3:  # gather the requests that arrive together (as HFPolicy does)
            quiet = quiet + 1 if len(self._pending) == seen else 0
            seen = len(self._pending)
            await asyncio.sleep(0)
        batch, self._pending = self._pending, []
        try:
            out = self.score_batch([(p, t) for p, t, _ in batch])
        except Exception as e:
            for *_, f in batch:
                if not f.done():
                    f.set_exception(e)
            return
        for (*_, f), lp in zip(batch, out, strict=True):
            if not f.done():
                f.set_result(lp)

    def score_batch(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[list[float]]:
        """Synchronous: one right-padded forward pass over ``prompt + target`` of each pair."""
        from rolloutlab.agent import token_logprobs

        torch = self._torch
        t0 = time.perf_counter()
        seqs = [list(p) + list(t) for p, t in pairs]
        width = max(len(s) for s in seqs)
        ids = torch.zeros((len(seqs), width), dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):  # right padding: real tokens never attend to the padding after them
            ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
            mask[i, : len(s)] = 1
        with torch.inference_mode():
            logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits
            # logits[:, k] predicts token k + 1: (B, W-1, V) against targets (B, W-1)
            lp, _ = token_logprobs(logits[:, :-1], ids[:, 1:].to(self.device), suppress=self.suppress)
        rows = lp.tolist()
        self.seconds += time.perf_counter() - t0
        return [rows[i][len(p) - 1: len(p) - 1 + len(t)] for i, (p, t) in enumerate(pairs)]


class OpenAIScorer:
    """An OpenAI-compatible completions endpoint asked for prompt log-probabilities
    (``echo: true, logprobs: 1``, vLLM's and SGLang's legacy completions API), prompt
    given as token ids."""

    def __init__(self, client: Any, model: str, base_url: str) -> None:
        self.client, self.model, self.base_url = client, model, base_url
        self.seconds = 0.0

    async def logprobs(self, prompt_ids: Sequence[int], target_ids: Sequence[int]) -> list[float]:
        ids = [*prompt_ids, *target_ids]
        body = {"model": self.model, "prompt": ids, "max_tokens": 1, "echo": True, "logprobs": 1,
                "temperature": 1.0, "return_tokens_as_token_ids": True}
        t0 = time.perf_counter()
        data = await self.client.post("/completions", body)
        self.seconds += time.perf_counter() - t0
        try:
            lps = data["choices"][0]["logprobs"]["token_logprobs"]
        except (KeyError, IndexError, TypeError):
            lps = None
        span = lps[len(prompt_ids): len(ids)] if isinstance(lps, list) and len(lps) >= len(ids) else None
        if span is None or any(not isinstance(x, int | float) or isinstance(x, bool) or not math.isfinite(x)
                               for x in span):
            raise NoLogprobs(
                f"{self.base_url} (model {self.model!r}) returned no log-probabilities for the prompt tokens; "
                "action-prob labels need a completions endpoint that honours echo=true with logprobs "
                "(vLLM, SGLang), or a local model (--policy hf:PATH)"
            )
        return [float(x) for x in span]


def geo_mean_prob(logprobs: Sequence[float]) -> float:
    """exp of the mean log-probability: the per-token geometric mean probability."""
    return math.exp(sum(logprobs) / len(logprobs))


def action_split(raw: str, thought: str | None, action: Any) -> tuple[int, int, int]:
    """``(a, b, i)``: the recorded thought is ``raw[a:b]`` (``a == b`` when there is none), and
    the action begins at ``raw[i]`` (its text searched after the thought; else right after it)."""
    a = raw.find(thought) if thought else -1
    if a < 0:
        a = b = 0
    else:
        b = a + len(thought or "")
    i = raw.find(action, b) if isinstance(action, str) and action else -1
    return a, b, (i if i >= 0 else b)


def _common_prefix(x: Sequence[int], y: Sequence[int]) -> int:
    n = 0
    for u, v in zip(x, y, strict=False):
        if u != v:
            break
        n += 1
    return n


def span_ids(tok: ChatTokenizer, state: Sequence[Message], head: str, full: str) -> tuple[list[int], list[int]]:
    """(prompt ids, action ids): ``full`` = ``head`` + action, as an assistant reply after
    ``state``; the action ids are what the template gives ``full`` beyond ``head``, its
    end-of-turn tokens excluded."""
    ids_full = tok.render([*state, {"role": "assistant", "content": full}], add_generation_prompt=False)
    ids_head = tok.render([*state, {"role": "assistant", "content": head}], add_generation_prompt=False)
    p = _common_prefix(ids_full, ids_head)
    s = _common_prefix(ids_full[::-1], ids_head[::-1])
    s = min(s, len(ids_head) - p, len(ids_full) - p)
    return ids_full[:p], ids_full[p: len(ids_full) - s]


def _seed(*parts: Any) -> int:
    return zlib.crc32("/".join(str(p) for p in parts).encode()) & 0x7FFFFFFF


async def action_prob_labels(item: Item, source: Source, config: LabelConfig, policy: Policy,
                             scorer: Scorer) -> list[dict[str, Any]]:
    """The label of each turn of ``item`` (``extras.label`` of the turn)."""
    t = item.trajectory
    tok = policy.tokenizer
    if tok is None:
        raise RolloutlabError(f"{policy.name}: action-prob labels need the model's tokenizer")
    parser = parser_of(t, source.spec(), config.loop.parser)
    parse = get_parser(parser)

    async def thought(state: list[Message], action_text: str, turn: int, g: int) -> str:
        prompt = state
        if config.action_prompted:
            prompt = [*state, {"role": "user", "content": f"The action taken: {action_text}\n"
                               "Write the reasoning that leads to this action."}]
        gen = await policy.generate(GenerateRequest(
            messages=tuple(prompt), prompt_ids=tuple(tok.render(prompt, add_generation_prompt=True)),
            max_tokens=config.loop.max_tokens_per_turn, temperature=config.loop.temperature,
            top_p=config.loop.top_p, seed=_seed(config.seed, item.key, turn, g)))
        if config.action_prompted:  # the whole reply explains the action it was shown
            return gen.text.strip()
        return parse(gen).thought or ""  # a sample that wrote no thought contributes an empty one

    async def one(turn: int) -> dict[str, Any]:
        u = t.turns[turn]
        raw = u.action or ""
        parsed = parse(reply_of(raw, u.tool_calls, parser))
        base: dict[str, Any] = {"method": "action-prob", "action_prompted": config.action_prompted}
        if not parsed.valid:
            return {**base, "value": None, "hard": None, "g": 0, "reason": "the reply could not be parsed: no action"}
        action = parsed.actions[0]
        a, b, i = action_split(raw, parsed.thought, action)
        state = history_before(t, turn)
        if a == b:  # no thought in the reply: p(action | state), exactly
            thoughts: list[str | None] = [None]
        else:
            action_text = action if isinstance(action, str) else (u.parsed_action or raw[i:])
            thoughts = list(await asyncio.gather(*(thought(state, action_text, turn, g) for g in range(config.g))))
        probs: list[float] = []
        ntok = 0
        for z in thoughts:
            filled = raw if z is None else raw[:a] + z + raw[b:]
            shift = 0 if z is None else len(z) - (b - a)
            prompt_ids, target = span_ids(tok, state, filled[: i + shift], filled)
            if not target:
                return {**base, "value": None, "hard": None, "g": 0, "reason": "the action renders to no tokens"}
            probs.append(geo_mean_prob(await scorer.logprobs(prompt_ids, target)))
            ntok = len(target)
        value = sum(probs) / len(probs)
        label = {**base, "value": value, "hard": value >= config.hard_threshold, "g": 0 if thoughts == [None] else len(probs),
                 "probs": probs, "action_tokens": ntok}
        if config.normalise:
            total = sum(probs)
            label["normalised"] = [p / total if total > 0 else None for p in probs]
        return label

    return list(await asyncio.gather(*(one(k) for k in range(len(t.turns)))))
