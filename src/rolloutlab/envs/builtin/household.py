"""``household-v0``: ALFWorld-style household tasks, offline.

ALFWorld (Shridhar et al., 2021; ``alfworld/alfworld``) renders ALFRED's household tasks
as TextWorld games; its game files are a download, so this environment rebuilds the text
game on procedurally generated rooms (:mod:`._household_world`) and keeps what an agent
sees and does:

- **commands** (ALFWorld's grammar): ``go to R``, ``open R``, ``close R``, ``take O from R``,
  ``put O in/on R``, ``clean O with R``, ``heat O with R``, ``cool O with R``, ``use L``,
  ``examine X``, ``look``, ``inventory``; the admissible commands of each state are in
  ``info.available_actions`` (ALFWorld's ``admissible_commands``), sorted;
- **observations** in TextWorld's phrasing (``You arrive at countertop 1. On the countertop
  1, you see a apple 1, and a mug 2.``; ``Nothing happens.`` for anything inadmissible);
- **reward** 1 when the goal holds (ALFWorld's sparse ``won``), the episode then ends;
- **prompt**: verl-agent's ALFWorld template (``agent_system/environments/prompts/
  alfworld.py``): the task, the current observation, the admissible actions, and the
  ``<think>``/``<action>`` format; later turns give the new observation and actions;
- **anchor**: the current observation text without history (verl-agent's GiGPO anchor).

Treatments follow ALFWorld's PDDL (``alfworld/data/alfred.pddl`` at ca98194): ``heat`` needs a
heatable object and a microwave, ``cool`` a coolable one and a fridge, ``clean`` a cleanable
one and a sink basin (otherwise the command is not admissible); heating removes ``isCool``
and cooling removes ``isHot``.

**Not comparable to ALFWorld papers.** The rooms and tasks are generated here, not ALFWorld's
game files (its ``valid_unseen``/``valid_seen`` splits), so success rates measure this
environment only.  To compare with published ALFWorld numbers, run AgentGym's ALFWorld
server and point rolloutlab at it: ``--env agentgym:alfworld@http://HOST:PORT``.

Departures: any object fits any receptacle; the agent holds one object at a time and
``take`` is admissible only with empty hands (as in ALFWorld); ``put O in R`` and ``put O on
R`` are accepted besides ALFWorld's literal ``put O in/on R``.  An inadmissible command
changes nothing and sets ``action_valid = False`` (verl-agent's validity rule).  ``expert_action``
is an oracle planner (ALFWorld ships a hand-coded expert for the same purpose).
"""

from __future__ import annotations

import random
import re
from typing import Any

from rolloutlab.envs._core import Action, Info, Observation, StepResult, Task
from rolloutlab.envs._registry import register_env
from rolloutlab.envs._thread import never_blocks
from rolloutlab.envs.builtin._household_world import (
    CLEANABLE,
    COOLABLE,
    HEATABLE,
    TASK_TYPES,
    World,
    generate,
    kind,
    task_type_of,
)
from rolloutlab.envs.builtin._sim import seeded_order
from rolloutlab.errors import UnknownTask

ENV_ID = "household-v0"
MAX_STEPS = 50
SPLIT_SIZES = {"train": 3000, "test": 300}
NOTHING = "Nothing happens."

INTRO = (
    "You are an expert agent operating in the ALFRED Embodied Environment. Your task is to: "
    "{task}\nYour current observation is: {obs}\n"
    "Your admissible actions of the current situation are: [{actions}].\n\n"
    "Now it's your turn to take an action.\n"
    "You should first reason step-by-step about the current situation. This reasoning "
    "process MUST be enclosed within <think> </think> tags. Once you've finished your "
    "reasoning, you should choose an admissible action for current step and present it "
    "within <action> </action> tags."
)
TURN = "{obs}\nYour admissible actions of the current situation are: [{actions}]."


def tasks(split: str, seed: int) -> list[Task]:
    """``split``'s tasks (train 3,000, test 300; the six types in turn), order seeded."""
    if split not in SPLIT_SIZES:
        return []
    return seeded_order(
        [
            Task(id=f"{split}/{i}", split=split, category=task_type_of(i))
            for i in range(SPLIT_SIZES[split])
        ],
        seed,
    )


def parse_task_id(task: Task | str | None, seed: int | None) -> tuple[str, int]:
    """(split, index) of a task id ``split/index``; ``None``: a train task drawn with ``seed``."""
    if task is None:
        return "train", random.Random(0 if seed is None else seed).randrange(SPLIT_SIZES["train"])
    tid = task.id if isinstance(task, Task) else task
    split, _, idx = tid.partition("/")
    if split not in SPLIT_SIZES or not idx.isdigit() or int(idx) >= SPLIT_SIZES[split]:
        raise UnknownTask(
            f"{ENV_ID}: unknown task {tid!r}; ids are train/0..train/{SPLIT_SIZES['train'] - 1} "
            f"and test/0..test/{SPLIT_SIZES['test'] - 1}"
        )
    return split, int(idx)


def _a(items: list[str]) -> str:
    """TextWorld's list: ``a x``, ``a x, and a y``, ``a x, a y, and a z``; ``nothing``."""
    if not items:
        return "nothing"
    words = [f"a {i}" for i in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + ", and " + words[-1]


def describe(w: World, recep: str) -> str:
    """What is seen at ``recep``, as TextWorld says it."""
    if recep in w.openable:
        if recep not in w.opened:
            return f"The {recep} is closed."
        return f"The {recep} is open. In it, you see {_a(w.contents[recep])}."
    return f"On the {recep}, you see {_a(w.contents[recep])}."


def opening(w: World) -> str:
    return (
        f"-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking "
        f"quickly around you, you see {_a(w.receptacles)}.\n\nYour task is to: {w.task_text}"
    )


TOOLS = {"sinkbasin": "clean", "microwave": "heat", "fridge": "cool"}
"""The receptacle type each treatment needs (ALFWorld's PDDL: SinkBasinType, MicrowaveType,
FridgeType)."""
TREATABLE = {"clean": CLEANABLE, "heat": HEATABLE, "cool": COOLABLE}
"""The object types each treatment accepts (ALFWorld's ``cleanable``/``heatable``/``coolable``)."""


def admissible(w: World) -> list[str]:
    """ALFWorld's admissible commands in this state, sorted."""
    out = [f"go to {r}" for r in w.receptacles if r != w.location] + ["inventory", "look"]
    r = w.location
    if w.holding:
        out.append(f"examine {w.holding}")
    if r is not None:
        out.append(f"examine {r}")
        if r in w.openable:
            out.append(f"close {r}" if r in w.opened else f"open {r}")
        reachable = r not in w.openable or r in w.opened
        if reachable and w.holding is None:
            out += [f"take {o} from {r}" for o in w.contents[r] if not o.startswith("desklamp ")]
        if reachable and w.holding is not None:
            out.append(f"put {w.holding} in/on {r}")
        if w.holding is not None:
            tool = TOOLS.get(kind(r))
            if tool and kind(w.holding) in TREATABLE[tool]:
                out.append(f"{tool} {w.holding} with {r}")
        lamp = w.lamp_at(r)
        if lamp:
            out.append(f"use {lamp}")
    return sorted(out)


def _canonical(command: str) -> str:
    c = " ".join(command.strip().lower().rstrip(".").split())
    return re.sub(r"^put (.+?) (?:in|on|in/on|into|onto) (.+)$", r"put \1 in/on \2", c)


def apply(w: World, command: str) -> tuple[str, bool]:
    """Run ``command`` on ``w``; (observation, admissible)."""
    c = _canonical(command)
    if c not in admissible(w):
        return NOTHING, False
    if c == "look":
        if w.location is None:
            return (
                "You are in the middle of a room. Looking quickly around you, you see nothing.",
                True,
            )
        return f"You are facing the {w.location}. Next to it, you see nothing.", True
    if c == "inventory":
        return (
            f"You are carrying: a {w.holding}." if w.holding else "You are not carrying anything."
        ), True
    verb, _, rest = c.partition(" ")
    if c.startswith("go to "):
        w.location = c[6:]
        return f"You arrive at {w.location}. {describe(w, w.location)}", True
    if verb == "open":
        w.opened.add(rest)
        return f"You open the {rest}. {describe(w, rest)}", True
    if verb == "close":
        w.opened.discard(rest)
        return f"You close the {rest}.", True
    if verb == "examine":
        return (
            describe(w, rest) if rest in w.contents else f"There's nothing special about {rest}."
        ), True
    if verb == "take":
        obj, recep = rest.split(" from ")
        w.contents[recep].remove(obj)
        w.holding = obj
        return f"You pick up the {obj} from the {recep}.", True
    if verb == "put":
        obj, recep = rest.split(" in/on ")
        w.contents[recep].append(obj)
        w.holding = None
        return f"You put the {obj} in/on the {recep}.", True
    if verb == "clean":
        obj, recep = rest.split(" with ")
        w.clean.add(obj)
        return f"You {verb} the {obj} using the {recep}.", True
    if verb in (
        "heat",
        "cool",
    ):  # each undoes the other (PDDL: (not (isCool ?o)) / (not (isHot ?o)))
        obj, recep = rest.split(" with ")
        (w.hot if verb == "heat" else w.cold).add(obj)
        (w.cold if verb == "heat" else w.hot).discard(obj)
        return f"You {verb} the {obj} using the {recep}.", True
    if verb == "use":
        w.lamps_on.add(rest)
        return f"You turn on the {rest}.", True
    raise AssertionError(
        f"admissible command {c!r} has no effect"
    )  # admissible() and apply() disagree


def expert_action(w: World) -> str:
    """The next command of an oracle plan (it sees the whole room): fetch an object of the
    goal type, treat it (clean/heat/cool, or carry it to the lit lamp), put it in the first
    receptacle of the target type; twice for pick-two."""

    def go_and(recep: str, then: str) -> str:
        if w.location != recep:
            return f"go to {recep}"
        if (
            recep in w.openable
            and recep not in w.opened
            and not then.startswith(("use ", "heat ", "cool ", "clean "))
        ):
            return f"open {recep}"
        return then

    targets = [r for r in w.receptacles if kind(r) == w.target_type]
    target = targets[-1] if targets else None  # the lowest-numbered, e.g. "drawer 1"
    held = w.holding
    if held is not None:
        if w.task_type == "look_at_obj_in_light":
            lamp_home = next(r for r in w.receptacles if w.lamp_at(r))
            return go_and(lamp_home, f"use {w.lamp_at(lamp_home)}")
        if not w.satisfied(held):
            tool, verb = {
                "pick_clean_then_place": ("sinkbasin", "clean"),
                "pick_heat_then_place": ("microwave", "heat"),
                "pick_cool_then_place": ("fridge", "cool"),
            }[w.task_type]
            station = next(r for r in w.receptacles if kind(r) == tool)
            return go_and(station, f"{verb} {held} with {station}")
        assert target is not None
        return go_and(target, f"put {held} in/on {target}")
    placed = set(w.contents[target]) if target else set()
    obj = next(
        o for r in w.receptacles for o in w.contents[r] if kind(o) == w.obj_type and o not in placed
    )
    home = w.where(obj)
    assert home is not None
    return go_and(home, f"take {obj} from {home}")


@register_env(
    ENV_ID,
    original="ALFWorld's six task types and PDDL rules (alfworld ca98194), on generated rooms",
    comparable=False,
    description="ALFWorld-style household tasks (six types) on generated rooms; admissible commands",
    max_turns=MAX_STEPS,
    action_format="xml",
    reward_range=(0.0, 1.0),
    tasks=tasks,
    has_anchor=True,
)
@never_blocks  # short pure computation: runs on the agent loop's own event loop, no thread
class HouseholdEnv:
    """One ALFWorld-style episode; ``max_steps`` commands at most (then truncated)."""

    def __init__(self, *, max_steps: int = MAX_STEPS, show_actions: bool = True) -> None:
        from rolloutlab.envs._registry import ENVS

        self.spec = ENVS[ENV_ID]
        self.max_steps = max_steps
        self.show_actions = show_actions
        self.world: World | None = None
        self._steps = self._invalid = 0
        self._done = False

    async def reset(
        self, *, task: Task | str | None = None, seed: int | None = None
    ) -> Observation:
        split, index = parse_task_id(task, seed)
        self.world = w = generate(split, index)
        self._steps = self._invalid = 0
        self._done = False
        obs = opening(w)
        actions = admissible(w)
        text = (
            INTRO.format(task=w.task_text, obs=obs, actions=", ".join(actions))
            if self.show_actions
            else (
                f"{obs}\n\nRespond with your reasoning in <think> </think> and one command in <action> </action>."
            )
        )
        return Observation(
            messages=({"role": "user", "content": text},),
            anchor=obs,
            info=Info(
                available_actions=tuple(actions),
                metrics=self._metrics(),
                extras={"task_type": w.task_type, "room": w.room},
            ),
        )

    def _metrics(self) -> dict[str, float]:
        return {"invalid_actions": float(self._invalid)}

    def expert_action(self) -> str:
        """The oracle's next command (see :func:`expert_action`)."""
        if self.world is None:
            raise RuntimeError(f"{ENV_ID}: expert_action() before reset()")
        return expert_action(self.world)

    async def step(self, action: Action) -> StepResult:
        w = self.world
        if w is None or self._done:
            raise RuntimeError(
                f"{ENV_ID}: step() called {'before reset()' if w is None else 'after the episode ended'}"
            )
        self._steps += 1
        if isinstance(action, str):
            obs, valid = apply(w, action)
        else:
            obs, valid = NOTHING, False
        self._invalid += not valid
        won = w.won()
        truncated = not won and self._steps >= self.max_steps
        self._done = won or truncated
        actions = admissible(w)
        text = (
            obs
            if self._done or not self.show_actions
            else TURN.format(obs=obs, actions=", ".join(actions))
        )
        extra: dict[str, Any] = {}
        if self._done:
            extra = {"success": won, "score": 1.0 if won else 0.0}
        return StepResult(
            messages=({"role": "user", "content": text},),
            reward=1.0 if won else 0.0,
            terminated=won,
            truncated=truncated,
            stop_reason="solved" if won else ("max_steps" if truncated else None),
            anchor=obs,
            info=Info(
                action_valid=valid,
                available_actions=tuple(actions),
                metrics=self._metrics(),
                **extra,
            ),
        )

    async def close(self) -> None:
        self.world = None


__all__ = ["TASK_TYPES", "HouseholdEnv", "admissible", "apply", "expert_action", "tasks"]
