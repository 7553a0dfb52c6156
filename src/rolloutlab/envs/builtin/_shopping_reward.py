"""WebShop's purchase reward, written from its formula.

Followed: ``web_agent_site/engine/goal.py`` (princeton-nlp/WebShop), ``get_reward`` and its
parts, for a bought product ``P`` with chosen options ``O`` against a goal ``G``::

    r_type   = 1.0, but 0.5 if neither query, category (>= 2 shared path parts) nor title
               (noun overlap > 0.2) matches; 0.1 if the title overlap < 0.1; 0.0 if it is 0
    n_attr   = goal attributes found in P's attributes (token-set ratio > 85) or, failing
               that, as a substring of P's title, bullet points or description
    n_option = chosen option values equal to a goal option (``size``: exact) or fuzzily
               equal (token-set ratio > 85), or found in P's title/bullets/description
    r_price  = price <= G.price_upper
    reward   = r_type * (n_attr + n_option + r_price) / (|G.attributes| + |G.options| + 1)

Departures, because WebShop's scorers are downloads or extra dependencies: the title
overlap counts *content words* (lower-case words that are not stop words nor descriptive
words of the catalogue, :data:`NOT_NOUNS`) where WebShop keeps spaCy's NOUN/PROPN tokens;
the token-set ratio is ``thefuzz.fuzz.token_set_ratio``'s definition computed with
``difflib.SequenceMatcher`` (thefuzz uses Levenshtein distances; the two agree on identical
and disjoint strings and differ by a few points in between); colour names are not
normalised (the catalogue uses one spelling per colour).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from difflib import SequenceMatcher
from typing import Any

from rolloutlab.envs.builtin._gen_shopping import _MARKETING, TYPES

EXACT_MATCH_OPTS = ("size",)
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "with",
        "i",
        "me",
        "my",
        "we",
        "you",
        "your",
        "need",
        "want",
        "looking",
        "find",
        "would",
        "like",
        "buy",
        "some",
    ]
)
NOT_NOUNS = (
    STOPWORDS
    | frozenset(_MARKETING)
    | frozenset(w for types in TYPES.values() for t in types for attr in t[3] for w in attr.split())
)
"""Words that describe rather than name a product: stop words, the catalogue's marketing
adjectives and the words of its attribute phrases (``long lasting``, ``easy assemble``)."""


def content_words(title: str) -> set[str]:
    """The words of a product name that stand for what it is (brand and type nouns)."""
    return {w for w in re.findall(r"[a-z0-9][a-z0-9\-]*", title.lower()) if w not in NOT_NOUNS}


def _process(s: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", s.lower()).split())


def _ratio(a: str, b: str) -> int:
    return round(100 * SequenceMatcher(None, a, b).ratio()) if a or b else 0


def token_set_ratio(a: str, b: str) -> int:
    """thefuzz's ``token_set_ratio``: compare the shared words with each side's full word
    set; 100 when one side's words are a subset of the other's."""
    ta, tb = set(_process(a).split()), set(_process(b).split())
    if not ta or not tb:
        return 0
    sect = " ".join(sorted(ta & tb))
    c1 = " ".join(filter(None, [sect, " ".join(sorted(ta - tb))]))
    c2 = " ".join(filter(None, [sect, " ".join(sorted(tb - ta))]))
    return max(_ratio(sect, c1), _ratio(sect, c2), _ratio(c1, c2))


def type_reward(product: Mapping[str, Any], goal: Mapping[str, Any]) -> dict[str, Any]:
    """WebShop's ``get_type_reward``."""
    query_match = product["query"] == goal["query"]
    p_cat = {x.strip() for x in product["product_category"].split("›")}
    g_cat = {x.strip() for x in goal["product_category"].split("›")}
    category_match = len(p_cat & g_cat) >= 2
    p_words, g_words = content_words(product["name"]), content_words(goal["name"])
    title_score = 0.2 if not g_words else len(p_words & g_words) / len(g_words)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {
        "r_type": r_type,
        "query_match": query_match,
        "category_match": category_match,
        "title_score": title_score,
    }


def _in_text(value: str, product: Mapping[str, Any]) -> bool:
    return (
        value in product["Title"].lower()
        or value in " ".join(product["BulletPoints"]).lower()
        or value in product["Description"].lower()
    )


def attribute_matches(product: Mapping[str, Any], goal_attrs: Sequence[str]) -> int:
    """WebShop's ``get_attribute_reward`` count."""
    n = 0
    for g in goal_attrs:
        if any(token_set_ratio(p, g) > 85 for p in product["Attributes"]) or _in_text(g, product):
            n += 1
    return n


def option_matches(
    product: Mapping[str, Any], goal_options: Sequence[str], chosen: Mapping[str, str]
) -> int:
    """WebShop's ``get_option_reward`` count (over the *chosen* options, as WebShop counts)."""
    n = 0
    for k, v in chosen.items():
        if k.lower() in EXACT_MATCH_OPTS:
            matched = v in goal_options
        else:
            matched = any(token_set_ratio(g, v) > 85 for g in goal_options)
        if matched or _in_text(v, product):
            n += 1
    return n


def webshop_reward(
    product: Mapping[str, Any], goal: Mapping[str, Any], price: float, chosen: Mapping[str, str]
) -> tuple[float, dict[str, float]]:
    """(reward, components) of buying ``product`` at ``price`` with options ``chosen``."""
    t = type_reward(product, goal)
    goal_options = list(goal["goal_options"].values())
    r_price = float(price <= goal["price_upper"]) if goal["price_upper"] > 0 else 0.0
    n_attr = attribute_matches(product, goal["attributes"])
    n_opt = option_matches(product, goal_options, chosen)
    denom = len(goal["attributes"]) + len(goal_options) + 1
    reward = (n_attr + n_opt + r_price) / denom * t["r_type"]
    parts = {
        "r_type": t["r_type"],
        "r_att": n_attr / len(goal["attributes"]) if goal["attributes"] else 0.0,
        "r_price": r_price,
        "title_score": float(t["title_score"]),
    }
    if goal_options:
        parts["r_option"] = n_opt / len(goal_options)
    return reward, parts
