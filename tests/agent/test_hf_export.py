"""Issue 20 item 3: a tiny model's checkpoint is a standard Hugging Face folder.

``AutoTokenizer`` loads the tokenizer written beside the weights (transformers 5 would force
its Qwen2 tokenizer on a ``qwen2`` folder), and its chat template renders every conversation
to the ids the agent loop builds; ``generation_config.json`` holds the run's sampling."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from rolloutlab.agent import (
    ByteTokenizer,
    LoopConfig,
    TinyModelConfig,
    WordTokenizer,
    generation_settings,
    guess_number_tokenizer,
    save_model,
    tiny_model,
)

SHAPE = TinyModelConfig(hidden_size=8, num_layers=1, num_heads=1, intermediate_size=8, max_positions=256)
PIECES = [*"abcxyz HIGHERlower0123456789 .,!?_-\t\n", "é", "e\u0301", "٣", "²", "ß", "İ", "日本", "😀",
          "higher", "lower", "Lower", "north", "go"]
TOKENIZERS = {
    "bytes": ByteTokenizer,
    "guess-number": guess_number_tokenizer,  # unknown words dropped
    "words-unk": lambda: WordTokenizer(["a", "go", "north", "?", "3", "_"], unknown="unk"),
    "words-drop": lambda: WordTokenizer(["a", "go", "north", "?", "3", "_", "é", "日本", "²"]),
}


def _checkpoint(tok: ByteTokenizer | WordTokenizer, d: Path, **sampling: float) -> Path:
    save_model(tiny_model(tok.vocab_size, seed=0, shape=SHAPE), tok, d, sampling=LoopConfig(**sampling))
    return d


def _conversations(seed: int, n: int) -> list[list[dict[str, str]]]:
    rng = random.Random(seed)
    roles = ["system", "user", "assistant", "tool"]
    return [[{"role": rng.choice(roles), "content": "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))}
             for _ in range(rng.randint(1, 6))] for _ in range(n)]


@pytest.mark.parametrize("name", TOKENIZERS)
def test_the_chat_template_gives_the_loops_ids(name: str, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    tok = TOKENIZERS[name]()
    d = _checkpoint(tok, tmp_path / "ck")
    assert json.loads((d / "config.json").read_text())["model_type"] == "qwen2"
    hf = AutoTokenizer.from_pretrained(str(d), local_files_only=True)
    assert type(hf).__name__ != "Qwen2Tokenizer"  # our tokenizer.json, not transformers' Qwen2 pipeline
    assert len(hf) == tok.vocab_size and hf.eos_token_id == tok.eos_token_id and hf.pad_token_id == tok.pad_token_id
    for messages in _conversations(0, 60):
        for prompt in (True, False):
            ids = hf.apply_chat_template(messages, add_generation_prompt=prompt, tokenize=True)["input_ids"]
            assert ids == tok.render(messages, add_generation_prompt=prompt), messages
    from jinja2.exceptions import TemplateError

    with pytest.raises(TemplateError, match=r"chat message role robot unknown; expected one of system, user"):
        hf.apply_chat_template([{"role": "robot", "content": "hi"}], tokenize=True)
    if name == "words-unk":  # by hand: <user> go north ? <unk> <eos> <assistant>
        assert hf.apply_chat_template([{"role": "user", "content": "Go NORTH? now"}], add_generation_prompt=True,
                                      tokenize=True)["input_ids"] == [2, 6, 7, 8, 4, 1, 3]


def test_with_trust_remote_code_the_same_tokenizer_loads(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    tok = guess_number_tokenizer()
    d = _checkpoint(tok, tmp_path / "ck")
    hf = AutoTokenizer.from_pretrained(str(d), local_files_only=True, trust_remote_code=True)
    assert type(hf).__name__ == "RolloutlabTokenizer"
    [messages] = _conversations(1, 1)
    assert hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)["input_ids"] == tok.render(
        messages, add_generation_prompt=True)


def test_generation_config_holds_the_runs_sampling(tmp_path: Path) -> None:
    from transformers import GenerationConfig

    tok = ByteTokenizer()
    d = _checkpoint(tok, tmp_path / "s", max_tokens_per_turn=7, temperature=0.7, top_p=0.9)
    g = GenerationConfig.from_pretrained(str(d))
    assert (g.max_new_tokens, g.do_sample, g.temperature, g.top_p, g.top_k) == (7, True, 0.7, 0.9, 0)
    assert (g.eos_token_id, g.pad_token_id, sorted(g.suppress_tokens)) == (257, 256, [256, 258, 259, 260, 261])
    assert generation_settings(d) == {"max_tokens_per_turn": 7, "temperature": 0.7, "top_p": 0.9}
    greedy = _checkpoint(tok, tmp_path / "g", max_tokens_per_turn=1, temperature=0.0)
    assert generation_settings(greedy) == {"max_tokens_per_turn": 1, "temperature": 0.0}
    assert generation_settings(tmp_path) == {}  # no file: nothing to reuse


def test_a_bad_generation_config_names_the_file_and_value(tmp_path: Path) -> None:
    from rolloutlab.errors import RolloutlabError

    (tmp_path / "generation_config.json").write_text('{"max_new_tokens": "many"}')
    with pytest.raises(RolloutlabError, match=r"generation_config.json: max_new_tokens must be a number, got 'many'"):
        generation_settings(tmp_path)
