"""`LocalChanges`: the `AsyncChanges` of an embedded store's async wrapper (SPEC §11).

The sync in-memory and SQLite stores wake their waits at once on a write made through the same
store object (`Storage.change_signal`: a `threading.Event` set by the next write). Their async
wrappers wait on an event loop, which cannot wait on a thread's event; without this, their
``await_events_after`` and ``subscribe`` slept their whole poll interval after an in-process
write, so a stream already open in ``durable-graph serve`` on SQLite heard of its run's events
up to 250 ms after a stream opened later, which reads them at once.

One relay thread waits on the store's signal while anyone watches and, at each write, moves the
generation and sets the waiters' asyncio events on their loops (``call_soon_threadsafe``). A
write moves every kind (the store's signal says nothing of what was written): a waiter reads
again and waits again, as the sync waits do. Writes by other processes are still found by
polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from typing import Final

from durable_graph.embedded.storage import Signal

RELAY_IDLE: Final = 1.0
"""Seconds the relay waits for a write before it looks whether anyone still watches."""


class LocalChanges:
    """Writes of one store object in this process, for waits on any event loop."""

    def __init__(self, signal: Callable[[], Signal]) -> None:
        self._signal = signal
        self._lock = threading.Lock()  # the relay thread and the loops share what follows
        self._generation = 0
        self._watchers = 0
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._relaying = False
        self._closed = False

    def generation(self, kind: str) -> int:
        return self._generation

    @contextlib.asynccontextmanager
    async def watching(self, kind: str, key: str = "") -> AsyncIterator[None]:
        """Writes relayed while inside: from entry on, a write moves the generation."""
        with self._lock:
            self._watchers += 1
            if not self._relaying and not self._closed:
                self._relaying = True
                # Taken now, before the caller reads again: no write after this is missed.
                signal = self._signal()
                threading.Thread(
                    target=self._relay, args=(signal,), name="dg-local-changes", daemon=True
                ).start()
        try:
            yield
        finally:
            with self._lock:
                self._watchers -= 1

    async def wait(
        self, kind: str, generation: int, timeout: float, wake: asyncio.Event | None = None
    ) -> None:
        """Return once a write moved the generation past ``generation``, ``wake`` is set, or
        after ``timeout`` seconds."""
        waiter = (asyncio.get_running_loop(), wake if wake is not None else asyncio.Event())
        with self._lock:
            if self._generation != generation or self._closed:
                return
            self._waiters.add(waiter)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter[1].wait(), max(0.0, timeout))
        finally:
            with self._lock:
                self._waiters.discard(waiter)

    def close(self) -> None:
        """Wake every waiter; the relay ends within `RELAY_IDLE`."""
        with self._lock:
            self._closed = True
        self._wake()

    def _relay(self, signal: Signal) -> None:
        while True:
            fired = signal.wait(RELAY_IDLE)
            with self._lock:
                if self._closed or (not fired and self._watchers == 0):
                    self._relaying = False
                    return
            if fired:
                # The next signal first, then the wake: a write before this line is read by the
                # woken waiters, a write after it sets the new signal.
                signal = self._signal()
                with self._lock:
                    self._generation += 1
                self._wake()

    def _wake(self) -> None:
        with self._lock:
            waiters = list(self._waiters)
        for loop, event in waiters:
            with contextlib.suppress(RuntimeError):  # its loop has closed: nobody waits there
                loop.call_soon_threadsafe(event.set)


__all__ = ["RELAY_IDLE", "LocalChanges"]
