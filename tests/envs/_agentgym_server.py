"""A test server speaking AgentGym's protocol, in three of its dialects.

``python tests/envs/_agentgym_server.py PORT FLAVOR`` where FLAVOR is
``textcraft`` (``id``, ``data_idx``, ``observation``/``reward``/``done``, no ``/close``),
``webshop`` (bare integer from ``/create``, ``env_idx``, ``session_id``, reset answers
``[obs, None]``, step answers ``state``) or ``babyai`` (``score`` running total besides
``reward``).  The game: reach the number ``data_idx % 5 + 3`` by saying ``up`` from 0; any
other word is an error answered, as AgentGym does, with HTTP 200 and ``{"error"}``.
"""

from __future__ import annotations

import sys
from typing import Any

import uvicorn
from fastapi import FastAPI, Request

FLAVOR = sys.argv[2] if len(sys.argv) > 2 else "textcraft"
ID = "env_idx" if FLAVOR == "webshop" else "id"
app = FastAPI()
envs: dict[int, dict[str, Any]] = {}
closed: list[int] = []


@app.post("/create")
async def create() -> Any:
    idx = len(envs) + len(closed)
    envs[idx] = {"pos": 0, "goal": 3, "score": 0.0}
    return idx if FLAVOR == "webshop" else {"id": idx}


@app.post("/reset")
async def reset(request: Request) -> Any:
    body = await request.json()
    idx = body.get(ID)
    if idx not in envs:
        return {"error": f"The id {idx} is not valid."}
    task = body.get("session_id" if FLAVOR == "webshop" else "data_idx")
    envs[idx].update(pos=0, goal=int(task) % 5 + 3, score=0.0)
    obs = f"Reach {envs[idx]['goal']}. You are at 0."
    if FLAVOR == "webshop":
        return [obs, None]
    if FLAVOR == "babyai":
        return {"observation": obs, "reward": 0, "score": 0, "done": False}
    return {"id": idx, "observation": obs, "done": False, "reward": 0}


@app.post("/step")
async def step(request: Request) -> Any:
    body = await request.json()
    idx, action = body.get(ID), body.get("action")
    if idx not in envs:
        return {"error": f"The id {idx} is not valid."}
    e = envs[idx]
    if action == "crash":
        return {"error": "simulated failure"}
    if action != "up":
        text, reward = f"Unknown action {action!r}. You are at {e['pos']}.", 0.0
    else:
        e["pos"] += 1
        text, reward = f"You are at {e['pos']}.", 0.0
    done = e["pos"] >= e["goal"]
    if done:
        reward = 1.0
    e["score"] += reward
    if FLAVOR == "webshop":
        return {"state": text, "reward": reward, "done": done, "info": None}
    if FLAVOR == "babyai":
        return {"observation": text, "reward": reward, "score": e["score"], "done": done}
    return {"observation": text, "reward": reward, "done": done}


@app.get("/observation")
async def observation(id: int | None = None, env_idx: int | None = None) -> Any:
    idx = id if id is not None else env_idx
    if idx not in envs:
        return {"error": f"The id {idx} is not valid."}
    return f"You are at {envs[idx]['pos']}."


if FLAVOR != "textcraft":  # textcraft's server has no /close

    @app.post("/close")
    async def close(request: Request) -> Any:
        body = await request.json()
        idx = body.get(ID)
        if envs.pop(idx, None) is None:
            return {"error": f"The id {idx} is not valid."}
        closed.append(idx)
        return {"closed": True}


@app.get("/stats")
async def stats() -> Any:
    return {"open": len(envs), "closed": len(closed)}


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
