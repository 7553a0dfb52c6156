"""Run one environment's coroutines on a thread of its own, off the caller's event loop.

``asyncio.timeout`` fires only at an ``await``: an environment whose ``step`` blocks
(``time.sleep``, a long computation, a C call) inside ``async def`` would freeze the loop
that runs it, and with it every timeout, every other episode or session, ``/health`` and
the handling of SIGINT / SIGTERM.  An :class:`EnvThread` gives the environment its own event
loop on its own (daemon) thread, so the caller's loop only awaits a future: its timeouts
fire, other work goes on, signals are handled.  ``env serve`` runs each session this way, and
the agent loop each in-process environment (one thread per running episode).

What a blocking environment still costs: the blocked thread (and the memory it holds) stays
until the call returns; Python cannot stop a thread, so the caller is answered with a timeout
and the environment is abandoned (a daemon thread does not hold up the process's exit).
Each thread's loop holds three file descriptors (its selector and wake-up socket pair) while
it runs.  Environment classes that never block stay on the caller's loop, without a thread:
those that only await network I/O (the remote clients, :func:`async_io_only`) and those whose
calls are short pure computation (the built-in simulations, :func:`never_blocks`).  The thread
costs two cross-thread wake-ups per call; on the one-turn guess-number step of
``benchmarks/bench_train_trl.py`` (2,048 episodes of 2 calls each per step) that was ~60 %
of the step (0.30 s against 0.12 s without).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["ASYNC_IO_ONLY", "NEVER_BLOCKS", "EnvThread", "async_io_only", "env_calls_in_flight", "env_calls_settled", "never_blocks"]

ASYNC_IO_ONLY: set[type] = set()
"""Environment classes that never block their event loop (they only ``await`` I/O, or
compute for well under a millisecond a call): the agent loop runs them on its own loop,
without a thread each.  Exact classes: a subclass is not included (it may add a blocking call)."""

NEVER_BLOCKS: set[type] = set()
"""The classes of :data:`ASYNC_IO_ONLY` marked :func:`never_blocks`: they do not even await, so
a call cannot be cut by a timeout either, and the agent loop calls them without one."""

C = TypeVar("C", bound=type)


def async_io_only(cls: C) -> C:
    """Class decorator: instances of ``cls`` only await I/O and never block (see :data:`ASYNC_IO_ONLY`)."""
    ASYNC_IO_ONLY.add(cls)
    return cls


def never_blocks(cls: C) -> C:
    """Class decorator for an environment whose ``reset``/``step``/``close`` are short pure
    computation (no sleep, no blocking I/O, no subprocess, nothing that can take seconds): the
    agent loop calls it on its own event loop instead of a thread per episode.  A step that
    blocks anyway would hold the loop, with every timeout and signal, until it returns; leave
    an environment unmarked when in doubt."""
    ASYNC_IO_ONLY.add(cls)
    NEVER_BLOCKS.add(cls)
    return cls


_IN_FLIGHT: dict[int, int] = {}
"""Calls awaited on environment threads, per calling event loop (by ``id``; an entry is
removed when its count returns to 0, so a later loop with the same ``id`` starts clean)."""
_SETTLED: dict[int, list[asyncio.Future[None]]] = {}
"""Per calling event loop: who waits for its count to return to 0."""


def env_calls_in_flight() -> int:
    """How many environment calls the running event loop awaits on threads.  A batching
    policy waits for them before it samples, so that a batch holds the episodes it would hold
    if the environments ran on the loop itself, whatever the threads' timing."""
    return _IN_FLIGHT.get(id(asyncio.get_running_loop()), 0)


async def env_calls_settled() -> None:
    """Return once the running event loop awaits no environment call on a thread."""
    loop = asyncio.get_running_loop()
    if _IN_FLIGHT.get(id(loop), 0):
        fut: asyncio.Future[None] = loop.create_future()
        _SETTLED.setdefault(id(loop), []).append(fut)
        await fut


def _leave(key: int) -> None:
    _IN_FLIGHT[key] -= 1
    if not _IN_FLIGHT[key]:
        del _IN_FLIGHT[key]
        for fut in _SETTLED.pop(key, []):
            if not fut.done():
                fut.set_result(None)


_IDLE: list[EnvThread] = []
"""Threads whose environment was closed, kept for the next episode (a thread and an event
loop cost a few hundred microseconds to make; a training step runs hundreds of episodes)."""
_IDLE_MAX = 256
_IDLE_LOCK = threading.Lock()


class EnvThread:
    """A thread running an event loop for one environment; :meth:`run` awaits a coroutine there."""

    def __init__(self, name: str = "env") -> None:
        self._loop = asyncio.new_event_loop()
        self._lock = threading.Lock()
        self._calls = 0  # submitted and not yet returned on the thread (a timed-out call included)
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()  # its selector and wake-up socket pair: a session must not leak fds

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """The result of ``coro`` run on this thread's loop; cancelling the caller (a timeout)
        cancels it there at its next ``await``."""
        key = id(asyncio.get_running_loop())
        _IN_FLIGHT[key] = _IN_FLIGHT.get(key, 0) + 1
        with self._lock:
            self._calls += 1
        try:
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._counted(coro), self._loop))
        finally:
            _leave(key)

    async def _counted(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            return await coro
        finally:
            with self._lock:
                self._calls -= 1

    @property
    def busy(self) -> bool:
        """A call is still running on the thread (also one whose caller gave up at a timeout):
        the environment must not be used, not even closed, from elsewhere."""
        with self._lock:
            return self._calls > 0

    async def settled(self, within_s: float) -> bool:
        """Wait up to ``within_s`` for the calls on the thread to return (a cancelled ``async``
        call ends at its next ``await``, a blocked one does not); whether none is left."""
        deadline = time.monotonic() + within_s
        while self.busy and time.monotonic() < deadline:
            await asyncio.sleep(0.002)
        return not self.busy

    @classmethod
    def lease(cls) -> EnvThread:
        """An idle thread from an earlier environment, or a new one; give it back with :meth:`release`."""
        with _IDLE_LOCK:
            while _IDLE:
                t = _IDLE.pop()
                if t.alive:
                    return t
        return cls("env")

    def release(self) -> None:
        """Keep this thread for the next :meth:`lease` if nothing runs on it, else stop it
        (a blocked one is abandoned)."""
        if not self.busy and self.alive:
            with _IDLE_LOCK:
                if len(_IDLE) < _IDLE_MAX:
                    _IDLE.append(self)
                    return
        self.stop()

    def stop(self) -> None:
        """Stop the loop once whatever it runs returns (a blocked call is not waited for)."""
        with contextlib.suppress(RuntimeError):  # already closed
            self._loop.call_soon_threadsafe(self._loop.stop)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()
