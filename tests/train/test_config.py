"""TrainConfig: overrides, refusals that name the fix, presets."""

from __future__ import annotations

from pathlib import Path

import pytest

from rolloutlab.io import InputError
from rolloutlab.train import ESTIMATORS, ConfigError, TrainConfig, config_keys, load_config
from rolloutlab.train._config import presets_dir

from ._helpers import TINY

PRESETS = sorted(p.stem for p in presets_dir().glob("*.yaml") if not p.stem.startswith("sft_"))
"""The trainer's presets (``sft_*`` are ``rolloutlab sft``'s, tests/train/test_sft.py)."""


def test_presets_are_the_documented_ones() -> None:
    assert sorted([
        "alfworld_gigpo", "code_search_rloo", "demo", "search_r1_grpo", "search_r1_process_grpo",
        "textcraft_scalinginter", "webshop_gigpo", "webshop_process_center_mean_std", "webshop_process_std_sum",
    ]) == PRESETS


def test_overrides_and_round_trip() -> None:
    cfg = load_config(None, [*TINY, "algorithm.adv_estimator=rloo", "optim.lr=8e-6",
                             "rollout.rounds_ctrl.rounds=[10, 20, 30]", "env.kwargs.n=8"])
    assert cfg.algorithm.adv_estimator == "rloo" and cfg.optim.lr == 8e-6
    assert cfg.rollout.rounds_ctrl.rounds == [10, 20, 30] and cfg.env.kwargs == {"n": 8}
    assert cfg.batch_size == cfg.rollout.tasks_per_step * cfg.rollout.n
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg


def test_unknown_key_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as e:
        load_config(None, [*TINY, "rollout.nn=3"])
    assert "rollout.n'" in str(e.value) and "algorithm.adv_estimator" in str(e.value)
    assert "rollout.n" in config_keys()


def test_unknown_estimator_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as e:
        load_config(None, [*TINY, "algorithm.adv_estimator=ppo"])
    for name in ESTIMATORS:
        assert name in str(e.value)


@pytest.mark.parametrize(
    ("overrides", "fix"),
    [
        (["algorithm.adv_estimator=rloo", "rollout.n=1"], "rollout.n=2"),
        (["rollout.n=0"], "rollout.n must be >= 1"),
        (["actor.clip_ratio_c=0.5"], "must be > 1"),
        (["actor.mini_batches=3", "rollout.tasks_per_step=4"], "must divide"),
        (["rollout.rounds_ctrl.type=scaling_inter_stepwise"], "rounds=[10,20,30]"),
        (["optim.lr=0"], "optim.lr"),
        (["rollout.backend=openai"], "base_url"),
        (["trainer.total_steps=abc"], "must be an integer"),
    ],
)
def test_impossible_combinations_name_the_fix(overrides: list[str], fix: str) -> None:
    with pytest.raises(ConfigError, match=None) as e:
        load_config(None, [*TINY, *overrides])
    assert fix in str(e.value)


def test_missing_model_path() -> None:
    with pytest.raises(ConfigError, match=r"model\.path is required"):
        load_config("search_r1_grpo")
    from rolloutlab.io import RolloutlabError
    from rolloutlab.train import train

    cfg = load_config(None, ["model.path=/nonexistent/model", "logging.progress=false"])
    with pytest.raises(RolloutlabError, match="does not exist"):
        train(cfg, Path("/tmp/never-written"), progress=False)


def test_gigpo_without_anchors_is_refused(tmp_path: Path) -> None:
    from rolloutlab.train import Trainer

    cfg = load_config(None, [*TINY, "env.id=search-qa-v0", "algorithm.adv_estimator=gigpo"])
    with pytest.raises(ConfigError, match="anchor"):
        Trainer(cfg, tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_bad_yaml_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("rollout:\n  n: [1,\n")
    with pytest.raises(InputError) as e:
        load_config(p)
    assert str(p) in str(e.value)
    p.write_text("rollout:\n  bogus: 1\n")
    with pytest.raises(ConfigError, match=r"rollout\.bogus"):
        load_config(p)
    with pytest.raises(InputError, match="presets: "):
        load_config("no_such_preset")


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_loads_with_the_tiny_model(preset: str) -> None:
    cfg = load_config(preset, ["model.tiny=true"])
    assert cfg.model.tiny


def test_strategy_is_ddp_or_fsdp() -> None:
    assert load_config(None, TINY).trainer.strategy == "ddp"
    assert load_config(None, [*TINY, "trainer.strategy=fsdp"]).trainer.strategy == "fsdp"
    with pytest.raises(ConfigError, match=r"trainer\.strategy='zero3' is not one of: ddp, fsdp"):
        load_config(None, [*TINY, "trainer.strategy=zero3"])


def test_dual_clip_is_on_by_default_as_in_verl() -> None:
    """verl's vanilla policy loss always applies the dual clip with c = 3
    (``compute_policy_loss_vanilla``, core_algos.py at b178a3cd); null turns it off."""
    assert load_config(None, TINY).actor.clip_ratio_c == 3.0
    assert load_config(None, [*TINY, "actor.clip_ratio_c=null"]).actor.clip_ratio_c is None
