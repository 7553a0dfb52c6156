"""The trainer's configuration: one frozen :class:`TrainConfig`, nested sections, every field
documented where it is declared.

A YAML preset (``configs/*.yaml``) gives some fields; ``key=value`` overrides with dotted keys
(``algorithm.adv_estimator=gigpo``) give more; everything else keeps its default.  Values of
overrides are read as YAML scalars (``true``, ``8e-6``, ``[10, 20, 30]``).  Unknown keys are
refused with the list of valid ones, closed choices are ``Literal`` types whose values are
listed on error, and ``__post_init__`` derives sizes and refuses impossible combinations,
naming the fix.  The resolved configuration (:meth:`TrainConfig.to_dict`) goes into
``run.json``, from which ``--resume`` rebuilds it.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from rolloutlab import algos
from rolloutlab.agent import INLINE, LoopConfig, TinyModelConfig, from_flat, settings
from rolloutlab.io import InputError, RolloutlabError

__all__ = [
    "ESTIMATORS",
    "TRAIN_LOOP",
    "ActorConfig",
    "AlgorithmConfig",
    "ConfigError",
    "EnvConfig",
    "LoggingConfig",
    "LoraConfig",
    "ModelConfig",
    "OptimConfig",
    "RolloutConfig",
    "RoundsCtrl",
    "TrainConfig",
    "TrainerConfig",
    "config_keys",
    "load_config",
]


TRAIN_LOOP = LoopConfig(max_tokens_per_turn=64, concurrency=1024, env_retries=0, policy_retries=0, split="train")
"""The trainer's loop defaults: short turns, a whole step's episodes at once (the local
policy batches them), and no per-episode retries — a failed episode fails its group, which
``algorithm.on_failure`` retries or drops whole."""


class ConfigError(RolloutlabError):
    """A configuration that cannot run: unknown key, bad value or impossible combination."""


Estimator = Literal[
    "grpo",
    "dr_grpo",
    "rloo",
    "reinforce_pp_baseline",
    "gigpo",
    "per_turn_norm",
    "center_mean_std",
    "center_mean",
    "std_sum",
]
ESTIMATORS: tuple[str, ...] = get_args(Estimator)
"""Advantage estimators the trainer accepts, each an entry of the registry
``rolloutlab.algos.ESTIMATORS`` (which also holds the replay-only ``grpo_no_std``, spelled
``grpo`` with ``norm_adv_by_std=false`` here); ``__post_init__`` refuses one missing there."""
LossAggMode = Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]


@dataclass(frozen=True)
class EnvConfig:
    """Which environment the policy acts in."""

    id: str = "guess-number-v0"
    """Registered environment id (``rolloutlab env list``) or a remote reference."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the environment's factory (e.g. ``{n: 8}``)."""
    split: str = "train"
    """Task split the trainer samples from."""
    task_seed: int = 0
    """Seed of the split's task order (``EnvSpec.tasks(split, seed)``)."""
    max_tasks: int | None = None
    """Train on the first this many tasks of the split only (``None``: all of them)."""


@dataclass(frozen=True)
class LoraConfig:
    """LoRA adapters through PEFT (``peft.LoraConfig``); off by default (full fine-tuning)."""

    enabled: bool = False
    """Train LoRA adapters instead of every weight."""
    r: int = 8
    """Adapter rank."""
    alpha: int = 16
    """Scaling numerator (``lora_alpha``)."""
    dropout: float = 0.0
    """Dropout on the adapter input."""
    target_modules: str = "all-linear"
    """PEFT ``target_modules`` (``all-linear`` or a comma-separated list of module names)."""


@dataclass(frozen=True)
class ModelConfig:
    """The policy model."""

    path: str | None = None
    """A local Hugging Face model folder (``save_pretrained`` layout). Required unless ``tiny``."""
    tiny: bool = False
    """Use a randomly initialised tiny ``Qwen2ForCausalLM`` with a tokenizer built locally
    (the 16-id word tokenizer for ``guess-number-v0``, bytes otherwise) instead of ``path``."""
    tiny_shape: TinyModelConfig = field(default_factory=TinyModelConfig, metadata=INLINE)
    """Tiny model: its shape (keys ``model.hidden_size``, ``model.num_layers``,
    ``model.num_heads``, ``model.intermediate_size``, ``model.max_positions``), declared once in
    :class:`rolloutlab.agent.TinyModelConfig`."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Parameter dtype of a loaded model (the tiny one is float32)."""
    device: str = "cpu"
    """Torch device (``cpu``, ``cuda``, ``cuda:1``)."""
    lora: LoraConfig = field(default_factory=LoraConfig)
    """LoRA section."""


@dataclass(frozen=True)
class RoundsCtrl:
    """Per-episode turn cap over training (ScalingInter-RL, AgentGym-RL)."""

    type: Literal["fixed", "scaling_inter_stepwise"] = "fixed"
    """``fixed``: the cap is ``rounds[0]`` (or the environment's ``max_turns`` when ``rounds``
    is empty); ``scaling_inter_stepwise``: ``rounds[min((step-1) // steps_scaling_inter, -1)]``
    (``rolloutlab.algos.max_rounds_at``), a pure function of the step."""
    rounds: list[int] = field(default_factory=list)
    """Caps, in stage order (e.g. ``[10, 20, 30]``)."""
    steps_scaling_inter: int = 100
    """Steps per stage."""


@dataclass(frozen=True)
class RolloutConfig:
    """How episodes are collected each step."""

    tasks_per_step: int = 32
    """Distinct tasks (GRPO groups) per step."""
    n: int = 8
    """Episodes per task (group size)."""
    loop: LoopConfig = field(default_factory=lambda: TRAIN_LOOP, metadata=INLINE)
    """The loop settings (:class:`rolloutlab.agent.LoopConfig`, shared with ``rolloutlab eval``),
    read as this section's own keys: ``rollout.max_turns`` (the turn cap when ``rounds_ctrl``
    gives none), ``rollout.max_tokens_per_turn``, ``rollout.parser``, ``rollout.temperature``,
    ``rollout.top_p``, ``rollout.invalid_action_penalty``, ``rollout.concurrency``,
    ``rollout.env_timeout_s``, ``rollout.env_retries``, ``rollout.policy_timeout_s``,
    ``rollout.policy_retries``, ``rollout.policy_backoff_s``, ``rollout.policy_backoff_max_s``.
    The trainer's defaults are :data:`TRAIN_LOOP`'s."""
    rounds_ctrl: RoundsCtrl = field(default_factory=RoundsCtrl)
    """Horizon schedule (ScalingInter-RL)."""
    backend: Literal["local", "openai"] = "local"
    """``local``: the trainer's own model samples (batched, in process); ``openai``: an
    OpenAI-compatible server (vLLM / SGLang) samples and gets the weights after each update."""
    base_url: str | None = None
    """Server URL for ``backend=openai`` (``http://host:8000/v1``)."""
    weight_sync: Literal["none", "filesystem", "vllm_lora", "sglang_disk"] = "filesystem"
    """How a server gets new weights (``backend=openai``): ``filesystem`` writes them to
    ``sync_dir`` only; ``vllm_lora`` also calls vLLM's ``/v1/load_lora_adapter``;
    ``sglang_disk`` calls SGLang's ``/update_weights_from_disk``."""
    sync_dir: str | None = None
    """Folder the weights are written to for the server (default ``RUN_DIR/weights``)."""
    executor: Literal["local", "ray"] = "local"
    """``local``: the step's episodes run with asyncio in the trainer's process; ``ray``: they
    are fanned out over Ray workers (``backend=openai`` only: each worker rebuilds the
    environment and a client of the same server; the episodes come back in order)."""
    ray_workers: int = 0
    """Ray tasks per step for ``executor=ray`` (0: one per CPU Ray reports)."""


@dataclass(frozen=True)
class AlgorithmConfig:
    """Advantages, dynamic sampling and failure handling."""

    adv_estimator: Estimator = "grpo"
    """One of ``grpo``, ``dr_grpo``, ``rloo``, ``reinforce_pp_baseline``, ``gigpo``,
    ``per_turn_norm``, ``center_mean_std``, ``center_mean``, ``std_sum`` (``rolloutlab.algos``)."""
    norm_adv_by_std: bool = True
    """GRPO: divide by the group std (``False`` is Dr. GRPO's advantage)."""
    gamma: float = 0.95
    """GiGPO: discount of step returns."""
    gigpo_omega: float = 1.0
    """GiGPO: weight of the step-level advantage."""
    gigpo_mode: Literal["mean_std_norm", "mean_norm"] = "mean_std_norm"
    """GiGPO: normalisation at both levels."""
    gigpo_episode_stats: Literal["trajectory", "turn"] = "trajectory"
    """GiGPO: what the episode-level group mean and std pool.  ``trajectory``: one entry per
    episode (the paper's Eq. 3); ``turn``: one entry per turn, so long episodes weigh more,
    as verl-agent's trainer always does (``episode_norm_reward`` with its default
    ``compute_mean_std_cross_steps=True``, ``gigpo/core_gigpo.py``)."""
    dynamic_sampling: bool = False
    """DAPO: drop groups whose rewards are all equal and collect more until the step has
    ``tasks_per_step`` informative groups (or ``max_refills`` extra rounds were tried)."""
    max_refills: int = 4
    """Dynamic sampling: extra collection rounds per step at most."""
    on_failure: Literal["retry", "drop"] = "retry"
    """A group with an ungraded episode: ``retry`` reruns the whole group with fresh
    environments (up to ``max_retries``), then drops it; ``drop`` drops it at once.  An
    ungraded episode is never scored 0."""
    max_retries: int = 1
    """Retries of a failed group."""
    process_rewards: str | None = None
    """A labelled run directory (``rolloutlab label --out DIR``): a turn whose task and
    replies so far match a labelled turn there takes that label as its reward in the per-turn
    estimators; other turns keep the environment's (``docs/process-rewards.md``).  ``None``:
    the environment's rewards only."""


@dataclass(frozen=True)
class ActorConfig:
    """The policy loss."""

    clip_ratio_low: float = 0.2
    """PPO clip: ratio floor is ``1 - clip_ratio_low``."""
    clip_ratio_high: float = 0.2
    """PPO clip: ratio ceiling is ``1 + clip_ratio_high`` (clip-higher: DAPO uses 0.28)."""
    clip_ratio_c: float | None = 3.0
    """Dual clip (Ye et al. 2020): for negative advantages the loss is bounded by
    ``-A * clip_ratio_c``.  On by default with 3.0, as verl's vanilla policy loss always
    applies it (``compute_policy_loss_vanilla``, ``verl/trainer/ppo/core_algos.py`` at
    b178a3cd); ``None`` turns it off."""
    loss_agg_mode: LossAggMode = "token-mean"
    """Loss reduction, verl's ``loss_agg_mode`` (``rolloutlab.algos.agg_loss``)."""
    loss_norm_constant: float | None = None
    """``seq-mean-token-sum-norm``: the constant divisor (verl's ``loss_scale_factor``).
    ``None``: the run's maximum response length, ``rollout.max_tokens_per_turn`` times the
    largest turn cap of the run (``rolloutlab.train._update.loss_norm_constant``)."""
    entropy_coef: float = 0.0
    """Entropy bonus weight (loss -= coef * entropy)."""
    kl_coef: float = 0.0
    """Weight of the KL to the reference (initial) model; 0 turns the reference off."""
    kl_in: Literal["loss", "reward"] = "loss"
    """Where the KL goes: a loss term, or subtracted from the episode reward before advantages."""
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"
    """KL estimator (Schulman's k1 ``log r``, k2 ``(log r)^2 / 2``, k3 ``r - 1 - log r``)."""
    tis_cap: float | None = None
    """Truncated importance sampling: weight each token by ``min(pi_old / pi_sampler, cap)``
    (for a sampler that is not the trainer's engine); ``None``: off."""
    ppo_epochs: int = 1
    """Passes over each step's batch."""
    mini_batches: int = 1
    """Optimizer steps per pass (the batch is split into this many mini-batches)."""
    micro_batch_size: int = 0
    """Samples per forward/backward (gradient accumulation); 0: the whole mini-batch."""
    micro_batch_tokens: int = 0
    """Token budget per forward/backward, in place of ``micro_batch_size`` (verl's
    ``use_dynamic_bsz`` with ``ppo_max_token_len_per_gpu``): the mini-batch's samples, longest
    first, are cut into micro-batches of at most this many positions (rows times the longest
    row), so each pads little (similar lengths) and short samples share a pass; a sample
    longer than the budget runs alone.  The loss and gradient are those of the whole
    mini-batch either way.  0: off."""
    check_masks: bool = True
    """Refuse a batch whose loss mask disagrees with the sampler: a token with a non-zero
    sampler log-prob but mask 0, or mask 1 on a token with sampler log-prob 0.0 that the
    trainer gives probability < exp(-1) (``Updater.check_masks``) — learning silently
    stalls otherwise."""


@dataclass(frozen=True)
class OptimConfig:
    """AdamW and its schedule."""

    lr: float = 1e-6
    """Peak learning rate."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    """AdamW betas."""
    eps: float = 1e-8
    """AdamW eps."""
    warmup_steps: int = 0
    """Linear warm-up from 0 over this many optimizer steps."""
    schedule: Literal["constant", "cosine", "linear"] = "constant"
    """After warm-up: constant, cosine or linear decay to ``min_lr_ratio * lr`` at the last step."""
    min_lr_ratio: float = 0.0
    """Floor of the decaying schedules, as a fraction of ``lr``."""
    grad_clip: float | None = 1.0
    """Max global gradient norm; ``None``: no clipping (the norm is still logged)."""


@dataclass(frozen=True)
class LoggingConfig:
    """Where metrics go besides ``metrics.jsonl``."""

    progress: bool = True
    """Show progress each step: a rich progress bar with the key figures on a terminal, one
    line per step with those figures when stdout is not a terminal (a file, a pipe, a job
    log); ``false`` (or ``--no-progress``) prints nothing per step."""
    tensorboard: bool = True
    """Also write TensorBoard events under ``RUN_DIR/tensorboard`` when it is installed."""
    wandb: bool = False
    """Also log to Weights & Biases (the ``wandb`` extra; a run that asks for it without wandb
    installed is refused before it starts).  Credentials and entity come from wandb's own
    environment (``WANDB_API_KEY``, ``WANDB_ENTITY``, ``WANDB_MODE=offline``)."""
    wandb_project: str | None = None
    """W&B project; ``None``: ``$WANDB_PROJECT``, else wandb's default."""
    wandb_run_name: str | None = None
    """W&B run name; ``None``: the config's ``name``."""
    write_rollouts: bool = True
    """Write ``rollouts/step_NNNNNN.jsonl`` each step."""


@dataclass(frozen=True)
class TrainerConfig:
    """Length of the run, checkpoints, threads."""

    total_steps: int = 100
    """Training steps (each: collect, advantages, update)."""
    save_every: int = 50
    """Checkpoint every this many steps (and at the last step); 0: only at the end."""
    keep_checkpoints: int = 0
    """Keep only the newest this many checkpoints; 0 keeps all (evaluation reads them)."""
    threads: int = 2
    """``torch.set_num_threads`` on the CPU."""
    check_memory: bool = True
    """On the CPU, estimate the step's peak memory before the run starts and refuse a run
    whose estimate exceeds the memory available, naming overrides that fit
    (``rolloutlab.train._memory``; an upper bound: ``false`` runs it anyway)."""
    strategy: Literal["ddp", "fsdp"] = "ddp"
    """Data parallelism under ``torchrun`` (WORLD_SIZE > 1; one process ignores it): ``ddp``
    replicates the model on every rank (torch DDP); ``fsdp`` shards parameters, gradients and
    optimizer state over the ranks (FSDP2 ``fully_shard``, a unit per decoder layer).  With
    ``fsdp`` and ``rollout.backend=local`` every rank also keeps an unsharded copy to sample
    with, refreshed after each update; with a server, rank 0 keeps one on the CPU to write
    checkpoints from.  Checkpoints are full either way, so a run resumes under the other
    strategy (``rolloutlab.train._parallel``)."""
    deterministic: bool = True
    """Reseed the sampler from (seed, step) each step so rollouts are a pure function of the
    step (exact resume)."""


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run needs; ``run.json`` keeps it resolved."""

    name: str = "run"
    """Run name (``run.json``)."""
    seed: int = 0
    """Seed of the model init, the task order, sampling and the environments."""
    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    actor: ActorConfig = field(default_factory=ActorConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)

    # derived (computed in __post_init__, not settable)
    batch_size: int = field(init=False)
    """Episodes per step: ``tasks_per_step * n``."""

    def __post_init__(self) -> None:
        r, a, act = self.rollout, self.algorithm, self.actor
        object.__setattr__(self, "batch_size", r.tasks_per_step * r.n)
        _positive(self, "rollout.tasks_per_step", r.tasks_per_step)
        _positive(self, "rollout.n", r.n)
        _positive(self, "trainer.total_steps", self.trainer.total_steps)
        _positive(self, "actor.ppo_epochs", act.ppo_epochs)
        _positive(self, "actor.mini_batches", act.mini_batches)
        spec = algos.ESTIMATORS.get(a.adv_estimator)
        if spec is None:
            raise ConfigError(
                f"algorithm.adv_estimator={a.adv_estimator} has no entry in the estimator registry "
                f"(rolloutlab.algos.ESTIMATORS: {', '.join(algos.ESTIMATORS)}); register it with "
                "@register_estimator or pick one of those"
            )
        if r.n < spec.min_n:
            raise ConfigError(
                f"algorithm.adv_estimator={a.adv_estimator} needs rollout.n >= {spec.min_n} ({spec.singleton}); "
                f"set rollout.n={spec.min_n} or more, or use reinforce_pp_baseline"
            )
        if a.process_rewards and spec.unit == "trajectory":
            raise ConfigError(
                f"algorithm.process_rewards needs a per-turn estimator (per_turn_norm, center_mean_std, center_mean, "
                f"std_sum, gigpo); algorithm.adv_estimator={a.adv_estimator} uses the episode reward only"
            )
        if r.tasks_per_step % act.mini_batches:
            raise ConfigError(
                f"actor.mini_batches={act.mini_batches} must divide rollout.tasks_per_step={r.tasks_per_step} "
                "(mini-batches hold whole groups)"
            )
        if act.micro_batch_size < 0:
            raise ConfigError("actor.micro_batch_size must be >= 0 (0: no accumulation)")
        if act.micro_batch_tokens < 0:
            raise ConfigError(f"actor.micro_batch_tokens must be >= 0 (0: off), got {act.micro_batch_tokens}")
        if not 0 <= act.clip_ratio_low < 1 or act.clip_ratio_high < 0:
            raise ConfigError(
                f"actor.clip_ratio_low must be in [0, 1) and clip_ratio_high >= 0, got "
                f"{act.clip_ratio_low}, {act.clip_ratio_high}"
            )
        if act.clip_ratio_c is not None and act.clip_ratio_c <= 1:
            raise ConfigError(f"actor.clip_ratio_c (dual clip) must be > 1, got {act.clip_ratio_c}; null turns it off")
        if act.loss_norm_constant is not None and act.loss_norm_constant <= 0:
            raise ConfigError(f"actor.loss_norm_constant must be > 0, got {act.loss_norm_constant}; null: the run's "
                              "maximum response length")
        if act.tis_cap is not None and act.tis_cap <= 0:
            raise ConfigError(f"actor.tis_cap must be > 0, got {act.tis_cap}; null turns TIS off")
        if not self.model.tiny and not self.model.path and r.backend == "local":
            raise ConfigError("model.path is required (a local model folder), or set model.tiny=true for the CPU tiny model")
        if r.executor == "ray" and r.backend != "openai":
            raise ConfigError("rollout.executor=ray needs rollout.backend=openai: with backend=local the model lives in "
                              "the trainer's process, and Ray workers could not sample from it")
        if r.ray_workers < 0:
            raise ConfigError(f"rollout.ray_workers must be >= 0, got {r.ray_workers}")
        if r.backend == "openai" and not r.base_url:
            raise ConfigError("rollout.backend=openai needs rollout.base_url (http://host:port/v1)")
        rc = r.rounds_ctrl
        if rc.type == "scaling_inter_stepwise" and not rc.rounds:
            raise ConfigError("rollout.rounds_ctrl.type=scaling_inter_stepwise needs rounds, e.g. rollout.rounds_ctrl.rounds=[10,20,30]")
        if any(x < 1 for x in rc.rounds) or rc.steps_scaling_inter < 1:
            raise ConfigError("rollout.rounds_ctrl.rounds must be >= 1 and steps_scaling_inter >= 1")
        if self.optim.lr <= 0:
            raise ConfigError(f"optim.lr must be > 0, got {self.optim.lr}")
        if len(self.optim.betas) != 2:
            raise ConfigError(f"optim.betas must be two numbers, got {self.optim.betas}")

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the derived fields left out), as saved in ``run.json``."""
        return _to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<config>") -> TrainConfig:
        """Build from nested plain data; unknown keys and ill-typed values are refused."""
        return typing.cast(TrainConfig, _build(cls, data, prefix="", source=source))

    def with_overrides(self, overrides: Sequence[str]) -> TrainConfig:
        """A copy with ``key=value`` overrides applied (dotted keys, YAML values)."""
        return TrainConfig.from_dict(apply_overrides(self.to_dict(), overrides), source="overrides")


def _positive(cfg: TrainConfig, key: str, v: int) -> None:
    if v < 1:
        raise ConfigError(f"{key} must be >= 1, got {v}")


def _to_dict(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            if not f.init or not f.metadata.get("setting", True):
                continue
            v = _to_dict(getattr(obj, f.name))
            if f.metadata.get("inline"):
                out.update(v)  # an inline section's fields read as the holder's own
            else:
                out[f.name] = v
        return out
    if isinstance(obj, list | tuple):
        return [_to_dict(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _to_dict(v) for k, v in obj.items()}
    return obj


def config_keys(cls: type = TrainConfig, prefix: str = "") -> list[str]:
    """Every settable dotted key."""
    out: list[str] = []
    for key, _, t in settings(cls, prefix):
        if dataclasses.is_dataclass(t):
            out.extend(config_keys(typing.cast(type, t), f"{key}."))
        else:
            out.append(key)
    return out


def _unknown(key: str, valid: Sequence[str], source: str) -> ConfigError:
    near = difflib.get_close_matches(key, valid, n=1)
    hint = f" Did you mean {near[0]!r}?" if near else ""
    return ConfigError(f"{source}: unknown config key {key!r}.{hint} Valid keys: {', '.join(valid)}")


def _build(cls: type, data: Any, *, prefix: str, source: str) -> Any:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: {prefix.rstrip('.') or 'config'} must be a mapping, got {data!r}")
    types_ = {name: t for name, _, t in settings(cls)}
    values: dict[str, Any] = {}
    for k, v in data.items():
        if k not in types_:
            raise _unknown(prefix + str(k), config_keys(TrainConfig), source)
        values[k] = _coerce(types_[k], v, prefix + k, source)
    try:
        return from_flat(cls, values)  # an inline section starts from the holder's default for it
    except ConfigError:
        raise
    except RolloutlabError as e:  # a shared section (LoopConfig) refusing a value
        raise ConfigError(f"{source}: {prefix.rstrip('.') or 'config'}: {e}") from None


def _coerce(tp: Any, v: Any, key: str, source: str) -> Any:
    origin = get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _build(typing.cast(type, tp), v, prefix=key + ".", source=source)
    if origin is Literal:
        choices = get_args(tp)
        if v not in choices:
            raise ConfigError(f"{source}: {key}={v!r} is not one of: {', '.join(map(str, choices))}")
        return v
    if origin in (typing.Union, types.UnionType):
        args = get_args(tp)
        if v is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(a, v, key, source)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if errors else f"{source}: {key}: bad value {v!r}")
    if origin is list:
        (inner,) = get_args(tp)
        if not isinstance(v, list | tuple):
            raise ConfigError(f"{source}: {key} must be a list, got {v!r}")
        return [_coerce(inner, x, key, source) for x in v]
    if origin is dict:
        if not isinstance(v, Mapping):
            raise ConfigError(f"{source}: {key} must be a mapping, got {v!r}")
        return dict(v)
    if tp is bool:
        if not isinstance(v, bool):
            raise ConfigError(f"{source}: {key} must be true or false, got {v!r}")
        return v
    if tp is int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"{source}: {key} must be an integer, got {v!r}")
        return v
    if tp is float:
        if isinstance(v, str):  # YAML 1.1 reads 1e-3 (no dot) as a string
            try:
                return float(v)
            except ValueError:
                pass
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ConfigError(f"{source}: {key} must be a number, got {v!r}")
        return float(v)
    if tp is str:
        if not isinstance(v, str):
            raise ConfigError(f"{source}: {key} must be a string, got {v!r}")
        return v
    if tp is Any:
        return v
    raise ConfigError(f"{source}: {key}: unsupported type {tp}")  # pragma: no cover


def _parse_value(text: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError:
        return text


def apply_overrides(data: dict[str, Any], overrides: Sequence[str], cls: type | None = None, *,
                    example: str = "algorithm.adv_estimator=rloo") -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides to nested plain data (copied); the keys are checked
    against ``cls``'s settings (:class:`TrainConfig` unless given)."""
    import copy

    out = copy.deepcopy(data)
    valid = config_keys(cls or TrainConfig)
    for ov in overrides:
        key, eq, raw = ov.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ConfigError(f"override {ov!r} is not key=value (e.g. {example})")
        parts = key.split(".")
        # env.kwargs.X and other dict-valued fields take free sub-keys
        node: Any = out
        for i, p in enumerate(parts[:-1]):
            prefix = ".".join(parts[: i + 1])
            if prefix in valid:  # a dict field such as env.kwargs
                node = node.setdefault(p, {})
                continue
            if not any(k.startswith(prefix + ".") for k in valid):
                raise _unknown(key, valid, "overrides")
            node = node.setdefault(p, {})
        dict_field = ".".join(parts[:-1]) in valid
        if key not in valid and not dict_field:
            raise _unknown(key, valid, "overrides")
        node[parts[-1]] = _parse_value(raw)
    return out


def read_preset(path: str | Path | None) -> tuple[dict[str, Any], str]:
    """A preset's plain data (YAML file or ``configs/`` name) and its source name for
    messages; ``path`` None: no data, ``"<defaults>"``."""
    import yaml

    if path is None:
        return {}, "<defaults>"
    p = resolve_preset(path)
    try:
        loaded = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise InputError(f"not valid YAML: {getattr(e, 'problem', e)}", path=p, line=mark.line + 1 if mark else None) from None
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise InputError("a config file must be a mapping of sections", path=p)
    return loaded, str(p)


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> TrainConfig:
    """A preset file (YAML) plus overrides; ``path`` None: the defaults plus overrides.

    ``path`` may also be a preset name (``demo``) looked up in the project's ``configs/``."""
    data, source = read_preset(path)
    # the file alone may be incomplete (presets leave model.path to the command line)
    merged = apply_overrides(data, overrides)
    return TrainConfig.from_dict(merged, source=source if not overrides else f"{source} + overrides")


def presets_dir() -> Path:
    """The presets shipped with the package (``rolloutlab/configs/``; a source checkout also
    shows them as ``configs/`` at its top)."""
    return Path(__file__).resolve().parent.parent / "configs"


def resolve_preset(path: str | Path) -> Path:
    p = Path(path)
    if p.exists():
        return p
    cand = presets_dir() / f"{p.name}.yaml" if p.suffix == "" else None
    if cand is not None and cand.exists():
        return cand
    names = sorted(q.stem for q in presets_dir().glob("*.yaml"))
    raise InputError(f"no such config file; presets: {', '.join(names) or '(none found)'}", path=p)
