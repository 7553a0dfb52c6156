"""Generate the bundled repositories and tasks of ``code-search-v0`` (run as a module).

Four small Python repositories (packages, modules, classes, functions, a README and
tests) are written clean to ``data/envs/code_search/repos.json`` (path -> text per
repository); each task seeds one or
two bugs (a text substitution inside one function or method each) and describes the
symptom in an issue, as SWE-smith's synthesised bugs come with issue texts.  The gold
locations of a task are computed here from the mutated source with ``ast``: the file,
the module-level entity (class, or top-level function) and the entity (function or
``Class.method``) that encloses each changed line.

    python -m rolloutlab.envs.builtin._gen_code_search

Fixed seed; a test checks the bundled files equal a fresh generation.
"""

from __future__ import annotations

import ast
import itertools
import json
import random
from pathlib import Path
from textwrap import dedent
from typing import Any

SEED = 20261205
OUT = Path(__file__).resolve().parents[2] / "data" / "envs" / "code_search"
TEST_FRACTION = 0.25


def _src(text: str) -> str:
    return dedent(text).lstrip("\n")


REPOS: dict[str, dict[str, str]] = {
    "textkit": {
        "README.md": "# textkit\n\nSmall text utilities: slugs, wrapping, tokenizing.\n",
        "textkit/__init__.py": _src('''
            """Small text utilities."""
            from textkit.slug import slugify, unique_slug
            from textkit.tokens import Tokenizer
            from textkit.wrap import truncate, wrap_text

            __all__ = ["Tokenizer", "slugify", "truncate", "unique_slug", "wrap_text"]
        '''),
        "textkit/slug.py": _src('''
            """URL slugs."""
            import re
            import unicodedata

            _NON_WORD = re.compile(r"[^a-z0-9]+")


            def slugify(text, max_length=50, separator="-"):
                """Lower-case ASCII slug of ``text``, words joined by ``separator``."""
                ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
                slug = _NON_WORD.sub(separator, ascii_text.lower()).strip(separator)
                return slug[:max_length].rstrip(separator)


            def unique_slug(text, taken):
                """A slug of ``text`` not in ``taken``, numbered when needed."""
                base = slugify(text)
                candidate, n = base, 2
                while candidate in taken:
                    candidate = f"{base}-{n}"
                    n += 1
                return candidate
        '''),
        "textkit/wrap.py": _src('''
            """Line wrapping and truncation."""


            def wrap_text(text, width=70):
                """Greedy line wrapping; words are never split."""
                lines, current = [], ""
                for word in text.split():
                    if current and len(current) + 1 + len(word) > width:
                        lines.append(current)
                        current = word
                    else:
                        current = f"{current} {word}" if current else word
                if current:
                    lines.append(current)
                return lines


            def truncate(text, limit, suffix="..."):
                """``text`` cut to at most ``limit`` characters, ``suffix`` included."""
                if len(text) <= limit:
                    return text
                return text[: max(0, limit - len(suffix))] + suffix
        '''),
        "textkit/tokens.py": _src('''
            """Word tokens and counts."""
            import re


            class Tokenizer:
                """Splits text into word tokens and counts them."""

                def __init__(self, lowercase=True, stopwords=()):
                    self.lowercase = lowercase
                    self.stopwords = set(stopwords)

                def tokenize(self, text):
                    words = re.findall(r"[\\w']+", text)
                    if self.lowercase:
                        words = [w.lower() for w in words]
                    return [w for w in words if w not in self.stopwords]

                def count(self, text):
                    counts = {}
                    for w in self.tokenize(text):
                        counts[w] = counts.get(w, 0) + 1
                    return counts

                def most_common(self, text, n=3):
                    counts = self.count(text)
                    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
        '''),
        "tests/test_textkit.py": _src("""
            from textkit import Tokenizer, slugify, truncate, wrap_text


            def test_slugify():
                assert slugify("Hello, World!") == "hello-world"


            def test_wrap_and_truncate():
                assert wrap_text("a b c", width=3) == ["a b", "c"]
                assert truncate("hello", 5) == "hello"


            def test_tokenizer_counts():
                assert Tokenizer().count("a a b") == {"a": 2, "b": 1}
        """),
    },
    "ledger": {
        "README.md": "# ledger\n\nAccounts, money parsing and interest for a toy bookkeeping app.\n",
        "ledger/__init__.py": _src('''
            """Toy bookkeeping."""
            from ledger.account import Account, InsufficientFunds
            from ledger.interest import InterestCalculator, simple_interest
            from ledger.money import format_amount, parse_amount
        '''),
        "ledger/money.py": _src('''
            """Parsing and formatting amounts of money."""
            from decimal import ROUND_HALF_UP, Decimal


            def parse_amount(text):
                """'1,234.50' or '$1,234.50' -> Decimal('1234.50'); '(12.00)' is negative."""
                s = text.strip().replace("$", "").replace(",", "")
                negative = s.startswith("(") and s.endswith(")")
                if negative:
                    s = s[1:-1]
                value = Decimal(s)
                return -value if negative else value


            def format_amount(value, symbol="$"):
                """Decimal -> '$1,234.50' with two decimals; negatives in parentheses."""
                q = abs(value).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
                text = f"{symbol}{q:,.2f}"
                return f"({text})" if value < 0 else text
        '''),
        "ledger/account.py": _src('''
            """Accounts with a balance and a history."""
            from decimal import Decimal


            class InsufficientFunds(Exception):
                """A withdrawal larger than the balance."""


            class Account:
                """A named account."""

                def __init__(self, owner, balance=Decimal("0")):
                    self.owner = owner
                    self.balance = balance
                    self.history = []

                def deposit(self, amount):
                    if amount <= 0:
                        raise ValueError("deposit must be positive")
                    self.balance += amount
                    self.history.append(("deposit", amount))

                def withdraw(self, amount):
                    if amount > self.balance:
                        raise InsufficientFunds(f"{self.owner}: balance {self.balance} < {amount}")
                    self.balance -= amount
                    self.history.append(("withdraw", amount))

                def transfer(self, other, amount):
                    self.withdraw(amount)
                    other.deposit(amount)
        '''),
        "ledger/interest.py": _src('''
            """Interest."""


            class InterestCalculator:
                """Compound interest at a fixed annual rate."""

                def __init__(self, annual_rate, periods_per_year=12):
                    self.annual_rate = annual_rate
                    self.periods_per_year = periods_per_year

                def period_rate(self):
                    return self.annual_rate / self.periods_per_year

                def compound(self, principal, years):
                    periods = int(years * self.periods_per_year)
                    return principal * (1 + self.period_rate()) ** periods


            def simple_interest(principal, annual_rate, years):
                """Interest without compounding."""
                return principal * annual_rate * years
        '''),
        "tests/test_ledger.py": _src("""
            from decimal import Decimal

            from ledger import Account, parse_amount


            def test_deposit_withdraw():
                a = Account("ann")
                a.deposit(Decimal("10"))
                a.withdraw(Decimal("4"))
                assert a.balance == Decimal("6")


            def test_parse():
                assert parse_amount("(12.00)") == Decimal("-12.00")
        """),
    },
    "geomkit": {
        "README.md": "# geomkit\n\nTwo-dimensional vectors, shapes and helpers.\n",
        "geomkit/__init__.py": _src('''
            """2-D geometry."""
            from geomkit.mathutil import clamp, distance, lerp
            from geomkit.shapes import Circle, Rectangle
            from geomkit.vector import Vector
        '''),
        "geomkit/vector.py": _src('''
            """2-D vectors."""
            import math


            class Vector:
                """An immutable 2-D vector."""

                def __init__(self, x, y):
                    self.x = x
                    self.y = y

                def __eq__(self, other):
                    return (self.x, self.y) == (other.x, other.y)

                def __add__(self, other):
                    return Vector(self.x + other.x, self.y + other.y)

                def __sub__(self, other):
                    return Vector(self.x - other.x, self.y - other.y)

                def dot(self, other):
                    return self.x * other.x + self.y * other.y

                def norm(self):
                    return math.hypot(self.x, self.y)

                def normalized(self):
                    n = self.norm()
                    if n == 0:
                        raise ZeroDivisionError("cannot normalise the zero vector")
                    return Vector(self.x / n, self.y / n)
        '''),
        "geomkit/shapes.py": _src('''
            """Axis-aligned rectangles and circles."""


            class Rectangle:
                """Corner (x, y), width and height."""

                def __init__(self, x, y, width, height):
                    self.x, self.y, self.width, self.height = x, y, width, height

                def area(self):
                    return self.width * self.height

                def perimeter(self):
                    return 2 * (self.width + self.height)

                def contains(self, p):
                    return self.x <= p.x <= self.x + self.width and self.y <= p.y <= self.y + self.height

                def intersects(self, other):
                    return not (
                        other.x > self.x + self.width
                        or other.x + other.width < self.x
                        or other.y > self.y + self.height
                        or other.y + other.height < self.y
                    )


            class Circle:
                """Centre (cx, cy) and radius."""

                def __init__(self, cx, cy, radius):
                    self.cx, self.cy, self.radius = cx, cy, radius

                def contains(self, p):
                    dx, dy = p.x - self.cx, p.y - self.cy
                    return dx * dx + dy * dy <= self.radius * self.radius
        '''),
        "geomkit/mathutil.py": _src('''
            """Scalar helpers."""
            import math


            def clamp(value, low, high):
                """``value`` limited to [low, high]."""
                if value < low:
                    return low
                if value > high:
                    return high
                return value


            def lerp(a, b, t):
                """Linear interpolation: a at t=0, b at t=1."""
                return a + (b - a) * t


            def distance(a, b):
                """Euclidean distance between two points with .x and .y."""
                return math.hypot(a.x - b.x, a.y - b.y)
        '''),
        "tests/test_geomkit.py": _src("""
            from geomkit import Rectangle, Vector, clamp


            def test_vector_ops():
                assert Vector(3, 4) - Vector(1, 1) == Vector(2, 3)
                assert Vector(3, 4).norm() == 5


            def test_rectangle():
                assert Rectangle(0, 0, 2, 3).area() == 6


            def test_clamp():
                assert clamp(15, 0, 10) == 10
        """),
    },
    "taskq": {
        "README.md": "# taskq\n\nA tiny task queue with retries and a scheduler.\n",
        "taskq/__init__.py": _src('''
            """A tiny task queue."""
            from taskq.queue import PriorityQueue, TaskQueue
            from taskq.retry import backoff_delays, retry
            from taskq.schedule import Scheduler, parse_duration
        '''),
        "taskq/queue.py": _src('''
            """FIFO and priority queues."""
            import heapq


            class TaskQueue:
                """First in, first out."""

                def __init__(self):
                    self._items = []

                def __len__(self):
                    return len(self._items)

                def push(self, task):
                    self._items.append(task)

                def pop(self):
                    return self._items.pop(0)

                def peek(self):
                    return self._items[0] if self._items else None


            class PriorityQueue:
                """Lowest priority number first; ties in insertion order."""

                def __init__(self):
                    self._heap = []
                    self._counter = 0

                def push(self, task, priority):
                    heapq.heappush(self._heap, (priority, self._counter, task))
                    self._counter += 1

                def pop(self):
                    return heapq.heappop(self._heap)[2]
        '''),
        "taskq/retry.py": _src('''
            """Retrying flaky calls."""
            import time


            def backoff_delays(base, factor, n):
                """Delays before each of ``n`` retries: base, base*factor, base*factor**2, ..."""
                return [base * factor ** i for i in range(n)]


            def retry(fn, attempts=3, delay=0.0, sleep=time.sleep):
                """Call ``fn`` until it succeeds, at most ``attempts`` times."""
                last = None
                for attempt in range(attempts):
                    try:
                        return fn()
                    except Exception as e:
                        last = e
                        sleep(delay)
                raise last
        '''),
        "taskq/schedule.py": _src('''
            """Periodic jobs."""
            import re

            _UNITS = {"h": 3600, "m": 60, "s": 1}


            def parse_duration(text):
                """'1h30m' -> 5400 (seconds)."""
                total = 0
                for number, unit in re.findall(r"(\\d+)([hms])", text):
                    total += int(number) * _UNITS[unit]
                return total


            class Job:
                def __init__(self, name, every, next_run):
                    self.name, self.every, self.next_run = name, every, next_run


            class Scheduler:
                """Jobs that run every so many seconds."""

                def __init__(self, start=0):
                    self.jobs = []
                    self.start = start

                def add(self, name, every):
                    self.jobs.append(Job(name, parse_duration(every), self.start + parse_duration(every)))

                def due(self, now):
                    ready = [j for j in self.jobs if now >= j.next_run]
                    for j in ready:
                        j.next_run = now + j.every
                    return [j.name for j in ready]
        '''),
        "tests/test_taskq.py": _src("""
            from taskq import TaskQueue, parse_duration


            def test_fifo():
                q = TaskQueue()
                q.push("a")
                q.push("b")
                assert q.pop() == "a"


            def test_duration():
                assert parse_duration("1h30m") == 5400
        """),
    },
}

# (repo, path, old, new, issue).  ``old`` occurs exactly once in the clean file.
BUGS: list[tuple[str, str, str, str, str]] = [
    (
        "textkit",
        "textkit/slug.py",
        "ascii_text.lower()",
        "ascii_text",
        "slugify() loses capital letters: slugify('Hello World') returns 'ello-orld' instead of 'hello-world'.",
    ),
    (
        "textkit",
        "textkit/slug.py",
        "        n += 1",
        "        n += 0",
        "unique_slug() never returns when both 'post' and 'post-2' are already taken.",
    ),
    (
        "textkit",
        "textkit/wrap.py",
        "    if current:\n        lines.append(current)",
        "    if not current:\n        lines.append(current)",
        "wrap_text() drops the last line: wrap_text('a b c', width=3) gives ['a b'] and 'c' is lost.",
    ),
    (
        "textkit",
        "textkit/wrap.py",
        "if len(text) <= limit:",
        "if len(text) < limit:",
        "truncate('hello', 5) returns 'he...' although 'hello' already fits in 5 characters.",
    ),
    (
        "textkit",
        "textkit/tokens.py",
        "if w not in self.stopwords]",
        "if w in self.stopwords]",
        "Tokenizer(stopwords=['the']).tokenize('the cat') returns ['the'] instead of ['cat'].",
    ),
    (
        "textkit",
        "textkit/tokens.py",
        "counts.get(w, 0) + 1",
        "counts.get(w, 1)",
        "Tokenizer().count('a a a') reports {'a': 1}; every count is stuck at 1.",
    ),
    (
        "textkit",
        "textkit/tokens.py",
        "key=lambda kv: (-kv[1], kv[0])",
        "key=lambda kv: (kv[1], kv[0])",
        "most_common() lists the rarest words first instead of the most frequent ones.",
    ),
    (
        "ledger",
        "ledger/money.py",
        '.replace(",", "")',
        '.replace(",", ".")',
        "parse_amount('1,234.50') raises decimal.InvalidOperation; amounts with thousands separators cannot be read.",
    ),
    (
        "ledger",
        "ledger/money.py",
        'quantize(Decimal("0.01")',
        'quantize(Decimal("0.1")',
        "format_amount(Decimal('2.345')) prints '$2.30' instead of '$2.35'; cents are lost.",
    ),
    (
        "ledger",
        "ledger/account.py",
        "        self.balance += amount",
        "        self.balance = amount",
        "After two deposits of 10 into an empty account its balance is 10, not 20.",
    ),
    (
        "ledger",
        "ledger/account.py",
        "if amount > self.balance:",
        "if amount >= self.balance:",
        "Withdrawing exactly the whole balance raises InsufficientFunds.",
    ),
    (
        "ledger",
        "ledger/account.py",
        "        other.deposit(amount)",
        "        self.deposit(amount)",
        "a.transfer(b, 5) leaves b's balance unchanged; the money comes back to a.",
    ),
    (
        "ledger",
        "ledger/interest.py",
        "self.annual_rate / self.periods_per_year",
        "self.annual_rate * self.periods_per_year",
        "InterestCalculator(0.05).compound(100, 1) returns tens of thousands instead of about 105.12.",
    ),
    (
        "ledger",
        "ledger/interest.py",
        "int(years * self.periods_per_year)",
        "int(years)",
        "InterestCalculator(0.05).compound(100, 2) compounds only twice in two years although periods_per_year is 12.",
    ),
    (
        "ledger",
        "ledger/interest.py",
        "principal * annual_rate * years",
        "principal * annual_rate + years",
        "simple_interest(1000, 0.05, 2) returns 52.0 instead of 100.0.",
    ),
    (
        "geomkit",
        "geomkit/vector.py",
        "Vector(self.x - other.x, self.y - other.y)",
        "Vector(self.x - other.x, self.y + other.y)",
        "Vector(3, 4) - Vector(1, 1) gives Vector(2, 5) instead of Vector(2, 3).",
    ),
    (
        "geomkit",
        "geomkit/vector.py",
        "self.x * other.x + self.y * other.y",
        "self.x * other.y + self.y * other.x",
        "Vector(1, 0).dot(Vector(0, 1)) returns 1 for perpendicular vectors.",
    ),
    (
        "geomkit",
        "geomkit/vector.py",
        "Vector(self.x / n, self.y / n)",
        "Vector(self.x / n, self.y)",
        "Vector(0, 5).normalized() returns a vector of length 5 instead of a unit vector.",
    ),
    (
        "geomkit",
        "geomkit/shapes.py",
        "2 * (self.width + self.height)",
        "2 * self.width + self.height",
        "Rectangle(0, 0, 2, 3).perimeter() returns 7 instead of 10.",
    ),
    (
        "geomkit",
        "geomkit/shapes.py",
        "self.x <= p.x <= self.x + self.width",
        "self.x < p.x <= self.x + self.width",
        "Rectangle.contains() says a point on the rectangle's left edge is outside.",
    ),
    (
        "geomkit",
        "geomkit/shapes.py",
        "or other.x + other.width < self.x",
        "or other.x + other.width > self.x",
        "Rectangle(0, 0, 2, 2).intersects(Rectangle(1, 1, 2, 2)) is False for overlapping rectangles.",
    ),
    (
        "geomkit",
        "geomkit/shapes.py",
        "<= self.radius * self.radius",
        "<= self.radius",
        "Circle(0, 0, 3).contains(Vector(2, 2)) is False although the point is inside the circle.",
    ),
    (
        "geomkit",
        "geomkit/mathutil.py",
        "    if value > high:\n        return high",
        "    if value > high:\n        return low",
        "clamp(15, 0, 10) returns 0; values above the range come back as the lower bound.",
    ),
    (
        "geomkit",
        "geomkit/mathutil.py",
        "a + (b - a) * t",
        "a + (b - a) * (1 - t)",
        "lerp(0, 10, 0.25) returns 7.5 instead of 2.5; interpolation runs backwards.",
    ),
    (
        "geomkit",
        "geomkit/mathutil.py",
        "math.hypot(a.x - b.x, a.y - b.y)",
        "math.hypot(a.x - b.x, a.x - b.y)",
        "distance(Vector(0, 0), Vector(0, 3)) returns 3 but distance(Vector(1, 0), Vector(1, 3)) returns about 2.2.",
    ),
    (
        "taskq",
        "taskq/queue.py",
        "return self._items.pop(0)",
        "return self._items.pop()",
        "TaskQueue hands out the newest task first (LIFO); it should be first in, first out.",
    ),
    (
        "taskq",
        "taskq/queue.py",
        "return self._items[0] if self._items else None",
        "return self._items[-1] if self._items else None",
        "TaskQueue.peek() shows the last pushed task while pop() returns the first one.",
    ),
    (
        "taskq",
        "taskq/queue.py",
        "(priority, self._counter, task)",
        "(-priority, self._counter, task)",
        "PriorityQueue pops priority 9 before priority 1; lower numbers should come out first.",
    ),
    (
        "taskq",
        "taskq/retry.py",
        "base * factor ** i",
        "base * factor * i",
        "backoff_delays(1, 2, 4) returns [0, 2, 4, 6] instead of [1, 2, 4, 8].",
    ),
    (
        "taskq",
        "taskq/retry.py",
        "for attempt in range(attempts):",
        "for attempt in range(attempts - 1):",
        "retry(fn, attempts=3) calls a failing fn only twice, and raises None when attempts=1.",
    ),
    (
        "taskq",
        "taskq/schedule.py",
        "total += int(number) * _UNITS[unit]",
        "total = int(number) * _UNITS[unit]",
        "parse_duration('1h30m') returns 1800 instead of 5400; only the last part counts.",
    ),
    (
        "taskq",
        "taskq/schedule.py",
        "if now >= j.next_run]",
        "if now > j.next_run]",
        "Scheduler.due(now) skips a job that is due exactly at now; it only runs one tick late.",
    ),
    (
        "taskq",
        "taskq/schedule.py",
        "self.start + parse_duration(every)))",
        "self.start))",
        "A job added with every='1h' runs immediately at start instead of one hour later.",
    ),
    (
        "textkit",
        "textkit/slug.py",
        "slug[:max_length]",
        "slug[: max_length - 1]",
        "slugify('abcdefgh', max_length=5) returns 'abcd'; the slug is one character short of max_length.",
    ),
    (
        "textkit",
        "textkit/wrap.py",
        "limit - len(suffix)",
        "limit + len(suffix)",
        "truncate('abcdefghij', 6) returns 'abcdefghi...' (12 characters) instead of 'abc...'.",
    ),
    (
        "textkit",
        "textkit/wrap.py",
        "len(current) + 1 + len(word) > width",
        "len(current) + 1 + len(word) >= width",
        "wrap_text('ab cd', width=5) splits 'ab cd' over two lines although it is exactly 5 characters.",
    ),
    (
        "textkit",
        "textkit/tokens.py",
        "if self.lowercase:",
        "if not self.lowercase:",
        "Tokenizer().tokenize('Hello World') returns ['Hello', 'World']; the default should lower-case.",
    ),
    (
        "ledger",
        "ledger/money.py",
        "return -value if negative else value",
        "return value",
        "parse_amount('(12.00)') returns 12.00; amounts in parentheses should be negative.",
    ),
    (
        "ledger",
        "ledger/money.py",
        'return f"({text})" if value < 0 else text',
        'return f"({text})" if value > 0 else text',
        "format_amount(Decimal('5')) prints '($5.00)' as if the amount were negative.",
    ),
    (
        "ledger",
        "ledger/account.py",
        "if amount <= 0:",
        "if amount < 0:",
        "Account.deposit(0) is accepted and adds a ('deposit', 0) entry to the history; it should raise ValueError.",
    ),
    (
        "ledger",
        "ledger/account.py",
        'self.history.append(("withdraw", amount))',
        'self.history.append(("deposit", amount))',
        "Withdrawals show up as deposits in Account.history.",
    ),
    (
        "geomkit",
        "geomkit/vector.py",
        "Vector(self.x + other.x, self.y + other.y)",
        "Vector(self.x + other.x, self.y + other.x)",
        "Vector(1, 2) + Vector(3, 4) gives Vector(4, 5) instead of Vector(4, 6).",
    ),
    (
        "geomkit",
        "geomkit/vector.py",
        "math.hypot(self.x, self.y)",
        "math.hypot(self.x, self.x)",
        "Vector(3, 4).norm() returns about 4.24 instead of 5.",
    ),
    (
        "geomkit",
        "geomkit/shapes.py",
        "return self.width * self.height",
        "return self.width * self.width",
        "Rectangle(0, 0, 2, 3).area() returns 4 instead of 6.",
    ),
    (
        "geomkit",
        "geomkit/mathutil.py",
        "    if value < low:\n        return low",
        "    if value < low:\n        return value",
        "clamp(-5, 0, 10) returns -5; values below the range are not clamped.",
    ),
    (
        "taskq",
        "taskq/queue.py",
        "return len(self._items)",
        "return len(self._items) - 1",
        "len(TaskQueue()) is -1 for an empty queue.",
    ),
    (
        "taskq",
        "taskq/queue.py",
        "heapq.heappop(self._heap)[2]",
        "heapq.heappop(self._heap)[1]",
        "PriorityQueue.pop() returns an integer instead of the task that was pushed.",
    ),
    (
        "taskq",
        "taskq/schedule.py",
        "j.next_run = now + j.every",
        "j.next_run = now",
        "A job returned by Scheduler.due(now) is due again at the same time instead of `every` seconds later.",
    ),
    (
        "taskq",
        "taskq/retry.py",
        "sleep(delay)",
        "sleep(delay * attempt)",
        "retry(fn, attempts=3, delay=1.0) sleeps 0 s after the first failure instead of 1 s.",
    ),
]


def locate(source: str, line: int, path: str) -> dict[str, str]:
    """Gold locations of ``line`` in ``source``: file, module and entity level."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.lineno <= line <= (
            node.end_lineno or node.lineno
        ):
            return {
                "file": path,
                "module": f"{path}::{node.name}",
                "entity": f"{path}::{node.name}",
            }
        if isinstance(node, ast.ClassDef) and node.lineno <= line <= (
            node.end_lineno or node.lineno
        ):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef) and sub.lineno <= line <= (
                    sub.end_lineno or sub.lineno
                ):
                    return {
                        "file": path,
                        "module": f"{path}::{node.name}",
                        "entity": f"{path}::{node.name}.{sub.name}",
                    }
    raise ValueError(f"line {line} of {path} is not inside a function or method")


def apply_bug(files: dict[str, str], path: str, old: str, new: str) -> tuple[dict[str, str], int]:
    """``files`` with the bug seeded, and the (1-based) first changed line."""
    text = files[path]
    if text.count(old) != 1:
        raise ValueError(f"{path}: {old!r} occurs {text.count(old)} times, expected once")
    at = text.index(old)
    first = (
        text[:at].count("\n")
        + 1
        + next(
            i
            for i, (a, b) in enumerate(zip(old.split("\n"), new.split("\n"), strict=False))
            if a != b
        )
    )
    return {**files, path: text.replace(old, new)}, first


def build(seed: int = SEED) -> list[dict[str, Any]]:
    """The tasks: every bug alone, then pairs of bugs in different files of one repo."""
    rng = random.Random(seed)
    tasks: list[dict[str, Any]] = []

    def task(bugs: list[tuple[str, str, str, str, str]]) -> dict[str, Any]:
        repo = bugs[0][0]
        files = dict(REPOS[repo])
        gold: dict[str, set[str]] = {"file": set(), "module": set(), "entity": set()}
        for _, path, old, new, _ in bugs:
            files, line = apply_bug(files, path, old, new)
            for level, loc in locate(files[path], line, path).items():
                gold[level].add(loc)
        issue = (
            bugs[0][4]
            if len(bugs) == 1
            else "Two problems:\n" + "\n".join(f"{i}. {b[4]}" for i, b in enumerate(bugs, 1))
        )
        return {
            "repo": repo,
            "issue": issue,
            "category": "one_location" if len(bugs) == 1 else "two_locations",
            "edits": [{"path": p, "old": o, "new": n} for _, p, o, n, _ in bugs],
            "gold": {k: sorted(v) for k, v in gold.items()},
        }

    for bug in BUGS:
        tasks.append(task([bug]))
    for repo in REPOS:
        pairs = [
            (a, b)
            for a, b in itertools.combinations([x for x in BUGS if x[0] == repo], 2)
            if a[1] != b[1]
        ]
        for a, b in rng.sample(pairs, k=min(30, len(pairs))):
            tasks.append(task([a, b]))
    rng.shuffle(tasks)
    n_test = round(len(tasks) * TEST_FRACTION)
    counts = {"train": 0, "test": 0}
    for i, t in enumerate(tasks):
        split = "test" if i < n_test else "train"
        t["split"], t["id"] = split, f"{split}/{counts[split]}"
        counts[split] += 1
    return tasks


def main() -> None:
    tasks = build()
    OUT.mkdir(parents=True, exist_ok=True)
    # One JSON file, not a tree of .py files: bundled sources must not be linted, type-checked
    # or collected as the package's own code.
    (OUT / "repos.json").write_text(
        json.dumps(REPOS, sort_keys=True, indent=1) + "\n", encoding="utf-8"
    )
    with (OUT / "tasks.jsonl").open("w", encoding="utf-8") as f:
        for t in tasks:
            f.write(json.dumps(t, sort_keys=True) + "\n")
    print(f"wrote {len(REPOS)} repositories and {len(tasks)} tasks to {OUT}")


if __name__ == "__main__":
    main()
