"""``rolloutlab label``: step labels checked against exact values on guess-number-v0.

The tiny policy writes single-token actions (``max_tokens_per_turn = 1``) and the feedback
is deterministic, so the exact value of a state is a finite sum over the policy's action
distribution (:func:`exact_value`, written from the environment's rules and the chat
template, not from the labeller).  Monte-Carlo labels must fall inside the binomial interval
of that value at the expected rate and be unbiased; action-probability labels must equal
the hand-computed probability to 1e-6.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson
import pytest
import torch
from scipy.stats import binom

from rolloutlab.agent import LoopConfig, guess_number_tokenizer, save_model, tiny_model
from rolloutlab.agent._tokenizers import save_tokenizer
from rolloutlab.envs.builtin.guess_number import target_of
from rolloutlab.evaluate import EvalConfig, run_eval
from rolloutlab.io import RunWriter, read_trajectories
from rolloutlab.label import PARTIAL, LabelConfig, run_label
from rolloutlab.schema import Run, Trajectory, Turn
from tests._mock_openai import MockOpenAI

MAX_TURNS = 3
N = 32


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model with a peaked action distribution (embeddings scaled), so that state
    values spread over (0, 1) instead of all sitting near chance."""
    tok = guess_number_tokenizer()
    model = tiny_model(tok.vocab_size, seed=7)
    with torch.no_grad():
        model.get_input_embeddings().weight.mul_(8.0)  # tied: sharpens the output logits too
    d = tmp_path_factory.mktemp("model") / "tiny"
    save_model(model, tok, d)
    return d


@pytest.fixture(scope="module")
def run_dir(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "eval"
    run_eval(EvalConfig(env="guess-number-v0", out=out, policy=f"hf:{model_dir}", episodes=10, samples=1, seed=3,
                        loop=LoopConfig(max_turns=MAX_TURNS, max_tokens_per_turn=1, split="eval")))
    return out


def _labelled(out: Path) -> list[Trajectory]:
    return [t for f in sorted((out / "rollouts").glob("step_*.jsonl")) for _, t in read_trajectories(f)]


# ---------------------------------------------------------------- the exact value, slowly


def _model(model_dir: Path) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(model_dir), local_files_only=True).eval()


def _dist(model: Any, ids: list[int]) -> list[float]:
    """The sampler's distribution of the next token: softmax at temperature 1, padding and
    role markers (never sampled) excluded."""
    tok = guess_number_tokenizer()
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, -1].double()
    for i in tok.suppress_ids:
        logits[i] = -math.inf
    return torch.softmax(logits, -1).tolist()


def _feedback(text: str, target: int) -> str:
    """guess-number's answer to a reply (the loop's corrective message when nothing parses)."""
    if not text.strip():
        return "Your reply could not be read: the reply is empty. Reply with the action only."
    s = text.strip()
    if not s.isdigit() or int(s) > 7:
        return "invalid"
    g = int(s)
    return "correct" if g == target else ("higher" if g < target else "lower")


def exact_value(model: Any, messages: list[dict[str, str]], target: int, turns_left: int) -> float:
    """P(the episode is solved within ``turns_left`` more single-token replies)."""
    if turns_left == 0:
        return 0.0
    tok = guess_number_tokenizer()
    probs = _dist(model, tok.render(messages, add_generation_prompt=True))
    v = 0.0
    for k, p in enumerate(probs):
        if p == 0.0:
            continue
        text = tok.decode([k])
        fb = _feedback(text, target)
        if fb == "correct":
            v += p
        else:
            v += p * exact_value(model, [*messages, {"role": "assistant", "content": text},
                                         {"role": "user", "content": fb}], target, turns_left - 1)
    return v


def _state_after(t: Trajectory, turn: int) -> list[dict[str, str]]:
    msgs = [{"role": "user", "content": "guess a number from 0 to 7"}]
    for k in range(turn + 1):
        msgs += [{"role": "assistant", "content": t.turns[k].action or ""},
                 {"role": "user", "content": t.turns[k + 1].observation or ""}]
    return msgs


# ---------------------------------------------------------------- Monte-Carlo


def test_mc_labels_fall_in_their_binomial_interval(model_dir: Path, run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "mc"
    res = run_label(LabelConfig(run=run_dir, out=out, method="mc", policy=f"hf:{model_dir}", n=N, seed=11,
                                loop=LoopConfig(max_tokens_per_turn=1, concurrency=256)))
    model = _model(model_dir)
    labelled = _labelled(out)
    assert len(labelled) == 10 and res.labelled == 10
    exact, counts = [], []
    for t in labelled:
        target = target_of(t.task_id or "", 8)
        for k, u in enumerate(t.turns):
            lab = u.extras["label"] if u.extras else None
            assert lab is not None and lab["method"] == "mc" and u.reward == lab["value"]
            if lab.get("terminal"):
                assert k == len(t.turns) - 1 and lab["value"] == float(bool(t.success))
                continue
            assert lab["n"] == N and lab["ungraded"] == 0
            assert lab["hard"] == (lab["successes"] > 0)
            exact.append(exact_value(model, _state_after(t, k), target, MAX_TURNS - (k + 1)))
            counts.append(lab["successes"])
    assert len(exact) >= 8
    assert sum(0.05 < p < 0.95 for p in exact) >= 4, f"values too extreme to test anything: {exact}"
    # each count inside the central 99% interval of Binomial(N, p), at the expected rate
    miss = sum(not binom.ppf(0.005, N, p) <= k <= binom.ppf(0.995, N, p) for p, k in zip(exact, counts, strict=True))
    assert miss <= binom.ppf(0.999, len(exact), 0.01), (miss, list(zip(exact, counts, strict=True)))
    # and no bias: the summed deviation within 4 standard deviations
    dev = sum(k - N * p for p, k in zip(exact, counts, strict=True))
    sd = math.sqrt(sum(N * p * (1 - p) for p in exact))
    assert abs(dev) <= 4 * sd + 1e-9, (dev, sd)
    # every original reward kept, the run record says how it was labelled
    run = orjson.loads((out / "run.json").read_bytes())
    assert run["config"]["labels"]["method"] == "mc" and run["config"]["labels"]["params"]["n"] == N
    assert run["config"]["labels"]["model"] == "hf:tiny" and run["status"] == "finished"
    source = orjson.loads((run_dir / "run.json").read_bytes())
    assert run["config"]["labels"]["source_run"] == source["run_id"] != run["run_id"] and run["name"] == "mc"
    src = {t.traj_id: t for f in (run_dir / "eval").glob("*/episodes.jsonl") for _, t in read_trajectories(f)}
    for t in labelled:
        orig = src[t.traj_id.split("/", 2)[2]]
        assert [u.extras["env_reward"] for u in t.turns if u.extras] == [u.reward for u in orig.turns]
        assert t.reward == orig.reward and t.success == orig.success


def test_mc_resumes_without_duplicates(model_dir: Path, run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "mc"
    cfg = LabelConfig(run=run_dir, out=out, method="mc", policy=f"hf:{model_dir}", n=2, limit=3,
                      loop=LoopConfig(max_tokens_per_turn=1))
    first = run_label(cfg)
    assert first.labelled == 3
    before = {t.traj_id: t for t in _labelled(out) if t.turns[0].extras}
    assert len(before) == 3

    class Stop(Exception):
        pass

    calls = []

    def stop_after_one(p: Any) -> None:
        calls.append(p.done_steps)
        if len(calls) == 2:  # the first report, then one trajectory labelled
            raise Stop

    import dataclasses

    with pytest.raises(Stop):
        run_label(dataclasses.replace(cfg, limit=None), on_progress=stop_after_one)
    kept = len((out / PARTIAL).read_bytes().splitlines())
    assert 1 <= kept < 7  # interrupted: some labelled (those finished in the same batch too), not all
    with (out / PARTIAL).open("ab") as f:
        f.write(b'{"traj_id": "torn')  # a kill mid-write
    last = run_label(dataclasses.replace(cfg, limit=None))
    assert last.labelled == 10 - 3 - kept
    after = _labelled(out)
    assert len(after) == 10 and len({t.traj_id for t in after}) == 10
    assert all(u.extras and "label" in u.extras for t in after for u in t.turns)
    for t in after:  # the first run's labels are kept as they were
        if t.traj_id in before:
            assert t == before[t.traj_id]
    assert not (out / PARTIAL).exists()
    with pytest.raises(Exception, match="other settings"):
        run_label(dataclasses.replace(cfg, n=3))


# ---------------------------------------------------------------- action probability


def test_action_prob_equals_the_hand_computed_probability(model_dir: Path, run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "ap"
    run_label(LabelConfig(run=run_dir, out=out, method="action-prob", policy=f"hf:{model_dir}", normalise=True,
                          loop=LoopConfig(max_tokens_per_turn=1)))
    model = _model(model_dir)
    tok = guess_number_tokenizer()
    checked = 0
    for t in _labelled(out):
        msgs = [{"role": "user", "content": "guess a number from 0 to 7"}]
        for k, u in enumerate(t.turns):
            lab = u.extras["label"] if u.extras else None
            assert lab is not None
            action = (u.action or "").strip()
            if not action:
                assert lab["value"] is None and u.reward is None and "could not be parsed" in lab["reason"]
            else:
                ids = tok.encode(action)
                assert len(ids) == 1  # single-token actions
                p = _dist(model, tok.render(msgs, add_generation_prompt=True))[ids[0]]
                assert abs(lab["value"] - p) <= 1e-6 and abs(u.reward - p) <= 1e-6
                assert lab["g"] == 0 and lab["normalised"] == [1.0] and lab["hard"] == (p >= 0.5)
                checked += 1
            if k + 1 < len(t.turns):
                msgs += [{"role": "assistant", "content": u.action or ""},
                         {"role": "user", "content": t.turns[k + 1].observation or ""}]
    assert checked >= 10


def _tok_dir(tok: Any, path: Path) -> Path:
    path.mkdir(parents=True)
    save_tokenizer(tok, path)
    return path


def _hand_run(path: Path, actions: list[str]) -> Path:
    turns = [Turn(turn_idx=k, observation="guess a number from 0 to 7" if k == 0 else "invalid", action=a,
                  parsed_action=a, reward=0.0) for k, a in enumerate(actions)]
    t = Trajectory(traj_id="t0", step=1, task_id="train/1", data_source="guess-number-v0", reward=0.0, success=False,
                   termination="max_turns", num_turns=len(turns), turns=turns,
                   prompt=[{"role": "user", "content": "guess a number from 0 to 7"}],
                   extras={"env_seed": 0, "parser": "text", "max_turns": len(turns)})
    with RunWriter(path, Run(run_id="hand", name="hand", env="guess-number-v0")) as w:
        w.write_step(1, [t])
    return path


def test_action_prob_through_a_server_with_prompt_logprobs(tmp_path: Path) -> None:
    from rolloutlab.cli import main

    tok = guess_number_tokenizer()
    _tok_dir(tok, tmp_path / "tok")
    run = _hand_run(tmp_path / "run", ["12", "3"])

    def lp(prefix: Any, token: int) -> float:
        return -0.1 * (token % 4) - 0.01 * len(prefix)

    with MockOpenAI(prompt_logprob=lp) as m:
        rc = main(["label", str(run), "--method", "action-prob", "--policy", f"openai:{m.base_url}:mock",
                   "--tokenizer", str(tmp_path / "tok"), "--out", str(tmp_path / "out"), "--json"])
        assert rc == 0
        assert all(b.get("echo") for b in m.bodies)
    (t,) = _labelled(tmp_path / "out")
    # turn 0: <user> 0 7 <eos> <assistant> | 1 2 ; turn 1: ... 1 2 <eos> <user> <eos> <assistant> | 3
    p0 = tok.render([{"role": "user", "content": "guess a number from 0 to 7"}], add_generation_prompt=True)
    i1, i2, i3 = tok.encode("1")[0], tok.encode("2")[0], tok.encode("3")[0]
    want0 = math.exp((lp(p0, i1) + lp([*p0, i1], i2)) / 2)
    p1 = [*p0, i1, i2, tok.eos_token_id, tok.role_ids["user"], tok.eos_token_id, tok.role_ids["assistant"]]
    want1 = math.exp(lp(p1, i3))
    assert t.turns[0].reward == pytest.approx(want0, abs=1e-9)
    assert t.turns[1].reward == pytest.approx(want1, abs=1e-9)
    assert t.turns[0].extras and t.turns[0].extras["label"]["action_tokens"] == 2


def test_thoughts_are_sampled_and_put_in_place_of_the_recorded_one(tmp_path: Path) -> None:
    from rolloutlab.agent import ByteTokenizer
    from rolloutlab.label import span_ids

    tok = ByteTokenizer()
    state = [{"role": "user", "content": "go"}]
    raw = "<think>plan</think>5"
    filled = raw.replace("plan", "other idea")
    prompt, action = span_ids(tok, state, filled[: filled.index("5")], filled)
    assert action == tok.encode("5")
    assert prompt == tok.render([*state, {"role": "assistant", "content": "<think>other idea</think>"}],
                                add_generation_prompt=False)[:-1]
    _tok_dir(tok, tmp_path / "tok")
    run = _hand_run(tmp_path / "run", [raw])
    sampled = [[*tok.encode("<think>a</think>1"), tok.eos_token_id], [*tok.encode("<think>bb</think>2"), tok.eos_token_id]]
    n = iter(range(100))

    def lp(prefix: Any, token: int) -> float:
        return -0.02 * len(prefix)  # depends on where the action starts: on the thought's length

    with MockOpenAI(prompt_logprob=lp, complete=lambda ids: sampled[next(n) % 2]) as m:
        run_label(LabelConfig(run=run, out=tmp_path / "out", method="action-prob", policy=f"openai:{m.base_url}:m",
                              tokenizer=tmp_path / "tok", g=2, normalise=True))
    (t,) = _labelled(tmp_path / "out")
    lab = t.turns[0].extras["label"] if t.turns[0].extras else {}
    want = []
    opening = [{"role": "user", "content": "guess a number from 0 to 7"}]
    for z in ("a", "bb"):
        p, a = span_ids(tok, opening, f"<think>{z}</think>", f"<think>{z}</think>5")
        want.append(math.exp(lp(p, a[0])))
    assert lab["g"] == 2 and sorted(lab["probs"]) == pytest.approx(sorted(want), abs=1e-12)
    assert lab["value"] == pytest.approx(sum(want) / 2, abs=1e-12)
    assert sum(lab["normalised"]) == pytest.approx(1.0)


# ---------------------------------------------------------------- bad input


def test_a_model_without_logprobs_is_refused_and_nothing_written(tmp_path: Path) -> None:
    from rolloutlab.cli import main

    _tok_dir(guess_number_tokenizer(), tmp_path / "tok")
    run = _hand_run(tmp_path / "run", ["3"])
    with MockOpenAI() as m:  # ignores echo: gives no prompt log-probs
        rc = main(["label", str(run), "--method", "action-prob", "--policy", f"openai:{m.base_url}:mock",
                   "--tokenizer", str(tmp_path / "tok"), "--out", str(tmp_path / "out")])
    assert rc == 1 and not (tmp_path / "out").exists()


def test_diverging_replay_is_refused_and_nothing_written(model_dir: Path, run_dir: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    from rolloutlab.cli import main

    bad = tmp_path / "bad"
    shutil.copytree(run_dir, bad)
    f = next((bad / "eval").glob("*/episodes.jsonl"))
    lines = f.read_bytes().splitlines()
    rec = orjson.loads(lines[0])
    rec["task_id"] = "train/999" if rec["task_id"] != "train/999" else "train/998"  # another target
    rec["turns"][-1]["observation"] = "lower"
    rec["turns"][0]["observation"] = "guess a number from 0 to 9"
    f.write_bytes(b"\n".join([orjson.dumps(rec), *lines[1:]]) + b"\n")
    rc = main(["label", str(bad), "--method", "mc", "--policy", f"hf:{model_dir}", "--n", "2",
               "--out", str(tmp_path / "out")])
    assert rc == 1 and not (tmp_path / "out").exists()
    err = capsys.readouterr().err
    assert "guess-number-v0" in err and "diverged at turn 0" in err


def test_run_without_turns_and_bad_options_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rolloutlab.cli import main

    with RunWriter(tmp_path / "r", Run(run_id="r", name="r")) as w:
        w.write_step(1, [Trajectory(traj_id="a", step=1, reward=1.0)])
    assert main(["label", str(tmp_path / "r"), "--policy", "random", "--out", str(tmp_path / "o")]) == 1
    assert "has turns" in capsys.readouterr().err and not (tmp_path / "o").exists()
    assert main(["label", str(tmp_path / "r"), "--method", "action-prob", "--policy", "random",
                 "--out", str(tmp_path / "o")]) == 1
    assert "needs a model that gives log-probs" in capsys.readouterr().err
    assert main(["label", str(tmp_path / "r"), "--method", "bogus", "--policy", "random"]) == 1
    assert "mc, action-prob" in capsys.readouterr().err


def test_action_prompted_thoughts_see_the_action(tmp_path: Path) -> None:
    from rolloutlab.agent import ByteTokenizer

    tok = ByteTokenizer()
    _tok_dir(tok, tmp_path / "tok")
    run = _hand_run(tmp_path / "run", ["<think>plan</think>5"])
    with MockOpenAI(prompt_logprob=lambda prefix, token: -0.01 * len(prefix),
                    complete=lambda ids: [*tok.encode("because"), tok.eos_token_id]) as m:
        run_label(LabelConfig(run=run, out=tmp_path / "out", method="action-prob", policy=f"openai:{m.base_url}:m",
                              tokenizer=tmp_path / "tok", g=2, action_prompted=True))
        sampling = [b for b in m.bodies if not b.get("echo")]
        scoring = [b for b in m.bodies if b.get("echo")]
    assert len(sampling) == 2 and all("The action taken: 5" in tok.decode(b["prompt"]) for b in sampling)
    # the whole reply is the thought, put in place of the recorded one, then the action scored
    assert any(tok.decode(b["prompt"]).endswith("<think>because</think>5") for b in scoring)
    (t,) = _labelled(tmp_path / "out")
    lab = t.turns[0].extras["label"] if t.turns[0].extras else {}
    assert lab["action_prompted"] is True and lab["g"] == 2


# ---------------------------------------------------------------- --steps


def _steps_run(run_dir: Path, path: Path) -> Path:
    """The evaluation's 10 trajectories as a training run of steps 1, 2 and 3 (4, 3 and 3 of them)."""
    trajs = [t for f in (run_dir / "eval").glob("*/episodes.jsonl") for _, t in read_trajectories(f)]
    with RunWriter(path, Run(run_id="steps", name="steps", env="guess-number-v0")) as w:
        for step, part in ((1, trajs[:4]), (2, trajs[4:7]), (3, trajs[7:])):
            w.write_step(step, [t.model_copy(update={"step": step}) for t in part])
    return path


def test_steps_labels_only_those_steps_and_resumes_with_others(model_dir: Path, run_dir: Path, tmp_path: Path) -> None:
    import dataclasses

    run = _steps_run(run_dir, tmp_path / "run")
    cfg = LabelConfig(run=run, out=tmp_path / "out", method="mc", policy=f"hf:{model_dir}", n=2, steps="2-3",
                      loop=LoopConfig(max_tokens_per_turn=1))
    assert run_label(cfg).labelled == 6
    got = _labelled(tmp_path / "out")
    assert len(got) == 10  # the others copied, unlabelled
    assert {t.step for t in got if t.turns[0].extras and "label" in t.turns[0].extras} == {2, 3}
    assert not any(u.extras and "label" in u.extras for t in got if t.step == 1 for u in t.turns)
    params = orjson.loads((tmp_path / "out" / "run.json").read_bytes())["config"]["labels"]["params"]
    assert "steps" not in params  # which trajectories get labels, not what a label is
    # another range into the same folder resumes: the labelled ones kept, step 1 labelled now
    before = {t.traj_id: t for t in got if t.step > 1}
    assert run_label(dataclasses.replace(cfg, steps="1")).labelled == 4
    after = _labelled(tmp_path / "out")
    assert len(after) == 10 and all(u.extras and "label" in u.extras for t in after for u in t.turns)
    assert all(before[t.traj_id] == t for t in after if t.step > 1)


def test_bad_steps_are_refused(model_dir: Path, run_dir: Path, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    from rolloutlab.cli import main

    run = _steps_run(run_dir, tmp_path / "run")
    for bad in ("30-26", "x", "-3", "5-", ""):
        with pytest.raises(Exception, match=r"--steps .*expected A-B"):
            LabelConfig(run=run, policy="random", steps=bad)
    assert main(["label", str(run), "--policy", "random", "--steps", "7-9", "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "no trajectory to label in steps 7-9 (its steps: 1-3)" in err and not (tmp_path / "o").exists()
    assert main(["label", str(run), "--policy", "random", "--steps", "3-2", "--out", str(tmp_path / "o")]) == 1
    assert "expected A-B" in capsys.readouterr().err
