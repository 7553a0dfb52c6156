"""A local Hugging Face causal LM as a token-in/token-out :class:`~rolloutlab.agent.Policy`.

Many episodes run concurrently on one event loop; each calls ``generate`` for its next turn.
:class:`HFPolicy` gathers the requests that arrive together (until a pass of the event loop
brings no new one, or ``max_batch``) and answers them with one batched sampling loop:
prompts left-padded, positions counted from each row's first real token, a key/value cache,
one forward per new token for the whole batch.  This is what makes hundreds of episodes per
training step cheap on a CPU.

Sampling randomness is per draw, not per batch: a request with a ``sample_key`` (the agent
loop sets ``"{traj_id}/{turn}"``) samples from uniforms of a ``torch.Generator`` seeded with
``(seed, sample_key)``, by inverse CDF (:func:`inverse_cdf`), so its reply does not depend on
which batch it landed in, its row there, or the order in which episodes asked.  Batches are
still gathered as if environments ran on the event loop (the flusher waits for environment
calls running on threads, :func:`~rolloutlab.envs._thread.env_calls_in_flight`) and ordered
by key, so that even the floating-point rounding of a batched forward repeats.

Sampled ids and their log-probabilities come back unchanged (token-out).  The log-probability
is that of the distribution actually sampled from: ``log_softmax(logits / temperature)`` with
the tokenizer's ``suppress_ids`` masked out, the same quantity the trainer recomputes
(:func:`token_logprobs`).  Departure from vLLM: with ``top_p < 1`` the reported log-prob is
still that of the untruncated tempered distribution (vLLM's default ``raw_logprobs`` mode
reports it before temperature); ``temperature == 0`` is greedy and reports the untempered
log-prob.

:func:`tiny_model` builds the CPU demo's model: a randomly initialised ``Qwen2ForCausalLM``
from a config (about 75k parameters with the 16-id guess-number vocabulary), seeded, so
nothing is downloaded.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rolloutlab.agent._hf_export import save_generation_config, save_hf_tokenizer
from rolloutlab.agent._settings import LoopConfig, TinyModelConfig
from rolloutlab.agent._tokenizers import (
    ByteTokenizer,
    HFChatTokenizer,
    WordTokenizer,
    load_tokenizer,
    save_tokenizer,
)
from rolloutlab.agent._types import ChatTokenizer, FinishReason, GenerateRequest, Generation
from rolloutlab.envs import env_calls_in_flight, env_calls_settled
from rolloutlab.errors import PromptTooLong, RolloutlabError

__all__ = ["HFPolicy", "TinyModelConfig", "draw_seed", "inverse_cdf", "save_model", "tiny_model", "token_logprobs"]


def tiny_model(vocab_size: int, *, seed: int, shape: TinyModelConfig | None = None) -> Any:
    """A randomly initialised ``Qwen2ForCausalLM`` built from a config, seeded with ``seed``.

    Tied input/output embeddings, no dropout, eager attention (deterministic on the CPU)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    s = shape or TinyModelConfig()  # declared once, in agent._settings (the trainer's model.* keys)
    cfg = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=s.hidden_size,
        intermediate_size=s.intermediate_size,
        num_hidden_layers=s.num_layers,
        num_attention_heads=s.num_heads,
        num_key_value_heads=s.num_heads,
        max_position_embeddings=s.max_positions,
        tie_word_embeddings=True,
        attention_dropout=0.0,
        use_sliding_window=False,
        pad_token_id=0,
        bos_token_id=None,
        eos_token_id=None,
    )
    cfg._attn_implementation = "eager"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(cfg)
    return model


def save_model(model: Any, tokenizer: ChatTokenizer, directory: str | Path, *,
               sampling: LoopConfig | None = None) -> None:
    """``save_pretrained`` plus the tokenizer (a tiny one as ``rolloutlab_tokenizer.json`` and
    as a standard Hugging Face tokenizer with a chat template) and, given ``sampling``, its
    token cap and sampling settings as ``generation_config.json`` (``agent._hf_export``)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    target = model
    if hasattr(target, "module"):  # DDP
        target = target.module
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # no "Writing model shards" bar in the trainer's output
    target.save_pretrained(str(d), safe_serialization=True)
    if isinstance(tokenizer, WordTokenizer | ByteTokenizer):
        save_tokenizer(tokenizer, d)
        save_hf_tokenizer(tokenizer, d)
    elif isinstance(tokenizer, HFChatTokenizer):
        tokenizer.hf.save_pretrained(str(d))
    if sampling is not None:
        save_generation_config(d, tokenizer, max_new_tokens=sampling.max_tokens_per_turn,
                               temperature=sampling.temperature, top_p=sampling.top_p)


def suppress_mask(tokenizer: ChatTokenizer, vocab: int, device: torch.device) -> torch.Tensor | None:
    ids = [i for i in getattr(tokenizer, "suppress_ids", ()) if 0 <= i < vocab]
    if not ids:
        return None
    m = torch.zeros(vocab, dtype=torch.bool, device=device)
    m[ids] = True
    return m


def token_logprobs(
    logits: torch.Tensor,
    targets: torch.Tensor,
    *,
    temperature: float = 1.0,
    suppress: torch.Tensor | None = None,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob of ``targets`` under ``log_softmax(logits / temperature)`` (suppressed ids
    masked), and optionally the entropy of that distribution.  ``logits (..., V)``,
    ``targets (...)`` -> ``(...)``.  The one definition shared by sampler and trainer."""
    x = logits.float()
    if temperature > 0 and temperature != 1.0:
        x = x / temperature
    if suppress is not None:
        x = x.masked_fill(suppress, float("-inf"))
    logp = torch.log_softmax(x, dim=-1)
    out = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    ent = None
    if with_entropy:
        p = logp.exp()
        ent = -(p * torch.where(p > 0, logp, torch.zeros_like(logp))).sum(-1)
    return out, ent


def draw_seed(seed: int, sample_key: str) -> int:
    """The seed of one draw's generator: a hash of the policy's seed and the draw's key
    (63 bits, a valid ``manual_seed``); stable across processes and platforms."""
    digest = hashlib.blake2b(f"{seed}/{sample_key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & 0x7FFF_FFFF_FFFF_FFFF


def inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Per row, the index ``i`` with ``cdf[i-1] <= u * total < cdf[i]``: a sample of the
    (unnormalised) ``probs (n, V)`` given a uniform ``u (n,)`` in ``[0, 1)``.  Ids of zero
    probability are never chosen (``u * total`` rounding up to the total takes the last id
    of positive probability).  The cumulative sum is in float64."""
    cdf = probs.double().cumsum(-1)
    x = (u.double() * cdf[:, -1]).unsqueeze(-1)
    idx = torch.searchsorted(cdf, x, right=True).squeeze(-1)
    last = probs.shape[-1] - 1 - (probs > 0).flip(-1).long().argmax(-1)
    return torch.minimum(idx, last)


@dataclass
class _Pending:
    request: GenerateRequest
    future: asyncio.Future[Generation]


class HFPolicy:
    """A local causal LM answering many concurrent episodes with batched sampling.

    ``model`` is a ``transformers`` causal LM (or a PEFT-wrapped one); ``tokenizer`` a
    :class:`ChatTokenizer`.  The trainer shares the same ``model`` object, so an update is
    visible to the next batch; ``policy_version`` is stamped on every generation.  Each draw
    with a ``sample_key`` has a generator of its own, seeded from ``(seed, sample_key)``; one
    without draws from the policy's shared ``generator``.  :meth:`reseed` sets both, which
    makes a training step's rollouts a pure function of (seed, step) and keeps resumed runs
    identical to uninterrupted ones.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: ChatTokenizer,
        *,
        name: str = "hf",
        seed: int = 0,
        max_batch: int = 1024,
        temperature_override: float | None = None,
    ) -> None:
        self.model = model
        self.tokenizer: ChatTokenizer | None = tokenizer
        self.tok: ChatTokenizer = tokenizer
        self.name = name
        self.max_batch = max_batch
        self.temperature_override = temperature_override
        self.policy_version: int | None = None
        self.device = next(model.parameters()).device
        vocab = int(model.get_output_embeddings().weight.shape[0])
        self.suppress = suppress_mask(tokenizer, vocab, self.device)
        self.pad_id = int(getattr(tokenizer, "pad_token_id", tokenizer.eos_token_id))
        self.seed = seed
        """Seeds every draw with a ``sample_key`` (:func:`draw_seed`)."""
        self.generator = torch.Generator()  # on the CPU: uniforms are drawn there, then moved
        self.generator.manual_seed(seed)
        import inspect

        params = inspect.signature(model.forward).parameters
        # transformers >= 5 renamed past_key_values to cache
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._pending: list[_Pending] = []
        self._flusher: asyncio.Task[None] | None = None
        self.calls = 0
        """Batched sampling loops run (for benchmarks)."""
        self.gen_seconds = 0.0
        """Time spent inside the sampling loops."""

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        *,
        name: str | None = None,
        device: str = "cpu",
        dtype: str = "auto",
        seed: int = 0,
        max_batch: int = 1024,
    ) -> HFPolicy:
        """Load a model folder (``save_pretrained`` layout; a tiny model's tokenizer is
        ``rolloutlab_tokenizer.json``, else the folder's Hugging Face tokenizer).  Offline."""
        p = Path(path)
        if not p.is_dir():
            raise RolloutlabError(f"model path {str(path)!r} is not a folder (expected a save_pretrained layout)")
        tok = load_tokenizer(p)
        from transformers import AutoModelForCausalLM

        kw: dict[str, Any] = {"local_files_only": True}
        if dtype != "auto":
            kw["dtype"] = getattr(torch, dtype)
        try:
            model = AutoModelForCausalLM.from_pretrained(str(p), **kw)
        except (OSError, ValueError) as e:
            raise RolloutlabError(f"{p}: cannot load a causal LM ({e})") from None
        model = model.to(device)  # type: ignore[arg-type]
        model.eval()
        return cls(model, tok, name=name or f"hf:{p.name}", seed=seed, max_batch=max_batch)

    def reseed(self, seed: int) -> None:
        self.seed = seed
        self.generator.manual_seed(seed)

    def after_save(self, checkpoint: Path) -> None:
        """Nothing to do: this policy samples with the weights being trained."""

    def sampler_state(self) -> Any:
        return self.generator.get_state()

    async def generate(self, request: GenerateRequest) -> Generation:
        if request.prompt_ids is None:
            raise RolloutlabError("HFPolicy needs token ids (GenerateRequest.prompt_ids); the agent loop renders them with policy.tokenizer")
        fut: asyncio.Future[Generation] = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(request, fut))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush())
        return await fut

    async def _flush(self) -> None:
        # let every episode that is about to ask reach generate(): stop waiting once a pass
        # of the event loop brings nobody new
        # (three quiet passes: an episode's way back to generate() crosses a few awaits)
        # (environment calls on threads are waited for: the batch then holds the episodes it
        # would if they ran on the loop, at most env_timeout_s longer when one blocks; rows are
        # ordered by sample_key, not by which thread finished first, so that the batched
        # forward's rounding repeats too)
        seen, quiet = -1, 0
        while True:
            if env_calls_in_flight():  # first: a batch never closes while one runs (max_batch or not)
                await env_calls_settled()
                quiet = 0
                continue
            if quiet >= 3 or len(self._pending) >= self.max_batch:
                break
            quiet = quiet + 1 if len(self._pending) == seen else 0
            seen = len(self._pending)
            await asyncio.sleep(0)
        self._pending.sort(key=lambda p: p.request.sample_key or "")  # stable: keyless rows keep their order
        while self._pending:
            batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
            # a prompt that cannot fit fails its own episode, before any tensor is allocated
            fits: list[_Pending] = []
            for p in batch:
                try:
                    self._check_fits(p.request)
                except PromptTooLong as e:
                    if not p.future.done():
                        p.future.set_exception(e)
                else:
                    fits.append(p)
            if not fits:
                continue
            try:
                gens = self.generate_batch([p.request for p in fits])
            except BaseException as e:
                # every waiting episode hears of it, also of an interrupt (a BaseException):
                # this task is nobody's child, so what it raised would be lost and the
                # episodes would wait out the policy timeout; they carry it up instead
                for p in (*fits, *self._pending):
                    if not p.future.done():
                        p.future.set_exception(e)
                if not isinstance(e, Exception):
                    self._pending = []
                    return
                continue
            for p, g in zip(fits, gens, strict=True):
                if not p.future.done():
                    p.future.set_result(g)

    def _check_fits(self, request: GenerateRequest) -> None:
        """Raise :class:`PromptTooLong` when the prompt plus ``max_tokens`` exceeds the model's positions."""
        limit_ctx = getattr(self.model.config, "max_position_embeddings", None)
        n_prompt, n_new = len(request.prompt_ids or ()), max(1, request.max_tokens)
        if limit_ctx is not None and n_prompt + n_new > limit_ctx:
            raise PromptTooLong(
                f"prompt of {n_prompt} tokens + {n_new} new exceeds the model's {limit_ctx} positions: the "
                "environment's observations and the replies so far no longer fit; lower rollout.max_turns or "
                "rollout.max_tokens_per_turn, or shorten the environment's observations"
            )

    @torch.inference_mode()
    def generate_batch(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        """Sample replies for ``requests`` in one batched loop (synchronous)."""
        import time

        t0 = time.perf_counter()
        n = len(requests)
        prompts = [list(r.prompt_ids or ()) for r in requests]
        if any(not p for p in prompts):
            raise RolloutlabError("empty prompt: the chat template rendered no tokens")
        for r in requests:  # before the (n, width) tensors are allocated
            self._check_fits(r)
        width = max(len(p) for p in prompts)
        dev = self.device
        ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            mask[i, width - len(p) :] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        temps = torch.tensor(
            [self.temperature_override if self.temperature_override is not None else r.temperature for r in requests],
            dtype=torch.float32,
            device=dev,
        )
        greedy = temps <= 0
        safe_t = torch.where(greedy, torch.ones_like(temps), temps).unsqueeze(-1)
        top_p = torch.tensor([r.top_p for r in requests], dtype=torch.float32, device=dev)
        limits = torch.tensor([max(1, r.max_tokens) for r in requests], device=dev)
        max_new = int(limits.max())
        limit_ctx = getattr(self.model.config, "max_position_embeddings", None)
        # each row fits on its own (_check_fits); a finished row keeps being fed, so its
        # positions are capped at the last one (its outputs are discarded)
        last_ok = (limit_ctx - 1) if limit_ctx is not None else None
        from transformers import DynamicCache

        cache = DynamicCache()
        # logits of the last position only: all of them are (n, width, vocab), 77 GB in bf16 for
        # 64 prompts of 4k tokens over Qwen2.5's 151,936 ids
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1,
                         **{self._cache_kw: cache})
        logits = out.logits[:, -1, :]
        tokens = torch.zeros((n, max_new), dtype=torch.long, device=dev)
        logps = torch.zeros((n, max_new), dtype=torch.float32, device=dev)
        lengths = torch.zeros(n, dtype=torch.long, device=dev)
        done = torch.zeros(n, dtype=torch.bool, device=dev)
        eos = int(self.tok.eos_token_id)
        last_pos = pos[:, -1]
        u = self._uniforms(requests, max_new).to(dev)  # (n, max_new): row i's draw for its token t
        for t in range(max_new):
            x = logits.float() / safe_t
            if self.suppress is not None:
                x = x.masked_fill(self.suppress, float("-inf"))
            logp_all = torch.log_softmax(x, dim=-1)
            probs = logp_all.exp()
            if bool((top_p < 1).any()):
                probs = _top_p_filter(probs, top_p)
            sampled = inverse_cdf(probs, u[:, t])
            tok = torch.where(greedy, logp_all.argmax(-1), sampled)
            lp = logp_all.gather(-1, tok.unsqueeze(-1)).squeeze(-1)
            live = ~done
            tokens[:, t] = torch.where(live, tok, torch.full_like(tok, self.pad_id))
            logps[:, t] = torch.where(live, lp, torch.zeros_like(lp))
            lengths += live.long()
            done = done | (tok == eos) | (lengths >= limits)
            if bool(done.all()) or t == max_new - 1:
                break
            mask = torch.cat([mask, torch.ones((n, 1), dtype=mask.dtype, device=dev)], dim=1)
            last_pos = last_pos + 1 if last_ok is None else (last_pos + 1).clamp(max=last_ok)
            out = self.model(
                input_ids=tokens[:, t : t + 1],
                attention_mask=mask,
                position_ids=last_pos.unsqueeze(-1),
                use_cache=True,
                **{self._cache_kw: cache},
            )
            logits = out.logits[:, -1, :]
        self.calls += 1
        tl, ll, ln = tokens.tolist(), logps.tolist(), lengths.tolist()
        gens: list[Generation] = []
        for i in range(n):
            k = ln[i]
            ids_i = tuple(tl[i][:k])
            finish: FinishReason = "stop" if k and ids_i[-1] == eos else "length"
            gens.append(
                Generation(
                    text=self.tok.decode(ids_i),
                    token_ids=ids_i,
                    logprobs=tuple(ll[i][:k]),
                    finish_reason=finish,
                    policy_version=self.policy_version,
                )
            )
        self.gen_seconds += time.perf_counter() - t0
        return gens

    def _uniforms(self, requests: Sequence[GenerateRequest], width: int) -> torch.Tensor:
        """``(n, width)`` float64 uniforms on the CPU.  A keyed row draws exactly its own
        ``max_tokens`` from its own generator (the same numbers whatever the batch's widest
        row); a keyless row draws from the shared generator, in row order."""
        u = torch.zeros((len(requests), width), dtype=torch.float64)
        for i, r in enumerate(requests):
            k = min(width, max(1, r.max_tokens))
            if r.sample_key is None:
                g = self.generator
            else:
                g = torch.Generator()
                g.manual_seed(draw_seed(self.seed, r.sample_key))
            u[i, :k] = torch.rand(k, generator=g, dtype=torch.float64)
        return u

    async def close(self) -> None:
        for p in self._pending:
            if not p.future.done():
                p.future.cancel()
        self._pending = []


def _top_p_filter(probs: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Zero the tail outside each row's nucleus (the smallest set with mass >= top_p)."""
    sp, idx = probs.sort(dim=-1, descending=True)
    cum = sp.cumsum(-1)
    drop = (cum - sp) >= top_p.unsqueeze(-1)
    sp = sp.masked_fill(drop, 0.0)
    return torch.zeros_like(probs).scatter(-1, idx, sp)
