"""An environment served by ``openenv-core``'s own server (the real OpenEnv implementation).

``python tests/envs/_openenv_server.py PORT``.  The game: reach ``seed % 5 + 3`` by sending
``{"message": "up"}``; other messages leave the position unchanged.  Reward 1 at the goal.
"""

from __future__ import annotations

import sys
from typing import Any

import uvicorn
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State


class CountAction(Action):
    message: str


class CountObservation(Observation):
    prompt: str = ""


class CountEnv(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id="", step_count=0)
        self.pos, self.goal = 0, 3

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> CountObservation:
        self._state = State(episode_id=episode_id or "e", step_count=0)
        self.pos, self.goal = 0, (seed or 0) % 5 + 3
        return CountObservation(prompt=f"Reach {self.goal}. You are at 0.", done=False, reward=None)

    def step(self, action: CountAction, timeout_s: float | None = None, **kwargs: Any) -> CountObservation:  # type: ignore[override]
        self._state.step_count += 1
        if action.message == "up":
            self.pos += 1
        done = self.pos >= self.goal
        return CountObservation(prompt=f"You are at {self.pos}.", done=done, reward=1.0 if done else 0.0)

    @property
    def state(self) -> State:
        return self._state


app = create_app(CountEnv, CountAction, CountObservation, env_name="count", max_concurrent_envs=64)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
