"""The registry: built-ins, unknown ids, the decorator's checks, entry-point plugins."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from rolloutlab.envs import (
    ENVS,
    EnvSpec,
    UnknownEnvError,
    _registry,
    get_env_spec,
    known_envs,
    make_env,
    register_env,
)
from rolloutlab.envs.builtin.guess_number import GuessNumberEnv, guess_number_tasks
from rolloutlab.io import RolloutlabError


@pytest.fixture
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A registry whose plugin entry points load again, restored afterwards."""
    saved = dict(ENVS)
    monkeypatch.setattr(_registry, "_plugins_loaded", False)
    yield
    ENVS.clear()
    ENVS.update(saved)


def test_builtins_are_registered() -> None:
    ids = known_envs()
    assert "guess-number-v0" in ids and ids == sorted(ids)
    spec = get_env_spec("guess-number-v0")
    assert spec.max_turns == 4 and spec.action_format == "text" and spec.has_anchor
    assert isinstance(make_env("guess-number-v0"), GuessNumberEnv)


def test_unknown_id_lists_known_and_nearest() -> None:
    with pytest.raises(UnknownEnvError) as e:
        get_env_spec("guess-numbr-v0")
    msg = str(e.value)
    assert "unknown environment 'guess-numbr-v0'" in msg and "Did you mean 'guess-number-v0'?" in msg
    assert "Known: " in msg and "guess-number-v0" in msg.split("Known: ")[1] and "agentgym:NAME@URL" in msg
    assert isinstance(e.value, RolloutlabError)
    with pytest.raises(UnknownEnvError, match=r"^unknown environment 'zzzzzz'\. Known"):
        get_env_spec("zzzzzz")


def test_register_env_refuses_bad_and_duplicate_ids(clean_registry: None) -> None:
    kw: dict[str, Any] = dict(description="d", max_turns=1, action_format="text", reward_range=(0.0, 1.0), tasks=guess_number_tasks)
    with pytest.raises(ValueError, match="lower-case and versioned"):
        register_env("NoVersion", **kw)
    with pytest.raises(ValueError, match="already registered"):
        register_env("guess-number-v0", **kw)(lambda: None)


def _fake_entry_points(monkeypatch: pytest.MonkeyPatch, eps: list[EntryPoint]) -> None:
    def entry_points(*, group: str) -> list[EntryPoint]:
        return [ep for ep in eps if ep.group == group]

    monkeypatch.setattr(_registry, "entry_points", entry_points)


def test_plugin_module_registers_by_decorator(clean_registry: None, monkeypatch: pytest.MonkeyPatch) -> None:
    mod = types.ModuleType("fake_plugin_envs")
    exec(  # a third-party module: registering happens as a side effect of importing it
        "from rolloutlab.envs import register_env\n"
        "from rolloutlab.envs.builtin.guess_number import GuessNumberEnv, guess_number_tasks\n"
        "register_env('plugin-guess-v1', description='from a plugin', max_turns=4, action_format='text',\n"
        "             reward_range=(0.0, 1.0), tasks=guess_number_tasks)(lambda **kw: GuessNumberEnv(**kw))\n",
        mod.__dict__,
    )
    monkeypatch.setitem(sys.modules, "fake_plugin_envs", mod)
    _fake_entry_points(monkeypatch, [EntryPoint("fake", "fake_plugin_envs", _registry.ENTRY_POINT_GROUP)])
    assert "plugin-guess-v1" in known_envs()
    assert get_env_spec("plugin-guess-v1").description == "from a plugin"


def test_plugin_callable_returns_specs(clean_registry: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def specs() -> list[EnvSpec]:
        return [
            EnvSpec(id=f"plugin-{i}-v0", factory=GuessNumberEnv, description="p", max_turns=2, action_format="text",
                    reward_range=(0.0, 1.0), tasks=guess_number_tasks)
            for i in range(2)
        ]

    mod = types.ModuleType("fake_plugin_specs")
    mod.specs = specs  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_plugin_specs", mod)
    _fake_entry_points(monkeypatch, [
        EntryPoint("fake", "fake_plugin_specs:specs", _registry.ENTRY_POINT_GROUP),
        EntryPoint("other-group", "fake_plugin_specs:nope", "something.else"),
    ])
    assert {"plugin-0-v0", "plugin-1-v0"} <= set(known_envs())


def test_broken_plugins_are_named(clean_registry: None, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_entry_points(monkeypatch, [EntryPoint("broken", "no_such_module_xyz", _registry.ENTRY_POINT_GROUP)])
    with pytest.raises(RolloutlabError, match=r"environment plugin 'broken' \(no_such_module_xyz\) failed to load"):
        known_envs()
    mod = types.ModuleType("fake_plugin_wrong")
    mod.wrong = lambda: ["not a spec"]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_plugin_wrong", mod)
    monkeypatch.setattr(_registry, "_plugins_loaded", False)
    _fake_entry_points(monkeypatch, [EntryPoint("wrong", "fake_plugin_wrong:wrong", _registry.ENTRY_POINT_GROUP)])
    with pytest.raises(RolloutlabError, match="returned str, expected EnvSpec"):
        known_envs()


def test_installed_distribution_registers_through_its_entry_point(
    clean_registry: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A real (if tiny) installed distribution: importlib.metadata finds its dist-info."""
    pkg = tmp_path / "fake_rl_envs"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from rolloutlab.envs import register_env\n"
        "from rolloutlab.envs.builtin.guess_number import GuessNumberEnv, guess_number_tasks\n"
        "register_env('dist-guess-v2', description='installed', max_turns=4, action_format='text',\n"
        "             reward_range=(0.0, 1.0), tasks=guess_number_tasks)(lambda **kw: GuessNumberEnv(**kw))\n"
    )
    info = tmp_path / "fake_rl_envs-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-rl-envs\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{_registry.ENTRY_POINT_GROUP}]\nfake = fake_rl_envs\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    try:
        assert "dist-guess-v2" in known_envs()
        assert get_env_spec("dist-guess-v2").description == "installed"
    finally:
        sys.modules.pop("fake_rl_envs", None)
