"""A tiny verl dump writer for tests (facts from FORMATS.md § verl)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson


def verl_line(step: int, prompt: str, score: Any, *, output: str = "answer", gts: bool = True, **extra: Any) -> bytes:
    rec: dict[str, Any] = {"input": prompt, "output": output}
    if gts:
        rec["gts"] = "gold"
    rec.update({"score": score, "step": step, **extra})
    return orjson.dumps(rec)


def write_verl(dest: Path, scores: dict[int, list[list[float]]], *, gts: bool = True) -> Path:
    """``scores[step][group][sample]`` → ``dest/{step}.jsonl`` with consecutive groups."""
    dest.mkdir(parents=True, exist_ok=True)
    for step, groups in scores.items():
        lines = [
            verl_line(step, f"system\nbe brief\nuser\nquestion {g}\nassistant\n", s, gts=gts, acc=bool(s), pred=str(s))
            for g, samples in enumerate(groups)
            for s in samples
        ]
        (dest / f"{step}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return dest
