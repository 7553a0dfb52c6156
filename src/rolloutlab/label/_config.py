"""``LabelConfig``: one typed object for ``rolloutlab label``, every field documented; the
command's options are generated from it (``rolloutlab.cli.label``).  Light: no torch, no
environments, no pydantic (the command line imports it to build its options)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rolloutlab.agent import INLINE, NOT_A_SETTING, LoopConfig
from rolloutlab.errors import RolloutlabError

Method = Literal["mc", "action-prob"]
METHODS: tuple[str, ...] = ("mc", "action-prob")

PARAMS = ("n", "g", "normalise", "action_prompted", "hard_threshold", "seed", "temperature", "top_p",
          "max_tokens_per_turn", "parser", "max_turns", "invalid_action_penalty")
"""The settings that decide the labels' values: recorded in ``run.json`` (``config.labels.params``)
and required to be the same when a labelling resumes."""


def parse_steps(text: str) -> tuple[int, int]:
    """``"A-B"`` or ``"A"`` as ``(A, B)`` (``(A, A)``): training steps, both included."""
    first, dash, last = text.strip().partition("-")
    try:
        a, b = int(first), int(last) if dash else int(first)
    except ValueError:
        a = b = -1
    if a < 0 or b < a:
        raise RolloutlabError(f"--steps {text!r}: expected A-B (training steps A to B, both included, 0 <= A <= B) "
                              "or A (one step), e.g. --steps 26-30")
    return a, b


@dataclass(frozen=True)
class LabelConfig:
    """Label every step of the trajectories of a run with a process reward."""

    run: Path = field(metadata=NOT_A_SETTING)
    """The run directory to label (``rollouts/step_*.jsonl`` and ``eval/*/episodes.jsonl``)."""
    out: Path = field(default=Path("labelled"))
    """Run directory to write: the same trajectories, each turn's ``reward`` the label;
    re-running into it resumes (trajectories already labelled are kept, not redone)."""
    method: str = "mc"
    """``mc``: success rate of N continuations of the policy from the state after the step
    (Math-Shepherd); ``action-prob``: exp(mean log p(action tokens | state, thought)) under
    the model, averaged over G sampled thoughts (Act-PRM)."""
    policy: str = ""
    """The model: ``hf:PATH`` (a local model folder, e.g. a training checkpoint),
    ``openai:BASE_URL:MODEL`` (an OpenAI-compatible server), or for ``mc`` also ``random`` /
    ``scripted:NAME``."""
    tokenizer: Path | None = None
    """Folder of the server model's tokenizer (``openai:`` with ``action-prob``: log-probs
    are asked for token ids, so the prompt is rendered here)."""
    n: int = 8
    """``mc``: continuations per step (N)."""
    g: int = 4
    """``action-prob``: thoughts sampled per step (G); a step whose reply carries no
    thought is scored once, without sampling."""
    normalise: bool = False
    """``action-prob``: also record each thought's probability normalised within its group,
    p_g / sum_h p_h (Act-PRM's option; the step's value stays the mean of the p_g)."""
    action_prompted: bool = False
    """``action-prob``: sample each thought after showing the model the action taken
    (state + action, then a generated thought), Act-PRM's action-prompted variant."""
    hard_threshold: float = 0.5
    """``action-prob``: the hard label is value >= this (``mc``'s hard label is any success)."""
    env: str | None = None
    """Environment id; default: the run's (``run.json``) or the trajectories' ``data_source``."""
    limit: int | None = None
    """Label at most this many trajectories (in file order); the others are copied unlabelled."""
    steps: str | None = None
    """Label only the trajectories of these training steps, ``A-B`` (both included) or ``A``
    (e.g. ``26-30``: a run's last five); the others are copied unlabelled, as with ``--limit``.
    Not among the settings recorded in ``config.labels.params``: it picks which trajectories
    get labels, not what a label is, so a later run with other steps into the same ``--out``
    resumes and labels those too."""
    seed: int = 0
    """Seeds the continuations' and the thoughts' sampling."""
    loop: LoopConfig = field(default_factory=LoopConfig, metadata=INLINE)
    """How continuations and thoughts are sampled (temperature, top-p, concurrency, timeouts);
    ``max_turns`` and ``parser`` default to each trajectory's own."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise RolloutlabError(f"--method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if not self.policy:
            raise RolloutlabError("give the model with --policy (hf:PATH or openai:BASE_URL:MODEL)")
        kind = self.policy.partition(":")[0]
        allowed = ("hf", "openai") if self.method == "action-prob" else ("hf", "openai", "random", "scripted")
        if kind not in allowed:
            raise RolloutlabError(
                f"--policy {self.policy!r}: --method action-prob needs a model that gives log-probs: hf:PATH or "
                "openai:BASE_URL:MODEL" if self.method == "action-prob" else
                f"--policy {self.policy!r}: expected hf:PATH, openai:BASE_URL:MODEL, random or scripted:NAME")
        if self.method == "action-prob" and kind == "openai" and self.tokenizer is None:
            raise RolloutlabError("--method action-prob with an openai: policy needs --tokenizer FOLDER (the server "
                                  "model's tokenizer): log-probs are asked for token ids")
        if self.n < 1 or self.g < 1:
            raise RolloutlabError(f"--n and --g must be >= 1, got {self.n} and {self.g}")
        if self.limit is not None and self.limit < 1:
            raise RolloutlabError(f"--limit must be >= 1, got {self.limit}")
        if self.steps is not None:
            parse_steps(self.steps)
        if self.run.resolve() == self.out.resolve():
            raise RolloutlabError(f"--out {self.out} is the run being labelled; choose another folder")

    def step_range(self) -> tuple[int, int] | None:
        """``--steps`` as ``(first, last)``, both included; None: every step."""
        return None if self.steps is None else parse_steps(self.steps)

    def params(self) -> dict[str, Any]:
        """The settings that decide the values (:data:`PARAMS`) of this method."""
        flat = {**dataclasses.asdict(self.loop), **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}}
        skip = {"g", "normalise", "action_prompted", "hard_threshold"} if self.method == "mc" else {"n"}
        return {k: flat[k] for k in PARAMS if k not in skip}


__all__ = ["METHODS", "PARAMS", "LabelConfig", "Method", "parse_steps"]
