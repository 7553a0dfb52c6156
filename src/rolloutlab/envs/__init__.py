"""Environments: the contract (``_core``), the registry, built-in offline environments,
the conformance checker, and remote environments (HTTP server and clients)."""

from rolloutlab.envs._check import (
    CheckReport,
    CheckResult,
    acheck_env,
    check_env,
    missing_requirements,
)
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
from rolloutlab.envs._tools import ToolResult, call_tool, tool_message, tool_schema

__all__ = [
    "ENVS",
    "Action",
    "ActionFormat",
    "CheckReport",
    "CheckResult",
    "Env",
    "EnvSpec",
    "Info",
    "Message",
    "Observation",
    "StepResult",
    "Task",
    "ToolInvocation",
    "ToolResult",
    "UnknownEnvError",
    "acheck_env",
    "call_tool",
    "check_env",
    "get_env_spec",
    "info_to_json",
    "known_envs",
    "make_env",
    "missing_requirements",
    "register_env",
    "termination_of",
    "tool_message",
    "tool_schema",
]
