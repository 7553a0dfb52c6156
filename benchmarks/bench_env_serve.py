"""``rolloutlab env serve`` throughput on loopback, beside openenv-core's own server.

Serves ``guess-number-v0`` three ways, each in its own process, one after the other, and
drives each with the same load (``--sessions`` concurrent episodes, each guessing until the
episode ends and then resetting, for ``--seconds``):

1. rolloutlab's HTTP protocol (``POST /sessions/{id}/step``), with a minimal keep-alive
   HTTP/1.1 client so the numbers measure the server, not the client library;
2. rolloutlab's OpenEnv mode (``/ws`` WebSocket sessions, ``--openenv``);
3. ``openenv-core``'s server (``create_app``) hosting the same environment through an
   ``openenv`` ``Environment`` wrapper, same WebSocket client as (2).

Prints steps/s (a step = one ``step`` call; resets not counted) and the ratios.  A server
that stops answering (no reply within 10 s: openenv-core's did at 16 concurrent sessions
here) is reported as hung and restarted.  Each server is loaded with ``--sessions`` and with
4 sessions; the servers stay up for the whole run and are loaded in turn, round after round
(``--rounds``), so a change in the machine's load hits each alike; figures are medians.
Targets (issue 8): (1) ≥ 1,000 steps/s, goal 2,000; (2) faster than (3).

Usage: ``python benchmarks/bench_env_serve.py [--sessions 16 --seconds 3 --rounds 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
GUESSES = ["3", "5", "1", "7", "0", "2", "4", "6"]

OPENENV_APP = '''
import sys, asyncio
import uvicorn
from typing import Any
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from rolloutlab.envs import make_env

class GuessAction(Action):
    message: str

class GuessObservation(Observation):
    prompt: str = ""

class GuessEnv(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True
    def __init__(self):
        super().__init__()
        self.env = make_env("guess-number-v0")
        self._state = State(episode_id="", step_count=0)
    async def reset_async(self, seed=None, episode_id=None, **kw):
        obs = await self.env.reset(seed=seed)
        return GuessObservation(prompt=obs.messages[-1]["content"], done=False, reward=None)
    def reset(self, seed=None, episode_id=None, **kw):
        return asyncio.run(self.reset_async(seed, episode_id))
    async def step_async(self, action, timeout_s=None, **kw):
        r = await self.env.step(action.message)
        self._state.step_count += 1
        return GuessObservation(prompt=r.messages[-1]["content"] if r.messages else "",
                                done=r.terminated or r.truncated, reward=r.reward)
    def step(self, action, timeout_s=None, **kw):
        return asyncio.run(self.step_async(action))
    @property
    def state(self):
        return self._state

app = create_app(GuessEnv, GuessAction, GuessObservation, env_name="guess", max_concurrent_envs=1024)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(argv: list[str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, *argv], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{argv} exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise TimeoutError(f"{argv} did not start")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


class KeepAlive:
    """A minimal HTTP/1.1 client on one keep-alive connection (JSON in, JSON out)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.r: asyncio.StreamReader
        self.w: asyncio.StreamWriter

    async def open(self) -> None:
        self.r, self.w = await asyncio.open_connection("127.0.0.1", self.port)

    async def post(self, path: str, body: object) -> object:
        data = orjson.dumps(body)
        self.w.write(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        head = await self.r.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        payload = orjson.loads(await self.r.readexactly(length))
        if status >= 400:
            raise RuntimeError(f"{path}: HTTP {status}: {payload}")
        return payload


async def load_http(port: int, sessions: int, seconds: float) -> int:
    steps = 0
    stop_at = time.perf_counter() + seconds

    async def one(i: int) -> None:
        nonlocal steps
        c = KeepAlive(port)
        await c.open()
        sid = c.post("/sessions", {"env": "guess-number-v0"})
        sid_v = (await sid)["session_id"]  # type: ignore[index]
        k = 0
        while time.perf_counter() < stop_at:
            await c.post(f"/sessions/{sid_v}/reset", {"seed": k})
            for g in GUESSES:
                r = await c.post(f"/sessions/{sid_v}/step", {"action": g})
                steps += 1
                if r["terminated"] or r["truncated"]:  # type: ignore[index]
                    break
            k += 1
        c.w.close()

    await asyncio.gather(*(one(i) for i in range(sessions)))
    return steps


FEWER = 4  # the second, lighter load every server gets
RECV_TIMEOUT = 10.0  # seconds without a reply before a server counts as hung


class Hung(Exception):
    """A server stopped answering a session (no reply within RECV_TIMEOUT)."""


async def load_ws(port: int, sessions: int, seconds: float) -> int:
    from websockets.asyncio.client import connect

    async def recv(ws: object) -> dict:
        try:
            reply: dict = orjson.loads(await asyncio.wait_for(ws.recv(), RECV_TIMEOUT))  # type: ignore[attr-defined]
        except TimeoutError:
            raise Hung(f"no reply within {RECV_TIMEOUT:g} s") from None
        if reply["type"] == "error":
            raise RuntimeError(reply)
        return reply

    steps = 0
    stop_at = time.perf_counter() + seconds

    async def one(i: int) -> None:
        nonlocal steps
        async with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=RECV_TIMEOUT, ping_interval=None) as ws:
            k = 0
            while time.perf_counter() < stop_at:
                await ws.send(orjson.dumps({"type": "reset", "data": {"seed": k}}).decode())
                await recv(ws)
                for g in GUESSES:
                    await ws.send(orjson.dumps({"type": "step", "data": {"message": g}}).decode())
                    reply = await recv(ws)
                    steps += 1
                    if reply["data"]["done"]:
                        break
                k += 1
            await ws.send(orjson.dumps({"type": "close"}).decode())

    await asyncio.gather(*(one(i) for i in range(sessions)))
    return steps


def rate(port: int, loader: str, sessions: int, seconds: float) -> float | None:
    """Steps per second of one load against a running server; None when it hung."""
    fn = load_http if loader == "http" else load_ws
    t = time.perf_counter()
    try:
        n = asyncio.run(fn(port, sessions, seconds))
    except (Hung, TimeoutError) as e:
        print(f"  (server on port {port} hung at {sessions} sessions: {e})", flush=True)
        return None
    return n / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    cli = ["-m", "rolloutlab", "env", "serve", "guess-number-v0", "--max-sessions", "4096"]
    loads = sorted({args.sessions, FEWER}, reverse=True)
    with tempfile.TemporaryDirectory() as d:
        app = Path(d) / "openenv_app.py"
        app.write_text(OPENENV_APP)
        servers = {"http": [*cli, "--port"], "ws": [*cli, "--openenv", "--port"], "peer": [str(app)]}
        loader = {"http": "http", "ws": "ws", "peer": "ws"}
        ports = {name: free_port() for name in servers}
        procs = {name: start([*a, str(ports[name])], ports[name]) for name, a in servers.items()}
        got: dict[tuple[str, int], list[float | None]] = {(n, k): [] for n in servers for k in loads}
        try:
            for name in servers:  # warm-up
                rate(ports[name], loader[name], FEWER, 1.0)
            for _ in range(args.rounds):  # interleaved, so that a change in the machine's load hits all
                for k in loads:
                    for name in servers:
                        r = rate(ports[name], loader[name], k, args.seconds)
                        got[name, k].append(r)
                        if r is None:  # a hung server may stay stuck: a fresh one for the next load
                            stop(procs[name])
                            ports[name] = free_port()
                            procs[name] = start([*servers[name], str(ports[name])], ports[name])
        finally:
            for proc in procs.values():
                stop(proc)
    # a load that hung in any round is reported as hung
    med = {key: None if any(v is None for v in vals) else statistics.median(vals)  # type: ignore[type-var]
           for key, vals in got.items()}
    print(f"guess-number-v0, steps/s, median of {args.rounds} interleaved rounds of {args.seconds:g} s, "
          f"cores: {os.cpu_count()}; 'hung': no reply within {RECV_TIMEOUT:g} s in some round")
    print(f"  {'sessions':>8}  {'ours HTTP':>9}  {'ours ws':>9}  {'openenv-core':>12}  {'ws / openenv':>12}")
    for k in loads:
        print(f"  {k:>8}  {fmt(med['http', k]):>9}  {fmt(med['ws', k]):>9}  {fmt(med['peer', k]):>12}  "
              f"{ratio(med['ws', k], med['peer', k]):>12}")
    print("  targets: ours HTTP ≥ 1000 (goal 2000); ours ws faster than openenv-core (ratio > 1)")


def fmt(x: float | None) -> str:
    return "hung" if x is None else f"{x:,.0f}"


def ratio(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or b is None else f"{a / b:.2f}×"


if __name__ == "__main__":
    main()
