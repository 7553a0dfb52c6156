"""Client of AgentGym's environment servers (``agentgym:NAME@URL``), unchanged servers of
WooooDyy/AgentGym's ``agentenv-*`` packages: WebShop, ALFWorld, SciWorld, BabyAI, TextCraft,
SearchQA, SQLGym, LMRL-Gym maze and wordle, WebArena and the tool environments (academia,
movie, sheet, todo, weather).

Their protocol (``agentenv-*/server.py``): ``POST /create`` → ``POST /reset`` →
``GET /observation?id=`` → ``POST /step {id, action}`` → ``POST /close``.  Each server spells
it differently; :data:`PROFILES` says how, field by field, following AgentGym's own client
classes (``agentenv/agentenv/envs/*.py``) at commit 3ef9235d23e68e7c2920c5422ad957dc8ced5c6c.
The table with every environment is in ``docs/remote-environments.md``.

What the client makes of an episode, one rule for every server:

- **reward**: AgentGym's controller records as an episode's reward the ``reward`` of the last
  ``StepOutput`` its client returned (``agentenv/controller/task.py``); babyai's and
  sciworld's clients put the server's running ``score`` there, webarena's client the reward
  only once ``terminated``.  Each step's reward here is the change of that value, so an
  episode's return is exactly the reward AgentGym records (a running progress rate, as the
  tool servers report, is not counted twice);
- **success**: AgentGym's evaluator counts ``reward == 1 or reward == 100``
  (``agentenv/controller/utils.py``), which never holds for babyai, whose reward is
  ``1 - 0.9 * steps / max_steps`` (BabyAI's own).  Success is therefore the server's own
  notion: babyai's ``done`` (its server keeps ``done`` false unless the goal is reached with
  reward > 0.5, ``agentenv_babyai/environment.py``), sciworld's score reaching 100 (a failed
  task ends at -100), and a final reward of 1 everywhere else;
- errors come back as HTTP 200 with ``{"error": ...}``: raised here as
  :class:`RemoteEnvError`, never taken for an observation.

A server without ``/close`` (webshop, alfworld, sqlgym, lmrlgym, the tool servers) is
tolerated: its 404 or 405 on close is ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

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
from rolloutlab.envs._thread import async_io_only
from rolloutlab.envs.remote._client import RemoteEnvError
from rolloutlab.envs.remote._wire import MalformedResponse
from rolloutlab.io import RolloutlabError


@dataclass(frozen=True)
class AgentGymProfile:
    """How one AgentGym server spells the protocol (as AgentGym's own client for it does)."""

    id_key: str = "id"
    """Field naming the session in requests (``id``, or ``env_idx`` for the newer servers)."""
    create_with_task: bool = False
    """``/create`` needs ``{"id": TASK}`` (searchqa and the tool servers' ``CreateQuery``)."""
    reset_field: str = "data_idx"
    """The reset field that names the task: ``data_idx``, ``session_id``, ``item_id``,
    ``game``, ``seed``, ``id`` or ``idx``."""
    reset_extra: tuple[tuple[str, Any], ...] = ()
    """Constant reset fields: alfworld's ``world_type``, webarena's ``seed``."""
    first_text: Literal["reset", "observe", "alfworld", "sciworld"] = "reset"
    """Where the opening observation comes from: the reset answer, ``GET /observation``
    (what the client's ``observe()`` does), or the reset answer rendered as AgentGym's
    alfworld client (``+ "\\nAVAILABLE ACTIONS: " + ",".join(actions)``) or sciworld client
    (``task_description + "\\n" + observation``) does."""
    reward_field: Literal["reward", "score"] = "reward"
    """The step-answer field AgentGym's client reports as the reward."""
    reward_when_terminated: bool = False
    """The reward counts only once the episode is ``terminated`` (webarena's client)."""
    success_at: float | None = 1.0
    """Episode reward at or above which the task is solved; ``None``: the server's ``done``."""
    reward_range: tuple[float, float] = (0.0, 1.0)
    route_prefix: str = ""
    """Path of the environment on a server that hosts several (lmrlgym: ``/maze``, ``/wordle``)."""
    max_turns: int = 30


_TOOL_SERVER = AgentGymProfile(id_key="env_idx", create_with_task=True, reset_field="id", first_text="observe")

PROFILES: dict[str, AgentGymProfile] = {
    "webshop": AgentGymProfile(id_key="env_idx", reset_field="session_id", first_text="observe", max_turns=15),
    "alfworld": AgentGymProfile(reset_field="game", reset_extra=(("world_type", "Text"),), first_text="alfworld"),
    "sciworld": AgentGymProfile(
        first_text="sciworld", reward_field="score", success_at=100.0, reward_range=(-100.0, 100.0)
    ),
    "babyai": AgentGymProfile(reward_field="score", success_at=None, max_turns=20),
    "textcraft": AgentGymProfile(max_turns=40),
    "searchqa": AgentGymProfile(
        id_key="env_idx", create_with_task=True, reset_field="id", first_text="observe", max_turns=5
    ),
    "sqlgym": AgentGymProfile(id_key="env_idx", reset_field="item_id", first_text="observe", max_turns=5),
    "maze": AgentGymProfile(reset_field="game", route_prefix="/maze", max_turns=15),
    "wordle": AgentGymProfile(reset_field="seed", route_prefix="/wordle", max_turns=8),
    "webarena": AgentGymProfile(
        id_key="env_idx", reset_field="idx", reset_extra=(("seed", 0),), first_text="observe",
        reward_when_terminated=True,
    ),
    **{name: _TOOL_SERVER for name in ("academia", "movie", "sheet", "todo", "weather")},
}
"""The AgentGym servers this client knows, by the name in ``agentgym:NAME@URL``."""


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


@async_io_only  # only awaits HTTP: runs on the agent loop's own event loop, no thread
class AgentGymEnv:
    """One environment on an AgentGym server."""

    def __init__(self, spec: EnvSpec, base_url: str, profile: AgentGymProfile, *, timeout_s: float = 120.0) -> None:
        self.spec = spec
        self.base_url = base_url.rstrip("/")
        self.profile = profile
        self._client = httpx.AsyncClient(base_url=self.base_url, timeout=timeout_s)
        self._sid: int | str | None = None
        self._reported = 0.0
        """The reward AgentGym's client last reported: the episode's reward so far."""

    async def _post(self, route: str, body: dict[str, Any] | None, what: str) -> Any:
        try:
            r = await self._client.post(route, json=body if body is not None else {})
        except httpx.HTTPError as e:
            raise RemoteEnvError(f"{self.base_url}{route}: {what} failed ({type(e).__name__}: {e})") from e
        return self._payload(r, what)

    async def _get(self, route: str, what: str) -> Any:
        assert self._sid is not None
        try:
            r = await self._client.get(route, params={self.profile.id_key: self._sid})
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
        return {self.profile.id_key: self._sid, self.profile.reset_field: idx, **dict(self.profile.reset_extra)}

    def _first_text(self, payload: Any, where: str) -> str:
        how = self.profile.first_text
        if how in ("alfworld", "sciworld"):
            if not isinstance(payload, dict):
                raise MalformedResponse(f"{where}: expected an object, got {str(payload)[:200]}")
            obs = payload.get("observation")
            if not isinstance(obs, str):
                raise MalformedResponse(f"{where}: no observation text in {str(payload)[:200]}")
            if how == "sciworld":
                task = payload.get("task_description")
                if not isinstance(task, str):
                    raise MalformedResponse(f"{where}: sciworld's reset has no task_description: {str(payload)[:200]}")
                return f"{task}\n{obs}"
            actions = payload.get("available_actions")
            if not isinstance(actions, list):
                raise MalformedResponse(f"{where}: alfworld's reset has no available_actions: {str(payload)[:200]}")
            return f"{obs}\nAVAILABLE ACTIONS: {','.join(map(str, actions))}"
        text = _text_of(payload)
        if text is None:
            raise MalformedResponse(f"{where}: no observation text in {str(payload)[:200]}")
        if self.profile.reward_when_terminated and text == "TimeoutError":  # webarena's reset failure
            raise RemoteEnvError(f"{where}: the WebArena server timed out resetting (restart its web server)")
        return text

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
            body = {"id": idx} if self.profile.create_with_task else {}
            self._sid = _session_id(await self._post("/create", body, "create"), f"{self.base_url}/create")
        payload = await self._post("/reset", self._reset_body(idx), "reset")
        if self.profile.first_text == "observe":
            text = self._first_text(await self._get("/observation", "observation"), f"{self.base_url}/observation")
        else:
            text = self._first_text(payload, f"{self.base_url}/reset")
        self._reported = 0.0
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
        if "terminated" in payload or "truncated" in payload:
            terminated, truncated = bool(payload.get("terminated")), bool(payload.get("truncated"))
        else:
            done = payload.get("done")
            if not isinstance(done, bool):
                raise MalformedResponse(f"{where}: done must be a bool, got {done!r}")
            terminated, truncated = done, False
        field = self.profile.reward_field
        raw = payload.get(field)
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise MalformedResponse(f"{where}: {field} must be a number, got {raw!r}")
        reported = float(raw) if terminated or not self.profile.reward_when_terminated else 0.0
        reward, self._reported = reported - self._reported, reported
        actions = payload.get("available_actions")
        success: bool | None = None
        if terminated or truncated:
            at = self.profile.success_at
            success = terminated if at is None else reported >= at
        info = Info(
            success=success,
            score=self._reported,
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
    profile = PROFILES.get(name)
    if profile is None:
        raise RolloutlabError(f"unknown AgentGym server {name!r}; known: {', '.join(sorted(PROFILES))}")
    base = base_url.rstrip("/")
    if profile.route_prefix and not base.endswith(profile.route_prefix):
        base += profile.route_prefix

    def tasks(split: str, seed: int) -> Sequence[Task]:
        return [Task(id=f"{split}/{i}", split=split) for i in range(tasks_per_split)]

    holder: list[EnvSpec] = []
    spec = EnvSpec(
        id=f"agentgym:{name}",
        factory=lambda **kw: AgentGymEnv(holder[0], base, profile, **kw),
        description=f"AgentGym {name} server at {base}",
        max_turns=profile.max_turns,
        action_format="text",
        reward_range=profile.reward_range,
        tasks=tasks,
        has_anchor=True,
    )
    holder.append(spec)
    return spec
