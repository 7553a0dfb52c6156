"""Peak memory of a training step, estimated before the run starts, and the refusal that
names the overrides that fit.

The estimate is an upper bound built from the run's sizes, not a measurement:

- **the longest sequence** ``L = prompt + turns × (max_tokens_per_turn + observation)``, where
  ``prompt`` and ``observation`` are the token counts of the environment's opening
  observation (every later observation is taken to be as long), capped at the model's
  positions (the policy refuses a longer prompt);
- **state**: gradients and AdamW's two moments (``3 × params`` values) on top of the weights
  the process already holds, and a frozen reference copy (``params``) when ``actor.kl_coef > 0``;
  LoRA trains only the adapters, so only those get gradients and moments;
- **generation** (``rollout.backend=local``): the local policy batches up to
  ``min(rollout.concurrency, batch_size)`` requests and prefills each whole conversation:
  a KV cache ``B × layers × 2 × L × hidden``, eager attention scores and their softmax
  ``2 × B × heads × L²`` (one layer at a time) and logits at every position ``B × L × vocab``;
- **update**: a micro-batch ``mb`` (``actor.micro_batch_size``, else the mini-batch) keeps,
  per sample, ``layers × (L × (16 × hidden + 3 × intermediate) + 2 × heads × L²)`` activations
  for the backward pass and three ``L × vocab`` tensors (logits, log-softmax, their gradient);
- the process as it stands when the estimate is made (the Python runtime, torch and the
  weights), read from ``/proc/self/status``.

Peak = process + state + the larger of generation and update (they do not overlap).  How
close this comes to a measured peak is tested (``tests/train/test_memory.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rolloutlab.train._config import TrainConfig

__all__ = ["MemoryEstimate", "ModelShape", "available_bytes", "estimate_memory", "fitting_overrides", "process_rss"]

GB = 1024**3


@dataclass(frozen=True)
class ModelShape:
    """What the estimate needs to know of the policy model."""

    params: int
    """All parameters (trainable or not)."""
    trainable: int
    """Parameters that get gradients and AdamW moments (LoRA: the adapters only)."""
    vocab: int
    hidden: int
    layers: int
    heads: int
    intermediate: int
    max_positions: int | None
    """The model's position limit (``None``: none known)."""
    bytes_per_value: int
    """4 for float32, 2 for bfloat16 / float16."""


@dataclass(frozen=True)
class MemoryEstimate:
    """The parts of a step's peak memory, in bytes (see the module docstring)."""

    seq_len: int
    """The longest sequence a step can build."""
    process: int
    state: int
    generation: int
    update: int

    @property
    def total(self) -> int:
        return self.process + self.state + max(self.generation, self.update)

    def describe(self) -> str:
        return (f"{self.total / GB:.1f} GB (process {self.process / GB:.1f} + optimizer state "
                f"{self.state / GB:.1f} + max(generation {self.generation / GB:.1f}, update "
                f"{self.update / GB:.1f}); sequences up to {self.seq_len} tokens)")


def run_horizon(cfg: TrainConfig, env_max_turns: int) -> int:
    """The largest turn cap the run will use (the last ScalingInter stage, else the fixed cap)."""
    rc = cfg.rollout.rounds_ctrl
    if rc.type == "scaling_inter_stepwise":
        return max(rc.rounds)
    return int(rc.rounds[0] if rc.rounds else (cfg.rollout.loop.max_turns or env_max_turns))


def estimate_memory(cfg: TrainConfig, shape: ModelShape, *, prompt_tokens: int, turns: int, process: int) -> MemoryEstimate:
    """The step's peak memory for ``cfg`` (see the module docstring for each term)."""
    r, b = cfg.rollout, shape.bytes_per_value
    seq = prompt_tokens + turns * (r.loop.max_tokens_per_turn + prompt_tokens)
    if shape.max_positions is not None:
        seq = min(seq, shape.max_positions)
    state = 3 * shape.trainable * 4  # gradients and AdamW moments are float32
    if cfg.actor.kl_coef > 0:
        state += shape.params * b
    generation = 0
    if r.backend == "local":
        n = min(r.loop.concurrency, cfg.batch_size)
        kv = n * shape.layers * 2 * seq * shape.hidden * b
        scores = 2 * n * shape.heads * seq * seq * b
        logits = n * seq * shape.vocab * 4
        generation = kv + scores + logits
    mb = cfg.actor.micro_batch_size or cfg.batch_size // cfg.actor.mini_batches
    if cfg.actor.micro_batch_tokens:  # rows x length <= budget: as many full-length rows, at least one
        mb = max(1, -(-cfg.actor.micro_batch_tokens // seq))
    per_sample = shape.layers * (seq * (16 * shape.hidden + 3 * shape.intermediate) + 2 * shape.heads * seq * seq) * b
    per_sample += 3 * seq * shape.vocab * 4
    return MemoryEstimate(seq_len=seq, process=process, state=state, generation=generation, update=mb * per_sample)


_KNOBS = (("rollout.max_tokens_per_turn", 8), ("rollout.max_turns", 1), ("actor.micro_batch_size", 1),
          ("rollout.concurrency", 8))
"""What :func:`fitting_overrides` may lower, and how far."""


def fitting_overrides(cfg: TrainConfig, shape: ModelShape, *, prompt_tokens: int, turns: int, process: int,
                      budget: int) -> list[str] | None:
    """``key=value`` overrides under which the estimate fits ``budget``: the knob whose halving
    lowers the estimate most is halved until it fits; ``None`` when nothing does."""
    cur = {"rollout.max_tokens_per_turn": cfg.rollout.loop.max_tokens_per_turn, "rollout.max_turns": turns,
           "actor.micro_batch_size": cfg.actor.micro_batch_size or cfg.batch_size // cfg.actor.mini_batches,
           "rollout.concurrency": min(cfg.rollout.loop.concurrency, cfg.batch_size)}
    changed: dict[str, int] = {}

    def total(vals: dict[str, int]) -> int:
        c = cfg.with_overrides([f"{k}={v}" for k, v in vals.items() if k != "rollout.max_turns"])
        return estimate_memory(c, shape, prompt_tokens=prompt_tokens, turns=vals["rollout.max_turns"], process=process).total

    while total(cur) > budget:
        options = []
        for key, floor in _KNOBS:
            if cur[key] > floor:
                trial = {**cur, key: max(floor, cur[key] // 2)}
                options.append((total(trial), key, trial[key]))
        if not options:
            return None
        _, key, value = min(options)
        cur[key] = changed[key] = value
    return [f"{k}={v}" for k, v in changed.items()]


def process_rss() -> int:
    """This process's resident memory now, in bytes (0 where ``/proc`` is not there)."""
    status = Path("/proc/self/status")
    if not status.exists():
        return 0
    for line in status.read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def available_bytes() -> int | None:
    """Memory this process may still take on the host: ``MemAvailable`` and, in a container,
    the cgroup's limit less its use, whichever is smaller (``None``: unknown)."""
    found: list[int] = []
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
    cg = Path("/sys/fs/cgroup")
    limit, used = cg / "memory.max", cg / "memory.current"
    if limit.exists() and used.exists():
        raw = limit.read_text().strip()
        if raw != "max":
            found.append(int(raw) - int(used.read_text().strip()))
    return min(found) if found else None


def shape_of(model: object, *, bytes_per_value: int) -> ModelShape:
    """The :class:`ModelShape` of a Hugging Face causal LM (PEFT-wrapped or not)."""
    import torch

    assert isinstance(model, torch.nn.Module)
    config = getattr(model, "config")  # noqa: B009 - a PreTrainedModel (or PEFT model) has one
    params = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    hidden = int(config.hidden_size)
    return ModelShape(
        params=params, trainable=trainable,
        vocab=int(model.get_output_embeddings().weight.shape[0]),  # type: ignore[operator]
        hidden=hidden, layers=int(config.num_hidden_layers), heads=int(config.num_attention_heads),
        intermediate=int(getattr(config, "intermediate_size", 4 * hidden)),
        max_positions=getattr(config, "max_position_embeddings", None), bytes_per_value=bytes_per_value,
    )

