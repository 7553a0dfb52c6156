"""Process rewards: label every step of a run's trajectories (``rolloutlab label``).

Two methods: Monte-Carlo continuation (Math-Shepherd: a step's value is the success rate
of N continuations of the policy from its state, the environment brought there by replay)
and action probability (Act-PRM: exp(mean log p(action | state, thought)) over G sampled
thoughts).  The output is an ordinary run directory whose turn rewards are the labels, so
the store, ``analyze`` and the viewer read it as they read any run.  Reuses ``agent`` and
``envs``; never imports ``train``.  The names below are imported on first use (PEP 562), so
that the command line builds its options from :class:`LabelConfig` without loading torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rolloutlab._lazy import lazy_exports

if TYPE_CHECKING:
    from rolloutlab.label._actionprob import (
        HFScorer,
        NoLogprobs,
        OpenAIScorer,
        Scorer,
        action_split,
        geo_mean_prob,
        span_ids,
    )
    from rolloutlab.label._config import METHODS, PARAMS, LabelConfig
    from rolloutlab.label._run import PARTIAL, LabelProgress, LabelResult, apply_labels, run_label
    from rolloutlab.label._source import Item, Source, history_before, read_source

_WHERE = {
    **dict.fromkeys(("HFScorer", "NoLogprobs", "OpenAIScorer", "Scorer", "action_split", "geo_mean_prob", "span_ids"),
                    "_actionprob"),
    **dict.fromkeys(("METHODS", "PARAMS", "LabelConfig"), "_config"),
    **dict.fromkeys(("PARTIAL", "LabelProgress", "LabelResult", "apply_labels", "run_label"), "_run"),
    **dict.fromkeys(("Item", "Source", "history_before", "read_source"), "_source"),
}

__all__ = [
    "METHODS",
    "PARAMS",
    "PARTIAL",
    "HFScorer",
    "Item",
    "LabelConfig",
    "LabelProgress",
    "LabelResult",
    "NoLogprobs",
    "OpenAIScorer",
    "Scorer",
    "Source",
    "action_split",
    "apply_labels",
    "geo_mean_prob",
    "history_before",
    "read_source",
    "run_label",
    "span_ids",
]

__getattr__, __dir__ = lazy_exports(__name__, _WHERE, __all__)
