"""Headless Chromium for the browser tests: the browser, a running viewer, a watched page.

Chromium is Debian's ``chromium`` package (``/usr/bin/chromium``), driven by Playwright's
Python package; Playwright's own browser download is never used.  Without it the tests
skip with the install command, or fail when ``ROLLOUTLAB_REQUIRE_BROWSER=1`` (as in CI).

Every page records console errors, uncaught exceptions and every request it makes;
:meth:`Watched.assert_clean` checks there were no errors and that no request left the
machine (requests other than the viewer's own address, ``file:`` pages the test opened,
and ``data:``/``blob:``/``about:`` URLs are also aborted, so nothing leaks on failure).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.viewer import make_store

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
INSTALL = ("the browser tests need Debian's chromium at /usr/bin/chromium and the playwright Python package: "
           "`apt-get install -y chromium` and `pip install 'rolloutlab[test]'` (never `playwright install`)")


def _unavailable(why: str) -> None:
    msg = f"{why}; {INSTALL}"
    if os.environ.get("ROLLOUTLAB_REQUIRE_BROWSER") == "1":
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # Module scope, never session: while Playwright's sync API is open it holds a running
    # asyncio loop on the main thread, and every later test calling ``asyncio.run`` fails.
    if not CHROMIUM.exists():
        _unavailable(f"{CHROMIUM} is missing")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is missing")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS, timeout=30_000)
        try:
            yield b
        finally:
            b.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@dataclass
class Server:
    url: str
    store: Path
    run_dir: Path
    root: Path


@contextlib.contextmanager
def serving(store: Path) -> Iterator[str]:
    """A viewer over ``store`` on a free loopback port, in a thread: its URL (stopped afterwards)."""
    import uvicorn

    from rolloutlab.viewer import create_app

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(store), host="127.0.0.1", port=port, log_level="warning"))
    t = threading.Thread(target=server.run, daemon=True, name="viewer-under-test")
    t.start()
    deadline = time.monotonic() + 15
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "the viewer did not start within 15 s"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        t.join(timeout=10)


def start_viewer(root: Path) -> Iterator[Server]:
    """A viewer on a free loopback port over a fresh test store (stopped afterwards)."""
    store, run_dir = make_store(root)
    with serving(store) as url:
        yield Server(url, store, run_dir, root)


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from start_viewer(tmp_path_factory.mktemp("browser"))


@dataclass
class Watched:
    """A page with what it logged and requested."""

    page: Any
    allowed: list[str]
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)

    def local(self, url: str) -> bool:
        return url.split(":", 1)[0] in ("data", "blob", "about") or any(url.startswith(a) for a in self.allowed)

    def assert_clean(self) -> None:
        assert not self.errors, f"JavaScript errors: {self.errors}"
        assert not self.blocked, f"requests that would have left the machine: {self.blocked}"
        assert all(self.local(u) for u in self.requests), self.requests
        assert self.page.evaluate("typeof window.__xss") == "undefined", "an XSS payload ran"


@pytest.fixture
def watched(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """``watched(*allowed_prefixes) -> Watched``: a fresh page in its own context."""
    contexts: list[Any] = []

    def make(*allowed: str) -> Watched:
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, service_workers="block")
        contexts.append(ctx)
        page = ctx.new_page()
        page.set_default_timeout(15_000)
        w = Watched(page, list(allowed))
        page.on("console", lambda m: w.errors.append(f"console: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: w.errors.append(f"uncaught: {e}"))
        page.on("request", lambda r: w.requests.append(r.url))

        def route(r: Any) -> None:
            if w.local(r.request.url):
                r.continue_()
            else:
                w.blocked.append(r.request.url)
                r.abort()

        ctx.route("**/*", route)
        return w

    yield make
    for ctx in contexts:
        ctx.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go (look at them: the path is printed with -s)."""
    d = tmp_path_factory.mktemp("screenshots")
    print(f"\nscreenshots: {d}")
    return d
