"""Issue 20 items 3 and 4 in ``eval``: a checkpoint's own generation settings, the rates of
lost turns in ``summary.json`` and a warning when they pass half, running episodes in the
progress, and a ``transformers serve`` round trip."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from rolloutlab.agent import (
    LoopConfig,
    TinyModelConfig,
    guess_number_tokenizer,
    save_model,
    tiny_model,
)
from rolloutlab.cli import main
from rolloutlab.evaluate import EvalConfig, Progress, run_eval
from tests.envs._procs import free_port, server

ENV = "guess-number-v0"
SHAPE = TinyModelConfig(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=16, max_positions=512)


def _checkpoint(d: Path, **sampling: float) -> Path:
    tok = guess_number_tokenizer()
    save_model(tiny_model(tok.vocab_size, seed=3, shape=SHAPE), tok, d, sampling=LoopConfig(**sampling))
    return d


def _summary(out: Path) -> dict[str, object]:
    return dict(json.loads((out / "eval" / "policy" / "summary.json").read_text()))


def test_eval_samples_a_checkpoint_with_its_own_settings_unless_a_flag_is_given(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ck = _checkpoint(tmp_path / "ck", max_tokens_per_turn=1, temperature=0.0)
    base = ["eval", "--env", ENV, "--policy", f"hf:{ck}", "--episodes", "2", "--max-turns", "2", "--json"]
    assert main([*base, "--out", str(tmp_path / "own")]) == 0
    own = _summary(tmp_path / "own")
    assert (own["max_tokens_per_turn"], own["temperature"]) == (1, 0.0)
    assert own["length_cut_rate"] == 1.0  # one-token replies: every turn reaches the cap, by design (no warning)
    assert "cut at the token cap" not in capsys.readouterr().err
    assert main([*base, "--max-tokens", "2", "--out", str(tmp_path / "flag")]) == 0
    assert "100% of the replies were cut at the token cap (2 tokens per turn)" in capsys.readouterr().err
    flag = _summary(tmp_path / "flag")
    assert (flag["max_tokens_per_turn"], flag["temperature"]) == (2, 0.0)  # the flag wins, the rest stays
    assert main([*base, "--no-checkpoint-generation", "--out", str(tmp_path / "off")]) == 0
    off = _summary(tmp_path / "off")
    assert (off["max_tokens_per_turn"], off["temperature"]) == (512, 1.0)  # the defaults


def test_summary_records_invalid_and_cut_rates_by_hand(tmp_path: Path) -> None:
    """Scripted guess-number: every action valid, replies of no tokens counted (text policy)."""
    [s] = run_eval(EvalConfig(env=ENV, policy="scripted:guess-number", episodes=3, out=tmp_path,
                              loop=LoopConfig(invalid_action_penalty=-0.5)))
    # a text policy counts no tokens: its turns are read by their finish reason, "stop"
    assert s.invalid_action_rate == 0.0 and s.length_cut_rate == 0.0
    [r] = run_eval(EvalConfig(env=ENV, policy="random", episodes=4, out=tmp_path / "r", seed=1))
    trajs = [json.loads(line) for line in (tmp_path / "r" / "eval" / "policy" / "episodes.jsonl").read_text().splitlines()]
    invalid = sum(t["invalid_actions"] for t in trajs) / sum(t["num_turns"] for t in trajs)
    assert r.invalid_action_rate == pytest.approx(invalid)


def test_progress_shows_the_running_episodes(tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []

    def on(p: Progress) -> None:
        seen.append((p.done, p.running))

    run_eval(EvalConfig(env=ENV, policy="scripted:guess-number", episodes=5, out=tmp_path,
                        loop=LoopConfig(concurrency=2)), on_progress=on)
    # before any finishes two are under way; then two while three or more are left, then fewer
    assert seen == [(0, 2), (1, 2), (2, 2), (3, 2), (4, 1), (5, 0)]
    assert Progress(checkpoint="policy", total=5, running=2).in_flight() == "2 running"
    assert Progress(checkpoint="policy", total=5).in_flight() == ""


@pytest.mark.slow
def test_a_checkpoint_served_by_transformers_serve_scores_as_hf(tmp_path: Path) -> None:
    """The checkpoint folder as written, served by ``transformers serve`` offline (chat
    template, stop and suppressed ids from the folder) and evaluated through ``openai:``,
    plays every episode as ``hf:`` does, greedily."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    pytest.importorskip("openai")  # transformers serve answers with its types
    ck = _checkpoint(tmp_path / "step_000002", max_tokens_per_turn=1, temperature=0.0)
    port = free_port()
    cli = Path(sys.executable).parent / "transformers"
    offline = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    argv = ["serve", "--host", "127.0.0.1", "--port", str(port), "--device", "cpu", "--log-level", "warning", str(ck)]
    with server(argv, port=port, executable=str(cli), env=offline, timeout_s=90) as url:
        common = ["eval", "--env", ENV, "--episodes", "6", "--max-turns", "4", "--temperature", "0", "--json"]
        assert main([*common, "--policy", f"hf:{ck}", "--out", str(tmp_path / "hf")]) == 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the cap comes from the flag here: it warns about one-token replies
            assert main([*common, "--max-tokens", "1", "--policy", f"openai:{url}/v1:{ck}",
                         "--out", str(tmp_path / "served")]) == 0
    hf, served = _summary(tmp_path / "hf"), _summary(tmp_path / "served")
    assert served["success_rate"] == hf["success_rate"] and served["mean_reward"] == hf["mean_reward"]
    # one-token replies: cut at the cap, counted by tokens (hf:) and by finish reason (served)
    assert served["length_cut_rate"] == hf["length_cut_rate"] == 1.0

    def actions(out: Path) -> list[list[str | None]]:
        lines = (out / "eval" / "policy" / "episodes.jsonl").read_text().splitlines()
        return [[tu.get("parsed_action") for tu in json.loads(x)["turns"]] for x in lines]

    assert actions(tmp_path / "served") == actions(tmp_path / "hf")


def test_a_resume_that_would_sample_otherwise_is_refused(tmp_path: Path) -> None:
    """The same flag values sample differently when one was given before and not now (the
    checkpoint's own cap then applies): resuming across that change is refused."""
    from rolloutlab.io import RolloutlabError

    cfg = EvalConfig(env=ENV, policy="scripted:guess-number", episodes=2, out=tmp_path)
    run_eval(cfg)
    run_eval(cfg)  # the same settings resume
    with pytest.raises(RolloutlabError, match=r"from_checkpoint: \['max_tokens_per_turn', 'temperature', 'top_p'\] "
                                              r"before, \['temperature', 'top_p'\] now"):
        run_eval(EvalConfig(env=ENV, policy="scripted:guess-number", episodes=2, out=tmp_path,
                            given=frozenset({"max_tokens_per_turn"})))


def test_the_table_is_followed_by_each_checkpoints_settings_and_lost_turns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--env", ENV, "--policy", "random", "--episodes", "3", "--max-tokens", "5",
                 "--temperature", "0.5", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    [line] = [x for x in out.splitlines() if x.startswith("policy: ")]
    s = _summary(tmp_path)
    assert line == (f"policy: cap 5 tokens, temp 0.5; invalid {s['invalid_action_rate']:.3f}, "
                    f"cut at cap {s['length_cut_rate']:.3f}")
    assert max(len(x) for x in out.splitlines()) <= 80
