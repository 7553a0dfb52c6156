"""Generate the bundled corpus and questions of ``search-qa-v0`` (run as a module).

A small synthetic knowledge base of invented countries, cities, people, companies, books
and films (invented names, so a model cannot answer from memory and must search) is
written out as Search-R1-format passages (``{"id", "contents"}`` with contents
``'"Title"\\ntext'``, one passage per entity) and as single-hop and two-hop questions
whose answers are stated in the passages.  A two-hop question names an entity whose
passage names a bridge entity, whose passage states the answer.

    python -m rolloutlab.envs.builtin._gen_search_qa

Fixed seed: the output is byte-identical on every run (a test checks the bundled files
match a fresh generation).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

SEED = 20261203
OUT = Path(__file__).resolve().parents[2] / "data" / "envs" / "search_qa"
N_COUNTRIES, N_CITIES, N_PEOPLE, N_COMPANIES, N_BOOKS, N_FILMS = 30, 240, 1100, 350, 450, 300
N_TEST = 400  # questions held out (half single-hop, half multi-hop)
N_PER_KIND = 2000  # questions kept per kind (single-hop, multi-hop)

_ONSETS = [
    "b",
    "br",
    "c",
    "d",
    "dr",
    "f",
    "g",
    "gr",
    "h",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "st",
    "t",
    "th",
    "v",
    "w",
    "z",
    "ch",
    "sh",
    "tr",
    "qu",
    "y",
    "j",
]
_VOWELS = ["a", "e", "i", "o", "u", "ae", "ia", "ou", "ei", "y"]
_CODAS = ["", "", "n", "r", "l", "s", "th", "m", "nd", "rk", "x", "st", "v"]
OCCUPATIONS = [
    "painter",
    "chemist",
    "architect",
    "poet",
    "engineer",
    "violinist",
    "botanist",
    "economist",
    "sculptor",
    "astronomer",
    "historian",
    "surgeon",
    "novelist",
    "cartographer",
    "mathematician",
    "photographer",
    "linguist",
    "composer",
]
INDUSTRIES = [
    "shipbuilding",
    "textiles",
    "software",
    "mining",
    "publishing",
    "aviation",
    "pharmaceuticals",
    "brewing",
    "railways",
    "telecommunications",
    "glassmaking",
]
GENRES = [
    "mystery",
    "historical",
    "science fiction",
    "romance",
    "travel",
    "philosophy",
    "poetry",
    "adventure",
    "satire",
    "biography",
]
FILM_GENRES = ["drama", "comedy", "documentary", "thriller", "musical", "western", "animated"]
CURRENCIES = ["crown", "mark", "florin", "dinar", "shell", "ducat", "real", "talon"]
BOOK_NOUNS = [
    "Garden",
    "River",
    "Lantern",
    "Mirror",
    "Winter",
    "Harbour",
    "Clockmaker",
    "Orchard",
    "Tide",
    "Archive",
    "Compass",
    "Furnace",
    "Meadow",
    "Lighthouse",
    "Cartographer",
    "Silence",
    "Kingdom",
    "Mountain",
    "Letters",
    "Glass",
]
BOOK_ADJ = [
    "Silver",
    "Last",
    "Hidden",
    "Quiet",
    "Broken",
    "Golden",
    "Distant",
    "Burning",
    "Forgotten",
    "Northern",
    "Patient",
    "Crimson",
    "Hollow",
    "Endless",
    "Wandering",
]


def _an(word: str) -> str:
    """``word`` with its indefinite article."""
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def _word(rng: random.Random, syllables: int) -> str:
    s = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables))
    return (s + rng.choice(_CODAS)).capitalize()


def _unique(rng: random.Random, n: int, make: Any, taken: set[str]) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        w = make()
        if w not in taken:
            taken.add(w)
            out.append(w)
    return out


def build(seed: int = SEED) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(passages, questions) of the knowledge base generated with ``seed``."""
    rng = random.Random(seed)
    taken: set[str] = set()
    countries = _unique(rng, N_COUNTRIES, lambda: _word(rng, rng.choice([2, 3])) + "ia", taken)
    cities = _unique(rng, N_CITIES, lambda: _word(rng, rng.choice([2, 3])), taken)
    people = _unique(
        rng, N_PEOPLE, lambda: f"{_word(rng, 2)} {_word(rng, rng.choice([1, 2]))}", taken
    )
    companies = _unique(
        rng,
        N_COMPANIES,
        lambda: (
            f"{_word(rng, 2)} {rng.choice(['Works', 'Group', 'Holdings', 'Industries', 'Company', 'Labs'])}"
        ),
        taken,
    )
    books = _unique(
        rng,
        N_BOOKS,
        lambda: f"The {rng.choice(BOOK_ADJ)} {rng.choice(BOOK_NOUNS)} of {_word(rng, 2)}",
        taken,
    )
    films = _unique(
        rng,
        N_FILMS,
        lambda: (
            f"{_word(rng, 2)} {rng.choice(['Rising', 'Nights', 'Road', 'Falls', 'Story', 'Station', 'Sky'])}"
        ),
        taken,
    )

    city_country = {
        c: countries[i % N_COUNTRIES] if i < N_COUNTRIES else rng.choice(countries)
        for i, c in enumerate(cities)
    }
    capital = {k: next(c for c in cities if city_country[c] == k) for k in countries}
    city_founded = {c: rng.randint(900, 1850) for c in cities}
    currency = {k: rng.choice(CURRENCIES) for k in countries}
    birth_city = {p: rng.choice(cities) for p in people}
    birth_year = {p: rng.randint(1820, 1995) for p in people}
    occupation = {p: rng.choice(OCCUPATIONS) for p in people}
    founder = {c: rng.choice(people) for c in companies}
    hq = {c: rng.choice(cities) for c in companies}
    industry = {c: rng.choice(INDUSTRIES) for c in companies}
    company_year = {c: min(birth_year[founder[c]] + rng.randint(22, 50), 2025) for c in companies}
    author = {b: rng.choice(people) for b in books}
    book_year = {b: min(birth_year[author[b]] + rng.randint(20, 60), 2025) for b in books}
    genre = {b: rng.choice(GENRES) for b in books}
    director = {f: rng.choice(people) for f in films}
    film_year = {
        f: min(max(birth_year[director[f]] + rng.randint(25, 55), 1905), 2025) for f in films
    }
    film_genre = {f: rng.choice(FILM_GENRES) for f in films}

    passages: list[tuple[str, str]] = []
    for k in countries:
        n_cities = sum(1 for c in cities if city_country[c] == k)
        passages.append(
            (
                k,
                f"{k} is a country with {n_cities} major cities. Its capital is "
                f"{capital[k]}. The currency of {k} is the {currency[k]}.",
            )
        )
    for c in cities:
        passages.append(
            (c, f"{c} is a city in {city_country[c]}. It was founded in {city_founded[c]}.")
        )
    for p in people:
        passages.append(
            (
                p,
                f"{p} (born {birth_year[p]}) is {_an(occupation[p])} born in the city "
                f"of {birth_city[p]}.",
            )
        )
    for c in companies:
        passages.append(
            (
                c,
                f"{c} is {_an(industry[c])} company founded in {company_year[c]} by "
                f"{founder[c]}. Its headquarters are in {hq[c]}.",
            )
        )
    for b in books:
        passages.append(
            (
                b,
                f"{b} is {_an(genre[b])} book written by {author[b]} and first "
                f"published in {book_year[b]}.",
            )
        )
    for f in films:
        passages.append(
            (
                f,
                f"{f} is {_an(film_genre[f])} film directed by {director[f]}, "
                f"released in {film_year[f]}.",
            )
        )
    docs = [{"id": str(i), "contents": f'"{t}"\n{x}'} for i, (t, x) in enumerate(passages)]

    single: list[dict[str, Any]] = []
    multi: list[dict[str, Any]] = []

    def q(bucket: list[dict[str, Any]], text: str, answer: object, chain: list[str]) -> None:
        bucket.append({"question": text, "golden_answers": [str(answer)], "chain": chain})

    for p in people:
        q(single, f"In which city was {p} born?", birth_city[p], [p])
        q(single, f"In what year was {p} born?", birth_year[p], [p])
        q(multi, f"In which country was {p} born?", city_country[birth_city[p]], [p, birth_city[p]])
    for c in cities:
        q(single, f"In which country is {c}?", city_country[c], [c])
        q(
            multi,
            f"What is the capital of the country where {c} is located?",
            capital[city_country[c]],
            [c, city_country[c]],
        )
    for k in countries:
        q(single, f"What is the capital of {k}?", capital[k], [k])
    for c in companies:
        q(single, f"Who founded {c}?", founder[c], [c])
        q(single, f"In which city is {c} headquartered?", hq[c], [c])
        q(multi, f"In which country are the headquarters of {c}?", city_country[hq[c]], [c, hq[c]])
        q(
            multi,
            f"In what year was the founder of {c} born?",
            birth_year[founder[c]],
            [c, founder[c]],
        )
    for b in books:
        q(single, f"Who wrote {b}?", author[b], [b])
        q(
            multi,
            f"In which city was the author of {b} born?",
            birth_city[author[b]],
            [b, author[b]],
        )
        q(
            multi,
            f"What is the occupation of the author of {b}?",
            occupation[author[b]],
            [b, author[b]],
        )
    for f in films:
        q(single, f"Who directed {f}?", director[f], [f])
        q(
            multi,
            f"In which city was the director of {f} born?",
            birth_city[director[f]],
            [f, director[f]],
        )

    rng.shuffle(single)
    rng.shuffle(multi)
    questions: list[dict[str, Any]] = []
    half = N_TEST // 2
    for kind, bucket in (("single_hop", single), ("multi_hop", multi)):
        for i, rec in enumerate(bucket[:N_PER_KIND]):
            questions.append({**rec, "category": kind, "split": "test" if i < half else "train"})
    counts: dict[str, int] = {}
    for rec in questions:
        n = counts.get(rec["split"], 0)
        counts[rec["split"]] = n + 1
        rec["id"] = f"{rec['split']}/{n}"
    return docs, questions


def main() -> None:
    docs, questions = build()
    OUT.mkdir(parents=True, exist_ok=True)
    for name, rows in (("corpus.jsonl", docs), ("questions.jsonl", questions)):
        with (OUT / name).open("w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, sort_keys=True) + "\n")
    print(f"wrote {len(docs)} passages and {len(questions)} questions to {OUT}")


if __name__ == "__main__":
    main()
