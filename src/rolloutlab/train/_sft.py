"""``rolloutlab sft``: weighted supervised fine-tuning on exported think-act rows.

Act-PRM's SFT stage (``act-prm-tinker``; ACTING.md § Act-PRM): cross-entropy with weight 0 on
the state's tokens and 1 on the thought + action tokens.  A row is rendered with the
model's chat template twice, ``P = render(state, add_generation_prompt=True)`` and
``F = render(state + [assistant: action])``; the trained tokens are ``F[len(P):]`` (the
reply and the template's end-of-turn token), the others weigh 0 (TRL's prompt-completion
mask, ``sft_trainer.py``).  Options depart from plain SFT in two ways: the weight on the
reply's tokens may be the row's ``advantage`` or ``return_`` (reward-weighted regression),
and an over-long row loses its *oldest state* tokens rather than its end, so the action —
the target — is kept.

The loss of an optimizer step is the token mean over the step's trained tokens::

    L = sum_{b,l} w[b,l] * -log p(x[b,l+1] | x[b,:l+1]) / sum_{b,l} m[b,l]

with ``m`` the 0/1 mask of trained tokens and ``w = m * row_weight``; micro-batches divide
by the whole step's ``sum m``, so accumulation gives the same gradient as one batch.

Output: a run directory (``run.json``, ``metrics.jsonl`` with ``sft/*`` scalars) whose
``checkpoints/step_NNNNNN/`` have the trainer's layout (``rolloutlab.train._checkpoint``), so
``rolloutlab eval --checkpoints OUT/checkpoints`` and ``rolloutlab train model.path=...``
take them.  LoRA adapters are merged into the saved weights (a copy of the model is merged
at each save), so a checkpoint is always a full model.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from rolloutlab.agent import ChatTokenizer
from rolloutlab.io import InputError, RolloutlabError
from rolloutlab.train._sft_config import SFTConfig

__all__ = ["SFTExample", "SFTResult", "load_rows", "sft", "tokenize_row", "weighted_ce", "weighted_ce_slow"]


@dataclass(frozen=True)
class SFTExample:
    """One tokenized row."""

    input_ids: list[int]
    mask: list[int]
    """1 on the reply's tokens (thought + action + end of turn), 0 on the state's."""
    weight: float
    """The row's weight on its reply tokens (1, its advantage or its return)."""
    dropped: int = 0
    """Tokens cut to fit ``max_seq_len``."""


@dataclass
class SFTResult:
    """What an SFT run did."""

    run_dir: Path
    steps: int
    rows: int
    truncated_rows: int
    trained_tokens: int
    seconds: float
    losses: list[float] = field(default_factory=list)
    checkpoints: list[Path] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float:
        """Tokens through forward and backward (state and reply) per second of training."""
        return self.trained_tokens / self.seconds if self.seconds > 0 else 0.0


def _dataset_dir(path: Path) -> tuple[Path, dict[str, Any]]:
    manifest: dict[str, Any] = {}
    if (path / "export.json").is_file():
        try:
            manifest = json.loads((path / "export.json").read_text())
        except ValueError as e:
            raise InputError(f"not valid JSON ({e})", path=path / "export.json") from None
        path = path / "dataset"
    return path, manifest


def load_rows(path: Path, *, need: Sequence[str] = ()) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows of an export folder (``export.json`` + ``dataset/``), a ``save_to_disk`` folder or
    a Parquet file, and the export's manifest (``{}`` when there is none).  Every row needs a
    state (``prompt`` or ``state``), an action (``completion`` or ``action``) and the fields in
    ``need``; a missing one is refused naming the file and the fields present."""
    path = Path(path)
    if not path.exists():
        raise InputError("no such dataset (an export folder, a datasets folder or a .parquet file)", path=path)
    where, manifest = _dataset_dir(path) if path.is_dir() else (path, {})
    if where.is_dir():
        import datasets

        try:
            ds = datasets.load_from_disk(str(where))
        except (FileNotFoundError, ValueError) as e:
            raise InputError(f"not a Hugging Face datasets folder (save_to_disk): {e}", path=where) from None
        if isinstance(ds, datasets.DatasetDict):
            if "train" not in ds:
                raise InputError(f"a DatasetDict without a 'train' split (splits: {', '.join(ds)})", path=where)
            ds = ds["train"]
        columns, rows = list(ds.column_names), ds.to_list()
    else:
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(where)
        except Exception as e:  # pyarrow's ArrowInvalid and OSError alike
            raise InputError(f"not a Parquet file ({str(e).splitlines()[0][:200]})", path=where) from None
        columns, rows = table.column_names, table.to_pylist()
    missing = [f for f in need if f not in columns]
    if not any(c in columns for c in ("prompt", "state")):
        missing.append("prompt (or state)")
    if not any(c in columns for c in ("completion", "action")):
        missing.append("completion (or action)")
    if missing:
        raise InputError(f"dataset lacks the field(s) {', '.join(missing)} (fields present: {', '.join(columns)}); "
                         "write it with `rolloutlab export RUN --as think-act --out DIR`", path=where)
    if not rows:
        raise InputError("dataset has no rows", path=where)
    return rows, manifest


def _state(row: dict[str, Any]) -> list[dict[str, Any]]:
    s = row.get("prompt") if row.get("prompt") is not None else row.get("state")
    if isinstance(s, str):
        return [{"role": "user", "content": s}]
    if not isinstance(s, list):
        raise InputError(f"a row's state must be chat messages or text, got {type(s).__name__}")
    return [{"role": m["role"], "content": m.get("content") or ""} for m in s]


def _action(row: dict[str, Any]) -> str:
    c = row.get("completion")
    if isinstance(c, list) and c:
        return "".join(str(m.get("content") or "") for m in c)
    if isinstance(c, str):
        return c
    a = row.get("action")
    if not isinstance(a, str):
        raise InputError(f"a row's action must be text, got {type(a).__name__}")
    return a


def tokenize_row(tok: ChatTokenizer, state: list[dict[str, Any]], action: str, *, max_seq_len: int,
                 weight: float = 1.0) -> SFTExample:
    """``state`` + the assistant's ``action`` as ids with the reply's mask (module docstring)."""
    p = tok.render(state, add_generation_prompt=True)
    f = tok.render([*state, {"role": "assistant", "content": action}], add_generation_prompt=False)
    n = 0  # the reply starts where the two renderings part (a template may render the prompt alone differently)
    while n < min(len(p), len(f)) and p[n] == f[n]:
        n += 1
    ids, mask = list(f), [0] * n + [1] * (len(f) - n)
    dropped = 0
    if len(ids) > max_seq_len:
        over = len(ids) - max_seq_len
        cut = min(over, n)  # oldest state tokens first
        ids, mask, dropped = ids[cut:], mask[cut:], cut
        if len(ids) > max_seq_len:  # the reply alone is too long: cut its end
            dropped += len(ids) - max_seq_len
            ids, mask = ids[:max_seq_len], mask[:max_seq_len]
    return SFTExample(input_ids=ids, mask=mask, weight=weight, dropped=dropped)


def weighted_ce(logits: torch.Tensor, input_ids: torch.Tensor, weights: torch.Tensor, denom: float) -> torch.Tensor:
    """``sum w * nll / denom`` over next-token predictions.

    Shapes: logits (B, L, V); input_ids (B, L); weights (B, L), the weight of token ``l`` as a
    target (0 on state and padding).  Position ``l`` of the logits predicts token ``l + 1``."""
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)  # (B, L-1, V)
    nll = -logp.gather(-1, input_ids[:, 1:, None]).squeeze(-1)  # (B, L-1)
    return (weights[:, 1:] * nll).sum() / denom


def weighted_ce_slow(logits: Sequence[Sequence[Sequence[float]]], input_ids: Sequence[Sequence[int]],
                     weights: Sequence[Sequence[float]], denom: float) -> float:
    """:func:`weighted_ce` written out with loops and ``math`` (the test's reference)."""
    total = 0.0
    for b in range(len(input_ids)):
        for t in range(1, len(input_ids[b])):
            w = weights[b][t]
            if w == 0:
                continue
            row = logits[b][t - 1]
            mx = max(row)
            lse = mx + math.log(sum(math.exp(x - mx) for x in row))
            total += w * (lse - row[input_ids[b][t]])
    return total / denom


def _row_weight(row: dict[str, Any], how: str, where: str) -> float:
    if how == "mask":
        return 1.0
    key = "advantage" if how == "advantage" else "return_"
    v = row.get(key)
    if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
        raise InputError(f"weight={how} needs a finite {key!r} in every row, got {v!r} (row of "
                         f"{row.get('unique_data_sample_id', '?')} at timestep {row.get('timestep', '?')})", path=where)
    return float(v)


def _batch(exs: Sequence[SFTExample], pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded (ids, attention mask, per-token weights), each (B, L)."""
    width = max(len(e.input_ids) for e in exs)
    ids = torch.full((len(exs), width), pad, dtype=torch.long)
    att = torch.zeros((len(exs), width), dtype=torch.long)
    w = torch.zeros((len(exs), width), dtype=torch.float32)
    for i, e in enumerate(exs):
        n = len(e.input_ids)
        ids[i, :n] = torch.tensor(e.input_ids)
        att[i, :n] = 1
        w[i, :n] = torch.tensor(e.mask, dtype=torch.float32) * e.weight
    return ids, att, w


def _saveable(model: Any) -> Any:
    """The model to write: a LoRA model merged into a copy (a checkpoint is a full model)."""
    if hasattr(model, "merge_and_unload"):
        import copy

        return copy.deepcopy(model).merge_and_unload()
    return model


def sft(cfg: SFTConfig, dataset: Path, out: Path, *,
        on_step: Callable[[int, int, dict[str, float]], None] | None = None) -> SFTResult:
    """Fine-tune ``cfg.model`` on ``dataset`` (:func:`load_rows`) and write the run ``out``."""
    from rolloutlab.agent import HFChatTokenizer
    from rolloutlab.io import RunWriter
    from rolloutlab.schema import Run
    from rolloutlab.train._checkpoint import save_checkpoint
    from rolloutlab.train._config import EnvConfig, TrainConfig
    from rolloutlab.train._model import build_model

    if (out / "checkpoints").exists() and any((out / "checkpoints").iterdir()):
        raise RolloutlabError(f"{out} already holds checkpoints; give a new --out folder")
    need = {"advantage": ("advantage",), "return": ("return_",)}.get(cfg.weight, ())
    rows, manifest = load_rows(dataset, need=need)
    env = cfg.env_id or manifest.get("env")
    if cfg.model.tiny and not env:
        raise RolloutlabError("model.tiny needs the environment to pick its tokenizer: the dataset has no export.json "
                              "naming it; set env_id=guess-number-v0 (or the environment the rows came from)")
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    tcfg = TrainConfig(name=cfg.name, seed=cfg.seed, env=EnvConfig(id=env or "guess-number-v0"), model=cfg.model)
    model, tok = build_model(tcfg)
    if cfg.gradient_checkpointing:
        model.config.use_cache = False
        # transformers 5 renamed it activation checkpointing; the old name warns
        if hasattr(model, "activation_checkpointing_enable"):
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:  # pragma: no cover - transformers < 5
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if hasattr(model, "enable_input_require_grads"):  # LoRA: frozen embeddings would cut the graph
            model.enable_input_require_grads()
    pad = tok.hf.pad_token_id if isinstance(tok, HFChatTokenizer) and tok.hf.pad_token_id is not None else tok.eos_token_id
    where = str(dataset)
    exs = [tokenize_row(tok, _state(r), _action(r), max_seq_len=cfg.max_seq_len, weight=_row_weight(r, cfg.weight, where))
           for r in rows]
    truncated = sum(1 for e in exs if e.dropped)
    if not any(any(e.mask) for e in exs):
        raise RolloutlabError(f"{dataset}: no row has a reply token to train on (every action renders empty)")

    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    per_epoch = math.ceil(len(exs) / cfg.batch_size)
    total = per_epoch * cfg.epochs
    run = Run(run_id=f"{cfg.name}-{random.Random(time.time_ns()).getrandbits(32):08x}", name=cfg.name,
              config={**cfg.to_dict(), "dataset": str(dataset), "export": manifest.get("options")},
              model=cfg.model.path or "tiny", algorithm="sft", env=env, status="running", source="rolloutlab")
    writer = RunWriter(out, run)
    res = SFTResult(run_dir=out, steps=0, rows=len(exs), truncated_rows=truncated, trained_tokens=0, seconds=0.0)
    rng = random.Random(cfg.seed)
    micro = cfg.micro_batch_size or cfg.batch_size
    step = 0
    if cfg.save_initial:
        res.checkpoints.append(save_checkpoint(out, 0, _saveable(model), tok, {"sft": {"rows": len(exs), "epochs": 0}}))
    model.train()
    try:
        for _ in range(cfg.epochs):
            order = list(range(len(exs)))
            rng.shuffle(order)
            for s in range(0, len(order), cfg.batch_size):
                t0 = time.perf_counter()
                batch = [exs[i] for i in order[s:s + cfg.batch_size]]
                denom = float(max(1, sum(sum(e.mask) for e in batch)))
                lr = cfg.lr * min(1.0, (step + 1) / cfg.warmup_steps) if cfg.warmup_steps else cfg.lr
                for g in opt.param_groups:
                    g["lr"] = lr
                opt.zero_grad(set_to_none=True)
                loss_sum, ntok = 0.0, 0
                for m in range(0, len(batch), micro):
                    ids, att, w = _batch(batch[m:m + micro], pad)
                    ids, att, w = ids.to(cfg.model.device), att.to(cfg.model.device), w.to(cfg.model.device)
                    logits = model(input_ids=ids, attention_mask=att).logits
                    loss = weighted_ce(logits, ids, w, denom)
                    loss.backward()
                    loss_sum += float(loss.detach())
                    ntok += int(att.sum())
                gn = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip if cfg.grad_clip is not None else float("inf"))
                opt.step()
                step += 1
                dt = time.perf_counter() - t0
                res.seconds += dt
                res.trained_tokens += ntok
                res.losses.append(loss_sum)
                metrics = {"sft/loss": loss_sum, "sft/grad_norm": float(gn), "sft/lr": lr,
                           "sft/tokens": float(ntok), "sft/tokens_per_s": ntok / dt if dt > 0 else None}
                writer.log_metrics(step, metrics)
                if on_step is not None:
                    on_step(step, total, {k: v for k, v in metrics.items() if v is not None})
                if (cfg.save_every and step % cfg.save_every == 0) or step == total:
                    model.eval()
                    res.checkpoints.append(save_checkpoint(out, step, _saveable(model), tok,
                                                           {"sft": {"rows": len(exs), "epochs": cfg.epochs}}))
                    model.train()
    except BaseException:
        writer.close(status="aborted")
        raise
    res.steps = step
    writer.run.last_step = step
    writer.close(status="finished")
    return res
