"""Generate the bundled catalogue and instructions of ``shopping-v0`` (run as a module).

Products follow WebShop's product record (``web_agent_site/engine/engine.py``,
``load_products``): ``asin``, ``Title``, ``category``, ``product_category`` (a path joined by
`` › ``), ``query``, ``Attributes``, ``BulletPoints``, ``Description``, ``options``
(option name -> values) and ``price``.  Goals follow WebShop's synthetic goals
(``web_agent_site/engine/goal.py``, ``get_synthetic_goals``): attributes of one product,
one value of each of its options, and a price bound drawn as WebShop draws it (the larger
of two of the first four multiples of 10 above the price), phrased
``..., with color: black, and size: large, and price lower than 40.00 dollars``.

    python -m rolloutlab.envs.builtin._gen_shopping

Fixed seed; a test checks the bundled files equal a fresh generation.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

SEED = 20261204
OUT = Path(__file__).resolve().parents[2] / "data" / "envs" / "shopping"
PER_TYPE = 70
N_TEST = 500
PRICE_RANGE = [10.0 * i for i in range(1, 100)]  # WebShop's goal.py

_COLORS = ["black", "white", "navy blue", "grey", "red", "pink", "beige", "green", "brown"]
_SIZES = ["small", "medium", "large", "x-large", "xx-large"]
_MARKETING = [
    "premium",
    "classic",
    "deluxe",
    "ultra",
    "pro",
    "essential",
    "everyday",
    "professional",
]

# category -> [(type noun, product_category path, query, attributes, options, (min, max) price)]
TYPES: dict[
    str, list[tuple[str, str, str, list[str], dict[str, list[str]], tuple[float, float]]]
] = {
    "beauty": [
        (
            "hair extension",
            "Beauty & Personal Care › Hair Care › Hair Extensions, Wigs & Accessories › Extensions",
            "hair extensions",
            ["natural looking", "long lasting", "easy to apply", "heat resistant", "high quality"],
            {
                "color": ["jet black", "dark brown", "blonde", "auburn", "ombre grey"],
                "size": ["12 inch", "16 inch", "20 inch", "24 inch"],
            },
            (12, 60),
        ),
        (
            "shampoo",
            "Beauty & Personal Care › Hair Care › Shampoo & Conditioner › Shampoos",
            "shampoo",
            ["sulfate free", "paraben free", "natural ingredients", "dry hair", "cruelty free"],
            {
                "size": ["8 fl oz", "16 fl oz", "32 fl oz"],
                "scent": ["lavender", "coconut", "unscented", "mint"],
            },
            (6, 35),
        ),
        (
            "lipstick",
            "Beauty & Personal Care › Makeup › Lips › Lipstick",
            "lipstick",
            ["long lasting", "cruelty free", "matte finish", "paraben free", "easy to carry"],
            {"color": ["ruby red", "nude", "berry", "coral", "mauve"]},
            (5, 30),
        ),
        (
            "moisturizer",
            "Beauty & Personal Care › Skin Care › Face › Creams & Moisturizers › Face Moisturizers",
            "face moisturizer",
            ["fragrance free", "dry skin", "sensitive skin", "anti aging", "non greasy"],
            {"size": ["1.7 oz", "2.5 oz", "3.4 oz"]},
            (9, 55),
        ),
        (
            "nail polish",
            "Beauty & Personal Care › Foot, Hand & Nail Care › Nail Art & Polish › Nail Polish",
            "nail polish",
            ["quick drying", "long lasting", "non toxic", "high gloss", "chip resistant"],
            {"color": ["cherry red", "baby pink", "midnight blue", "clear", "lilac"]},
            (4, 20),
        ),
        (
            "toothbrush",
            "Beauty & Personal Care › Oral Care › Toothbrushes & Accessories › Powered Toothbrushes",
            "electric toothbrush",
            ["rechargeable", "long battery life", "sensitive teeth", "travel case", "smart timer"],
            {"color": ["white", "black", "sky blue", "pink"]},
            (15, 90),
        ),
    ],
    "electronics": [
        (
            "earbuds",
            "Electronics › Headphones, Earbuds & Accessories › Headphones & Earbuds › Earbud Headphones",
            "wireless earbuds",
            [
                "noise cancelling",
                "water resistant",
                "long battery life",
                "fast charging",
                "hands free",
            ],
            {"color": ["black", "white", "navy", "rose gold"]},
            (15, 120),
        ),
        (
            "phone case",
            "Cell Phones & Accessories › Cases, Holsters & Sleeves › Basic Cases",
            "phone case",
            [
                "shockproof",
                "slim fit",
                "wireless charging compatible",
                "scratch resistant",
                "easy install",
            ],
            {
                "color": ["clear", "matte black", "purple", "forest green"],
                "style": ["iphone 13", "iphone 14", "galaxy s22", "pixel 7"],
            },
            (6, 30),
        ),
        (
            "hdmi cable",
            "Electronics › Computers & Accessories › Cables & Interconnects › HDMI Cables",
            "hdmi cable",
            ["high speed", "gold plated", "4k ultra hd", "braided cord", "ethernet support"],
            {"size": ["3 feet", "6 feet", "10 feet", "15 feet"]},
            (5, 25),
        ),
        (
            "speaker",
            "Electronics › Portable Audio & Video › Portable Speakers & Docks › Portable Bluetooth Speakers",
            "bluetooth speaker",
            ["waterproof", "long battery life", "stereo sound", "usb port", "built in microphone"],
            {"color": ["black", "blue", "red", "camo"]},
            (20, 150),
        ),
        (
            "charger",
            "Cell Phones & Accessories › Accessories › Chargers & Power Adapters › Wall Chargers",
            "usb wall charger",
            ["fast charging", "dual port", "compact design", "usb c", "foldable plug"],
            {"color": ["white", "black"], "style": ["20w", "30w", "65w"]},
            (8, 45),
        ),
        (
            "watch band",
            "Electronics › Wearable Technology › Smartwatch Accessories › Bands",
            "smart watch band",
            ["quick release", "stainless steel", "adjustable", "breathable", "sweat resistant"],
            {"color": ["silver", "black", "starlight", "olive"], "size": ["38mm", "41mm", "45mm"]},
            (6, 35),
        ),
    ],
    "fashion": [
        (
            "running shoes",
            "Clothing, Shoes & Jewelry › Men › Shoes › Athletic › Running › Road Running",
            "running shoes",
            ["non slip", "lightweight", "rubber sole", "breathable mesh", "arch support"],
            {
                "color": ["black white", "grey", "navy", "red"],
                "size": ["8", "9", "9.5", "10", "11", "12"],
            },
            (25, 110),
        ),
        (
            "t-shirt",
            "Clothing, Shoes & Jewelry › Men › Clothing › Shirts › T-Shirts",
            "t shirt",
            ["machine wash", "cotton spandex", "short sleeve", "classic fit", "moisture wicking"],
            {"color": _COLORS[:6], "size": _SIZES},
            (8, 30),
        ),
        (
            "dress",
            "Clothing, Shoes & Jewelry › Women › Clothing › Dresses › Casual",
            "casual dress",
            ["machine wash", "polyester spandex", "long sleeve", "elastic waist", "high waist"],
            {"color": ["floral", "black", "wine red", "navy blue", "khaki"], "size": _SIZES},
            (15, 60),
        ),
        (
            "jeans",
            "Clothing, Shoes & Jewelry › Women › Clothing › Jeans",
            "womens jeans",
            ["slim fit", "button closure", "stretch fabric", "high waist", "machine wash"],
            {"color": ["light wash", "dark wash", "black"], "size": ["26", "28", "30", "32"]},
            (18, 70),
        ),
        (
            "sunglasses",
            "Clothing, Shoes & Jewelry › Men › Accessories › Sunglasses & Eyewear Accessories › Sunglasses",
            "sunglasses",
            [
                "polarized lenses",
                "uv protection",
                "lightweight frame",
                "scratch resistant",
                "spring hinges",
            ],
            {"color": ["tortoise", "matte black", "gold mirror", "blue mirror"]},
            (10, 80),
        ),
        (
            "backpack",
            "Clothing, Shoes & Jewelry › Luggage & Travel Gear › Backpacks › Laptop Backpacks",
            "laptop backpack",
            [
                "water resistant",
                "usb charging port",
                "anti theft",
                "padded straps",
                "large capacity",
            ],
            {"color": ["black", "grey", "navy", "burgundy"]},
            (20, 90),
        ),
    ],
    "food": [
        (
            "coffee",
            "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Coffee › Ground Coffee",
            "ground coffee",
            ["gluten free", "fair trade", "dark roast", "non gmo", "kosher certified"],
            {
                "flavor name": ["french roast", "hazelnut", "vanilla", "colombian"],
                "size": ["12 ounce", "2 pound"],
            },
            (7, 40),
        ),
        (
            "protein bar",
            "Grocery & Gourmet Food › Snacks & Sweets › Snack Foods › Bars › Protein Bars",
            "protein bars",
            ["gluten free", "low sugar", "high protein", "keto friendly", "individually wrapped"],
            {
                "flavor name": ["chocolate chip", "peanut butter", "cookie dough", "berry"],
                "size": ["12 count", "24 count"],
            },
            (12, 50),
        ),
        (
            "green tea",
            "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Tea › Green",
            "green tea",
            ["organic", "non gmo", "gluten free", "individually wrapped", "antioxidant rich"],
            {
                "flavor name": ["jasmine", "mint", "lemon", "matcha"],
                "size": ["20 count", "100 count"],
            },
            (4, 30),
        ),
        (
            "beef jerky",
            "Grocery & Gourmet Food › Meat & Seafood › Jerky",
            "beef jerky",
            ["high protein", "low fat", "gluten free", "keto friendly", "ready to eat"],
            {
                "flavor name": ["original", "teriyaki", "peppered", "sweet and spicy"],
                "size": ["3.25 ounce", "10 ounce"],
            },
            (6, 35),
        ),
        (
            "olive oil",
            "Grocery & Gourmet Food › Pantry Staples › Cooking & Baking › Oils, Vinegars & Salad Dressings › Oils › Olive",
            "olive oil",
            ["extra virgin", "cold pressed", "non gmo", "organic", "kosher certified"],
            {"size": ["16.9 fl oz", "33.8 fl oz", "1 gallon"]},
            (8, 60),
        ),
        (
            "cookies",
            "Grocery & Gourmet Food › Snacks & Sweets › Cookies",
            "cookies",
            ["gluten free", "dairy free", "vegan", "individually wrapped", "nut free"],
            {
                "flavor name": ["double chocolate", "oatmeal raisin", "lemon", "snickerdoodle"],
                "size": ["6 pack", "12 pack"],
            },
            (5, 30),
        ),
    ],
    "furniture": [
        (
            "office chair",
            "Home & Kitchen › Furniture › Home Office Furniture › Home Office Chairs › Home Office Desk Chairs",
            "office chair",
            ["lumbar support", "height adjustable", "easy assemble", "mesh back", "heavy duty"],
            {"color": ["black", "grey", "white", "blue"]},
            (60, 300),
        ),
        (
            "bookshelf",
            "Home & Kitchen › Furniture › Living Room Furniture › Bookcases",
            "bookshelf",
            ["easy assemble", "solid wood", "space saving", "storage space", "engineered wood"],
            {
                "color": ["white", "black", "espresso", "natural oak"],
                "size": ["3 tier", "4 tier", "5 tier"],
            },
            (30, 200),
        ),
        (
            "coffee table",
            "Home & Kitchen › Furniture › Living Room Furniture › Tables › Coffee Tables",
            "coffee table",
            ["storage space", "easy assemble", "mid century", "solid wood", "metal frame"],
            {"color": ["walnut", "black", "white", "rustic brown"]},
            (40, 250),
        ),
        (
            "bed frame",
            "Home & Kitchen › Furniture › Bedroom Furniture › Beds, Frames & Bases › Beds",
            "bed frame",
            ["easy assemble", "metal frame", "noise free", "storage space", "heavy duty"],
            {"size": ["twin", "full", "queen", "king"]},
            (80, 400),
        ),
        (
            "table lamp",
            "Home & Kitchen › Lighting & Ceiling Fans › Lamps & Shades › Table Lamps",
            "table lamp",
            ["dimmable", "usb port", "touch control", "energy efficient", "living room"],
            {"color": ["brass", "matte black", "white", "ceramic blue"]},
            (15, 90),
        ),
        (
            "shoe rack",
            "Home & Kitchen › Storage & Organization › Clothing & Closet Storage › Shoe Organizers › Shoe Racks",
            "shoe rack",
            ["easy assemble", "space saving", "stackable", "metal frame", "non woven fabric"],
            {"color": ["black", "white", "bronze"], "size": ["3 tier", "5 tier", "10 tier"]},
            (12, 70),
        ),
    ],
}
_ONSETS = [
    "b",
    "br",
    "c",
    "d",
    "f",
    "g",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "z",
    "qu",
    "tr",
]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "eo"]


def _brand(rng: random.Random) -> str:
    return "".join(
        rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(rng.choice([2, 3]))
    ).capitalize() + rng.choice(["", "x", "n", "ra"])


def _asin(rng: random.Random) -> str:
    return "B0" + "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(8))


def build(seed: int = SEED) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(products, goals) generated with ``seed``."""
    rng = random.Random(seed)
    brands = sorted({_brand(rng) for _ in range(160)})
    asins: set[str] = set()
    products: list[dict[str, Any]] = []
    for category, types in TYPES.items():
        for noun, path, query, attr_pool, option_pool, (lo, hi) in types:
            for _ in range(PER_TYPE):
                asin = _asin(rng)
                while asin in asins:
                    asin = _asin(rng)
                asins.add(asin)
                attrs = sorted(rng.sample(attr_pool, k=rng.randint(2, 4)))
                options = {
                    k: sorted(rng.sample(v, k=rng.randint(min(2, len(v)), len(v))), key=v.index)
                    for k, v in option_pool.items()
                }
                shown = rng.sample(attrs, k=min(2, len(attrs)))
                title = (
                    f"{rng.choice(brands)} {rng.choice(_MARKETING).capitalize()} "
                    f"{noun.title()}, " + ", ".join(a.title() for a in shown)
                )
                bullets = [
                    f"{a.capitalize()}: {rng.choice(['designed for', 'made for', 'built for'])} "
                    f"{rng.choice(['daily use', 'comfort', 'reliability', 'travel', 'gifting'])}"
                    for a in attrs
                ]
                products.append(
                    {
                        "asin": asin,
                        "Title": title,
                        "category": category,
                        "product_category": path,
                        "query": query,
                        "Attributes": attrs,
                        "BulletPoints": bullets,
                        "Description": f"This {noun} from {title.split()[0]} is a {rng.choice(['popular', 'new', 'best-selling'])} "
                        f"choice in {path.split(' › ')[-1].lower()}.",
                        "options": options,
                        "price": round(rng.uniform(lo, hi), 2),
                    }
                )
    goals = []
    for p in products:
        price_range = [x for x in PRICE_RANGE if x > p["price"]][:4]
        _, upper = sorted(rng.sample(price_range, 2))
        attrs = sorted(rng.sample(p["Attributes"], k=rng.randint(1, min(3, len(p["Attributes"])))))
        goal_options = {k: rng.choice(v) for k, v in p["options"].items()}
        noun = next(t[0] for t in TYPES[p["category"]] if t[2] == p["query"])
        opener = rng.choice(
            ["i need", "i am looking for", "i want", "find me", "i would like to buy"]
        )
        article = "an" if noun[0] in "aeiou" else "a"
        article = (
            "some"
            if noun.endswith("s")
            or noun in ("coffee", "green tea", "olive oil", "beef jerky", "shampoo")
            else article
        )
        opt_text = ", and ".join(f"{k}: {v}" for k, v in goal_options.items())
        text = (
            f"{opener} {article} {noun} that is {' and '.join(attrs)}"
            + (f" with {opt_text}" if opt_text else "")
            + f", and price lower than {upper:.2f} dollars"
        )
        # WebShop's goal also carries the product's category, query, name and path; the
        # environment fills them in from the product (``asin``) when it loads the goals.
        goals.append(
            {
                "asin": p["asin"],
                "instruction_text": text,
                "attributes": attrs,
                "goal_options": goal_options,
                "price_upper": upper,
            }
        )
    rng.shuffle(goals)  # (test membership is then a seeded sample over all types)
    for i, g in enumerate(goals):
        split = "test" if i < N_TEST else "train"
        g["split"] = split
        g["id"] = f"{split}/{i if split == 'test' else i - N_TEST}"
    return products, goals


def main() -> None:
    products, goals = build()
    OUT.mkdir(parents=True, exist_ok=True)
    for name, rows in (("products.jsonl", products), ("goals.jsonl", goals)):
        with (OUT / name).open("w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"wrote {len(products)} products and {len(goals)} goals to {OUT}")


if __name__ == "__main__":
    main()
