"""The policy update: collate samples, recompute log-probs, PPO-clip loss, optimizer step.

One call of :meth:`Updater.update` per training step.  The step's samples are split into
``actor.mini_batches`` mini-batches (whole groups each), each one optimizer step, repeated
for ``actor.ppo_epochs`` passes; a mini-batch is processed in micro-batches of
``actor.micro_batch_size`` samples whose gradients accumulate.  The reduction weights are
computed over the whole mini-batch first (and over every data-parallel rank), so the
gradient does not depend on how the mini-batch was cut into micro-batches.

Log-probs are recomputed by the trainer.  With one optimizer step per training step (the
default, on-policy) the "old" log-probs are the recomputed ones, detached (ratio 1 at the
start of the step, as verl does when it can skip the old-log-prob pass); otherwise a
no-grad pass computes them before the first update.  The sampler's log-probs serve to
measure the sampler/trainer mismatch (logged) and, with ``actor.tis_cap``, to weight tokens
by truncated importance sampling.

**Data parallel** (``rolloutlab.train._parallel``).  Each rank trains on its share of the
groups; the reduction weights are global, and DDP / FSDP average gradients, so the update is
the one of a single process on the whole batch.  Every rank runs the same number of
mini-batches and micro-batches (a collective per forward under FSDP, per optimizer step
under both): a rank short of data runs passes on an idle sample whose loss weight is zero.

**Mask check** (:meth:`Updater.check_masks`).  The trainer trains exactly on
``loss_mask == 1`` tokens, and the agent loop writes sampler log-prob 0.0 on every token it
did not sample.  Two disagreements between mask and sampler raise :class:`MaskMismatchError`
(the sample and position named) unless ``actor.check_masks`` is off:

- mask 1 on a token whose sampler log-prob is exactly 0.0 while the trainer gives it a
  probability below ``exp(-1)``: an observation or template token in the loss (training on
  such tokens stalled learning at 0.35 success instead of 0.99 on the tiny task).  A token
  sampled with probability ~1 also has log-prob 0.0, hence the trainer-side threshold;
- mask 0 on a token with a non-zero sampler log-prob: a token the policy sampled left out
  of the loss.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from rolloutlab.agent import token_logprobs
from rolloutlab.io import RolloutlabError
from rolloutlab.train._config import TrainConfig
from rolloutlab.train._data import TrainSample
from rolloutlab.train._loss import kl_penalty, policy_loss, token_weights
from rolloutlab.train._parallel import unwrap

__all__ = ["Batch", "MaskMismatchError", "Updater", "collate", "length_buckets", "loss_norm_constant", "lr_lambda",
           "padding_share", "reference_model"]


class MaskMismatchError(RolloutlabError):
    """The loss mask marks as sampled a token the sampler did not sample."""


def lr_lambda(cfg: TrainConfig, total_updates: int) -> Any:
    """Multiplier of the peak lr at optimizer step ``k`` (0-based): linear warm-up over
    ``warmup_steps``, then constant, cosine or linear decay to ``min_lr_ratio``."""
    o = cfg.optim
    warm = o.warmup_steps
    floor = o.min_lr_ratio

    def f(k: int) -> float:
        if warm > 0 and k < warm:
            return (k + 1) / warm
        if o.schedule == "constant":
            return 1.0
        span = max(1, total_updates - warm)
        prog = min(1.0, (k - warm) / span)
        if o.schedule == "cosine":
            return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * prog))
        return floor + (1 - floor) * (1 - prog)

    return f


def loss_norm_constant(cfg: TrainConfig, env_max_turns: int) -> float:
    """The fixed divisor of ``seq-mean-token-sum-norm``: ``actor.loss_norm_constant``, or the
    run's maximum response length, ``rollout.max_tokens_per_turn`` times the largest turn cap
    the run can reach (the last ScalingInter stage, else the fixed cap).

    verl divides by ``loss_scale_factor``, default ``loss_mask.shape[-1]``: the padded response
    length, which verl pads to ``data.max_response_length`` (``agg_loss`` in
    ``verl/trainer/ppo/core_algos.py`` at b178a3cd).  Departure: a rolloutlab sample is a whole
    episode whose observation tokens have no configured bound, so the constant counts the
    sampled tokens an episode can hold; for one turn it is verl's ``max_response_length``.
    Dividing by the longest response of each mini-batch instead (as before) made the
    effective learning rate change from one mini-batch to the next."""
    if cfg.actor.loss_norm_constant is not None:
        return float(cfg.actor.loss_norm_constant)
    rc = cfg.rollout.rounds_ctrl
    if rc.type == "scaling_inter_stepwise":
        turns = max(rc.rounds)
    elif rc.rounds:
        turns = rc.rounds[0]
    else:
        turns = cfg.rollout.loop.max_turns or env_max_turns
    return float(cfg.rollout.loop.max_tokens_per_turn * turns)


@dataclass
class Batch:
    """Padded tensors of a list of samples (right padding); per-token arrays are aligned
    with ``ids`` (position ``p`` holds data of token ``ids[:, p]``)."""

    ids: torch.Tensor  # (B, T) long
    attn: torch.Tensor  # (B, T) long
    mask: torch.Tensor  # (B, T) float, 1 on sampled tokens
    sampler_lp: torch.Tensor  # (B, T) float
    adv: torch.Tensor  # (B, T) float
    min_prompt: int

    def __len__(self) -> int:
        return int(self.ids.shape[0])


def collate(samples: Sequence[TrainSample], pad_id: int, device: torch.device | str = "cpu") -> Batch:
    """Right-padded tensors of ``samples`` (prompt + response per row)."""
    lengths = [len(s.prompt_ids) + len(s.response_ids) for s in samples]
    t = max(lengths)
    # padded rows as Python lists, one tensor per field: a tensor per row and field cost
    # 6 ms per micro-batch of 64 one-turn samples (the values, hence the float32 casts, are
    # the same)
    ids, attn, mask, slp, adv = [], [], [], [], []
    for s, n in zip(samples, lengths, strict=True):
        p, pad = len(s.prompt_ids), t - n
        ids.append(s.prompt_ids + s.response_ids + [pad_id] * pad)
        attn.append([1] * n + [0] * pad)
        head, tail = [0.0] * p, [0.0] * pad
        mask.append(head + s.loss_mask + tail)
        slp.append(head + s.sampler_logprobs + tail)
        adv.append(head + s.advantages + tail)
    dev = torch.device(device)

    def tensor(rows: list[list[Any]], dtype: torch.dtype) -> torch.Tensor:
        return torch.tensor(rows, dtype=dtype).to(dev)

    return Batch(tensor(ids, torch.long), tensor(attn, torch.long), tensor(mask, torch.float32),
                 tensor(slp, torch.float32), tensor(adv, torch.float32), min(len(s.prompt_ids) for s in samples))


def _length(s: TrainSample) -> int:
    return len(s.prompt_ids) + len(s.response_ids)


def length_buckets(samples: Sequence[TrainSample], budget: int) -> list[list[TrainSample]]:
    """Micro-batches of ``samples`` under a token budget (``actor.micro_batch_tokens``): longest
    first, each takes samples while ``rows * longest <= budget`` (a sample longer than the
    budget alone).  verl's dynamic batch size balances unpadded token counts across
    micro-batches and removes the padding (``rearrange_micro_batches`` in
    ``verl/utils/seqlen_balancing.py``); here rows stay padded, and sorting keeps each
    micro-batch's lengths close, so little of it is padding."""
    out: list[list[TrainSample]] = []
    cur: list[TrainSample] = []
    longest = 0
    for s in sorted(samples, key=_length, reverse=True):  # stable: equal lengths keep their order
        if cur and (len(cur) + 1) * longest > budget:
            out.append(cur)
            cur = []
        if not cur:
            longest = _length(s)
        cur.append(s)
    if cur:
        out.append(cur)
    return out


def padding_share(chunks: Sequence[Sequence[TrainSample]]) -> float:
    """Share of the positions of the micro-batches' padded ``(rows, longest)`` tensors that
    are padding."""
    total = sum(len(c) * max(map(_length, c)) for c in chunks if c)
    real = sum(_length(s) for c in chunks for s in c)
    return 1.0 - real / total if total else 0.0


def _keep_token_stats(chunk: Sequence[TrainSample], old_lp: torch.Tensor, ent: torch.Tensor | None, start: int) -> None:
    """Keep each sample's trainer log-probs ``old_lp`` and entropies ``ent`` (``(B, T - start)``,
    0.0 on mask-0 positions) of its response tokens on the sample (``record_token_data``
    writes them into the turns)."""
    lp_rows = old_lp.detach().float().cpu()
    ent_rows = ent.detach().float().cpu() if ent is not None else None
    for i, s in enumerate(chunk):
        lo = len(s.prompt_ids) - start  # response token k sits at position len(prompt) + k
        hi = lo + len(s.response_ids)
        s.trainer_logprobs = lp_rows[i, lo:hi].tolist()
        if ent_rows is not None:
            s.entropies = ent_rows[i, lo:hi].tolist()


def reference_model(cfg: TrainConfig, model: Any) -> Any | None:
    """A frozen copy of ``model`` for the KL term, or None when none is needed (no KL, or a
    PEFT model whose base, adapters disabled, is the reference).  Take it before sharding."""
    if cfg.actor.kl_coef <= 0 or _is_peft(model):
        return None
    ref = copy.deepcopy(unwrap(model))
    for p in ref.parameters():
        p.requires_grad_(False)
    ref.eval()
    return ref


def _idle_sample(pad_id: int) -> TrainSample:
    """What a rank short of data runs so that every rank makes the same passes: one token,
    masked, so its loss weight and gradient are zero."""
    return TrainSample([pad_id], [pad_id], [0], [0.0], [0.0], group=-1, episode=-1)


class Updater:
    """Optimizer, schedule and the loss of one training run (see the module docstring)."""

    def __init__(
        self,
        cfg: TrainConfig,
        model: Any,
        *,
        pad_id: int,
        suppress: torch.Tensor | None = None,
        distributed: bool = False,
        ref_model: Any | None = None,
        env_max_turns: int | None = None,
    ) -> None:
        """``model`` is plain, DDP-wrapped or FSDP-sharded; ``ref_model`` the frozen KL
        reference (default: :func:`reference_model` of ``model``, which cannot copy a sharded
        model: the trainer passes one sharded alike); ``env_max_turns`` the environment's turn
        cap (default: its registered ``EnvSpec.max_turns``), for :func:`loss_norm_constant`."""
        self.cfg = cfg
        self.model = model
        self.pad_id = pad_id
        self.suppress = suppress
        self.distributed = distributed
        self.world = torch.distributed.get_world_size() if distributed else 1
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            raise RolloutlabError("the model has no trainable parameters")
        o = cfg.optim
        self.optimizer = torch.optim.AdamW(
            params, lr=o.lr, betas=(o.betas[0], o.betas[1]), eps=o.eps, weight_decay=o.weight_decay
        )
        total = cfg.trainer.total_steps * cfg.actor.ppo_epochs * cfg.actor.mini_batches
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda(cfg, total))
        self.ref_model: Any = ref_model if ref_model is not None else reference_model(cfg, model)
        if env_max_turns is None:
            from rolloutlab.envs import get_env_spec

            env_max_turns = get_env_spec(cfg.env.id).max_turns
        self.norm_constant = loss_norm_constant(cfg, env_max_turns)
        """Divisor of ``seq-mean-token-sum-norm``, fixed for the run."""
        self.fwd_bwd_seconds = 0.0
        """Time inside model forward and backward passes (benchmarks)."""

    # ------------------------------------------------------------------ log-probs

    def _forward(self, model: Any, batch: Batch, *, with_entropy: bool) -> tuple[torch.Tensor, torch.Tensor | None, int]:
        """Trainer log-probs of ``ids[:, s:]`` (and entropies), ``s = min_prompt``; returns
        ``(logp (B, T - s), entropy or None, s)``."""
        t = batch.ids.shape[1]
        start = max(1, batch.min_prompt)
        keep = t - start + 1
        out = model(input_ids=batch.ids, attention_mask=batch.attn, logits_to_keep=keep, use_cache=False)
        logits = out.logits[:, :-1, :]  # predicts ids[:, start:]
        lp, ent = token_logprobs(
            logits,
            batch.ids[:, start:],
            temperature=self.cfg.rollout.loop.temperature,
            suppress=self.suppress,
            with_entropy=with_entropy,
        )
        return lp, ent, start

    @torch.no_grad()
    def ref_logprobs(self, batch: Batch) -> torch.Tensor:
        if self.ref_model is not None:
            lp, _, _ = self._forward(self.ref_model, batch, with_entropy=False)
            return lp
        with unwrap(self.model).disable_adapter():  # PEFT: the base model is the reference
            lp, _, _ = self._forward(self.model, batch, with_entropy=False)
        return lp

    # --------------------------------------------------------------------- update

    def _global(self, x: float, op: str = "sum") -> float:
        if not self.distributed:
            return x
        t = torch.tensor([x], dtype=torch.float64)
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM if op == "sum" else torch.distributed.ReduceOp.MAX)
        return float(t.item())

    def check_masks(self, samples: Sequence[TrainSample], lp: torch.Tensor, batch: Batch, start: int, offset: int = 0) -> None:
        """Raise :class:`MaskMismatchError` where the loss mask and the sampler's log-probs
        disagree (the two cases of the module docstring); ``lp`` (B, T - start) are the
        trainer's log-probs of the same positions."""
        m = batch.mask[:, start:] > 0
        slp = batch.sampler_lp[:, start:]
        left_out = ~m & (slp != 0.0)  # prompt and padding positions hold 0.0: never flagged

        def first(flags: torch.Tensor) -> tuple[int, int, int, int]:
            """(row, column, response position, episode) of the first flagged token."""
            row, col = (int(x) for x in flags.nonzero()[0])
            return row, col, col + start - len(samples[row].prompt_ids), samples[row].episode + offset

        if bool(left_out.any()):
            row, col, pos, ep = first(left_out)
            raise MaskMismatchError(
                f"loss mask leaves out response token {pos} of episode {ep}, but the sampler "
                f"gave it log-prob {float(slp[row, col]):.3f}: a token the policy sampled is not trained on; "
                "fix the agent loop's masking (or set actor.check_masks=false to train anyway)"
            )
        suspicious = m & (slp == 0.0) & (lp < -1.0)
        if bool(suspicious.any()):
            row, col, pos, ep = first(suspicious)
            raise MaskMismatchError(
                f"loss mask marks response token {pos} of episode {ep} as sampled, but the sampler "
                f"gave it no log-prob (0.0) and the trainer gives it {float(lp[row, col]):.3f}: the sampler did "
                "not sample it (an observation/template token in the loss); fix the agent loop's masking "
                "(or set actor.check_masks=false to train anyway)"
            )

    def update(self, samples: Sequence[TrainSample], *, kl_in_reward: bool = False) -> dict[str, float]:
        """Train on ``samples`` (this rank's share); returns the step's ``actor/*`` metrics."""
        cfg, a = self.cfg, self.cfg.actor
        model = self.model
        model.train()
        t_start = time.perf_counter()
        fb = 0.0
        groups = sorted({s.group for s in samples})
        per_mb = max(1, math.ceil(len(groups) / a.mini_batches))
        mini = [[s for s in samples if s.group in set(groups[k : k + per_mb])] for k in range(0, len(groups), per_mb)]
        mini = [m for m in mini if m] or [list(samples)]
        if self.distributed:  # every rank makes the same optimizer steps
            mini += [[] for _ in range(int(self._global(len(mini), "max")) - len(mini))]
        plan = [self._lockstep(list(self._chunks(mb))) for mb in mini]
        live_chunks = [c for chunks in plan for c, is_live in chunks if is_live]
        single_update = a.ppo_epochs == 1 and len(mini) == 1
        acc: dict[str, float] = {}
        counts: dict[str, float] = {}

        def add(k: str, v: float, w: float = 1.0) -> None:
            if k.endswith("_max"):  # a maximum, not a mean
                acc[k] = max(acc.get(k, v), v)
                counts[k] = 1.0
                return
            acc[k] = acc.get(k, 0.0) + v * w
            counts[k] = counts.get(k, 0.0) + w

        # old log-probs: the first mini-batch's are its own first forward (no optimizer step
        # has run yet: the same weights, the same batch, the same numbers), so only the later
        # mini-batches need a separate no-grad pass before the first step
        old: dict[tuple[int, int], torch.Tensor] = {}
        batches: dict[tuple[int, int], Batch] = {}  # collated once, used by every pass
        if not single_update:
            t0 = time.perf_counter()
            with torch.no_grad():
                for mi, chunks in enumerate(plan):
                    for ci, (chunk, _live) in enumerate(chunks):
                        batches[mi, ci] = collate(chunk, self.pad_id, self._device())
                        if mi == 0:
                            continue
                        b = batches[mi, ci]
                        lp, _, s0 = self._forward(model, b, with_entropy=False)
                        old[mi, ci] = lp.detach()
                        self._mismatch_metrics(add, lp, b, s0)  # nothing from an idle pass: no tokens
            fb += time.perf_counter() - t0
        grad_norms: list[float] = []
        lrs: list[float] = []
        for epoch in range(a.ppo_epochs):
            for mi, (mb, chunks) in enumerate(zip(mini, plan, strict=True)):
                # reduction normalisers over the whole mini-batch, on every rank
                n_tok_local = float(sum(sum(s.loss_mask) for s in mb))
                live_local = float(sum(1 for s in mb if any(s.loss_mask)))
                total_tokens = self._global(n_tok_local)
                live = self._global(live_local)
                self.optimizer.zero_grad(set_to_none=True)
                for ci, (chunk, is_live) in enumerate(chunks):
                    b = batches[mi, ci] if (mi, ci) in batches else collate(chunk, self.pad_id, self._device())
                    own_old = single_update or (epoch == 0 and mi == 0)  # old log-probs = this forward's
                    sync = ci == len(chunks) - 1
                    # DDP all-reduces on the last micro-batch only; FSDP reduce-scatters each one
                    ddp = isinstance(model, torch.nn.parallel.DistributedDataParallel)
                    ctx = model.no_sync() if (ddp and not sync) else nullcontext()
                    with ctx:
                        t0 = time.perf_counter()
                        need_ent = True
                        lp, ent, s0 = self._forward(model, b, with_entropy=need_ent)
                        fb += time.perf_counter() - t0
                        m = b.mask[:, s0:]
                        # suppressed ids (role markers) sit on mask-0 positions with log-prob -inf;
                        # zero them so no NaN reaches the loss or its gradient
                        lp = torch.where(m > 0, lp, torch.zeros_like(lp))
                        if ent is not None:
                            ent = torch.where(m > 0, ent, torch.zeros_like(ent))
                        if a.check_masks:
                            self.check_masks(chunk, lp.detach(), b, s0)
                        if own_old and not single_update:
                            old[mi, ci] = lp.detach()  # for the later epochs
                        old_lp = lp.detach() if own_old else torch.where(m > 0, old[mi, ci], torch.zeros_like(lp))
                        if epoch == 0 and is_live and cfg.rollout.loop.record_tokens:
                            _keep_token_stats(chunk, old_lp, ent, s0)
                        slp = b.sampler_lp[:, s0:]
                        adv = b.adv[:, s0:]
                        w = token_weights(
                            m, a.loss_agg_mode, norm_constant=self.norm_constant, total_tokens=total_tokens, live_seqs=live
                        )
                        is_w = None
                        if a.tis_cap is not None:
                            is_w = torch.exp((old_lp - slp).clamp(-20, 20)).clamp(max=a.tis_cap)
                        pl = policy_loss(
                            lp, old_lp, adv, m,
                            clip_low=a.clip_ratio_low, clip_high=a.clip_ratio_high, clip_c=a.clip_ratio_c, is_weights=is_w,
                        )
                        mb_ = m.bool()
                        loss_tok = torch.where(mb_, pl.loss, torch.zeros_like(pl.loss))
                        loss = (loss_tok * w).sum()
                        pg_part = float(loss.detach())
                        if a.entropy_coef > 0 and ent is not None:
                            loss = loss - a.entropy_coef * (torch.where(mb_, ent, torch.zeros_like(ent)) * w).sum()
                        if a.kl_coef > 0 and not kl_in_reward:
                            ref_lp = self.ref_logprobs(b)
                            kl = kl_penalty(lp, ref_lp, a.kl_estimator)
                            kl_term = (torch.where(mb_, kl, torch.zeros_like(kl)) * w).sum()
                            loss = loss + a.kl_coef * kl_term
                            add("actor/kl_loss", float(kl_term.detach()))
                        t0 = time.perf_counter()
                        (loss * self.world).backward()  # DDP/FSDP average over ranks; the weights already sum over them
                        fb += time.perf_counter() - t0
                    if not is_live:
                        continue
                    ntok = float(m.sum())
                    add("actor/pg_loss", pg_part)
                    add("actor/pg_clipfrac", float(pl.clipfrac), ntok)
                    add("actor/pg_clipfrac_lower", float(pl.clipfrac_dual), ntok)  # verl's name: dual clip
                    add("actor/pg_clipfrac_ratio_low", float(pl.clipfrac_low), ntok)
                    add("actor/pg_clipfrac_ratio_high", float(pl.clipfrac_high), ntok)
                    add("actor/ppo_kl", float(pl.approx_kl), ntok)
                    with torch.no_grad():
                        if ent is not None:
                            add("actor/entropy", float((ent * m).sum() / m.sum().clamp(min=1)), ntok)
                        if own_old and epoch == 0:
                            self._mismatch_metrics(add, lp.detach(), b, s0)
                params = [p for p in model.parameters() if p.requires_grad]
                clip = cfg.optim.grad_clip
                gn = torch.nn.utils.clip_grad_norm_(params, clip if clip is not None else float("inf"))
                grad_norms.append(float(gn))
                lrs.append(float(self.optimizer.param_groups[0]["lr"]))
                if math.isfinite(float(gn)):
                    self.optimizer.step()
                else:
                    add("actor/skipped_nonfinite", 1.0)
                self.scheduler.step()
        self.fwd_bwd_seconds += fb
        out = {k: (acc[k] / counts[k] if counts[k] > 0 else acc[k]) for k in acc}
        out["actor/pg_loss"] = acc.get("actor/pg_loss", 0.0)
        if "actor/kl_loss" in acc:
            out["actor/kl_loss"] = acc["actor/kl_loss"]
        out["actor/grad_norm"] = sum(grad_norms) / len(grad_norms)
        out["actor/lr"] = lrs[-1]
        out["timing/update_s"] = time.perf_counter() - t_start
        out["timing/forward_backward_s"] = fb
        out["perf/padding_share"] = padding_share(live_chunks)
        out["perf/update_tokens"] = float(a.ppo_epochs * sum(_length(s) for c in live_chunks for s in c))
        model.eval()
        return out

    @staticmethod
    def _mismatch_metrics(add: Any, lp: torch.Tensor, b: Batch, s0: int) -> None:
        """Sampler vs trainer log-probs of the sampled tokens, before any update of the step:
        ``k1 = mean(lp_sampler - lp_trainer)`` (KL(sampler || trainer) estimate), ``k3``, and
        the largest absolute difference."""
        m = b.mask[:, s0:]
        ntok = float(m.sum())
        if ntok == 0:
            return
        diff = torch.where(m > 0, b.sampler_lp[:, s0:] - lp, torch.zeros_like(lp))
        add("rollout/sampler_trainer_kl", float(diff.sum()) / ntok, ntok)
        k3 = torch.where(m > 0, torch.exp(-diff) - 1 + diff, torch.zeros_like(lp))
        add("rollout/sampler_trainer_k3", float(k3.sum()) / ntok, ntok)
        add("rollout/logprob_absdiff_max", float(diff.abs().max()), ntok)

    def _device(self) -> torch.device:
        return next(self.model.parameters()).device

    def _chunks(self, mb: Sequence[TrainSample]) -> Iterator[list[TrainSample]]:
        if self.cfg.actor.micro_batch_tokens:
            yield from length_buckets(mb, self.cfg.actor.micro_batch_tokens)
            return
        size = self.cfg.actor.micro_batch_size or len(mb)
        for k in range(0, len(mb), size):
            yield list(mb[k : k + size])

    def _lockstep(self, chunks: list[list[TrainSample]]) -> list[tuple[list[TrainSample], bool]]:
        """``(micro-batch, live)`` pairs, as many on every rank: a rank with fewer micro-batches
        than the most loaded one adds idle passes (``live`` false, loss weight zero)."""
        n = int(self._global(len(chunks), "max")) if self.distributed else len(chunks)
        return [(c, True) for c in chunks] + [([_idle_sample(self.pad_id)], False)] * (n - len(chunks))

    # ---------------------------------------------------------------- KL in reward

    @torch.no_grad()
    def kl_reward_penalty(self, samples: Sequence[TrainSample], n_episodes: int) -> list[float]:
        """``-kl_coef * sum_t KL_t`` per episode (KL in the reward, before advantages)."""
        a = self.cfg.actor
        pen = [0.0] * n_episodes
        for chunk, live in self._lockstep(list(self._chunks(samples))):
            b = collate(chunk, self.pad_id, self._device())
            lp, _, s0 = self._forward(self.model, b, with_entropy=False)
            ref = self.ref_logprobs(b)
            if not live:
                continue
            # where, not a product: suppressed ids (role markers) on mask-0 positions have
            # log-prob -inf under both models, and -inf - -inf is NaN
            kl = torch.where(b.mask[:, s0:] > 0, kl_penalty(lp, ref, a.kl_estimator), torch.zeros_like(lp))
            for s, v in zip(chunk, kl.sum(-1).tolist(), strict=True):
                pen[s.episode] -= a.kl_coef * float(v)
        return pen


def _is_peft(model: Any) -> bool:
    m = unwrap(model)
    return hasattr(m, "disable_adapter") and hasattr(m, "peft_config")


@contextmanager
def eval_mode(model: Any) -> Iterator[None]:
    was = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was)
