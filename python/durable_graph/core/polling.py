"""Waiting for changes: polling, cut short by notifications where the store has them (SPEC §11).

Shared by the SQLite and PostgreSQL stores and the workers. A store with notifications exposes
`Changes` (PostgreSQL: `durable_graph.postgres.notify.Listener`, LISTEN/NOTIFY): a waiter
registers what it waits for (`Changes.watching`), reads, and waits for the kind's generation to
move — at most its poll interval, so polling stays the fallback and a lost notification only
delays. Without one, the loops below sleep their interval.

Deadlines are monotonic wall-clock time, never the store clock (D21, rule 23). The in-memory store
waits on its condition variable instead. The sync loops come first, then their asyncio twins,
which every async store's waits use (`AsyncEventWaits`: the async checkpointers' two).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from datetime import timedelta
from typing import Protocol, TypeVar

from durable_graph.core.model import Event, QueueEntry, WatchPolicy
from durable_graph.core.validation import check_await_closed, check_await_events, check_subscribe

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


# --- asyncio: the async stores' `await_events_after`, `subscribe`, `await_closed` -------------
#
# They poll with `asyncio.sleep` (never blocking the loop) and time out on the loop's monotonic
# clock (D21), whatever the store's clock says.

EventsAfter = Callable[[str, int], Awaitable[list[Event]]]
EntryOf = Callable[[int, str | None], Awaitable[QueueEntry | None]]
CheckOpen = Callable[[], None]

CLOSED_POLL_INTERVAL = WatchPolicy().poll_interval
"""How often `await_closed` reads the entry (it takes no `WatchPolicy`)."""


def _watching(
    changes: AsyncChanges | None, kind: str, key: str
) -> AbstractAsyncContextManager[None]:
    return contextlib.nullcontext() if changes is None else changes.watching(kind, key)


async def _pause(changes: AsyncChanges | None, kind: str, generation: int, seconds: float) -> None:
    """Sleep ``seconds``, or less when ``changes`` notifies ``kind`` (SPEC §11)."""
    if changes is None:
        await asyncio.sleep(seconds)
    else:
        await changes.wait(kind, generation, seconds)


async def await_events(
    events_after: EventsAfter,
    thread_id: str,
    after_seq: int,
    timeout: timedelta,
    watch: WatchPolicy,
    changes: AsyncChanges | None = None,
) -> list[Event]:
    """The events after ``after_seq`` as soon as there are some; ``[]`` at the timeout."""
    check_await_events(thread_id, after_seq, timeout, watch)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout.total_seconds()
    poll = watch.poll_interval.total_seconds()
    events = await events_after(thread_id, after_seq)
    if events or deadline - loop.time() <= 0:
        return events
    # It must wait: registered first (notified from now on), then it reads again.
    async with _watching(changes, "events", thread_id):
        while True:
            generation = changes.generation("events") if changes is not None else 0
            events = await events_after(thread_id, after_seq)
            remaining = deadline - loop.time()
            if events or remaining <= 0:
                return events
            await _pause(changes, "events", generation, min(poll, remaining))


def subscribe_events(
    events_after: EventsAfter,
    check_open: CheckOpen,
    thread_id: str,
    after_seq: int,
    watch: WatchPolicy,
    changes: AsyncChanges | None = None,
) -> AsyncIterator[Event]:
    """Every event after ``after_seq``, in order, forever.

    Arguments and the store being open are checked at once; after ``close()`` the iterator
    raises `ProcessingError` on its next step (rule 8).
    """
    check_subscribe(thread_id, after_seq, watch)
    check_open()
    poll = watch.poll_interval.total_seconds()
    return _subscription(events_after, check_open, thread_id, after_seq, poll, changes)


async def _subscription(
    events_after: EventsAfter,
    check_open: CheckOpen,
    thread_id: str,
    after_seq: int,
    poll: float,
    changes: AsyncChanges | None,
) -> AsyncIterator[Event]:
    seq = after_seq
    async with contextlib.AsyncExitStack() as registered:
        watching = False  # registered on the first wait: a reader that never waits costs nothing
        while True:
            generation = changes.generation("events") if watching and changes else 0
            events = await events_after(thread_id, seq)
            for event in events:
                check_open()
                seq = event.seq
                yield event
            if events:
                continue
            if changes is not None and not watching:
                await registered.enter_async_context(changes.watching("events", thread_id))
                watching = True  # registered: read again before waiting
            else:
                await _pause(changes, "events", generation, poll)


async def await_entry_closed(
    entry_of: EntryOf,
    entry_id: int,
    timeout: timedelta,
    tenant: str | None,
    poll_interval: timedelta = CLOSED_POLL_INTERVAL,
    changes: AsyncChanges | None = None,
) -> QueueEntry | None:
    """The entry once closed; None while open at the timeout or when not visible to ``tenant``."""
    check_await_closed(entry_id, timeout, tenant)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout.total_seconds()
    poll = poll_interval.total_seconds()
    entry = await entry_of(entry_id, tenant)
    if entry is None or entry.closed:
        return entry
    if deadline - loop.time() <= 0:
        return None
    # It must wait: registered first (notified from now on), then it reads again.
    async with _watching(changes, "closed", str(entry_id)):
        while True:
            generation = changes.generation("closed") if changes is not None else 0
            entry = await entry_of(entry_id, tenant)
            if entry is None or entry.closed:
                return entry
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            await _pause(changes, "closed", generation, min(poll, remaining))


class AsyncEventWaits:
    """`await_events_after` and `subscribe` of an async checkpointer, written once for the
    threaded wrappers and PostgreSQL's async store: both poll the store's own ``events_after``
    on the loop, cut short by `_notifications` where the store has them."""

    events_after: EventsAfter

    def _check_open(self) -> None:
        raise NotImplementedError  # each store knows whether it is closed

    def _notifications(self) -> AsyncChanges | None:
        return None  # none: the waits poll; PostgreSQL's async store returns its listener

    async def await_events_after(
        self,
        thread_id: str,
        after_seq: int,
        timeout: timedelta,
        watch: WatchPolicy = WatchPolicy(),
    ) -> list[Event]:
        """Poll at ``watch.poll_interval`` for events; ``[]`` at the wall-clock timeout (D21)."""
        return await await_events(
            self.events_after, thread_id, after_seq, timeout, watch, self._notifications()
        )

    def subscribe(
        self, thread_id: str, after_seq: int = 0, watch: WatchPolicy = WatchPolicy()
    ) -> AsyncIterator[Event]:
        """Every event after ``after_seq``, forever, polling when caught up (rule 8 on close)."""
        return subscribe_events(
            self.events_after, self._check_open, thread_id, after_seq, watch, self._notifications()
        )


__all__ = [
    "AsyncChanges",
    "AsyncEventWaits",
    "Changes",
    "await_entry_closed",
    "await_events",
    "follow",
    "poll",
    "subscribe_events",
]
