"""Arrow schemas of the store's tables (DESIGN.md §3).

Numbers and text are kept apart: ``trajectories`` and ``turns`` hold only numbers, ids
and short enumerations, so numeric queries never read text; ``texts`` holds the prompt,
response, observations and actions, keyed by ``(run_id, traj_id, turn_idx)`` with
``turn_idx = -1`` for the trajectory's own texts.
"""

from __future__ import annotations

import pyarrow as pa

RUNS = pa.schema(
    [
        ("run_id", pa.string()),
        ("name", pa.string()),
        ("source", pa.string()),
        ("model", pa.string()),
        ("algorithm", pa.string()),
        ("env", pa.string()),
        ("config", pa.string()),  # JSON
        ("labels", pa.map_(pa.string(), pa.string())),
        ("status", pa.string()),
        ("last_step", pa.int64()),
        ("created_at", pa.string()),
        ("format_version", pa.string()),
        ("sources", pa.list_(pa.string())),
    ]
)

METRICS = pa.schema(
    [
        ("run_id", pa.string()),
        ("split", pa.string()),
        ("step", pa.int64()),
        ("name", pa.string()),
        ("value", pa.float64()),
    ]
)

TRAJECTORIES = pa.schema(
    [
        ("run_id", pa.string()),
        ("split", pa.string()),
        ("step", pa.int64()),
        ("group_id", pa.string()),
        ("sample_idx", pa.int64()),
        ("traj_id", pa.string()),
        ("task_id", pa.string()),
        ("data_source", pa.string()),
        ("model", pa.string()),  # the model that produced it, when the artifacts say
        ("reward", pa.float64()),
        ("reward_components", pa.map_(pa.string(), pa.float64())),
        ("success", pa.bool_()),
        ("graded", pa.bool_()),
        ("termination", pa.string()),
        ("num_turns", pa.int64()),
        ("prompt_tokens", pa.int64()),
        ("response_tokens", pa.int64()),
        ("tool_calls", pa.int64()),
        ("invalid_actions", pa.int64()),
        ("prompt_chars", pa.int64()),
        ("response_chars", pa.int64()),
    ]
)

TURNS = pa.schema(
    [
        ("run_id", pa.string()),
        ("split", pa.string()),
        ("step", pa.int64()),
        ("traj_id", pa.string()),
        ("turn_idx", pa.int64()),
        ("reward", pa.float64()),
        ("action_valid", pa.bool_()),
        ("done", pa.bool_()),
        ("tokens", pa.int64()),
        ("num_tool_calls", pa.int64()),
        ("entropy", pa.float64()),
        ("anchor_hash", pa.int64()),  # hash of anchor_obs: GiGPO step groups without text
        ("finish_reason", pa.string()),  # stop | length | tool_calls | error
    ]
)

TEXTS = pa.schema(
    [
        ("run_id", pa.string()),
        ("split", pa.string()),
        ("step", pa.int64()),
        ("traj_id", pa.string()),
        ("turn_idx", pa.int64()),
        ("prompt", pa.string()),  # text, or chat messages as JSON
        ("response", pa.string()),
        ("error", pa.string()),
        ("extras", pa.string()),  # JSON
        ("observation", pa.string()),
        ("anchor_obs", pa.string()),
        ("thought", pa.string()),
        ("action", pa.string()),
        ("parsed_action", pa.string()),
        ("tool_calls", pa.string()),  # JSON list of {name, arguments, id, result}
        ("token_data", pa.string()),  # JSON of Turn.token_data: per-token arrays, read by the viewer only
    ]
)

REJECTS = pa.schema(
    [
        ("run_id", pa.string()),
        ("source", pa.string()),
        ("line", pa.int64()),
        ("column", pa.int64()),
        ("error", pa.string()),
        ("snippet", pa.string()),
    ]
)

TABLES: dict[str, pa.Schema] = {
    "runs": RUNS,
    "metrics": METRICS,
    "trajectories": TRAJECTORIES,
    "turns": TURNS,
    "texts": TEXTS,
    "rejects": REJECTS,
}
