"""Process rewards: label every step of a run's trajectories (``rolloutlab label``).

Two methods: Monte-Carlo continuation (Math-Shepherd: a step's value is the success rate
of N continuations of the policy from its state, the environment brought there by replay)
and action probability (Act-PRM: exp(mean log p(action | state, thought)) over G sampled
thoughts).  The output is an ordinary run directory whose turn rewards are the labels, so
the store, ``analyze`` and the viewer read it as they read any run.
"""

from rolloutlab.label._actionprob import (
    HFScorer,
    NoLogprobs,
    OpenAIScorer,
    Scorer,
    action_split,
    geo_mean_prob,
)
from rolloutlab.label._config import METHODS, PARAMS, LabelConfig
from rolloutlab.label._run import PARTIAL, LabelProgress, LabelResult, apply_labels, run_label
from rolloutlab.label._source import Item, Source, read_source

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
    "read_source",
    "run_label",
]
