"""The multi-turn agent loop, action parsers and policy backends."""

from rolloutlab.agent._loop import EpisodeJob, LoopConfig, run_episode, run_episodes
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
from rolloutlab.agent._tokens import TokenTrack, check_token_sample
from rolloutlab.agent._types import (
    ChatTokenizer,
    Episode,
    FinishReason,
    GenerateRequest,
    Generation,
    Policy,
    TokenSample,
)

__all__ = [
    "PARSERS",
    "SCRIPTS",
    "ChatTokenizer",
    "Episode",
    "EpisodeJob",
    "FinishReason",
    "GenerateRequest",
    "Generation",
    "LoopConfig",
    "OpenAIPolicy",
    "Parsed",
    "Policy",
    "PolicyError",
    "RandomPolicy",
    "ScriptedPolicy",
    "TokenSample",
    "TokenTrack",
    "check_token_sample",
    "format_action",
    "format_hint",
    "get_parser",
    "make_policy",
    "parse_action",
    "register_script",
    "run_episode",
    "run_episodes",
]
