"""Agent-loop throughput against a mock OpenAI-compatible endpoint with a fixed latency.

A mock server (``tests/_mock_openai.py``, FastAPI + uvicorn, in its own process so it does
not share this interpreter's lock) answers every chat completion after ``--latency``
seconds (50 ms).  ``--episodes`` (64) episodes of exactly ``--turns`` (10) turns run
concurrently through :func:`rolloutlab.agent.run_episodes` with :class:`OpenAIPolicy`
(the ``openai`` async client) on a trivial echo environment defined here (it never ends
by itself, so every episode runs the full horizon).  A first measurement replaces the
endpoint by an in-process 50 ms wait, to separate the loop's own cost from the HTTP
client's; then both transports of ``OpenAIPolicy`` run (``lean``: the built-in HTTP/1.1
client; ``openai``: the ``openai`` package's client); each prints the CPU spent per turn
in this process and in the mock server.  With the policy as the only wait,
the ideal is ``episodes / latency`` turns per second (64 / 0.05 = 1,280); the benchmark
prints turns/s and the ratio to the ideal (target >= 80 %, goal 90 %).  One warm-up
round, then the best of ``--repeat`` rounds.

Usage: ``python benchmarks/bench_agent.py [--episodes 64 --turns 10 --latency 0.05 --repeat 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal

from rolloutlab.agent import (
    EpisodeJob,
    GenerateRequest,
    Generation,
    LoopConfig,
    OpenAIPolicy,
    Policy,
    run_episodes,
)
from rolloutlab.envs import EnvSpec, Observation, StepResult, Task

ROOT = Path(__file__).resolve().parents[1]


def _tasks(split: str, seed: int) -> list[Task]:
    return [Task(id=f"{split}/0", split=split)]


class EchoEnv:
    """Repeats the action back; never terminates (the loop's horizon ends each episode)."""

    spec = EnvSpec(id="bench-echo-v0", factory=lambda: EchoEnv(), description="echo", max_turns=10,
                   action_format="text", reward_range=(0.0, 0.0), tasks=_tasks)

    async def reset(self, *, task: Task | str | None = None, seed: int | None = None) -> Observation:
        return Observation(messages=({"role": "user", "content": "say something"},))

    async def step(self, action: object) -> StepResult:
        return StepResult(messages=({"role": "user", "content": f"you said {action}"},), reward=0.0,
                          terminated=False, truncated=False)

    async def close(self) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_up(host: str, port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("the mock server exited")
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("the mock server did not start within 30 s")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class SleepPolicy:
    """In-process stand-in for the endpoint: waits ``latency`` then echoes (no HTTP)."""

    name = "sleep"
    tokenizer = None

    def __init__(self, latency: float) -> None:
        self.latency = latency

    async def generate(self, request: GenerateRequest) -> Generation:
        await asyncio.sleep(self.latency)
        return Generation(text=str(request.messages[-1]["content"]), token_ids=None, logprobs=None,
                          finish_reason="stop")

    async def close(self) -> None:
        pass


async def _round(base: str | None, episodes: int, turns: int, latency: float,
                 client: Literal["lean", "openai"] = "lean") -> tuple[float, int]:
    policy: Policy = OpenAIPolicy(base, "mock", logprobs=False, client=client) if base else SleepPolicy(latency)
    config = LoopConfig(max_turns=turns, max_tokens_per_turn=16, policy_retries=2, policy_backoff_s=0.05)
    jobs = [EpisodeJob(env_factory=EchoEnv, task=Task(id="test/0", split="test"), seed=i, step=0, traj_id=f"e{i}")
            for i in range(episodes)]
    t0 = time.perf_counter()
    eps = await run_episodes(jobs, policy, config=config, concurrency=episodes)
    dt = time.perf_counter() - t0
    await policy.close()
    bad = [e.trajectory.error for e in eps if e.trajectory.termination != "max_turns"]
    if bad:
        raise SystemExit(f"{len(bad)} episodes failed: {bad[0]}")
    return dt, sum(e.trajectory.num_turns or 0 for e in eps)


def _report(what: str, rounds: list[tuple[float, int]], args: argparse.Namespace, cpu: float,
            srv: float | None) -> None:
    ideal = args.episodes / args.latency
    dt, turns = min(rounds)
    rate = turns / dt
    n = sum(t for _, t in rounds)
    print(f"{what} ({args.latency * 1e3:.0f} ms/turn): {args.episodes} episodes x {args.turns} turns = "
          f"{turns} turns in {dt:.2f} s (best of {len(rounds)})")
    print(f"  {rate:,.0f} turns/s; ideal {ideal:,.0f} turns/s; ratio {rate / ideal:.1%} (target >= 80%, goal 90%)")
    server = f", mock server {srv / n * 1e3:.2f} ms" if srv is not None else ""
    print(f"  CPU per turn: this process {cpu / n * 1e3:.2f} ms{server} "
          f"({os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    # The loop alone: the endpoint replaced by an in-process 50 ms wait.
    cpu0 = time.process_time()
    rounds = [asyncio.run(_round(None, args.episodes, args.turns, args.latency)) for _ in range(args.repeat)]
    _report("agent loop, in-process policy", rounds, args, time.process_time() - cpu0, None)

    for server in ("fastapi", "raw"):
        port = _free_port()
        base = f"http://127.0.0.1:{port}/v1"
        proc = subprocess.Popen([sys.executable, "-m", "tests._mock_openai", "--port", str(port),
                                 "--latency", str(args.latency), "--answer", "echo",
                                 *(["--raw"] if server == "raw" else [])], cwd=ROOT)
        try:
            _wait_up("127.0.0.1", port, proc)
            client: Literal["lean", "openai"]
            for client in ("lean", "openai"):
                asyncio.run(_round(base, args.episodes, 2, args.latency, client))  # warm-up: connections, imports
                cpu0, srv0 = time.process_time(), _cpu_s(proc.pid)
                rounds = [asyncio.run(_round(base, args.episodes, args.turns, args.latency, client))
                          for _ in range(args.repeat)]
                cpu, srv = time.process_time() - cpu0, _cpu_s(proc.pid) - srv0
                _report(f"loop + OpenAIPolicy(client={client!r}) vs {server} mock over HTTP", rounds, args, cpu, srv)
        finally:
            proc.terminate()
            proc.wait(timeout=10)

if __name__ == "__main__":
    main()
