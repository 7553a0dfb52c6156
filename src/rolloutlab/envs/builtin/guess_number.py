"""``guess-number-v0``: guess an integer in ``0..n-1`` with higher/lower feedback.

The demo's and the tests' environment: a handful of tokens per action, fixed-form
observations, pure Python.  A tiny randomly initialised model with a 16-token vocabulary
learns binary search on it in a few hundred GRPO steps on a CPU.

Episode (default ``n = 8``, ``max_turns = 4``)::

    user:      guess a number from 0 to 7
    assistant: 3
    user:      higher
    assistant: 5
    user:      correct                     reward 1, terminated, success

- **Action grammar**: the whole reply is one decimal integer (surrounding white space
  allowed).  Anything else is invalid: observation :data:`INVALID`, ``action_valid =
  False``, and it still uses a guess (so a policy cannot stall the episode).
- **Reward**: ``1.0`` on the step that guesses the target, ``0.0`` on every other step;
  the episode reward is 1 on success, 0 on failure.
- **Termination**: the game ends by its own rules (``terminated``) when the target is
  guessed (``stop_reason = "solved"``) or the guesses run out (``"out_of_guesses"``);
  the environment never truncates.
- **Anchor** (GiGPO): the feasible interval the feedback so far leaves and the guesses
  used, e.g. ``"4-7 @1"``; identical states of the same task share it.
- **Tasks**: ``train/I`` and ``test/I``; the target of a task is a fixed function of its id
  (``random.Random(id).randrange(n)``), so an id means the same episode everywhere;
  ``tasks(split, seed)`` lists the split's ids in an order shuffled by ``seed``.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Sequence
from functools import cache, lru_cache

from rolloutlab.envs._core import Action, EnvSpec, Info, Message, Observation, StepResult, Task
from rolloutlab.envs._registry import ENVS, register_env
from rolloutlab.envs._thread import never_blocks
from rolloutlab.errors import RolloutlabError, UnknownTask

ID = "guess-number-v0"
HIGHER = "higher"
"""Feedback: the target is larger than the guess."""
LOWER = "lower"
"""Feedback: the target is smaller than the guess."""
CORRECT = "correct"
"""Feedback: the guess is the target (the episode ends)."""
INVALID = "invalid"
"""Feedback: the reply was not one integer in range (a guess is used up)."""
SPLIT_SIZES = {"train": 1024, "test": 128}
_INT = re.compile(r"^\s*(-?\d{1,9})\s*$")


def opening(n: int) -> str:
    """The opening user message for range ``0..n-1``."""
    return f"guess a number from 0 to {n - 1}"


@lru_cache(maxsize=4096)
def target_of(task_id: str, n: int) -> int:
    """The hidden number of task ``task_id`` (a fixed function of the id)."""
    return random.Random(task_id).randrange(n)


def guess_number_tasks(split: str, seed: int) -> list[Task]:
    """The ids of ``split`` in an order shuffled by ``seed``."""
    if split not in SPLIT_SIZES:
        raise RolloutlabError(f"{ID} has no split {split!r}; splits: {', '.join(SPLIT_SIZES)}")
    ids = [f"{split}/{i}" for i in range(SPLIT_SIZES[split])]
    random.Random(seed).shuffle(ids)
    return [Task(id=i, split=split) for i in ids]


def _resolve(task: Task | str | None, seed: int | None) -> str:
    if task is None:
        rng = random.Random(seed)  # seed None: a fresh draw
        return f"train/{rng.randrange(SPLIT_SIZES['train'])}"
    tid = task.id if isinstance(task, Task) else task
    split, _, idx = tid.partition("/")
    if split not in SPLIT_SIZES or not idx.isdigit() or int(idx) >= SPLIT_SIZES[split]:
        raise UnknownTask(
            f"{ID}: unknown task {tid!r}; ids are train/0..train/{SPLIT_SIZES['train'] - 1} "
            f"and test/0..test/{SPLIT_SIZES['test'] - 1}"
        )
    return tid


@cache
def _spec(n: int, max_turns: int) -> EnvSpec:
    """The registered spec with this instance's horizon and range (one per parameter pair)."""
    return dataclasses.replace(
        ENVS[ID], max_turns=max_turns,
        description=f"Guess a number in 0..{n - 1} in {max_turns} tries from higher/lower feedback.",
    )


@register_env(
    ID,
    description="Guess a number in 0..7 in 4 tries from higher/lower feedback (tiny, for demos and tests).",
    max_turns=4,
    action_format="text",
    reward_range=(0.0, 1.0),
    tasks=guess_number_tasks,
    has_anchor=True,
)
@never_blocks  # short pure computation: runs on the agent loop's own event loop, no thread
class GuessNumberEnv:
    """Guess a hidden integer in ``0..n-1`` within ``max_turns`` guesses."""

    spec: EnvSpec

    def __init__(self, *, n: int = 8, max_turns: int = 4) -> None:
        if n < 2 or max_turns < 1:
            raise RolloutlabError(f"{ID}: need n >= 2 and max_turns >= 1, got n={n}, max_turns={max_turns}")
        self.n = n
        self.max_turns = max_turns
        self.spec = _spec(n, max_turns)
        self._actions = tuple(str(i) for i in range(n))
        self._target: int | None = None
        self._lo = self._hi = self._turn = 0
        self._done = False

    def _anchor(self) -> str:
        return f"{self._lo}-{self._hi} @{self._turn}"

    async def reset(self, *, task: Task | str | None = None, seed: int | None = None) -> Observation:
        self._target = target_of(_resolve(task, seed), self.n)
        self._lo, self._hi, self._turn, self._done = 0, self.n - 1, 0, False
        return Observation(
            messages=({"role": "user", "content": opening(self.n)},),
            anchor=self._anchor(),
            info=Info(available_actions=self._actions),
        )

    async def step(self, action: Action) -> StepResult:
        if self._target is None or self._done:
            raise RolloutlabError(f"{ID}: step() called {'before reset()' if self._target is None else 'after the episode ended'}")
        self._turn += 1
        m = _INT.match(action) if isinstance(action, str) else None
        guess = int(m.group(1)) if m else None
        valid = guess is not None and 0 <= guess < self.n
        if not valid:
            feedback = INVALID
        elif guess == self._target:
            feedback = CORRECT
        elif guess is not None and guess < self._target:
            feedback, self._lo = HIGHER, max(self._lo, guess + 1)
        else:
            assert guess is not None
            feedback, self._hi = LOWER, min(self._hi, guess - 1)
        solved = feedback == CORRECT
        self._done = solved or self._turn >= self.max_turns
        return StepResult(
            messages=({"role": "user", "content": feedback},),
            reward=1.0 if solved else 0.0,
            terminated=self._done,
            truncated=False,
            stop_reason=("solved" if solved else "out_of_guesses") if self._done else None,
            anchor=self._anchor(),
            info=Info(
                action_valid=valid,
                available_actions=None if self._done else self._actions,
                success=solved if self._done else None,
                score=(1.0 if solved else 0.0) if self._done else None,
                metrics={"guesses": float(self._turn)},
            ),
        )

    def snapshot(self) -> tuple[int | None, int, int, int, bool]:
        """The episode's whole state (the optional :class:`~rolloutlab.envs.SnapshotEnv` hook)."""
        return (self._target, self._lo, self._hi, self._turn, self._done)

    def restore(self, state: tuple[int | None, int, int, int, bool]) -> None:
        """Put back a state taken by :meth:`snapshot`."""
        self._target, self._lo, self._hi, self._turn, self._done = state

    async def close(self) -> None:
        self._target = None


def binary_search(messages: Sequence[Message]) -> str:
    """Scripted policy: the midpoint of the interval the feedback so far leaves (solves every
    task within ``ceil(log2(n + 1))`` guesses); use as
    ``scripted:rolloutlab.envs.builtin.guess_number:binary_search``."""
    first = next(str(m["content"]) for m in messages if m["role"] == "user")
    m = re.search(r"from 0 to (\d+)", first)
    lo, hi = 0, int(m.group(1)) if m else 7
    guess: int | None = None
    for msg in messages:
        text = str(msg["content"]).strip()
        if msg["role"] == "assistant":
            g = _INT.match(text)
            guess = int(g.group(1)) if g else None
        elif guess is not None and text == HIGHER:
            lo = max(lo, guess + 1)
        elif guess is not None and text == LOWER:
            hi = min(hi, guess - 1)
    return str((lo + hi) // 2)
