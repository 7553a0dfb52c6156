"""Client of ``rolloutlab env serve``: a remote environment that is an :class:`Env` like any other.

Every step carries a fresh ``request_id``; a step whose connection failed is retried once
with the same id, and the server answers a repeated id from its cache, so a retried step is
never applied twice.  Server errors surface as :class:`RemoteEnvError` naming the URL, the
status and the server's message; answers that break the protocol as ``MalformedResponse``.
The agent loop treats both like any environment failure (retry with a fresh environment,
then an ungraded episode).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import httpx

from rolloutlab.envs._core import Action, EnvSpec, Observation, StepResult, Task
from rolloutlab.envs._thread import async_io_only
from rolloutlab.envs.remote._wire import (
    MalformedResponse,
    action_to_json,
    observation_from_json,
    step_from_json,
    task_from_json,
)
from rolloutlab.errors import RolloutlabError


class RemoteEnvError(RolloutlabError):
    """The remote environment server refused or failed a request."""


def _check(r: httpx.Response, what: str) -> Any:
    try:
        payload = r.json()
    except ValueError:
        payload = None
    if r.status_code >= 400:
        msg = payload.get("error") if isinstance(payload, dict) else None
        raise RemoteEnvError(f"{r.request.url}: {what} failed with HTTP {r.status_code}: {msg or r.text[:200]}")
    if payload is None:
        raise MalformedResponse(f"{r.request.url}: {what} answered non-JSON: {r.text[:200]!r}")
    return payload


@async_io_only  # only awaits HTTP: runs on the agent loop's own event loop, no thread
class RolloutlabRemoteEnv:
    """One session on a rolloutlab environment server."""

    def __init__(self, spec: EnvSpec, base_url: str, env_id: str, *, timeout_s: float = 60.0) -> None:
        self.spec = spec
        self.base_url = base_url.rstrip("/")
        self.env_id = env_id
        self._client = httpx.AsyncClient(base_url=self.base_url, timeout=timeout_s)
        self._sid: str | None = None

    async def _session(self) -> str:
        if self._sid is None:
            try:
                r = await self._client.post("/sessions", json={"env": self.env_id})
            except httpx.HTTPError as e:
                raise RemoteEnvError(f"{self.base_url}: cannot create a session ({type(e).__name__}: {e})") from e
            self._sid = str(_check(r, "create session")["session_id"])
        return self._sid

    async def reset(self, *, task: Task | str | None = None, seed: int | None = None) -> Observation:
        sid = await self._session()
        tid = task.id if isinstance(task, Task) else task
        try:
            r = await self._client.post(f"/sessions/{sid}/reset", json={"task": tid, "seed": seed})
        except httpx.HTTPError as e:
            raise RemoteEnvError(f"{self.base_url}: reset failed ({type(e).__name__}: {e})") from e
        return observation_from_json(_check(r, "reset"), f"{self.base_url} reset")

    async def step(self, action: Action) -> StepResult:
        if self._sid is None:
            raise RemoteEnvError(f"{self.base_url}: step before reset")
        body = {"action": action_to_json(action), "request_id": uuid.uuid4().hex}
        url = f"/sessions/{self._sid}/step"
        try:
            try:
                r = await self._client.post(url, json=body)
            except httpx.TransportError:  # the answer may be lost after the step ran: same id, applied once
                r = await self._client.post(url, json=body)
        except httpx.HTTPError as e:
            raise RemoteEnvError(f"{self.base_url}: step failed ({type(e).__name__}: {e})") from e
        return step_from_json(_check(r, "step"), f"{self.base_url} step")

    async def close(self) -> None:
        sid, self._sid = self._sid, None
        try:
            if sid is not None:
                await self._client.delete(f"/sessions/{sid}")
        except httpx.HTTPError:
            pass  # the server reaps idle sessions; a failed close cannot leak for long
        finally:
            await self._client.aclose()


def remote_spec(base_url: str, env_id: str | None = None, *, timeout_s: float = 10.0) -> EnvSpec:
    """The spec of an environment served by ``rolloutlab env serve`` at ``base_url``."""
    base = base_url.rstrip("/")
    try:
        r = httpx.get(f"{base}/envs", timeout=timeout_s)
    except httpx.HTTPError as e:
        raise RemoteEnvError(f"{base}: cannot reach the environment server ({type(e).__name__}: {e})") from e
    served = _check(r, "list environments")
    if not isinstance(served, list) or not all(isinstance(s, dict) and isinstance(s.get("id"), str) for s in served):
        raise MalformedResponse(f"{base}/envs: expected a list of specs, got {str(served)[:200]}")
    ids = [s["id"] for s in served]
    if env_id is None:
        if len(ids) != 1:
            raise RemoteEnvError(f"{base} serves {', '.join(ids)}: name one, as rolloutlab:ENV_ID@{base}")
        env_id = ids[0]
    if env_id not in ids:
        raise RemoteEnvError(f"{base} does not serve {env_id!r}; it serves {', '.join(ids)}")
    d = next(s for s in served if s["id"] == env_id)

    def tasks(split: str, seed: int) -> Sequence[Task]:
        got = _check(httpx.get(f"{base}/envs/{env_id}/tasks", params={"split": split, "seed": seed}, timeout=timeout_s), "tasks")
        if not isinstance(got, list):
            raise MalformedResponse(f"{base}: tasks must be a list, got {str(got)[:200]}")
        return [task_from_json(t) for t in got]

    spec_holder: list[EnvSpec] = []

    def factory(**kwargs: Any) -> RolloutlabRemoteEnv:
        return RolloutlabRemoteEnv(spec_holder[0], base, env_id, **kwargs)

    lo, hi = d.get("reward_range", [0.0, 1.0])
    spec = EnvSpec(
        id=env_id,
        factory=factory,
        description=f"{d.get('description', '')} (served at {base})",
        max_turns=int(d.get("max_turns", 30)),
        action_format=d.get("action_format", "text"),
        reward_range=(float(lo), float(hi)),
        tasks=tasks,
        splits=tuple(d.get("splits", ("train", "test"))),
        tool_specs=tuple(t for t in d.get("tools", []) if isinstance(t, dict)),
        has_anchor=bool(d.get("has_anchor", False)),
    )
    spec_holder.append(spec)
    return spec
