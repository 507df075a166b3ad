"""Waiting for changes: polling, cut short by notifications where the store has them (SPEC §11).

Shared by the SQLite and PostgreSQL stores and the workers. A store with notifications exposes
`Changes` (PostgreSQL: `durable_graph.postgres.notify.Listener`, LISTEN/NOTIFY): a waiter
registers what it waits for (`Changes.watching`), reads, and waits for the kind's generation to
move — at most its poll interval, so polling stays the fallback and a lost notification only
delays. Without one, the loops below sleep their interval.

Deadlines are monotonic wall-clock time, never the store clock (D21, rule 23). The in-memory store
waits on its condition variable instead, and `durable_graph.aio` has the asyncio twin of these
loops.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from datetime import timedelta
from typing import Protocol, TypeVar

from durable_graph.core.model import Event

T = TypeVar("T")


class Changes(Protocol):
    """A store's change notifications (kinds ``events``, ``closed``, ``queue``)."""

    def generation(self, kind: str) -> int:
        """A number that moves whenever ``kind`` is notified."""
        ...

    def watching(self, kind: str, key: str = "") -> AbstractContextManager[None]:
        """Have changes of (kind, key) notified while inside (registered on entry)."""
        ...

    def wait(
        self, kind: str, generation: int, timeout: float, wake: threading.Event | None = None
    ) -> None:
        """Return when ``kind``'s generation moved past ``generation``, ``wake`` is set, or
        after ``timeout`` seconds."""
        ...


class AsyncChanges(Protocol):
    """`Changes` on an event loop (`durable_graph.postgres.notify_async.AsyncListener`)."""

    def generation(self, kind: str) -> int: ...

    def watching(self, kind: str, key: str = "") -> AbstractAsyncContextManager[None]: ...

    async def wait(
        self, kind: str, generation: int, timeout: float, wake: asyncio.Event | None = None
    ) -> None: ...


def poll(
    fetch: Callable[[], T],
    done: Callable[[T], bool],
    timeout: timedelta,
    every: float,
    changes: Changes | None = None,
    watch: tuple[str, str] = ("", ""),
) -> T:
    """Call ``fetch`` until ``done(value)`` or the timeout passes: every ``every`` seconds, and
    at once when ``changes`` notifies ``watch`` = (kind, key).

    Returns the last value fetched: the one that was done, or the one read at the timeout.
    """
    deadline = time.monotonic() + timeout.total_seconds()
    value = fetch()
    if done(value) or changes is None:
        while not done(value):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return value
            time.sleep(min(every, remaining))
            value = fetch()
        return value
    if deadline - time.monotonic() <= 0:
        return value
    # It must wait: register first (a change from now on is notified), then read again.
    kind, key = watch
    with changes.watching(kind, key):
        while True:
            generation = changes.generation(kind)
            value = fetch()
            if done(value):
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return value
            changes.wait(kind, generation, min(every, remaining))


def follow(
    read_after: Callable[[int], list[Event]],
    after_seq: int,
    every: float,
    check_open: Callable[[], None],
    changes: Changes | None = None,
    thread_id: str = "",
) -> Iterator[Event]:
    """Every event after ``after_seq``, forever, reading again every ``every`` s when caught up
    (at once when ``changes`` notifies the thread's events).

    ``check_open`` runs before each event is handed out, so a live iterator of a closed store
    raises `ProcessingError` on its next step (rule 8).
    """
    cursor = after_seq
    with contextlib.ExitStack() as registered:
        watching = False  # registered on the first wait: a reader that never waits costs nothing
        while True:
            generation = changes.generation("events") if watching and changes else 0
            batch = read_after(cursor)
            for event in batch:
                check_open()
                cursor = event.seq
                yield event
            if batch:
                continue
            if changes is None:
                time.sleep(every)
            elif not watching:
                registered.enter_context(changes.watching("events", thread_id))
                watching = True  # registered: read again before waiting
            else:
                changes.wait("events", generation, every)


__all__ = ["AsyncChanges", "Changes", "follow", "poll"]
