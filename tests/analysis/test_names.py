"""Metric names by family: each framework's own names read as the right quantity, the
planted-pathology set renamed into every convention giving the same findings, overrides
(``--metric``) and the columns not understood."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rolloutlab.analysis._health import SIGNATURES, health_check, not_understood
from rolloutlab.analysis._health_gen import CONVENTIONS, PLANTED, healthy_run, planted_run, renamed
from rolloutlab.analysis._names import classify, parse_overrides, recognise, tokens

FRAMEWORK_NAMES: dict[str, dict[str, str | None]] = {
    "verl": {  # verl/trainer/ppo/metric_utils.py, verl/workers/actor/dp_actor.py
        "critic/score/mean": "reward", "critic/rewards/mean": "reward", "response_length/mean": "response_length",
        "response_length/clip_ratio": "truncation_rate", "response_length/max": None, "prompt_length/mean": None,
        "actor/entropy": "entropy", "actor/kl_loss": "kl_ref", "actor/kl_coef": None, "actor/ppo_kl": "policy_kl",
        "actor/pg_clipfrac": "clipfrac", "actor/pg_clipfrac_lower": "dual_clipfrac",  # not clip-low
        "actor/grad_norm": "grad_norm", "actor/lr": "lr", "critic/vf_loss": "value_loss",
        "critic/vf_explained_var": "explained_var", "critic/advantages/mean": "advantage_mean",
        "critic/advantages/max": "advantage_max", "critic/advantages/min": "advantage_min",
        "timing_s/step": "step_time", "timing_s/gen": "generation_time", "perf/total_num_tokens": "tokens",
        "val-core/openai/gsm8k/reward/mean@1": None, "adv/zero_frac": "zero_advantage_frac",  # the last: rolloutlab
    },
    "trl": {  # trl/trainer/grpo_trainer.py (and ppo_trainer.py for approxkl)
        "reward": "reward", "reward_std": "reward_std", "frac_reward_zero_std": "zero_variance_frac",
        "completions/mean_length": "response_length", "completions/clipped_ratio": "truncation_rate",
        "entropy": "entropy", "kl": "kl_ref", "clip_ratio/region_mean": "clipfrac", "clip_ratio/low_mean": "clipfrac_low",
        "clip_ratio/high_mean": "clipfrac_high", "num_tokens": "tokens", "grad_norm": "grad_norm",
        "learning_rate": "lr", "rewards/accuracy_reward/mean": "correctness", "rewards/format_reward/mean": "format",
        "policy/approxkl_avg": "policy_kl", "policy/clipfrac_avg": "clipfrac",
    },
    "skyrl": {  # skyrl_train/trainer.py
        "reward/avg_raw_reward": "reward", "generate/avg_num_tokens": "response_length",
        "policy/policy_entropy": "entropy", "policy/policy_kl": "kl_ref", "policy/loss_metrics/clip_ratio": "clipfrac",
        "policy/grad_norm": "grad_norm", "policy/policy_lr": "lr", "timing/step": "step_time",
        "timing/generate": "generation_time",
    },
    "openrlhf": {  # openrlhf/models/actor.py, openrlhf/trainer/ppo_utils/experience_maker.py
        "ppo_kl": "policy_kl", "ppo_clip_ratio": "clipfrac", "vllm_kl": "sampler_trainer_kl", "kl": "kl_ref",
        "actor_lr": "lr", "critic_loss": "value_loss", "response_length": "response_length", "reward": "reward",
    },
    "prime-rl": {
        "reward/mean": "reward", "seq_len/mean": "response_length", "is_truncated/mean": "truncation_rate",
        "mismatch_kl/mean": "sampler_trainer_kl", "optim/grad_norm": "grad_norm", "optim/lr": "lr",
        "entropy/mean": "entropy", "time/step": "step_time",
    },
    "nemo-rl": {  # nemo_rl/algorithms/grpo.py
        "train/reward": "reward", "train/approx_entropy": "entropy", "train/gen_kl_error": "sampler_trainer_kl",
        "train/token_mult_prob_error": "sampler_trainer_kl", "train/mean_gen_tokens_per_sample": "response_length",
        "train/kl_penalty": "kl_ref", "train/grad_norm": "grad_norm", "train/lr": "lr",
        "timing/train/total_step_time": "step_time", "validation/accuracy": None,
    },
    "art": {
        "train/reward": "reward", "train/reward_std_dev": "reward_std", "train/exception_rate": "ungraded_rate",
        "train/kl_div": "kl_ref", "train/entropy": "entropy", "train/grad_norm": "grad_norm",
        "train/learning_rate": "lr",
    },
    "tinker": {  # tinker-cookbook rl metrics
        "env/all/reward/total": "reward", "env/all/correct": "correctness", "env/all/format": "format",
        "env/all/ac_tokens_per_turn": "response_length", "optim/kl_sample_train_v1": "sampler_trainer_kl",
        "optim/lr": "lr", "time/total": "step_time", "env/all/frac_all_good": "all_solved_frac",
        "env/all/frac_all_bad": "none_solved_frac", "env/all/frac_mixed": None,
    },
    "cleanrl": {  # cleanrl/ppo.py
        "losses/approx_kl": "policy_kl", "losses/old_approx_kl": "policy_kl", "losses/clipfrac": "clipfrac",
        "losses/value_loss": "value_loss", "losses/explained_variance": "explained_var", "charts/learning_rate": "lr",
    },
    "snake_case": {
        "mean_reward": "reward", "reward_std": "reward_std", "success_rate": "correctness", "kl_to_ref": "kl_ref",
        "approx_kl": "policy_kl", "importance_ratio_mean": "importance_ratio", "response_length_mean": "response_length",
        "truncated_frac": "truncation_rate", "zero_variance_frac": "zero_variance_frac",
        "all_solved_frac": "all_solved_frac", "none_solved_frac": "none_solved_frac", "repetition_rate": "repetition",
        "advantage_std": "advantage_std", "value_loss": "value_loss", "explained_variance": "explained_var",
        "step_time_s": "step_time", "generation_time_s": "generation_time", "num_tokens": "tokens",
    },
}


def test_tokens_split_separators_and_camel_case() -> None:
    assert tokens("train/rewardStd_mean") == ("train", "reward", "std", "mean")
    assert tokens("timing_s/step") == ("timing", "s", "step")
    assert tokens("env.all-frac_all_good") == ("env", "all", "frac", "all", "good")


@pytest.mark.parametrize("framework", list(FRAMEWORK_NAMES))
def test_each_frameworks_own_names_are_read_as_their_quantity(framework: str) -> None:
    got = {name: classify(name) for name in FRAMEWORK_NAMES[framework]}
    assert got == FRAMEWORK_NAMES[framework]


def test_a_mean_beats_other_statistics_and_longer_names() -> None:
    found, unknown = recognise(["reward/std", "reward/max", "critic/rewards/mean", "reward", "mystery_metric"])
    assert found["reward"] == "critic/rewards/mean" and found["reward_std"] == "reward/std"
    assert unknown == ["reward/max", "mystery_metric"]
    found, _ = recognise(["env/reward", "env/reward/mean"])
    assert found["reward"] == "env/reward/mean"


def _findings(run: pd.DataFrame) -> list[tuple[str, str | None, int | None]]:
    return [(f.kind, f.severity, f.onset) for f in health_check(run).findings]


@pytest.mark.parametrize("convention", [c for c in CONVENTIONS if c != "rolloutlab"])
def test_planted_set_renamed_into_every_convention_gives_the_same_findings(convention: str) -> None:
    for k, kind in enumerate(PLANTED):
        run, _ = planted_run(kind, np.random.default_rng(500 + k), n=90)
        base = _findings(run)
        assert kind in {f[0] for f in base}, (kind, base)
        assert _findings(renamed(run, convention)) == base, kind
    for seed in range(3):
        run = healthy_run(np.random.default_rng(seed), 120)
        assert _findings(renamed(run, convention)) == _findings(run)


@pytest.mark.parametrize("convention", list(CONVENTIONS))
def test_every_signature_is_checked_under_every_convention(convention: str) -> None:
    rep = health_check(renamed(healthy_run(np.random.default_rng(1), 60), convention))
    assert set(rep.checked) == {s.kind for s in SIGNATURES}, rep.missing
    assert rep.unrecognised == []


def _trainer_metric_names() -> list[str]:
    """Every name in the trainer's metrics table (docs/training.md, "Metrics")."""
    doc = (Path(__file__).parents[2] / "docs" / "training.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Metrics (`metrics.jsonl`)"):]
    table = section[section.index("| name | meaning |\n|---|---|\n| `"):]
    rows = [line for line in table[:table.index("\n\n")].splitlines()[2:]]
    return sorted({n for row in rows for n in re.findall(r"`([^`]+)`", row.split("|")[1])})


def test_the_trainers_own_names_are_all_understood() -> None:
    """Nothing rolloutlab's own trainer logs is listed as "not understood"."""
    names = _trainer_metric_names()
    assert len(names) > 40 and {"adv/zero_frac", "episode/turns_mean", "perf/tokens_per_s"} <= set(names)
    assert not_understood(names, {}) == []
    # and the ones that share words with other quantities are read as what they are
    assert classify("adv/zero_frac") == "zero_advantage_frac"  # not the zero-variance group share
    assert classify("actor/pg_clipfrac_lower") == "dual_clipfrac"  # verl's dual-clip bound, not clip-low
    assert classify("success/rate_all") == "correctness"  # not a share of all-solved groups
    assert classify("perf/sampled_tokens") == "tokens" and classify("perf/tokens_per_s") == "throughput"


def test_override_reads_the_named_column_and_unknown_columns_are_listed() -> None:
    rng = np.random.default_rng(2)
    n = 100
    blow = 0.005 * np.exp(np.log(77 / 0.005) * np.clip((np.arange(n) - 60) / 10, 0, 1)) * np.exp(rng.normal(0, .2, n))
    run = pd.DataFrame({"mean_reward": 0.5 + rng.normal(0, 0.02, n), "q7": blow, "zz_other": rng.normal(0, 1, n)},
                       index=pd.RangeIndex(1, n + 1))
    plain = health_check(run)
    assert "policy_update_instability" in plain.missing and plain.unrecognised == ["q7", "zz_other"]
    rep = health_check(run, overrides={"policy_kl": "q7"})
    assert rep.scalars["policy_kl"] == "q7" and rep.unrecognised == ["zz_other"]
    assert [f.kind for f in rep.findings if f.severity == "critical"] == ["policy_update_instability"]
    with pytest.raises(ValueError, match="no column 'nope'"):
        health_check(run, overrides={"policy_kl": "nope"})


def test_parse_overrides_names_the_bad_value() -> None:
    assert parse_overrides(["policy_kl = my/kl"]) == {"policy_kl": "my/kl"}
    with pytest.raises(ValueError, match="QUANTITY=COLUMN"):
        parse_overrides(["policy_kl"])
    with pytest.raises(ValueError, match=r"unknown quantity 'polcy_kl'.*policy_kl"):
        parse_overrides(["polcy_kl=x"])


def test_cli_metric_override_and_columns_read_in_text_and_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from rolloutlab.cli import main

    monkeypatch.setenv("ROLLOUTLAB_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(4)
    n = 100
    blow = 0.005 * np.exp(np.log(77 / 0.005) * np.clip((np.arange(n) - 60) / 10, 0, 1)) * np.exp(rng.normal(0, .2, n))
    df = pd.DataFrame({"mean_reward": 0.5 + rng.normal(0, 0.02, n), "q7": blow, "zz_other": rng.normal(0, 1, n)},
                      index=pd.RangeIndex(1, n + 1))
    p = tmp_path / "run" / "metrics.csv"
    p.parent.mkdir()
    df.to_csv(p, index_label="step")
    assert main(["analyze", str(p), "--json", "--metric", "policy_kl=q7"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert any(f["kind"] == "policy_update_instability" and f["severity"] == "critical" for f in out["findings"])
    assert "policy_kl = q7" in out["skipped"]["names:read"]
    assert out["skipped"]["names:not_understood"].endswith("zz_other")
    assert main(["analyze", str(p)]) == 0
    text = capsys.readouterr().out
    assert "not understood" in text.replace("_", " ") and "zz_other" in text
    assert main(["analyze", str(p), "--metric", "polcy_kl=q7"]) == 2


def test_watch_metric_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    from rolloutlab.cli import main

    monkeypatch.setenv("ROLLOUTLAB_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(6)
    n = 100
    blow = 0.005 * np.exp(np.log(77 / 0.005) * np.clip((np.arange(n) - 60) / 10, 0, 1)) * np.exp(rng.normal(0, .2, n))
    p = tmp_path / "run" / "metrics.csv"
    p.parent.mkdir()
    pd.DataFrame({"mean_reward": 0.5 + rng.normal(0, 0.02, n), "q7": blow},
                 index=pd.RangeIndex(1, n + 1)).to_csv(p, index_label="step")
    assert main(["watch", str(p), "--interval", "0", "--max-polls", "1"]) == 0
    assert "policy_update_instability" not in capsys.readouterr().out
    assert main(["watch", str(p), "--interval", "0", "--max-polls", "1", "--metric", "policy_kl=q7"]) == 0
    assert "CRITICAL policy_update_instability" in capsys.readouterr().out
    assert main(["watch", str(p), "--metric", "q7"]) == 2


def test_step_table_keeps_reference_kl_and_policy_update_kl_apart() -> None:
    from rolloutlab.analysis._steps import trainer_scalars

    m = pd.DataFrame({"actor/ppo_kl": [0.01, 0.02], "actor/kl_loss": [0.3, 0.4]}, index=[1, 2])
    out = trainer_scalars(m)
    assert out.attrs["kl"] == "actor/kl_loss" and out.attrs["policy_kl"] == "actor/ppo_kl"
    assert out["kl"].tolist() == [0.3, 0.4]
