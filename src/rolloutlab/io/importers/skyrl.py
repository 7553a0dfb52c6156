"""SkyRL evaluation dumps (``trainer.dump_eval_results``).

Reads (FORMATS.md § SkyRL; ``skyrl/train/evaluate.py`` and
``skyrl/train/utils/trainer_utils.py::dump_per_dataset_eval_results``):
``{export_path}/dumped_evals/global_step_{N}_evals/`` — or ``eval_only/`` for a standalone
evaluation — holding one ``{data_source with "/" → "_"}.jsonl`` per data source, lines
``{input_prompt, output_response, score, stop_reason, env_class, env_extras,
data_source}``, and ``aggregated_results.jsonl``, one line of ``eval/{ds}/avg_score``,
``eval/{ds}/pass_at_{n}``, ``eval/{ds}/mean_positive_reward``, ``eval/all/...``.  The
source may be the export folder, its ``dumped_evals`` folder, one step folder, or one
data-source file.  Each step folder is one part: split ``eval`` at step ``N``
(subfolders and other files in a step folder, and folders of JSONL files beside the
step folders, are not read: the ingest warns, naming each);
``eval_only`` (its checkpoint's step is not written anywhere) lands at step 0, its ids
prefixed ``eval_only/`` so that it never collides with ``global_step_0_evals``.

Recovered: prompt and response texts as decoded (chat-template special tokens kept),
reward, data source (the line's ``data_source``, else the file's name), environment class and extras (``env_extras`` in extras), the
aggregated metrics (names kept, split ``eval``).

Inferred:

- **reward**: ``score`` is a number, or a list of token-level rewards; the reward of a
  list is its sum (SkyRL's ``avg_score`` sums it too); ``extras.token_rewards`` keeps its
  length and ``extras.last_token_reward`` its last element;
- **success**: SkyRL's own pass rule behind ``pass_at_n``: reward > 0 (for token-level
  rewards, the last token's reward > 0);
- **termination**: ``stop_reason`` ``"stop"`` → done, ``"length"`` → truncated,
  ``"abort"`` → aborted, anything else → unknown (the raw value stays in extras).  For a
  multi-turn episode it is the stop reason of the last generation; ``"stop"`` and
  ``"length"`` are also the last turn's ``finish_reason``;
- **groups**: identical ``input_prompt`` within one data source at one step
  (``eval_n_samples_per_prompt`` samples); ``task_id`` is the hash of the prompt;
- **turns**: from the row's ``conversation`` (chat messages ``{role, content,
  tool_calls?}``) when it has one: one turn per assistant message, the user / tool
  messages between them the next turn's observation, those after the last one
  ``extras.final_observation``; the messages before the first assistant one are the
  prompt (already in ``input_prompt``), and ``conversation`` is not kept in extras.
  Else a multi-turn ``output_response`` holds the environment's replies as chat
  messages; it is split at ChatML (``<|im_start|>role``) or Llama-3
  (``<|start_header_id|>role<|end_header_id|>``) markers into assistant turns, the
  user / tool messages between them being the next turn's observation (those after the
  last assistant turn go to ``extras.final_observation``).  End-of-turn tokens are cut
  from the turns' texts, not from ``response``.  A response that kept no markers but
  its bare role lines (``assistant\n…\nuser\n…``) is split at them by verl's rule
  (:func:`rolloutlab.io.importers._verl_turns.split_turns`: one turn per assistant segment);
  one without either is one turn;
- **tool calls**: a conversation's structured ``tool_calls`` (answered by the ``tool``
  messages with their ``tool_call_id``); else Hermes ``<tool_call>{json}</tool_call>``
  blocks in a turn (the Qwen templates' format), answered by the ``<tool_response>``
  blocks of the next reply.

Not recoverable: token counts (only decoded text is dumped), per-turn rewards (a
token-level list is not aligned to turns in the dump), the trainer's scalars (SkyRL logs
them to its trackers only).  With ``generator.step_wise_trajectories`` the dump holds one
line per *step* of each episode, with nothing to tell them apart: each line is then
imported as a trajectory.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from rolloutlab.errors import RecordError
from rolloutlab.io._files import logical_name, open_binary
from rolloutlab.io._sink import PartSink, TurnData, as_float
from rolloutlab.io.importers._agentlog import Msg, args_text, chat_turns
from rolloutlab.io.importers._base import (
    Importer,
    Part,
    ReadContext,
    RunInfo,
    default_name,
    register,
    require,
)
from rolloutlab.io.importers._hermes import with_calls
from rolloutlab.io.importers._verl_turns import split_turns

_STEP_DIR = re.compile(r"^global_step_(\d+)_evals$")
_EVAL_ONLY = "eval_only"
_AGGREGATED = "aggregated_results.jsonl"
_TERMINATION = {"stop": "done", "length": "truncated", "abort": "aborted"}
_FINISH = ("stop", "length")
"""The ``stop_reason`` values that are a turn's finish reason (``abort`` is the episode's)."""
_CHATML = re.compile(r"<\|im_start\|>(\w+)\n")
_LLAMA3 = re.compile(r"<\|start_header_id\|>(\w+)<\|end_header_id\|>\n\n")
_END_MARKERS = ("<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|end_of_text|>")


def _is_eval_dir(p: Path) -> bool:
    return p.is_dir() and (p.name == _EVAL_ONLY or _STEP_DIR.match(p.name) is not None)


def _eval_dirs(src: Path) -> list[Path]:
    """The step folders ``src`` names: itself, those of ``dumped_evals``, or its own."""
    if _is_eval_dir(src):
        return [src]
    base = src / "dumped_evals" if (src / "dumped_evals").is_dir() else src
    return sorted((p for p in base.iterdir() if _is_eval_dir(p)), key=_step_of)


def _step_of(d: Path) -> int:
    m = _STEP_DIR.match(d.name)
    return int(m.group(1)) if m else 0


def _files(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.is_file() and logical_name(p).endswith(".jsonl"))


def _first(path: Path) -> dict[str, Any] | None:
    import orjson

    try:
        with open_binary(path) as f:
            for raw in f:
                if raw.strip():
                    obj = orjson.loads(raw)
                    return obj if isinstance(obj, dict) else None
    except (orjson.JSONDecodeError, OSError, EOFError):
        return None
    return None


def _is_eval_file(path: Path) -> bool:
    rec = _first(path)
    return rec is not None and {"input_prompt", "output_response"} <= set(rec)


def _is_aggregated(path: Path) -> bool:
    rec = _first(path)
    return logical_name(path) == _AGGREGATED and rec is not None and any(k.startswith("eval/") for k in rec)


def _hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


@register
class SkyRLImporter(Importer):
    name = "skyrl"
    summary = "SkyRL eval dumps (dumped_evals/global_step_N_evals/{data_source}.jsonl, aggregated_results.jsonl)"
    recovers = __doc__ or ""

    def detect(self, src: Path) -> int:
        if src.is_file():
            return 85 if logical_name(src).endswith(".jsonl") and _is_eval_file(src) else 0
        if not src.is_dir():
            return 0
        for d in _eval_dirs(src)[:2]:
            for p in _files(d):
                if _is_aggregated(p) or _is_eval_file(p):
                    return 90
        return 0

    def run_info(self, src: Path) -> RunInfo:
        if src.is_file():
            src = src.parent
        if _is_eval_dir(src):
            src = src.parent
        if src.name == "dumped_evals":
            src = src.parent
        return RunInfo(name=default_name(src))

    def parts(self, src: Path) -> list[Part]:
        if src.is_file():
            return [Part(key=src.name, paths=(src,))]
        return [Part(key=d.name, paths=tuple(_files(d)), exclusive_steps=d.name != _EVAL_ONLY)
                for d in _eval_dirs(src) if _files(d)]

    def skipped(self, src: Path) -> list[str]:
        """What the step folders hold besides their data-source files — subfolders (SkyRL
        writes one file per data source into the step folder itself) and other files —
        and the folders beside the step folders that hold JSONL files but are none."""
        if src.is_file():
            return []
        out = []
        if not _is_eval_dir(src):
            base = src / "dumped_evals" if (src / "dumped_evals").is_dir() else src
            for p in sorted(base.iterdir()):
                if p.is_dir() and not _is_eval_dir(p) and any(logical_name(f).endswith(".jsonl") for f in p.rglob("*")):
                    out.append(f"{p.relative_to(src)}/: not a step folder (global_step_N_evals or eval_only), not read")
        for d in _eval_dirs(src):
            for p in sorted(d.iterdir()):
                if p.is_dir():
                    n = sum(1 for f in p.rglob("*") if f.is_file())
                    out.append(f"{p.relative_to(src)}/: a subfolder of a step folder ({n} files), not read")
                elif not logical_name(p).endswith(".jsonl"):
                    out.append(f"{p.relative_to(src)}: not a .jsonl file")
        return out

    def read(self, part: Part, sink: PartSink, ctx: ReadContext) -> None:
        folder = part.paths[0].parent
        step = _step_of(folder)
        prefix = f"{_EVAL_ONLY}/" if folder.name == _EVAL_ONLY else ""
        for path in part.paths:
            if logical_name(path) == _AGGREGATED:
                for lineno, rec in ctx.jsonl(path):
                    with ctx.record(path, lineno, rec):
                        if not isinstance(rec, dict):
                            raise RecordError(f"expected a JSON object of metrics, got {type(rec).__name__}")
                        for k, v in rec.items():
                            if isinstance(v, int | float):
                                sink.add_metric(step, k, v, split="eval")
            else:
                self._read_samples(path, step, prefix, sink, ctx)

    @staticmethod
    def _read_samples(path: Path, step: int, prefix: str, sink: PartSink, ctx: ReadContext) -> None:
        stem = logical_name(path)[: -len(".jsonl")]
        group_sizes: dict[str, int] = {}
        for lineno, rec in ctx.jsonl(path):
            with ctx.record(path, lineno, rec):
                prompt = require(rec, "input_prompt", str)
                response = require(rec, "output_response", str)
                score = require(rec, "score")
                extras: dict[str, Any] = {}
                if isinstance(score, list):
                    if not score:
                        raise RecordError("field 'score' is an empty list of token-level rewards")
                    tokens = [as_float(x, f"score[{i}]") for i, x in enumerate(score)]
                    reward: float | None = sum(x for x in tokens if x is not None)
                    last = tokens[-1]
                    extras.update(token_rewards=len(tokens), last_token_reward=last)
                else:
                    reward = last = as_float(score, "score")
                stop = rec.get("stop_reason")
                ds = rec.get("data_source")
                ds = ds if isinstance(ds, str) else stem
                for k in ("stop_reason", "env_class", "env_extras"):
                    if rec.get(k) is not None:
                        extras[k] = rec[k]
                extras.update({k: v for k, v in rec.items() if k not in (
                    "input_prompt", "output_response", "score", "stop_reason", "env_class", "env_extras", "data_source",
                    "conversation")})
                task = _hash(prompt)
                group_id = f"{prefix}{step}:{ds}:{task}"
                idx = group_sizes.get(group_id, 0)
                group_sizes[group_id] = idx + 1
                conversation = rec.get("conversation")
                split = None if conversation is None else conversation_turns(conversation)
                turns, final_obs = split_chat(response) if split is None else split
                if final_obs is not None:
                    extras["final_observation"] = final_obs
                if stop in _FINISH and turns:  # vLLM's finish reason of the last generation
                    turns[-1].finish_reason = stop
                sink.add_trajectory(
                    traj_id=f"eval/{prefix}{step}/{stem}/{lineno}", step=step, split="eval",
                    group_id=group_id, sample_idx=idx, task_id=task, data_source=ds,
                    prompt=prompt, response=response, reward=reward,
                    success=None if last is None else last > 0,
                    termination=_TERMINATION.get(stop) if isinstance(stop, str) else None,
                    extras=extras, turns=turns)


def split_chat(text: str) -> tuple[list[TurnData], str | None]:
    """Assistant turns of a decoded multi-turn response, and the messages after the last
    assistant turn (the final observation), if any: split at its chat markers, else at
    bare role lines (:func:`rolloutlab.io.importers._verl_turns.split_turns`)."""
    for marker in (_CHATML, _LLAMA3):
        pieces = marker.split(text)
        if len(pieces) > 1:
            break
    else:  # no chat markers: bare role lines, as verl's dumps keep them (or one turn)
        bare = split_turns(_strip_end(text))
        return bare.turns, bare.final_observation
    turns: list[TurnData] = []
    head = _strip_end(pieces[0])
    if head.strip():
        turns.append(TurnData(action=head))
    obs: list[str] = []
    for role, body in zip(pieces[1::2], pieces[2::2], strict=True):
        if role == "assistant":
            turns.append(TurnData(observation="\n".join(obs) if obs else None, action=_strip_end(body)))
            obs = []
        else:
            obs.append(_strip_end(body))
    final = "\n".join(obs) if obs else None
    return with_calls(turns or [TurnData(action=_strip_end(text))], final), final


def conversation_turns(conversation: Any) -> tuple[list[TurnData], str | None] | None:
    """Assistant turns of a row's ``conversation`` (chat messages ``{role, content,
    tool_calls?}``; the messages before the first assistant one are the prompt, already
    in ``input_prompt``), and the messages after the last assistant turn, if any; None
    when it holds no assistant message.  Structured ``tool_calls`` are the turns'
    calls; without any, their Hermes blocks are."""
    if not isinstance(conversation, list):
        raise RecordError(f"field 'conversation' must be a list of messages, got {type(conversation).__name__}")
    msgs: list[Msg] = []
    for i, m in enumerate(conversation):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise RecordError(f"conversation[{i}] must be a message with a text 'role', got {str(m)[:60]!r}")
        calls = m.get("tool_calls") or []
        if not isinstance(calls, list):
            raise RecordError(f"conversation[{i}].tool_calls must be a list, got {type(calls).__name__}")
        msgs.append(Msg(role=m["role"], text=_content(m.get("content"), i),
                        tool_calls=[_call(c) for c in calls], tool_call_id=m.get("tool_call_id")))
    chat = chat_turns(msgs)
    if not chat.turns:
        return None
    if not any(t.tool_calls for t in chat.turns):
        with_calls(chat.turns, chat.final_observation)
    return chat.turns, chat.final_observation


def _content(content: Any, i: int) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # [{type: text, text}, …]
        return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict) and "text" in c)
    raise RecordError(f"conversation[{i}].content must be text or a list of parts, got {type(content).__name__}")


def _call(c: Any) -> dict[str, Any]:
    """An OpenAI tool call ``{id, function: {name, arguments}}`` as a turn's call."""
    fn = c.get("function") if isinstance(c, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise RecordError(f"a tool call must be {{function: {{name, arguments}}}}, got {str(c)[:60]!r}")
    return {"name": fn["name"], "arguments": args_text(fn.get("arguments")), "id": c.get("id")}


def _strip_end(text: str) -> str:
    text = text.rstrip("\n")
    for m in _END_MARKERS:
        if text.endswith(m):
            return text[: -len(m)].rstrip("\n")
    return text
