"""Async stores over a sync store, one worker thread per call (the in-memory and SQLite stores).

The methods are `durable_graph.core.surface`'s async method sets (each derived from the sync
Protocol's method: no signature is written again here); each runs the sync store's method of
the same name with `asyncio.to_thread`, so lock waits (bounded, D23: a lock wait gives
up after 5 s) never block the event loop. It passes only the arguments its caller gave, and the
sync store checks them and supplies the defaults, as it always does. Written by hand: polling
(`await_events_after`, `subscribe`, `await_closed`) runs on the loop with `asyncio.sleep`; the
lifecycle.

Cancellation: a sync call cannot be interrupted once its thread runs it. A task cancelled while
its call runs waits for the call to settle (each sync call is atomic and its waits are bounded),
then raises `CancelledError`: when the task has ended, nothing of its call is still in flight.
A cancellation requested before a call starts is raised before the call is handed to a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any, Self, TypeVar

from durable_graph.core.async_polling import await_entry_closed, await_events, subscribe_events
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ProcessingError
from durable_graph.core.model import Event, QueueEntry, WatchPolicy
from durable_graph.core.run_queue import RunQueue
from durable_graph.core.surface import AsyncCheckpointerCalls, AsyncRunQueueCalls

T = TypeVar("T")


async def in_thread(fn: Callable[..., T], /, *args: object) -> T:
    """``fn(*args)`` in a worker thread; on cancellation, let it settle, then re-raise."""
    await asyncio.sleep(0)  # a cancellation requested before the call is raised here
    future = asyncio.ensure_future(asyncio.to_thread(fn, *args))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        if not future.done():
            # Another cancellation may cut this wait short: the call still settles on its own.
            with contextlib.suppress(BaseException):
                await asyncio.wait({future})
        if future.done() and not future.cancelled():
            future.exception()  # retrieved: the caller gets CancelledError, as asked
        raise


def _in_thread(
    sync: object, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Awaitable[Any]:
    """The sync store's method ``name`` called with the caller's arguments, in a thread."""
    return in_thread(functools.partial(getattr(sync, name), *args, **kwargs))


class ThreadedRunQueue(AsyncRunQueueCalls):
    """An `AsyncRunQueue` over a sync `RunQueue`."""

    def __init__(self, sync: RunQueue) -> None:
        self._sync = sync

    def _forward(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Awaitable[Any]:
        return _in_thread(self._sync, name, args, kwargs)

    async def await_closed(
        self, entry_id: int, timeout: timedelta, tenant: str | None = None
    ) -> QueueEntry | None:
        return await await_entry_closed(self.entry, entry_id, timeout, tenant, self._poll)

    _poll = timedelta(milliseconds=20)
    """Local stores are cheap to read: `await_closed` polls them often."""


class ThreadedCheckpointer(AsyncCheckpointerCalls):
    """An `AsyncCheckpointer` over a sync `Checkpointer` (which it owns and closes)."""

    def __init__(self, sync: Checkpointer) -> None:
        self._sync = sync
        self._run_queue = ThreadedRunQueue(sync.run_queue)
        self._closed = False

    def _forward(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Awaitable[Any]:
        return _in_thread(self._sync, name, args, kwargs)

    def _check_open(self) -> None:
        if self._closed:
            raise ProcessingError("the store is closed")

    @property
    def run_queue(self) -> ThreadedRunQueue:
        return self._run_queue

    async def await_events_after(
        self,
        thread_id: str,
        after_seq: int,
        timeout: timedelta,
        watch: WatchPolicy = WatchPolicy(),
    ) -> list[Event]:
        return await await_events(self.events_after, thread_id, after_seq, timeout, watch)

    def subscribe(
        self, thread_id: str, after_seq: int = 0, watch: WatchPolicy = WatchPolicy()
    ) -> AsyncIterator[Event]:
        return subscribe_events(self.events_after, self._check_open, thread_id, after_seq, watch)

    # --- lifecycle ------------------------------------------------------------------------

    async def close(self) -> None:
        await in_thread(self._sync.close)
        self._closed = True

    async def __aenter__(self) -> Self:
        self._check_open()
        return self
