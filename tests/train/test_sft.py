"""Export → SFT (issue 23 §2-3): the rows' numbers by hand, the loss mask on the reply only,
the weighted loss against a loop, SFT that learns and writes the trainer's checkpoints,
TRL's SFTTrainer on the exported folder, and bad input that leaves nothing behind."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from rolloutlab.agent import guess_number_tokenizer
from rolloutlab.io import (
    ExportOptions,
    InputError,
    RolloutlabError,
    RunWriter,
    export_rows,
    export_run,
)
from rolloutlab.schema import Run, Trajectory, Turn
from rolloutlab.train import (
    load_rows,
    load_sft_config,
    sft,
    tokenize_row,
    weighted_ce,
    weighted_ce_slow,
)

PROMPT = [{"role": "user", "content": "guess a number from 0 to 7"}]


def _traj(tid: str, step: int, actions: list[str], obs: list[str], rewards: list[float | None], *,
          reward: float | None = None, termination: str = "done", sample: int = 0, group: str = "g") -> Trajectory:
    turns = [Turn(turn_idx=i, observation=o, action=a, parsed_action=a, reward=r, done=i == len(actions) - 1)
             for i, (a, o, r) in enumerate(zip(actions, obs, rewards, strict=True))]
    final = reward if reward is not None else sum(r or 0.0 for r in rewards)
    return Trajectory(traj_id=tid, step=step, group_id=group, sample_idx=sample, prompt=list(PROMPT), reward=final,
                      success=final >= 1, termination=termination, num_turns=len(turns), turns=turns,  # type: ignore[arg-type]
                      extras={"env_id": "guess-number-v0"})


def _trajs() -> list[Trajectory]:
    first = "guess a number from 0 to 7"
    return [
        _traj("a", 1, ["4", "6", "5"], [first, "higher", "lower"], [0.0, 0.0, 1.0]),
        _traj("b", 1, ["3", "1"], [first, "lower"], [0.0, 0.0], termination="max_turns", sample=1),
        _traj("c", 2, ["2"], [first], [1.0], group="h"),
    ]


def test_rows_by_hand() -> None:
    rows, res = export_rows(_trajs(), ExportOptions(gamma=0.5, center=True))
    assert res.rows == 6 and res.trajectories == 3
    a0, _a1, a2, b0, b1, c0 = rows
    # returns with gamma 0.5: a = [0.25, 0.5, 1.0], b = [0, 0], c = [1]
    assert [r["return_"] for r in rows] == [0.25, 0.5, 1.0, 0.0, 0.0, 1.0]
    mean1 = (0.25 + 0.5 + 1.0) / 5  # batch 1 holds five rows
    assert a0["advantage"] == pytest.approx(0.25 - mean1) and b1["advantage"] == pytest.approx(-mean1)
    assert c0["advantage"] == 0.0  # alone in batch 2
    # the state: the prompt and the history without the last action
    assert a2["state"] == [*PROMPT, {"role": "assistant", "content": "4"}, {"role": "user", "content": "higher"},
                           {"role": "assistant", "content": "6"}, {"role": "user", "content": "lower"}]
    assert a2["prompt"] == a2["state"] and a2["completion"] == [{"role": "assistant", "content": "5"}]
    assert (a0["next_obs"], a2["next_obs"]) == ("higher", "")
    assert (a2["done"], a2["truncated"], b1["done"], b1["truncated"], a0["done"]) == (True, False, False, True, False)
    assert [r["timestep"] for r in rows] == [0, 1, 2, 0, 1, 0]
    assert (b0["unique_data_sample_id"], b0["generation_id"], b0["batch_id"], c0["batch_id"]) == ("b", 1, 1, 2)
    hidden, _ = export_rows(_trajs(), ExportOptions(hide_observations=True))
    assert hidden[2]["state"][2] == {"role": "user", "content": "[observation hidden]"}
    assert hidden[2]["state"][4] == {"role": "user", "content": "lower"}  # the one the action answers


def test_outcome_reward_goes_on_the_last_turn_and_ungraded_is_left_out() -> None:
    t = _traj("o", 0, ["1", "2"], ["x", "y"], [None, None], reward=1.0)
    u = _traj("u", 0, ["1"], ["x"], [None], reward=0.0).model_copy(update={"graded": False, "reward": None})
    rows, res = export_rows([t, u], ExportOptions(gamma=1.0))
    assert [r["reward"] for r in rows] == [0.0, 1.0] and [r["return_"] for r in rows] == [1.0, 1.0]
    assert res.skipped_ungraded == 1


def test_rejection_and_preference() -> None:
    rows, res = export_rows(_trajs(), ExportOptions(kind="rejection", threshold=1.0))
    assert {r["unique_data_sample_id"] for r in rows} == {"a", "c"} and res.skipped_below_threshold == 1
    pairs, _ = export_rows(_trajs(), ExportOptions(kind="preference"))
    assert len(pairs) == 1  # group g: a (1.0) over b (0.0); group h has one trajectory
    p = pairs[0]
    assert (p["chosen_id"], p["rejected_id"], p["prompt"]) == ("a", "b", PROMPT)
    assert p["chosen"][-1] == {"role": "assistant", "content": "5"} and p["rejected"][1] == {"role": "user", "content": "lower"}


def _labelled() -> list[Trajectory]:
    """``_trajs`` with process-reward labels on a and b (as ``rolloutlab label`` writes them),
    chosen so that the steps a label threshold of 0.5 keeps are not those of the successful
    trajectories: a (solved) opens with a poor step, b (failed) with a good one; c has none."""
    from rolloutlab.label import apply_labels

    a, b, c = _trajs()

    def lab(v: float | None) -> dict[str, Any]:
        return {"method": "mc", "value": v, "hard": bool(v)}

    return [apply_labels(a, [lab(0.25), lab(0.5), lab(1.0)]), apply_labels(b, [lab(0.75), lab(None)]), c]


def test_rejection_by_label_keeps_steps_not_trajectories() -> None:
    by_reward, _ = export_rows(_labelled(), ExportOptions(kind="rejection", threshold=0.5))
    assert [(r["unique_data_sample_id"], r["timestep"]) for r in by_reward] == [("a", 0), ("a", 1), ("a", 2), ("c", 0)]
    rows, res = export_rows(_labelled(), ExportOptions(kind="rejection", threshold=0.5, by="label"))
    assert [(r["unique_data_sample_id"], r["timestep"]) for r in rows] == [("a", 1), ("a", 2), ("b", 0)]
    assert [r["reward"] for r in rows] == [0.5, 1.0, 0.75]  # the label is the row's reward
    # b's first step kept from a failed episode, with its full state; c (no labels) is not read as 0
    assert rows[2]["state"] == PROMPT and rows[0]["state"][-1] == {"role": "user", "content": "higher"}
    assert (res.trajectories, res.skipped_unlabelled, res.skipped_below_threshold, res.skipped_null_labels) == (2, 1, 1, 1)
    none, res = export_rows(_trajs(), ExportOptions(kind="rejection", threshold=0.0, by="label"))
    assert none == [] and res.skipped_unlabelled == 3  # an unlabelled run gives nothing, not every row
    with pytest.raises(RolloutlabError, match=r"--by 'prm' is not one of: reward, label"):
        ExportOptions(kind="rejection", by="prm")  # type: ignore[arg-type]
    with pytest.raises(RolloutlabError, match="for --as rejection only"):
        ExportOptions(kind="think-act", by="label")


def _run(tmp_path: Path, trajs: list[Trajectory] | None = None) -> Path:
    d = tmp_path / "run"
    with RunWriter(d, Run(run_id="r", name="r", env="guess-number-v0")) as w:
        w.write_step(1, trajs if trajs is not None else _trajs())
    return d


def test_export_load_from_disk_mask_covers_exactly_the_reply(tmp_path: Path) -> None:
    import datasets

    out = tmp_path / "ex"
    export_run(_run(tmp_path), out, ExportOptions(kind="think-act"))
    assert sorted(p.name for p in out.iterdir()) == ["data.parquet", "dataset", "export.json"]
    ds = datasets.load_from_disk(str(out / "dataset"))
    assert ds.num_rows == 6 and ds[2]["action"] == "5"
    tok = guess_number_tokenizer()
    _, manifest = load_rows(out)
    assert manifest["env"] == "guess-number-v0"
    for row in ds:
        ex = tokenize_row(tok, row["prompt"], row["completion"][0]["content"], max_seq_len=64)
        reply = [i for i, m in zip(ex.input_ids, ex.mask, strict=True) if m]
        assert reply == [*tok.encode(row["action"]), tok.eos_token_id]  # thought + action, then the end of turn
        assert ex.input_ids[: len(ex.input_ids) - len(reply)] == tok.render(row["state"], add_generation_prompt=True)
        assert ex.mask == sorted(ex.mask)  # 0 … 0 1 … 1


def test_truncation_keeps_the_reply() -> None:
    tok = guess_number_tokenizer()
    state = [*PROMPT, {"role": "assistant", "content": "4"}, {"role": "user", "content": "higher"}]
    full = tokenize_row(tok, state, "6", max_seq_len=64)
    cut = tokenize_row(tok, state, "6", max_seq_len=5)
    assert cut.dropped == len(full.input_ids) - 5 and cut.input_ids == full.input_ids[-5:] and sum(cut.mask) == 2


def test_weighted_loss_equals_the_loop() -> None:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 7, generator=g)
    ids = torch.randint(0, 7, (3, 5), generator=g)
    w = torch.tensor([[0, 0, 1, 1, 0], [0, 1, 1, 1, 1], [0, 0, 0, 1, 0]], dtype=torch.float32)
    w = w * torch.tensor([[1.0], [-0.5], [2.0]])  # advantages as weights, one negative
    fast = float(weighted_ce(logits, ids, w, denom=8.0))
    slow = weighted_ce_slow(logits.tolist(), ids.tolist(), w.tolist(), denom=8.0)
    assert fast == pytest.approx(slow, rel=1e-5, abs=1e-6)
    # by hand: one token, uniform logits -> log V
    one = weighted_ce(torch.zeros(1, 2, 4), torch.tensor([[0, 3]]), torch.tensor([[0.0, 1.0]]), denom=1.0)
    assert float(one) == pytest.approx(math.log(4))


def _ckpt_weights(p: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(p / "model.safetensors"))


def test_sft_lowers_the_loss_changes_parameters_and_writes_trainer_checkpoints(tmp_path: Path) -> None:
    from rolloutlab.train import load_config
    from rolloutlab.train._checkpoint import list_checkpoints
    from rolloutlab.train._model import build_model

    ex = tmp_path / "ex"
    export_run(_run(tmp_path), ex, ExportOptions(kind="think-act"))
    cfg = load_sft_config("sft_tiny", ["epochs=12", "batch_size=6", "lr=1e-2", "progress=false", "threads=1"])
    res = sft(cfg, ex, tmp_path / "sft")
    assert res.steps == 12 and res.rows == 6 and res.truncated_rows == 0
    assert res.losses[-1] < 0.5 * res.losses[0]
    cks = list_checkpoints(tmp_path / "sft")
    assert [c.name for c in cks] == ["step_000000", "step_000012"]  # sft_tiny saves the start too
    before, after = _ckpt_weights(cks[0]), _ckpt_weights(cks[-1])
    assert any(not torch.equal(before[k], after[k]) for k in before)
    # `train model.path=` takes the checkpoint: the same weights, the tokenizer saved beside them
    model, tok = build_model(load_config("demo", [f"model.path={cks[-1]}", "model.tiny=false"]))
    assert tok.vocab_size == guess_number_tokenizer().vocab_size
    sd = model.state_dict()
    assert all(torch.equal(sd[k], after[k]) for k in after)


def test_accumulation_gives_the_same_gradient(tmp_path: Path) -> None:
    from rolloutlab.agent import tiny_model
    from rolloutlab.train._sft import _batch

    tok = guess_number_tokenizer()
    rows, _ = export_rows(_trajs(), ExportOptions(gamma=0.9, center=True))
    exs = [tokenize_row(tok, r["state"], r["action"], max_seq_len=64, weight=r["advantage"]) for r in rows]
    denom = float(sum(sum(e.mask) for e in exs))

    def grads(micro: int) -> list[torch.Tensor]:
        model = tiny_model(tok.vocab_size, seed=0)
        for m in range(0, len(exs), micro):
            ids, att, w = _batch(exs[m:m + micro], tok.eos_token_id)
            weighted_ce(model(input_ids=ids, attention_mask=att).logits, ids, w, denom).backward()
        return [p.grad.clone() for p in model.parameters() if p.grad is not None]

    whole, acc = grads(6), grads(2)
    assert len(whole) == len(acc) > 0
    assert all(torch.allclose(a, b, atol=1e-6, rtol=1e-4) for a, b in zip(whole, acc, strict=True))


def test_lora_checkpoint_is_a_merged_full_model(tmp_path: Path) -> None:
    ex = tmp_path / "ex"
    export_run(_run(tmp_path), ex, ExportOptions(kind="think-act", gamma=0.9, center=True))
    cfg = load_sft_config("sft_tiny", ["epochs=2", "batch_size=6", "model.lora.enabled=true", "weight=advantage",
                                       "gradient_checkpointing=true", "progress=false", "threads=1"])
    res = sft(cfg, ex, tmp_path / "sft")
    w = _ckpt_weights(res.checkpoints[-1])
    assert not any("lora" in k for k in w) and "model.layers.0.self_attn.q_proj.weight" in w


def _hf_tokenizer() -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = guess_number_tokenizer().vocab
    t = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="<pad>"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    hf = PreTrainedTokenizerFast(tokenizer_object=t, eos_token="<eos>", pad_token="<pad>")
    hf.chat_template = ("{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} <eos> {% endfor %}"
                        "{% if add_generation_prompt %}<assistant> {% endif %}")
    return hf


def test_trl_sft_trainer_reads_the_exported_folder(tmp_path: Path) -> None:
    import datasets
    from trl import SFTConfig, SFTTrainer

    from rolloutlab.agent import tiny_model

    ex = tmp_path / "ex"
    export_run(_run(tmp_path), ex, ExportOptions(kind="think-act"))
    ds = datasets.load_from_disk(str(ex / "dataset"))
    model = tiny_model(16, seed=0)
    before = [p.detach().clone() for p in model.parameters()]
    args = SFTConfig(output_dir=str(tmp_path / "trl"), max_steps=1, per_device_train_batch_size=6, use_cpu=True,
                     report_to="none", save_strategy="no", logging_strategy="no", disable_tqdm=True,
                     dataset_num_proc=None, learning_rate=1e-2)
    trainer = SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=_hf_tokenizer())
    first = trainer.train_dataset[2]
    # TRL trains the same reply tokens (its tokenizer reads the prompt's other words as <pad>, ours drops them)
    tok = guess_number_tokenizer()
    ours = tokenize_row(tok, ds[2]["prompt"], ds[2]["action"], max_seq_len=64)
    theirs = [i for i, label in zip(first["input_ids"], first["labels"], strict=True) if label != -100]
    assert theirs == [i for i, m in zip(ours.input_ids, ours.mask, strict=True) if m] == [tok.encode("5")[0], 1]
    trainer.train()
    assert any(not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters(), strict=True))


def test_bad_input_is_named_and_leaves_nothing(tmp_path: Path) -> None:
    empty = _traj("e", 1, ["1"], ["x"], [0.0]).model_copy(update={"turns": [], "num_turns": 0})
    run = _run(tmp_path, [empty])
    with pytest.raises(InputError, match="has turns"):
        export_run(run, tmp_path / "out", ExportOptions())
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out*"))
    # a dataset without an action column
    import pyarrow as pa
    import pyarrow.parquet as pq

    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"state": [[{"role": "user", "content": "0 7"}]], "reward": [1.0]}), bad)
    cfg = load_sft_config("sft_tiny", ["env_id=guess-number-v0", "progress=false"])
    with pytest.raises(InputError, match=r"completion \(or action\).*fields present: state, reward"):
        sft(cfg, bad, tmp_path / "sft")
    assert not (tmp_path / "sft").exists()
    with pytest.raises(InputError, match="advantage"):
        load_rows(tmp_path / "bad.parquet", need=("advantage",))
    # an existing output folder is refused before anything is written
    ex = tmp_path / "ex"
    export_run(_run(tmp_path / "r2"), ex, ExportOptions())
    with pytest.raises(RolloutlabError, match="not empty"):
        export_run(_run(tmp_path / "r3"), ex, ExportOptions())


def test_presets() -> None:
    gpu = load_sft_config("sft_act_prm_qwen3_4b")
    assert (gpu.model.lora.enabled, gpu.model.lora.r, gpu.lr, gpu.max_seq_len, gpu.gradient_checkpointing) == (
        True, 32, 4e-5, 4096, True)
    assert load_sft_config("sft_tiny").model.tiny
    with pytest.raises(RolloutlabError, match="Did you mean 'lr'"):
        load_sft_config("sft_tiny", ["lrr=1"])


def test_cli_export_then_sft(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rolloutlab.cli import main

    run = _run(tmp_path)
    assert main(["export", str(run), "--as", "bogus", "--out", str(tmp_path / "x")]) == 1
    assert "--as 'bogus' is not one of: think-act, policy, rejection, preference" in capsys.readouterr().err
    assert main(["export", str(run), "--as", "rejection", "--out", str(tmp_path / "ex")]) == 0
    assert "wrote 4 rows from 2 trajectories (0 ungraded left out, 1 below reward 1)" in capsys.readouterr().err
    assert main(["sft", str(tmp_path / "ex"), "sft_tiny", "epochs=1", "threads=1", "--out", str(tmp_path / "s"),
                 "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "1 steps over 4 rows" in err and "step_000000, step_000001" in err
    assert main(["sft", str(tmp_path / "ex"), "sft_tiny", "lrr=1", "--out", str(tmp_path / "t")]) == 1
    assert "Did you mean 'lr'" in capsys.readouterr().err and not (tmp_path / "t").exists()


def test_cli_export_by_label(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from rolloutlab.cli import main

    run = _run(tmp_path, _labelled())
    assert main(["export", str(run), "--as", "rejection", "--by", "outcome", "--out", str(tmp_path / "x")]) == 1
    assert "--by 'outcome' is not one of: reward, label" in capsys.readouterr().err and not (tmp_path / "x").exists()
    assert main(["export", str(run), "--by", "label", "--out", str(tmp_path / "x")]) == 1
    assert "for --as rejection only" in capsys.readouterr().err
    assert main(["export", str(run), "--as", "rejection", "--by", "label", "--threshold", "0.5",
                 "--out", str(tmp_path / "ex")]) == 0
    assert ("wrote 3 rows from 2 trajectories (0 ungraded left out, 1 unlabelled skipped, 1 steps below label 0.5, "
            "1 steps without a label value)") in capsys.readouterr().err
    manifest = json.loads((tmp_path / "ex" / "export.json").read_text())
    assert (manifest["skipped_unlabelled"], manifest["skipped_null_labels"], manifest["options"]["by"]) == (1, 1, "label")
    assert "1 unlabelled skipped" in manifest["summary"]
