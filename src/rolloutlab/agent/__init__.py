"""The multi-turn agent loop, action parsers and policy backends."""

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
    "ChatTokenizer",
    "Episode",
    "FinishReason",
    "GenerateRequest",
    "Generation",
    "Policy",
    "TokenSample",
]
