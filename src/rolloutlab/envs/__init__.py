"""Environments: the contract (``_core``), the registry, built-in offline environments,
the conformance checker, and remote environments (HTTP server and clients)."""

from rolloutlab.envs._core import (
    Action,
    ActionFormat,
    Env,
    EnvSpec,
    Info,
    Message,
    Observation,
    StepResult,
    Task,
    ToolInvocation,
    info_to_json,
    termination_of,
)
from rolloutlab.envs._registry import (
    ENVS,
    UnknownEnvError,
    get_env_spec,
    known_envs,
    make_env,
    register_env,
)

__all__ = [
    "ENVS",
    "Action",
    "ActionFormat",
    "Env",
    "EnvSpec",
    "Info",
    "Message",
    "Observation",
    "StepResult",
    "Task",
    "ToolInvocation",
    "UnknownEnvError",
    "get_env_spec",
    "info_to_json",
    "known_envs",
    "make_env",
    "register_env",
    "termination_of",
]
