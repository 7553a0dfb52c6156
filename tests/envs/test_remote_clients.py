"""Clients of remote environments against real server processes on 127.0.0.1:
rolloutlab's own server, openenv-core's server, and AgentGym-protocol servers."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import httpx
import pytest

from rolloutlab.envs import Env, StepResult, get_env_spec
from rolloutlab.envs._gym import gym_spec
from rolloutlab.envs.remote import MalformedResponse, RemoteEnvError, spec_for
from rolloutlab.io import RolloutlabError
from tests.envs._procs import free_port, server


async def play(env: Env, task: str, actions: list[str]) -> list[StepResult]:
    out = []
    try:
        await env.reset(task=task)
        for a in actions:
            r = await env.step(a)
            out.append(r)
            if r.terminated or r.truncated:
                break
    finally:
        await env.close()
    return out


@pytest.fixture(scope="module")
def fakes_url() -> Any:
    port = free_port()
    with server(["tests/envs/_remote_fakes.py", str(port), "4", "5.0"], port=port) as url:
        yield url


def test_rolloutlab_client_plays_an_episode(fakes_url: str) -> None:
    spec = get_env_spec(f"rolloutlab:count-v0@{fakes_url}")
    assert spec.max_turns == 8 and spec.has_anchor and [t.id for t in spec.tasks("test", 0)][:2] == ["test/0", "test/1"]
    steps = asyncio.run(play(spec.make(), "test/2", ["up", "jump", "up", "up", "up", "up"]))
    assert [r.info.action_valid for r in steps] == [True, False, True, True, True, True]
    assert steps[-1].terminated and steps[-1].reward == 1.0 and steps[-1].anchor == "5"


def test_remote_refs_name_what_is_wrong(fakes_url: str) -> None:
    with pytest.raises(RolloutlabError, match="serves count-v0, flaky-v0, hang-v0"):
        spec_for(f"rolloutlab@{fakes_url}")
    with pytest.raises(RolloutlabError, match="does not serve 'nope-v0'"):
        spec_for(f"rolloutlab:nope-v0@{fakes_url}")
    with pytest.raises(RolloutlabError, match="not an http"):
        spec_for("openenv@ftp://x")
    with pytest.raises(RolloutlabError, match="unknown remote environment"):
        spec_for(f"gym@{fakes_url}")
    with pytest.raises(RemoteEnvError, match="cannot reach"):
        spec_for(f"rolloutlab@http://127.0.0.1:{free_port()}")


def test_server_errors_surface_as_remote_errors(fakes_url: str) -> None:
    spec = spec_for(f"rolloutlab:flaky-v0@{fakes_url}")

    async def t() -> None:
        env = spec.make()
        await env.reset(task="test/0")
        with pytest.raises(RemoteEnvError, match=r"HTTP 500.*crashed"):
            await env.step("boom")
        await env.close()
        env = spec_for(f"rolloutlab:hang-v0@{fakes_url}").make()
        await env.reset(task="test/0")
        with pytest.raises(RemoteEnvError, match="HTTP 504"):
            await env.step("hang")
        await env.close()

    asyncio.run(t())


def test_session_cap_holds_against_a_client_that_never_closes(fakes_url: str) -> None:
    """Cap 4, idle timeout 5 s: leaked sessions are refused, then reaped; the server lives on."""
    leaked = [httpx.post(f"{fakes_url}/sessions", json={"env": "count-v0"}) for _ in range(6)]
    codes = [r.status_code for r in leaked]
    assert httpx.get(f"{fakes_url}/health").json()["sessions"] <= 4
    assert 429 in codes and "cap of 4" in next(r.json()["error"] for r in leaked if r.status_code == 429)
    deadline = time.monotonic() + 30
    while httpx.post(f"{fakes_url}/sessions", json={"env": "count-v0"}).status_code == 429:
        assert time.monotonic() < deadline, "idle sessions were never reaped"
        time.sleep(0.5)
    assert httpx.get(f"{fakes_url}/health").json()["sessions"] <= 4


def test_server_down_mid_episode_is_an_error_not_a_hang() -> None:
    port = free_port()
    stack = contextlib.ExitStack()
    url = stack.enter_context(server(["tests/envs/_remote_fakes.py", str(port)], port=port))
    spec = spec_for(f"rolloutlab:count-v0@{url}")

    async def t() -> None:
        env = spec.make()
        await env.reset(task="test/0")
        await env.step("up")
        stack.close()  # the server process is killed mid-episode
        with pytest.raises(RemoteEnvError, match=r"step failed|cannot|Connect"):
            await asyncio.wait_for(env.step("up"), 30)
        await env.close()

    try:
        asyncio.run(t())
    finally:
        stack.close()


def test_openenv_client_against_openenv_cores_own_server() -> None:
    port = free_port()
    with server(["tests/envs/_openenv_server.py", str(port)], port=port) as url:
        spec = spec_for(f"openenv@{url}?max_turns=12&tasks=5")
        assert spec.id == "openenv:CountEnv" and spec.max_turns == 12 and len(spec.tasks("test", 0)) == 5
        task = spec.tasks("train", 0)[2]  # seed 2: goal 2 % 5 + 3 = 5
        steps = asyncio.run(play(spec.make(), task.id, ["up", "down", "up", "up", "up", "up", "up"]))
        assert steps[0].messages[0]["content"] == "You are at 1."
        assert steps[-1].terminated and not steps[-1].truncated and steps[-1].reward == 1.0 and len(steps) == 6
        assert steps[1].reward == 0.0


def test_openenv_clients_against_our_openenv_mode() -> None:
    """openenv-core's own client drives a rolloutlab environment, and so does ours."""
    from openenv.core.generic_client import GenericEnvClient

    port = free_port()
    with server(["tests/envs/_remote_fakes.py", str(port), "openenv"], port=port) as url:

        async def theirs() -> list[Any]:
            async with GenericEnvClient(base_url=url) as client:
                first = await client.reset(seed=0, task="test/1")
                steps = [await client.step({"message": m}) for m in ["up", "up", "nope", "up", "up"]]
                return [first, *steps]

        got = asyncio.run(theirs())
        assert got[0].observation["prompt"] == "Reach 4." and got[0].done is False
        assert got[3].observation["info"]["action_valid"] is False
        assert got[-1].done is True and got[-1].reward == 1.0 and got[-1].observation["terminated"] is True
        meta = httpx.get(f"{url}/metadata").json()
        assert meta["name"] == "count-v0"
        spec = spec_for(f"openenv@{url}")
        steps = asyncio.run(play(spec.make(), "test/1", ["up"] * 6))
        assert steps[-1].terminated and steps[-1].anchor == "4" and steps[-1].info.success is True
        bad = httpx.post(f"{url}/step", json={"action": {"nope": 1}})
        assert bad.status_code == 422


@pytest.mark.parametrize("flavor", ["textcraft", "webshop", "babyai"])
def test_agentgym_client_normalises_each_dialect(flavor: str) -> None:
    port = free_port()
    with server(["tests/envs/_agentgym_server.py", str(port), flavor], port=port, ready="/stats") as url:
        spec = spec_for(f"agentgym:{flavor}@{url}?tasks=7")
        assert spec.id == f"agentgym:{flavor}" and len(spec.tasks("test", 0)) == 7

        async def t() -> list[StepResult]:
            env = spec.make()
            await env.reset(task="test/1")  # goal 1 % 5 + 3 = 4
            out = [await env.step(a) for a in ["up", "jump", "up", "up", "up"]]
            with pytest.raises(RemoteEnvError, match="simulated failure"):
                await env.step("crash")  # HTTP 200 {"error"} is an error, not an observation
            await env.close()
            return out

        steps = asyncio.run(t())
        assert [r.reward for r in steps] == [0.0, 0.0, 0.0, 0.0, 1.0]
        assert steps[1].messages[0]["content"].startswith("Unknown action")
        assert steps[-1].terminated and steps[-1].info.success is True and steps[-1].info.score == 1.0
        stats = httpx.get(f"{url}/stats").json()
        if flavor != "textcraft":  # textcraft's server has no /close, which the client tolerates
            assert stats == {"open": 0, "closed": 1}


def test_agentgym_malformed_answers_are_refused() -> None:
    from rolloutlab.envs.remote._agentgym import _session_id, _text_of

    with pytest.raises(MalformedResponse, match="no session id"):
        _session_id({"ok": True}, "x")
    assert _session_id(3, "x") == 3 and _session_id({"env_id": 5}, "x") == 5
    assert _text_of(["obs", None]) == "obs" and _text_of({"state": "s"}) == "s" and _text_of({"x": 1}) is None


class _LegacyGym:
    """A Gymnasium-style text environment with the old 4-tuple step."""

    def __init__(self) -> None:
        self.n = 0

    def reset(self, seed: int | None = None) -> tuple[dict[str, str], dict[str, Any]]:
        self.n = 0
        return {"text": f"seed {seed}"}, {"available_actions": ["go"]}

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        self.n += 1
        done = self.n >= 2
        info: dict[str, Any] = {"valid_action": action == "go", "won": done and action == "go"}
        if self.n >= 3:
            info["TimeLimit.truncated"] = True
        return f"step {self.n}", 1.0 if done else 0.0, done, info


def test_gym_adapter() -> None:
    spec = gym_spec("legacy-v0", _LegacyGym, description="t", max_turns=5)

    async def t() -> tuple[Any, list[StepResult]]:
        env = spec.make()
        obs = await env.reset(task="test/1000007")
        out = [await env.step("stay"), await env.step("go")]
        await env.close()
        return obs, out

    obs, (a, b) = asyncio.run(t())
    assert obs.messages[0]["content"] == "seed 1000007" and obs.info.available_actions == ("go",)
    assert a.info.action_valid is False and not a.terminated and a.info.success is None
    assert b.terminated and not b.truncated and b.info.success is True and b.reward == 1.0


def test_env_serve_cli_process_passes_check_env() -> None:
    """`rolloutlab env serve` as users run it; the conformance checker passes through HTTP."""
    from rolloutlab.envs import check_env

    port = free_port()
    argv = ["-m", "rolloutlab", "env", "serve", "guess-number-v0", "--port", str(port), "--max-sessions", "8"]
    with server(argv, port=port) as url:
        report = check_env(f"rolloutlab@{url}", episodes=2)
        assert report.ok, str(report)
        spec = spec_for(f"rolloutlab@{url}")
        assert spec.id == "guess-number-v0" and spec.max_turns == 4
        h = httpx.get(f"{url}/health").json()
        assert h["sessions"] == 0 and h["max_sessions"] == 8  # check_env closed every session it opened
