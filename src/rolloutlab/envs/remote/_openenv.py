"""Client of an OpenEnv environment server (``openenv@URL``): TRL's, SkyRL's, ART's and NeMo Gym's
environments, and rolloutlab's own served with ``--openenv``.

An episode is one WebSocket session at ``URL/ws`` (OpenEnv's HTTP ``/reset`` and ``/step`` are
stateless: each builds a fresh environment).  Messages follow ``openenv-core``
(``src/openenv/core/env_server/types.py``): ``reset`` with ``{seed, episode_id}`` (plus
``task`` when one is named), ``step`` with the action object, answers
``{"type": "observation", "data": {"observation", "reward", "done"}}`` or
``{"type": "error", "data": {"message", "code"}}``.

Mapping onto the contract:

- the action is sent as ``{ACTION_FIELD: text}`` (``message`` by default, what OpenEnv's text
  environments take), or ``{"type": "call_tool", "tool_name", "arguments"}`` for a tool call;
- the observation's text is, in order of preference, its ``messages`` (a rolloutlab server),
  or the first of the fields ``prompt``, ``message``, ``text``, ``echoed_message``,
  ``observation`` that is a string, or else the whole observation as JSON;
- ``done`` is ``terminated`` unless the observation says ``truncated`` (OpenEnv has one flag);
- a tool call's answer (``CallToolObservation``: ``tool_name``, ``result``, ``error``) is
  rendered as OpenEnv's own clients do: ``MCPToolClient.call_tool`` takes ``result["data"]``
  when the result is a FastMCP ``CallToolResult``, and the harness turns that into text with
  ``_serialize_for_message`` (a string as is, ``None`` as ``""``, anything else as JSON with
  sorted keys) — ``src/openenv/core/mcp_client.py`` and ``core/harness/__init__.py`` of
  ``openenv-core`` 0.3.0; a framework ``error`` becomes the text ``error (TYPE): MESSAGE``.
  The text is a ``tool`` message answering the call;
- an observation with no text at all (an MCP environment's reset: ``Observation`` fields
  ``done``, ``reward`` and ``metadata`` are left out of the wire) opens the episode with one
  line naming the server's tools — OpenEnv's clients show nothing there (their harness takes
  the opening message from the task), but an episode must open with a message;
- when the server answers ``{"type": "list_tools"}`` (an MCP tool environment), the spec
  offers its tools and takes tool calls (``action_format="tool_call"``);
- ``reward`` ``None`` stays ``None`` (no reward given); OpenEnv has no task list, so tasks are
  seeds: ``seed/0`` ... ``seed/N-1``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import orjson

from rolloutlab.envs._core import (
    Action,
    EnvSpec,
    Info,
    Message,
    Observation,
    StepResult,
    Task,
    ToolInvocation,
)
from rolloutlab.envs._thread import async_io_only
from rolloutlab.envs.remote._client import RemoteEnvError
from rolloutlab.envs.remote._wire import MalformedResponse, info_from_json, messages_from_json

TEXT_FIELDS = ("prompt", "message", "text", "echoed_message", "observation")


def tool_result_text(obs: dict[str, Any]) -> str:
    """The text of a ``CallToolObservation``, as ``MCPToolClient`` + OpenEnv's harness render it."""
    err = obs.get("error")
    if isinstance(err, dict):
        return f"error ({err.get('error_type', 'error')}): {err.get('message', '')}"
    result = obs.get("result")
    if isinstance(result, dict) and "data" in result:
        result = result["data"]
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    return orjson.dumps(result, option=orjson.OPT_SORT_KEYS).decode()


def _messages(obs: dict[str, Any], where: str, *, call: ToolInvocation | None = None, tools: tuple[str, ...] = ()) -> tuple[Message, ...]:
    if "messages" in obs:
        msgs = messages_from_json(obs["messages"], where)
        if call is not None and call.id is not None:  # the wire action carries no call id
            msgs = tuple({**m, "tool_call_id": call.id} if m.get("role") == "tool" and "tool_call_id" not in m else m for m in msgs)
        return msgs
    if call is not None and "tool_name" in obs:
        msg: Message = {"role": "tool", "name": call.name, "content": tool_result_text(obs)}
        if call.id is not None:
            msg["tool_call_id"] = call.id
        return (msg,)
    for key in TEXT_FIELDS:
        if isinstance(obs.get(key), str):
            return ({"role": "user", "content": obs[key]},)
    if not obs:
        listing = f" Tools: {', '.join(tools)}." if tools else ""
        return ({"role": "user", "content": f"The environment is ready.{listing}"},)
    return ({"role": "user", "content": orjson.dumps(obs).decode()},)


@async_io_only  # only awaits HTTP: runs on the agent loop's own event loop, no thread
class OpenEnvClientEnv:
    """One OpenEnv WebSocket session."""

    def __init__(self, spec: EnvSpec, base_url: str, *, action_field: str = "message", timeout_s: float = 60.0) -> None:
        self.spec = spec
        self.base_url = base_url.rstrip("/")
        self.action_field = action_field
        self.timeout_s = timeout_s
        self._ws: Any = None

    def _ws_url(self) -> str:
        u = self.base_url
        u = "ws://" + u[len("http://") :] if u.startswith("http://") else u
        u = "wss://" + u[len("https://") :] if u.startswith("https://") else u
        return u + "/ws"

    async def _ask(self, message: dict[str, Any], what: str) -> dict[str, Any]:
        import asyncio

        from websockets.asyncio.client import connect

        if self._ws is None:
            try:
                self._ws = await connect(self._ws_url(), open_timeout=self.timeout_s, max_size=1 << 24)
            except (OSError, TimeoutError) as e:
                raise RemoteEnvError(f"{self._ws_url()}: cannot connect ({type(e).__name__}: {e})") from e
        await self._ws.send(orjson.dumps(message).decode())
        raw = await asyncio.wait_for(self._ws.recv(), self.timeout_s)
        try:
            reply = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise MalformedResponse(f"{self._ws_url()} {what}: answered non-JSON {str(raw)[:200]!r}") from e
        if not isinstance(reply, dict) or not isinstance(reply.get("data"), dict):
            raise MalformedResponse(f"{self._ws_url()} {what}: expected {{type, data}}, got {str(reply)[:200]}")
        if reply.get("type") == "error":
            raise RemoteEnvError(f"{self._ws_url()} {what}: {reply['data'].get('code')}: {reply['data'].get('message')}")
        return reply["data"]

    @staticmethod
    def _parts(data: dict[str, Any], where: str) -> tuple[dict[str, Any], float | None, bool]:
        obs = data.get("observation")
        if not isinstance(obs, dict):
            raise MalformedResponse(f"{where}: observation must be an object, got {str(obs)[:200]}")
        reward = data.get("reward")
        if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)):
            raise MalformedResponse(f"{where}: reward must be a number or null, got {reward!r}")
        done = data.get("done", False)
        if not isinstance(done, bool):
            raise MalformedResponse(f"{where}: done must be a bool, got {done!r}")
        return obs, None if reward is None else float(reward), done

    async def reset(self, *, task: Task | str | None = None, seed: int | None = None) -> Observation:
        tid = task.id if isinstance(task, Task) else task
        data: dict[str, Any] = {}
        if tid is not None and tid.startswith("seed/") and tid[5:].isdigit():
            data["seed"] = int(tid[5:])
        elif tid is not None:
            data["task"] = tid
        if seed is not None and "seed" not in data:
            data["seed"] = seed
        reply = await self._ask({"type": "reset", "data": data}, "reset")
        obs, _, _ = self._parts(reply, f"{self.base_url} reset")
        anchor = obs.get("anchor") if isinstance(obs.get("anchor"), str) else None
        tools = tuple(t["function"]["name"] for t in self.spec.tool_specs)
        return Observation(
            messages=_messages(obs, "reset", tools=tools), anchor=anchor, info=info_from_json(obs.get("info"), "reset")
        )

    async def step(self, action: Action) -> StepResult:
        if isinstance(action, ToolInvocation):
            payload: dict[str, Any] = {"type": "call_tool", "tool_name": action.name, "arguments": dict(action.arguments)}
        else:
            payload = {self.action_field: action}
        reply = await self._ask({"type": "step", "data": payload}, "step")
        obs, reward, done = self._parts(reply, f"{self.base_url} step")
        truncated = bool(obs.get("truncated")) if isinstance(obs.get("truncated"), bool) else False
        terminated = bool(obs["terminated"]) if isinstance(obs.get("terminated"), bool) else done and not truncated
        stop = obs.get("stop_reason") if isinstance(obs.get("stop_reason"), str) else ("done" if done else None)
        info = info_from_json(obs.get("info"), "step") if "info" in obs else Info()
        return StepResult(
            messages=_messages(obs, "step", call=action if isinstance(action, ToolInvocation) else None),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            stop_reason=stop,
            anchor=obs.get("anchor") if isinstance(obs.get("anchor"), str) else None,
            info=info,
        )

    async def close(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(Exception):  # the server drops the session when the socket closes anyway
                await ws.send(orjson.dumps({"type": "close"}).decode())
            await ws.close()


def _list_tools(base: str, timeout_s: float = 10.0) -> tuple[dict[str, Any], ...]:
    """The server's tools as OpenAI tool schemas, asked as ``MCPToolClient.list_tools`` asks
    (a ``list_tools`` step on a WebSocket session); ``()`` when it is not a tool environment."""
    from websockets.exceptions import WebSocketException
    from websockets.sync.client import connect

    ws_url = ("ws://" + base[len("http://") :]) if base.startswith("http://") else ("wss://" + base[len("https://") :])
    try:
        with connect(ws_url + "/ws", open_timeout=timeout_s, max_size=1 << 24) as ws:
            ws.send(orjson.dumps({"type": "step", "data": {"type": "list_tools"}}).decode())
            raw = ws.recv(timeout=timeout_s)
            with contextlib.suppress(Exception):
                ws.send(orjson.dumps({"type": "close"}).decode())
    except (OSError, TimeoutError, WebSocketException) as e:
        raise RemoteEnvError(f"{ws_url}/ws: no OpenEnv session there ({type(e).__name__}: {e})") from e
    try:
        reply = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise MalformedResponse(f"{ws_url}/ws list_tools: answered non-JSON {str(raw)[:200]!r}") from e
    data = reply.get("data") if isinstance(reply, dict) and reply.get("type") == "observation" else None
    obs = data.get("observation") if isinstance(data, dict) else None
    listed = obs.get("tools") if isinstance(obs, dict) else None
    if not isinstance(listed, list):
        return ()  # a text environment refuses the action: it has no tools
    return tuple(
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description") or "",
                "parameters": t.get("input_schema") or t.get("inputSchema") or {"type": "object", "properties": {}},
            },
        }
        for t in listed
        if isinstance(t, dict) and isinstance(t.get("name"), str)
    )


def openenv_spec(base_url: str, *, max_turns: int = 30, tasks_per_split: int = 100, action_field: str = "message") -> EnvSpec:
    """Spec of the OpenEnv server at ``base_url`` (its ``/metadata`` names it)."""
    import httpx

    base = base_url.rstrip("/")
    try:
        meta = httpx.get(f"{base}/metadata", timeout=10.0)
        name = meta.json().get("name", "openenv") if meta.status_code == 200 else "openenv"
    except (httpx.HTTPError, ValueError) as e:
        raise RemoteEnvError(f"{base}: cannot reach the OpenEnv server ({type(e).__name__}: {e})") from e

    tools = _list_tools(base)

    def tasks(split: str, seed: int) -> Sequence[Task]:
        offset = 0 if split == "train" else 1_000_000
        return [Task(id=f"seed/{offset + seed * tasks_per_split + i}", split=split) for i in range(tasks_per_split)]

    holder: list[EnvSpec] = []
    spec = EnvSpec(
        id=f"openenv:{name}",
        factory=lambda **kw: OpenEnvClientEnv(holder[0], base, action_field=action_field, **kw),
        description=f"OpenEnv environment {name!r} at {base}",
        max_turns=max_turns,
        action_format="tool_call" if tools else "text",
        reward_range=(float("-inf"), float("inf")),
        tasks=tasks,
        tool_specs=tools,
    )
    holder.append(spec)
    return spec
