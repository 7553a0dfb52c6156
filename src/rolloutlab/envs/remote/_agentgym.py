"""Client of AgentGym's environment servers (``agentgym:NAME@URL``), unchanged servers of
WooooDyy/AgentGym's ``agentenv-*`` packages: WebShop, ALFWorld, SciWorld, BabyAI, TextCraft,
WebArena, SearchQA, SQLGym and the rest.

Their protocol (``agentenv-*/server.py``): ``POST /create`` → ``POST /reset`` →
``GET /observation?id=`` → ``POST /step {id, action}`` → ``POST /close``, with per-server
differences this client normalises (``../shared/ACTING.md``, ``FORMATS.md``):

- the session id comes back as a bare integer (webshop), ``{"id"}``, ``{"env_idx"}`` or
  ``{"env_id"}`` (newer servers), and is sent back as ``env_idx`` (webshop, searchqa, sqlgym,
  webarena) or ``id`` (the others);
- reset takes ``data_idx`` (most), ``session_id`` (webshop), ``item_id`` (sqlgym) or
  ``game`` + ``world_type`` (alfworld); a reset answer may hold the observation, be a
  ``[observation, info]`` pair (webshop), or hold nothing (then ``GET /observation`` gives it);
- a step answer calls the observation ``state`` (webshop) or ``observation``; babyai and
  sciworld report ``score``, a running total, besides ``reward``: the task reward is the
  score, so the step reward here is the score's increase; alfworld adds
  ``available_actions``; webarena reports ``terminated``/``truncated`` instead of ``done``;
- errors come back as HTTP 200 with ``{"error": ...}``: raised here as
  :class:`RemoteEnvError`, never taken for an observation.

A server without ``/close`` (textcraft) is tolerated: its 404 or 405 on close is ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from rolloutlab.envs._core import (
    Action,
    EnvSpec,
    Info,
    Observation,
    StepResult,
    Task,
    ToolInvocation,
)
from rolloutlab.envs.remote._client import RemoteEnvError
from rolloutlab.envs.remote._wire import MalformedResponse


@dataclass(frozen=True)
class AgentGymProfile:
    """How one AgentGym server spells the protocol."""

    id_key: str = "id"
    """Field naming the session in requests."""
    reset: str = "data_idx"
    """How reset names the task: ``data_idx``, ``session_id``, ``item_id`` or ``game``."""
    score_is_reward: bool = False
    """The server reports a running ``score`` that is the task reward (babyai, sciworld)."""
    max_turns: int = 30
    success_at: float = 1.0
    """Episode reward at or above which the task counts as solved."""


PROFILES: dict[str, AgentGymProfile] = {
    "webshop": AgentGymProfile(id_key="env_idx", reset="session_id", max_turns=15),
    "alfworld": AgentGymProfile(reset="game", max_turns=30),
    "sciworld": AgentGymProfile(score_is_reward=True, max_turns=30, success_at=100.0),
    "babyai": AgentGymProfile(score_is_reward=True, max_turns=20),
    "textcraft": AgentGymProfile(max_turns=40),
    "searchqa": AgentGymProfile(id_key="env_idx", max_turns=5),
    "sqlgym": AgentGymProfile(id_key="env_idx", reset="item_id", max_turns=5),
    "webarena": AgentGymProfile(id_key="env_idx", max_turns=30),
    "wordle": AgentGymProfile(max_turns=8),
}
"""Known servers; any other name uses the default profile (``id``, ``data_idx``)."""


def _error_of(payload: Any) -> str | None:
    if isinstance(payload, dict) and "error" in payload:
        return str(payload["error"])
    return None


def _session_id(payload: Any, where: str) -> int | str:
    if isinstance(payload, int | str) and not isinstance(payload, bool):
        return payload
    if isinstance(payload, dict):
        for key in ("id", "env_idx", "env_id"):
            v = payload.get(key)
            if isinstance(v, int | str) and not isinstance(v, bool):
                return v
    raise MalformedResponse(f"{where}: /create answered no session id: {str(payload)[:200]}")


def _text_of(payload: Any) -> str | None:
    if isinstance(payload, str):
        return payload
    if isinstance(payload, list) and payload and isinstance(payload[0], str):
        return payload[0]  # webshop's reset: [observation, info]
    if isinstance(payload, dict):
        for key in ("observation", "state"):
            if isinstance(payload.get(key), str):
                return str(payload[key])
    return None


class AgentGymEnv:
    """One environment on an AgentGym server."""

    def __init__(self, spec: EnvSpec, base_url: str, profile: AgentGymProfile, *, timeout_s: float = 120.0) -> None:
        self.spec = spec
        self.base_url = base_url.rstrip("/")
        self.profile = profile
        self._client = httpx.AsyncClient(base_url=self.base_url, timeout=timeout_s)
        self._sid: int | str | None = None
        self._score = 0.0

    async def _post(self, route: str, body: dict[str, Any] | None, what: str) -> Any:
        try:
            r = await self._client.post(route, json=body if body is not None else {})
        except httpx.HTTPError as e:
            raise RemoteEnvError(f"{self.base_url}{route}: {what} failed ({type(e).__name__}: {e})") from e
        return self._payload(r, what)

    def _payload(self, r: httpx.Response, what: str) -> Any:
        try:
            payload = r.json()
        except ValueError as e:
            raise MalformedResponse(f"{r.request.url}: {what} answered non-JSON: {r.text[:200]!r}") from e
        if r.status_code >= 400:
            raise RemoteEnvError(f"{r.request.url}: {what} failed with HTTP {r.status_code}: {str(payload)[:200]}")
        err = _error_of(payload)
        if err is not None:
            raise RemoteEnvError(f"{r.request.url}: {what}: the server says: {err}")
        return payload

    def _reset_body(self, idx: int) -> dict[str, Any]:
        assert self._sid is not None
        body: dict[str, Any] = {self.profile.id_key: self._sid}
        if self.profile.reset == "game":
            body.update(game=idx, world_type="Text")
        else:
            body[self.profile.reset] = idx
        return body

    async def reset(self, *, task: Task | str | None = None, seed: int | None = None) -> Observation:
        tid = task.id if isinstance(task, Task) else task
        if tid is None:
            idx = seed if seed is not None else 0
        else:
            try:
                idx = int(tid.rsplit("/", 1)[-1])
            except ValueError:
                raise ValueError(f"AgentGym task ids are data indices like 'test/17', got {tid!r}") from None
        if self._sid is None:
            self._sid = _session_id(await self._post("/create", {}, "create"), f"{self.base_url}/create")
        payload = await self._post("/reset", self._reset_body(idx), "reset")
        text = _text_of(payload)
        if text is None:
            try:
                r = await self._client.get("/observation", params={self.profile.id_key: self._sid})
            except httpx.HTTPError as e:
                raise RemoteEnvError(f"{self.base_url}/observation failed ({type(e).__name__}: {e})") from e
            text = _text_of(self._payload(r, "observation"))
            if text is None:
                raise MalformedResponse(f"{self.base_url}: reset gave no observation text")
        self._score = 0.0
        actions = payload.get("available_actions") if isinstance(payload, dict) else None
        info = Info(available_actions=tuple(actions) if isinstance(actions, list) else None)
        return Observation(messages=({"role": "user", "content": text},), anchor=text, info=info)

    async def step(self, action: Action) -> StepResult:
        if self._sid is None:
            raise RemoteEnvError(f"{self.base_url}: step before reset")
        if isinstance(action, ToolInvocation):
            raise ValueError("AgentGym servers take text actions, not tool calls")
        payload = await self._post("/step", {self.profile.id_key: self._sid, "action": action}, "step")
        where = f"{self.base_url}/step"
        if not isinstance(payload, dict):
            raise MalformedResponse(f"{where}: expected an object, got {str(payload)[:200]}")
        text = _text_of(payload)
        if text is None:
            raise MalformedResponse(f"{where}: no observation/state text in {str(payload)[:200]}")
        if self.profile.score_is_reward and isinstance(payload.get("score"), int | float):
            score = float(payload["score"])
            reward: float | None = score - self._score
            self._score = score
        else:
            raw = payload.get("reward")
            if raw is not None and (isinstance(raw, bool) or not isinstance(raw, int | float)):
                raise MalformedResponse(f"{where}: reward must be a number, got {raw!r}")
            reward = None if raw is None else float(raw)
            if reward is not None:
                self._score += reward
        if "terminated" in payload or "truncated" in payload:
            terminated, truncated = bool(payload.get("terminated")), bool(payload.get("truncated"))
        else:
            done = payload.get("done")
            if not isinstance(done, bool):
                raise MalformedResponse(f"{where}: done must be a bool, got {done!r}")
            terminated, truncated = done, False
        actions = payload.get("available_actions")
        ended = terminated or truncated
        info = Info(
            success=(self._score >= self.profile.success_at) if ended else None,
            score=self._score,
            available_actions=tuple(actions) if isinstance(actions, list) else None,
        )
        return StepResult(
            messages=({"role": "user", "content": text},),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            stop_reason="done" if terminated else ("truncated" if truncated else None),
            anchor=text,
            info=info,
        )

    async def close(self) -> None:
        sid, self._sid = self._sid, None
        try:
            if sid is not None:
                r = await self._client.post("/close", json={self.profile.id_key: sid})
                if r.status_code not in (404, 405):
                    self._payload(r, "close")
        except (httpx.HTTPError, RemoteEnvError, MalformedResponse):
            pass  # closing is best effort; the episode's result is already recorded
        finally:
            await self._client.aclose()


def agentgym_spec(name: str, base_url: str, *, tasks_per_split: int = 100) -> EnvSpec:
    """Spec of the AgentGym server ``name`` at ``base_url``; tasks are data indices."""
    profile = PROFILES.get(name, AgentGymProfile())
    base = base_url.rstrip("/")

    def tasks(split: str, seed: int) -> Sequence[Task]:
        return [Task(id=f"{split}/{i}", split=split) for i in range(tasks_per_split)]

    holder: list[EnvSpec] = []
    spec = EnvSpec(
        id=f"agentgym:{name}",
        factory=lambda **kw: AgentGymEnv(holder[0], base, profile, **kw),
        description=f"AgentGym {name} server at {base}",
        max_turns=profile.max_turns,
        action_format="text",
        reward_range=(0.0, profile.success_at if profile.score_is_reward else 1.0),
        tasks=tasks,
        has_anchor=True,
    )
    holder.append(spec)
    return spec
