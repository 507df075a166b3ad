"""Async polling shared by every async store: `await_events_after`, `subscribe`, `await_closed`.

They poll with `asyncio.sleep` (never blocking the loop) and time out on the loop's monotonic
clock (D21), whatever the store's clock says.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import timedelta

from durable_graph.core.errors import ValidationError
from durable_graph.core.model import Event, QueueEntry, WatchPolicy
from durable_graph.core.polling import AsyncChanges
from durable_graph.core.validation import (
    check_duration,
    check_identifier,
    check_int,
    check_optional_identifier,
)

EventsAfter = Callable[[str, int], Awaitable[list[Event]]]
EntryOf = Callable[[int, str | None], Awaitable[QueueEntry | None]]
CheckOpen = Callable[[], None]

CLOSED_POLL_INTERVAL = WatchPolicy().poll_interval
"""How often `await_closed` reads the entry (it takes no `WatchPolicy`)."""


def check_watch(value: object) -> WatchPolicy:
    if not isinstance(value, WatchPolicy):
        raise ValidationError(f"watch must be a WatchPolicy, got {type(value).__name__}")
    return value


def check_await_events_args(
    thread_id: object, after_seq: object, timeout: object, watch: object
) -> None:
    check_identifier("thread_id", thread_id)
    check_int("after_seq", after_seq, minimum=0)
    check_duration("timeout", timeout, allow_zero=True)
    check_watch(watch)


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
    check_await_events_args(thread_id, after_seq, timeout, watch)
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
    check_identifier("thread_id", thread_id)
    check_int("after_seq", after_seq, minimum=0)
    check_watch(watch)
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
    check_int("entry_id", entry_id, minimum=0)
    check_duration("timeout", timeout, allow_zero=True)
    check_optional_identifier("tenant", tenant)
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
