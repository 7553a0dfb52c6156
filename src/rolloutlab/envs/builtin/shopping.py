"""``shopping-v0``: WebShop-style shopping, offline.

WebShop (Yao et al., 2022; princeton-nlp/WebShop) needs its 1.18M-product scrape and a
Java search index; this environment keeps its text-mode site (``web_agent_site/envs/
web_agent_text_env.py``, observation mode ``text``: the page's visible strings joined by
`` [SEP] ``) over a bundled catalogue of 2,100 generated products in five categories
(:mod:`._gen_shopping`):

- **pages**: search → results (10 a page, ``Next >`` / ``< Prev``, 50 results at most, as
  WebShop's ``get_top_n_product_from_keywords``) → item (options, ``Description``,
  ``Features``, ``Reviews``, ``Buy Now``) and its sub-pages;
- **actions** exactly as WebShop: ``search[query]`` (only on the search page) and
  ``click[button]`` for a clickable of the page (lower-cased: ``back to search``,
  ``next >``, ``< prev``, a product's ASIN, an option value, ``description``, ``features``,
  ``reviews``, ``buy now``); the admissible ones are in ``info.available_actions`` as
  verl-agent lists them (``search[<your query>]`` and ``click[...]``);
- **reward** at ``Buy Now``: WebShop master's ``get_reward`` (64fa2a5, the version
  AgentGym ships; :mod:`._shopping_reward`, checked case by case in
  ``tests/envs/test_shopping_parity.py``), in [0, 1]; success when it is 1 (WebShop's
  success rate); nothing bought by the step limit: 0;
- **search**: BM25 (``bm25s``) over each product's title, description, bullet points
  and option values (WebShop uses Pyserini BM25 over its product text);
- **prompt**: verl-agent's WebShop template (``agent_system/environments/prompts/
  webshop.py``) with ``<think>``/``<action>``; the anchor is the current page text.

An invalid action leaves the page as it is (as in WebShop) and says so, with
``action_valid = False``.

**Not comparable to WebShop papers**: the products and goals are generated, not WebShop's
scrape and human instructions; to compare, evaluate on AgentGym's WebShop server
(``--env agentgym:webshop@http://HOST:PORT``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from rolloutlab.envs._core import Action, Info, Observation, StepResult, Task
from rolloutlab.envs._registry import register_env
from rolloutlab.envs._thread import never_blocks
from rolloutlab.envs.builtin._shopping_reward import webshop_reward
from rolloutlab.envs.builtin._sim import data_path, read_jsonl, resolve_task, seeded_order

ENV_ID = "shopping-v0"
MAX_STEPS = 15
PER_PAGE, TOP_N = 10, 50
SEARCH_PLACEHOLDER = "search[<your query>]"

INTRO = (
    "You are an expert autonomous agent operating in the WebShop e-commerce platform. Your task "
    "is to: {task}.\nYour current observation is: {obs}.\n"
    "Your admissible actions of the current situation are: [\n{actions}\n].\n\n"
    "Now it's your turn to take one action for the current step.\n"
    "You should first reason step-by-step about the current situation, then think carefully "
    "which admissible action best advances the shopping goal. This reasoning process MUST be "
    "enclosed within <think> </think> tags.\nOnce you've finished your reasoning, you should "
    "choose an admissible action for current step and present it within <action> </action> tags."
)
TURN = "{obs}\nYour admissible actions of the current situation are: [\n{actions}\n]."
_ACTION = re.compile(r"^\s*(\w+)\s*\[(.+)\]\s*$", re.DOTALL)


@dataclass
class Catalogue:
    """Products by ASIN and goals by task id; the BM25 index over the products is built on
    the first search (listing tasks does not need it)."""

    products: dict[str, dict[str, Any]]
    goals: dict[str, dict[str, Any]]
    order: list[str] = field(default_factory=list)

    @cached_property
    def index(self) -> Any:
        import bm25s

        self.order = list(self.products)
        docs = [
            " ".join(
                [
                    p["Title"],
                    p["Description"],
                    *p["BulletPoints"],
                    *(v for vs in p["options"].values() for v in vs),
                ]
            )
            for p in self.products.values()
        ]
        index = bm25s.BM25()
        index.index(bm25s.tokenize(docs, stopwords="en", show_progress=False), show_progress=False)
        return index

    def search(self, query: str) -> list[str]:
        """ASINs of the top 50 products for ``query`` (BM25), best first."""
        import bm25s

        index = self.index
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab or len(tokens.ids[0]) == 0:
            return []
        try:
            idx, scores = index.retrieve(tokens, k=TOP_N, show_progress=False)
        except ValueError:  # no query word is in the index
            return []
        return [self.order[int(i)] for i, s in zip(idx[0], scores[0], strict=True) if float(s) > 0]


@lru_cache(maxsize=1)
def catalogue() -> Catalogue:
    """The bundled catalogue and goals, loaded once per process."""
    products = {
        p["asin"]: {**p, "name": p["Title"]}
        for p in read_jsonl(data_path("shopping", "products.jsonl"))
    }
    goals = {}
    for g in read_jsonl(data_path("shopping", "goals.jsonl")):
        p = products[g["asin"]]
        goals[g["id"]] = {
            **g,
            "name": p["Title"],
            "query": p["query"],
            "category": p["category"],
            "product_category": p["product_category"],
        }
    return Catalogue(products=products, goals=goals)


def _task_table() -> dict[str, Task]:
    return {
        gid: Task(id=gid, split=g["split"], category=g["category"])
        for gid, g in catalogue().goals.items()
    }


def tasks(split: str, seed: int) -> list[Task]:
    """The goals of ``split`` (test 500, train 1,600; category = product category), seeded order."""
    return seeded_order([t for t in _task_table().values() if t.split == split], seed)


def parse_action(action: str) -> tuple[str, str] | None:
    """WebShop's ``parse_action``: ``name[arg]`` -> (name, lower-cased arg), else None."""
    m = _ACTION.match(action)
    return (m.group(1).lower(), m.group(2).strip().lower()) if m else None


@dataclass
class Session:
    """Where the shopper is: the page and what it shows."""

    page: str = "search"  # search | results | item | description | features | reviews
    keywords: str = ""
    results: list[str] = field(default_factory=list)
    page_no: int = 1
    asin: str | None = None
    options: dict[str, str] = field(default_factory=dict)


def _price(p: dict[str, Any]) -> str:
    return f"${p['price']:.2f}"


def render(s: Session, instruction: str, cat: Catalogue) -> tuple[str, list[str]]:
    """(page text, clickables) of the session's page, as WebShop's text mode shows it."""
    head = ["Instruction:", instruction]
    if s.page == "search":
        return " [SEP] ".join(["WebShop", *head, "Search"]), []
    parts, clicks = [*head, "Back to Search"], ["back to search"]
    if s.page == "results":
        n_pages = max(1, -(-len(s.results) // PER_PAGE))
        parts.append(f"Page {s.page_no} (Total results: {len(s.results)})")
        if s.page_no > 1:
            parts.append("< Prev")
            clicks.append("< prev")
        if s.page_no < n_pages:
            parts.append("Next >")
            clicks.append("next >")
        for asin in s.results[(s.page_no - 1) * PER_PAGE : s.page_no * PER_PAGE]:
            p = cat.products[asin]
            parts += [asin, p["Title"], _price(p)]
            clicks.append(asin.lower())
        return " [SEP] ".join(parts), clicks
    assert s.asin is not None
    p = cat.products[s.asin]
    parts.append("< Prev")
    clicks.append("< prev")
    if s.page == "item":
        for name, values in p["options"].items():
            parts += [name, *values]
            clicks += values
        parts += [
            p["Title"],
            f"Price: {_price(p)}",
            "Rating: N.A.",
            "Description",
            "Features",
            "Reviews",
            "Buy Now",
        ]
        clicks += ["description", "features", "reviews", "buy now"]
    elif s.page == "description":
        parts.append(p["Description"])
    elif s.page == "features":
        parts += p["BulletPoints"]
    return " [SEP] ".join(parts), clicks


def available_actions(s: Session, clicks: list[str]) -> tuple[str, ...]:
    return (SEARCH_PLACEHOLDER,) if s.page == "search" else tuple(f"click[{c}]" for c in clicks)


@register_env(
    ENV_ID,
    original="WebShop's pages, actions and get_reward (master 64fa2a5), on a generated catalogue",
    comparable=False,
    description="WebShop-style shopping: search[...]/click[...] over 2,100 products, WebShop's reward",
    max_turns=MAX_STEPS,
    action_format="xml",
    reward_range=(0.0, 1.0),
    tasks=tasks,
    has_anchor=True,
    requires=("bm25s",),
)
@never_blocks  # short pure computation: runs on the agent loop's own event loop, no thread
class ShoppingEnv:
    """One WebShop episode: find and buy what the instruction asks for."""

    def __init__(self, *, max_steps: int = MAX_STEPS, show_actions: bool = True) -> None:
        from rolloutlab.envs._registry import ENVS

        self.spec = ENVS[ENV_ID]
        self.max_steps = max_steps
        self.show_actions = show_actions
        self.cat = catalogue()
        self.goal: dict[str, Any] | None = None
        self.session = Session()
        self._steps = self._invalid = 0
        self._done = False

    @property
    def instruction(self) -> str:
        assert self.goal is not None
        return str(self.goal["instruction_text"])

    def _metrics(self) -> dict[str, float]:
        return {"invalid_actions": float(self._invalid)}

    async def reset(
        self, *, task: Task | str | None = None, seed: int | None = None
    ) -> Observation:
        t = resolve_task(task, seed, _task_table(), env_id=ENV_ID)
        self.goal = self.cat.goals[t.id]
        self.session = Session()
        self._steps = self._invalid = 0
        self._done = False
        page, clicks = render(self.session, self.instruction, self.cat)
        actions = available_actions(self.session, clicks)
        text = (
            INTRO.format(
                task=self.instruction, obs=page, actions=",\n".join(f"'{a}'" for a in actions)
            )
            if self.show_actions
            else page
        )
        return Observation(
            messages=({"role": "user", "content": text},),
            anchor=page,
            info=Info(available_actions=actions, metrics=self._metrics()),
        )

    def _apply(self, action: str, clicks: list[str]) -> tuple[bool, bool]:
        """Apply ``action``; (valid, bought)."""
        s = self.session
        parsed = parse_action(action)
        if parsed is None:
            return False, False
        name, arg = parsed
        if name == "search" and s.page == "search":
            s.keywords, s.results, s.page_no, s.page = arg, self.cat.search(arg), 1, "results"
            return True, False
        if name != "click" or arg not in clicks:
            return False, False
        if arg == "back to search":
            self.session = Session()
        elif arg == "next >":
            s.page_no += 1
        elif arg == "< prev":
            if s.page == "results":
                s.page_no -= 1
            elif s.page == "item":
                s.page, s.asin, s.options = "results", None, {}
            else:
                s.page = "item"
        elif s.page == "results":
            s.page, s.asin, s.options = "item", arg.upper(), {}
        elif arg in ("description", "features", "reviews"):
            s.page = arg
        elif arg == "buy now":
            return True, True
        else:  # an option value: select it under its option name
            assert s.asin is not None
            opts = self.cat.products[s.asin]["options"]
            s.options[next(k for k, vs in opts.items() if arg in vs)] = arg
        return True, False

    async def step(self, action: Action) -> StepResult:
        if self.goal is None or self._done:
            raise RuntimeError(
                f"{ENV_ID}: step() called {'before reset()' if self.goal is None else 'after the episode ended'}"
            )
        self._steps += 1
        _, clicks = render(self.session, self.instruction, self.cat)
        valid, bought = self._apply(action, clicks) if isinstance(action, str) else (False, False)
        self._invalid += not valid
        page, clicks = render(self.session, self.instruction, self.cat)
        actions = available_actions(self.session, clicks)
        info: dict[str, Any] = {
            "action_valid": valid,
            "available_actions": actions,
            "metrics": self._metrics(),
        }
        if bought:
            assert self.session.asin is not None
            product = self.cat.products[self.session.asin]
            reward, parts = webshop_reward(
                product, self.goal, product["price"], self.session.options
            )
            self._done = True
            return StepResult(
                messages=(),
                reward=reward,
                terminated=True,
                truncated=False,
                stop_reason="bought",
                anchor=page,
                info=Info(
                    **info,
                    success=reward == 1.0,
                    score=reward,
                    reward_components=parts,
                    extras={
                        "bought": self.session.asin,
                        "options": dict(self.session.options),
                        "goal_asin": self.goal["asin"],
                    },
                ),
            )
        truncated = self._steps >= self.max_steps
        self._done = truncated
        shown = (
            page
            if valid
            else f"Invalid action: {str(action)[:80]!r} is not admissible on this page.\n{page}"
        )
        text = (
            shown
            if truncated or not self.show_actions
            else TURN.format(obs=shown, actions=",\n".join(f"'{a}'" for a in actions))
        )
        end: dict[str, Any] = {"success": False, "score": 0.0} if truncated else {}
        return StepResult(
            messages=({"role": "user", "content": text},),
            reward=0.0,
            terminated=False,
            truncated=truncated,
            stop_reason="max_steps" if truncated else None,
            anchor=page,
            info=Info(**info, **end),
        )

    def expert_action(self) -> str:
        """An oracle's next action: search the goal product's title, open it, choose the
        goal's options, buy."""
        assert self.goal is not None
        s, target = self.session, self.goal["asin"]
        if s.page == "search":
            return f"search[{self.cat.products[target]['Title'].lower()}]"
        if s.page == "results":
            shown = s.results[(s.page_no - 1) * PER_PAGE : s.page_no * PER_PAGE]
            if target in shown:
                return f"click[{target.lower()}]"
            return (
                "click[next >]"
                if s.page_no * PER_PAGE < len(s.results)
                else "click[back to search]"
            )
        if s.page != "item" or s.asin != target:
            return "click[< prev]"
        for name, value in self.goal["goal_options"].items():
            if s.options.get(name) != value:
                return f"click[{value}]"
        return "click[buy now]"

    async def close(self) -> None:
        self.goal = None


__all__ = ["ShoppingEnv", "parse_action", "render", "tasks"]
