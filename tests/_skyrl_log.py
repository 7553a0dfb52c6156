"""SkyRL console records written exactly as ``ConsoleLogger.log`` writes them:
``logger.info(f"Step {step}: \\n{pprint.pformat(stringify_floats(data))}")`` through
loguru's default format (``{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} |
{name}:{function}:{line} - {message}``)."""

from __future__ import annotations

import pprint
from typing import Any

_T0 = "2025-08-12 12:48:{:02d}.{:03d}"


def stringify(obj: Any) -> Any:
    """SkyRL's ``stringify_floats``: every float becomes ``f"{x:.4f}"``, recursively."""
    if isinstance(obj, float):
        return f"{obj:.4f}"
    if isinstance(obj, dict):
        return {k: stringify(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [stringify(v) for v in obj]
    return obj


def loguru(i: int, message: str, *, name: str = "skyrl_train.utils.tracking", fn: str = "log", line: int = 97,
           level: str = "INFO") -> str:
    return f"{_T0.format(i % 60, i % 1000)} | {level: <8} | {name}:{fn}:{line} - {message}\n"


def loguru_colour(i: int, message: str, *, name: str = "skyrl_train.utils.tracking", fn: str = "log",
                  line: int = 97) -> str:
    """The same record as SkyRL's ``configure_ray_worker_logging`` writes it: loguru with
    ``colorize=True`` (ANSI even without a TTY), INFO in bold green."""
    g, b, c, r = "\x1b[32m", "\x1b[1m", "\x1b[36m", "\x1b[0m"
    return (f"{g}{_T0.format(i % 60, i % 1000)}{r} | {b}{g}{'INFO': <8}{r} | {c}{name}{r}:{c}{fn}{r}:{c}{line}{r} - "
            f"{b}{g}{message}{r}\n")


def console_record(step: int, data: dict[str, Any], i: int = 0, *, colour: bool = False) -> str:
    msg = f"Step {step}: \n{pprint.pformat(stringify(data))}"
    return loguru_colour(i, msg) if colour else loguru(i, msg)


def ray(prefix: str, text: str) -> str:
    return "".join(f"{prefix}{ln}\n" for ln in text.splitlines())


NOISE = [
    "INFO 08-12 12:48:21 [async_llm_engine.py:211] Added request 7f3c.\n",
    "(AsyncVLLMInferenceEngine pid=4242) INFO 08-12 12:48:22 metrics.py:455] Avg prompt throughput: 812.4 tokens/s\n",
    "Traceback (most recent call last):\n",
    '  File "/x/y.py", line 3, in <module>\n',
    "ValueError: Step 3: not a dict\n",
    "Training Step Progress:  40%|████      | 4/10 [01:12<01:48, 18.0s/it]\n",
    "\x1b[36m(skyrl_entrypoint pid=77)\x1b[0m some unrelated line {'a': 1}\n",
]
