"""A tiny tokenizer and the run's sampling settings as standard Hugging Face files.

A checkpoint of the tiny model is a folder any Hugging Face loader reads
(``AutoTokenizer``, ``AutoModelForCausalLM``, ``transformers serve``, vLLM): next to the
weights it holds

- ``tokenizer.json`` — a ``tokenizers`` pipeline built here, locally, that encodes text
  exactly as :class:`~rolloutlab.agent.WordTokenizer` / :class:`~rolloutlab.agent.ByteTokenizer`
  do (bytes: a byte-level BPE without merges; words: lower-casing, then a split that keeps
  only the pieces the vocabulary knows, or maps the others to ``<unk>``);
- ``tokenizer_config.json`` with a Jinja ``chat_template`` that renders ``<role> content
  <eos>`` per message and ``<assistant>`` for a reply, so that
  ``apply_chat_template(messages, add_generation_prompt=True)`` gives the ids the agent loop
  builds (tested over multi-turn conversations);
- ``tokenizer_config.json``'s ``response_template``: a reply is the text after ``<assistant>``
  up to ``<eos>`` (how ``transformers serve`` reads a reply back; it would otherwise apply
  Qwen's by the model type and return the prompt's text with the reply);
- ``generation_config.json`` — the run's sampling settings: ``max_new_tokens`` (the token
  cap per turn), ``temperature`` / ``top_p`` (greedy when the temperature is 0), the stop id
  (``eos_token_id``), and ``suppress_tokens``: padding and the role markers, which the
  sampler and the trainer never sample (a server that honours it samples the same
  distribution).

``rolloutlab_tokenizer.json`` stays beside them: rolloutlab itself loads the tiny tokenizer
from it (it carries the ids to suppress).

transformers 5 builds its own Qwen2 tokenizer (NFC normalisation, Qwen's pre-tokenizer) for
any folder whose ``config.json`` says ``qwen2``, whatever ``tokenizer_class`` says, except
when ``tokenizer_config.json`` names an ``auto_map`` (as a model with its own tokenizer code
does): then, without ``trust_remote_code``, ``tokenizer.json`` is loaded as written, and with
it, the three-line ``tokenization_rolloutlab.py`` written beside it (a plain
``PreTrainedTokenizerFast``) is.  Either way the pipeline is ours.

Decoding is exact for bytes; for words a Hugging Face decode puts a space between every two
pieces (``WordTokenizer.decode`` writes consecutive digits together).

Caveat shared with every chat template: content holding a marker's literal text
(``<|user|>``) is read as that marker by a Hugging Face tokenizer, while the tiny tokenizers
encode it as text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rolloutlab.agent._tokenizers import ByteTokenizer, WordTokenizer

__all__ = ["GENERATION_FIELDS", "generation_settings", "hf_tokenizer", "save_generation_config", "save_hf_tokenizer"]

TOKENIZER_CODE = "tokenization_rolloutlab.py"
_CODE = '''"""The tokenizer of a rolloutlab checkpoint: tokenizer.json as written (see tokenizer_config.json)."""

from transformers import PreTrainedTokenizerFast


class RolloutlabTokenizer(PreTrainedTokenizerFast):
    """A plain fast tokenizer; named so that transformers loads tokenizer.json unchanged."""
'''

# Python's pieces of WordTokenizer (``\\d|[^\\W\\d_]+|[^\\w\\s]|_``) in Oniguruma's Unicode classes:
# a letter run is letters and non-decimal numerals (``str.isalnum`` minus decimal digits)
_RUN = r"[\p{L}\p{Nl}\p{No}]"
_PIECE = rf"\p{{Nd}}|{_RUN}+|[^\p{{L}}\p{{N}}_\s]|_"

GENERATION_FIELDS = {"max_new_tokens": "max_tokens_per_turn", "temperature": "temperature", "top_p": "top_p"}
"""``generation_config.json`` keys read back by ``eval``, and the loop settings they set."""


def _names(tok: WordTokenizer | ByteTokenizer) -> list[str]:
    """The Hugging Face token string of every id, in id order."""
    if isinstance(tok, ByteTokenizer):
        from transformers.convert_slow_tokenizer import bytes_to_unicode

        b2u = bytes_to_unicode()
        return [b2u[b] for b in range(256)] + [f"<|{s}|>" for s in ("pad", "eos", "system", "user", "assistant", "tool")]
    return [f"<|{w[1:-1]}|>" if i < tok._n_special else w for i, w in enumerate(tok.vocab)]


def _escape(piece: str) -> str:
    return "".join(c if c.isalnum() else f"\\x{{{ord(c):x}}}" for c in piece)


def _word_split(tok: WordTokenizer) -> str:
    """The regex of the pieces kept: every piece (``unknown="unk"``) or only known ones."""
    if tok.unknown == "unk":
        return _PIECE
    alts = []
    for w in tok.words:
        if re.fullmatch(r"[^\W\d_]+", w):  # a letter run, as WordTokenizer's pattern reads one
            alts.append(rf"(?<!{_RUN}){_escape(w)}(?!{_RUN})")  # whole: not inside a longer run
        elif len(w) == 1:
            alts.append(_escape(w))  # a one-character piece: a digit, a punctuation mark, ``_``
        # any other word is never a piece of WordTokenizer.encode, so never produced
    return "|".join(alts) or r"(?!)"


def _template(tok: WordTokenizer | ByteTokenizer, names: list[str]) -> str:
    markers = {role: names[i] for role, i in tok.role_ids.items()}
    eos = names[tok.eos_token_id]
    table = ", ".join(f"'{r}': '{m}'" for r, m in markers.items())
    return (
        f"{{%- set markers = {{{table}}} -%}}"
        "{%- for message in messages -%}"
        "{%- if message['role'] not in markers -%}"
        "{{- raise_exception('chat message role ' + message['role'] + ' unknown; expected one of "
        + ", ".join(markers) + "') -}}"
        "{%- endif -%}"
        f"{{{{- markers[message['role']] + (message['content'] or '') + '{eos}' -}}}}"
        "{%- endfor -%}"
        f"{{%- if add_generation_prompt -%}}{{{{- '{markers['assistant']}' -}}}}{{%- endif -%}}"
    )


def hf_tokenizer(tok: WordTokenizer | ByteTokenizer) -> Any:
    """A ``PreTrainedTokenizerFast`` that encodes text and renders chats as ``tok`` does."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
    )
    from transformers import PreTrainedTokenizerFast

    names = _names(tok)
    special = sorted({tok.pad_token_id, tok.eos_token_id, *tok.role_ids.values()})
    if isinstance(tok, ByteTokenizer):
        backend = Tokenizer(models.BPE(vocab={n: i for i, n in enumerate(names[:256])}, merges=[]))
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        backend.decoder = decoders.ByteLevel()
    else:
        unk = names[tok.unk_id] if tok.unk_id is not None else names[tok.pad_token_id]
        backend = Tokenizer(models.WordLevel(vocab={n: i for i, n in enumerate(names)}, unk_token=unk))
        backend.normalizer = normalizers.Lowercase()
        # invert=True: the pattern's matches are the pieces, everything between them is dropped
        backend.pre_tokenizer = pre_tokenizers.Split(Regex(_word_split(tok)), behavior="removed", invert=True)
    backend.add_special_tokens([AddedToken(names[i], special=True, normalized=False) for i in special])
    assert [backend.token_to_id(n) for n in names] == list(range(len(names)))
    extra: dict[str, Any] = {}
    if isinstance(tok, WordTokenizer) and tok.unk_id is not None:
        extra["unk_token"] = names[tok.unk_id]
    assistant, eos = names[tok.role_ids["assistant"]], names[tok.eos_token_id]
    # how a server reads a reply back (transformers serve's parse_response): the text after the
    # assistant marker, up to the end-of-reply id; without it serve picks Qwen's by model type
    response = {"defaults": {"role": "assistant"}, "start_anchor": assistant,
                "fields": {"content": {"close_pattern": re.escape(eos), "content": "text"}}}
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token=eos, pad_token=names[tok.pad_token_id],
        chat_template=_template(tok, names), model_max_length=1 << 30, response_template=response, **extra,
    )


def save_hf_tokenizer(tok: WordTokenizer | ByteTokenizer, directory: str | Path) -> None:
    """Write :func:`hf_tokenizer` (``tokenizer.json``, ``tokenizer_config.json``) into ``directory``."""
    d = Path(directory)
    hf_tokenizer(tok).save_pretrained(str(d))
    p = d / "tokenizer_config.json"
    cfg = json.loads(p.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg["auto_map"] = {"AutoTokenizer": [None, TOKENIZER_CODE.removesuffix(".py") + ".RolloutlabTokenizer"]}
    p.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")
    (d / TOKENIZER_CODE).write_text(_CODE)


def save_generation_config(directory: str | Path, tok: Any, *, max_new_tokens: int, temperature: float,
                           top_p: float) -> None:
    """Write ``generation_config.json``: the run's token cap per turn and sampling; for a tiny
    tokenizer also its stop, padding and suppressed ids (module docstring).  A model's own
    file (``save_pretrained`` wrote it: a real model's stop ids) is kept and updated."""
    from transformers import GenerationConfig

    d = Path(directory)
    g = GenerationConfig.from_pretrained(str(d)) if (d / "generation_config.json").is_file() else GenerationConfig()
    sample = temperature > 0
    g._from_model_config = False  # stated by the run, not derived from config.json
    g.update(max_new_tokens=max_new_tokens, do_sample=sample, temperature=temperature if sample else None,
             top_p=top_p if sample else None, top_k=0 if sample else None)
    if isinstance(tok, WordTokenizer | ByteTokenizer):
        g.update(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None,
                 suppress_tokens=list(tok.suppress_ids))
    elif g.eos_token_id is None:
        g.update(eos_token_id=int(tok.eos_token_id))
    g.save_pretrained(str(d))


def generation_settings(directory: str | Path) -> dict[str, float | int]:
    """The loop settings (``max_tokens_per_turn``, ``temperature``, ``top_p``) a model folder's
    ``generation_config.json`` states; empty when it has none.  ``do_sample: false`` reads
    as temperature 0 (greedy)."""
    p = Path(directory) / "generation_config.json"
    if not p.is_file():
        return {}
    from rolloutlab.errors import RolloutlabError

    try:
        g = json.loads(p.read_text())
        if not isinstance(g, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        raise RolloutlabError(f"{p}: not a generation config ({e})") from None
    out: dict[str, float | int] = {}
    for key, setting in GENERATION_FIELDS.items():
        v = g.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise RolloutlabError(f"{p}: {key} must be a number, got {v!r}")
        out[setting] = int(v) if key == "max_new_tokens" else float(v)
    if g.get("do_sample") is False:
        out["temperature"] = 0.0
        out.pop("top_p", None)
    return out
