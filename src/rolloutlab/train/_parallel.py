"""Data parallelism for the update: torch DDP or FSDP2 under ``torchrun``, nothing in one process.

``trainer.strategy=ddp`` replicates the model on every rank and all-reduces gradients;
``fsdp`` shards parameters, gradients and optimizer state over the ranks with FSDP2
(``torch.distributed.fsdp.fully_shard``: one unit per decoder layer, the class names a
Hugging Face model lists in ``_no_split_modules``, then the root, as verl and accelerate
wrap).  Both average gradients over ranks, so the update is the same computation; the loss
weights are global (:mod:`rolloutlab.train._update`), so either equals one process on the
whole batch up to float summation order.

Under FSDP every forward and backward of the sharded model is a collective: the ranks must
run the same number of them, in the same order.  Two consequences, as in verl:

- sampling never uses the sharded model.  With ``rollout.backend=local`` every rank samples
  with an unsharded copy that :func:`gather_into` refreshes after each update (a collective
  all ranks enter together); otherwise a server samples and rank 0 keeps the copy on the CPU
  to write checkpoints from.
- the update pads a rank that holds fewer mini-batches or micro-batches than another with
  passes of weight zero (:class:`rolloutlab.train._update.Updater`).

Checkpoints hold the full (unsharded) state: the ``save_pretrained`` weights and an optimizer
state keyed by parameter name (:func:`optimizer_state`), which :func:`load_optimizer_state`
shards again.  So a checkpoint written under FSDP resumes under DDP or in one process, and
the other way round.
"""

from __future__ import annotations

import os
from typing import Any

import torch

__all__ = [
    "gather_into",
    "init_distributed",
    "load_optimizer_state",
    "optimizer_state",
    "shard",
    "unwrap",
    "wrap",
]


def init_distributed(device: str, *, group_of_one: bool = False) -> tuple[int, int, str]:
    """``(rank, world size, this rank's device)``; starts the process group when launched by
    ``torchrun`` with WORLD_SIZE > 1, or with WORLD_SIZE 1 when ``group_of_one`` (the trainer
    asks for it under FSDP: one rank then runs the sharded code path, to measure it on one
    GPU).  CPU tensors (the trainer's counters and metrics) go over gloo; CUDA tensors over
    NCCL, each rank on ``cuda:LOCAL_RANK`` when ``device`` is ``cuda``."""
    dist = torch.distributed
    world = os.environ.get("WORLD_SIZE")
    launched = world is not None and (int(world) > 1 or (group_of_one and "MASTER_ADDR" in os.environ))
    if launched and not dist.is_initialized():
        dist.init_process_group("cpu:gloo,cuda:nccl" if device.startswith("cuda") else "gloo")
    if not (dist.is_available() and dist.is_initialized()):
        return 0, 1, device
    if device == "cuda":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    return dist.get_rank(), dist.get_world_size(), device


def unwrap(model: Any) -> Any:
    """The module DDP wraps (an FSDP-sharded model is its own module)."""
    return model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model


def _block_classes(model: Any) -> set[str]:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # PEFT
    return set(getattr(base, "_no_split_modules", None) or ())


def shard(model: Any) -> Any:
    """FSDP2 in place: each decoder layer a unit, then the root (embeddings, norm, head)."""
    from torch.distributed.fsdp import fully_shard

    blocks = _block_classes(model)
    for m in list(model.modules()):
        if m is not model and type(m).__name__ in blocks:
            fully_shard(m)
    fully_shard(model)
    return model


def wrap(model: Any, strategy: str) -> Any:
    """``model`` made data-parallel (in a process group) by ``strategy`` (``ddp`` / ``fsdp``)."""
    if strategy == "fsdp":
        return shard(model)
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model)


@torch.no_grad()
def gather_into(full: Any | None, model: Any) -> None:
    """Copy the trainable parameters of ``model`` into the unsharded ``full`` (same
    architecture).  Under FSDP each parameter is all-gathered: every rank must call this, in
    step; a rank with ``full=None`` takes part and keeps nothing.  Frozen parameters (a LoRA
    base) never change, so they are not sent."""
    src = unwrap(model)
    dst = dict(full.named_parameters()) if full is not None else {}
    for name, p in src.named_parameters():
        if not p.requires_grad:
            continue
        value = p.full_tensor() if hasattr(p, "full_tensor") else p
        if full is not None:
            dst[name].copy_(value)


def optimizer_state(model: Any, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer state, unsharded, keyed by parameter name, on the CPU (torch's
    ``get_optimizer_state_dict`` with a full state dict).  Under FSDP a collective whose
    values land on rank 0 only."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    if not optimizer.state:
        # before the first step: torch would initialise the state with a zero-gradient step,
        # which counts as Adam's step 1 and so changes the bias correction of every later
        # update (a checkpoint of the initial model must not change the run)
        names = {id(p): n for n, p in unwrap(model).named_parameters()}
        return {"state": {}, "param_groups": [{**{k: v for k, v in g.items() if k != "params"},
                                                "params": [names[id(p)] for p in g["params"]]}
                                               for g in optimizer.param_groups]}
    return get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def load_optimizer_state(model: Any, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Load a state from :func:`optimizer_state` into ``optimizer`` (sharded again under
    FSDP).  A state keyed by position (``optimizer.state_dict()``, what checkpoints held before
    names were used) is renamed first: the optimizer's parameters are the model's trainable
    ones, in order."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    if not state.get("state"):
        return  # saved before the first step: a fresh optimizer is that state (loading would step it)
    if any(isinstance(k, int) for k in state.get("state", {})):
        names = [n for n, p in unwrap(model).named_parameters() if p.requires_grad]
        state = {
            "state": {names[k]: v for k, v in state["state"].items()},
            "param_groups": [{**g, "params": [names[i] for i in g["params"]]} for g in state["param_groups"]],
        }
    set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))
