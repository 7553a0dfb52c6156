"""The multi-turn agent loop, action parsers and policy backends.

The names below are imported on first use (PEP 562), so that the command line can build
its options from :class:`LoopConfig` (``_settings``, light) without loading the loop, the
environments and pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rolloutlab._lazy import lazy_exports

if TYPE_CHECKING:
    from rolloutlab.agent._executor import EpisodeSpec, run_ray
    from rolloutlab.agent._hf import HFPolicy, save_model, suppress_mask, tiny_model, token_logprobs
    from rolloutlab.agent._hf_export import GENERATION_FIELDS, generation_settings, hf_tokenizer
    from rolloutlab.agent._loop import EpisodeJob, ReplayPrefix, run_episode, run_episodes
    from rolloutlab.agent._parsers import PARSERS, Parsed, format_hint, get_parser, parse_action
    from rolloutlab.agent._policies import (
        SCRIPTS,
        OpenAIPolicy,
        PolicyError,
        RandomPolicy,
        ScriptedPolicy,
        format_action,
        make_policy,
        register_script,
    )
    from rolloutlab.agent._settings import (
        INLINE,
        NOT_A_SETTING,
        LoopConfig,
        TinyModelConfig,
        from_flat,
        settings,
    )
    from rolloutlab.agent._tokenizers import (
        ByteTokenizer,
        HFChatTokenizer,
        WordTokenizer,
        guess_number_tokenizer,
        load_tokenizer,
    )
    from rolloutlab.agent._tokens import (
        TOKEN_DIGITS,
        TokenTrack,
        check_token_sample,
        turn_positions,
        turn_tokens,
    )
    from rolloutlab.agent._types import (
        ChatTokenizer,
        Episode,
        FinishReason,
        GenerateRequest,
        Generation,
        Policy,
        TokenSample,
        TrainablePolicy,
    )

_WHERE = {
    **dict.fromkeys(("EpisodeSpec", "run_ray"), "_executor"),
    # these need torch: imported only when asked for
    **dict.fromkeys(("HFPolicy", "save_model", "suppress_mask", "tiny_model", "token_logprobs"), "_hf"),
    **dict.fromkeys(("GENERATION_FIELDS", "generation_settings", "hf_tokenizer"), "_hf_export"),
    **dict.fromkeys(("ByteTokenizer", "HFChatTokenizer", "WordTokenizer", "guess_number_tokenizer", "load_tokenizer"),
                    "_tokenizers"),
    **dict.fromkeys(("EpisodeJob", "ReplayPrefix", "run_episode", "run_episodes"), "_loop"),
    **dict.fromkeys(("PARSERS", "Parsed", "format_hint", "get_parser", "parse_action"), "_parsers"),
    **dict.fromkeys(("SCRIPTS", "OpenAIPolicy", "PolicyError", "RandomPolicy", "ScriptedPolicy", "format_action",
                     "make_policy", "register_script"), "_policies"),
    **dict.fromkeys(("INLINE", "NOT_A_SETTING", "LoopConfig", "TinyModelConfig", "from_flat", "settings"), "_settings"),
    **dict.fromkeys(("TOKEN_DIGITS", "TokenTrack", "check_token_sample", "turn_positions", "turn_tokens"), "_tokens"),
    **dict.fromkeys(("ChatTokenizer", "Episode", "FinishReason", "GenerateRequest", "Generation", "Policy", "TrainablePolicy",
                     "TokenSample"), "_types"),
}

__all__ = [
    "GENERATION_FIELDS",
    "INLINE",
    "NOT_A_SETTING",
    "PARSERS",
    "SCRIPTS",
    "TOKEN_DIGITS",
    "ByteTokenizer",
    "ChatTokenizer",
    "Episode",
    "EpisodeJob",
    "EpisodeSpec",
    "FinishReason",
    "GenerateRequest",
    "Generation",
    "HFChatTokenizer",
    "HFPolicy",
    "LoopConfig",
    "OpenAIPolicy",
    "Parsed",
    "Policy",
    "PolicyError",
    "RandomPolicy",
    "ReplayPrefix",
    "ScriptedPolicy",
    "TinyModelConfig",
    "TokenSample",
    "TokenTrack",
    "TrainablePolicy",
    "WordTokenizer",
    "check_token_sample",
    "format_action",
    "format_hint",
    "from_flat",
    "generation_settings",
    "get_parser",
    "guess_number_tokenizer",
    "hf_tokenizer",
    "load_tokenizer",
    "make_policy",
    "parse_action",
    "register_script",
    "run_episode",
    "run_episodes",
    "run_ray",
    "save_model",
    "settings",
    "suppress_mask",
    "tiny_model",
    "token_logprobs",
    "turn_positions",
    "turn_tokens",
]

__getattr__, __dir__ = lazy_exports(__name__, _WHERE, __all__)
