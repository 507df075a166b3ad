"""Async stores over a sync store, one worker thread per call (the in-memory and SQLite stores).

The one-call methods are written out in `durable_graph.embedded.threaded_generated` (generated
from the Protocols): each runs the sync store's method of the same name with the caller's
arguments in a worker thread (`durable_graph.embedded.offload.in_thread`), so lock waits (bounded,
D23: a lock wait gives up after 5 s) never block the event loop; the sync store checks the
arguments. Written here by hand: polling (`await_events_after`, `subscribe`, `await_closed`) runs
on the loop with `asyncio.sleep`; the lifecycle.

Cancellation: see `durable_graph.embedded.offload` (a call that has started settles first).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Self, cast

from durable_graph.core.async_protocols import AsyncClosedOnExit
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ProcessingError
from durable_graph.core.model import Event, QueueEntry, WatchPolicy
from durable_graph.core.polling import await_entry_closed, await_events, subscribe_events
from durable_graph.core.run_queue import RunQueue, TraceContexts
from durable_graph.embedded.offload import in_thread
from durable_graph.embedded.threaded_generated import (
    ThreadedCheckpointerCalls,
    ThreadedRunQueueCalls,
)


class ThreadedRunQueue(ThreadedRunQueueCalls):
    """An `AsyncRunQueue` over a sync `RunQueue` (one that keeps trace contexts, as every
    store's does)."""

    def __init__(self, sync: RunQueue) -> None:
        self._sync = sync
        self._traces = cast(TraceContexts, sync)

    async def await_closed(
        self, entry_id: int, timeout: timedelta, tenant: str | None = None
    ) -> QueueEntry | None:
        return await await_entry_closed(self.entry, entry_id, timeout, tenant, self._poll)

    _poll = timedelta(milliseconds=20)
    """Local stores are cheap to read: `await_closed` polls them often."""


class ThreadedCheckpointer(ThreadedCheckpointerCalls, AsyncClosedOnExit):
    """An `AsyncCheckpointer` over a sync `Checkpointer` (which it owns and closes)."""

    def __init__(self, sync: Checkpointer) -> None:
        self._sync = sync
        self._run_queue = ThreadedRunQueue(sync.run_queue)
        self._closed = False

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


__all__ = ["ThreadedCheckpointer", "ThreadedRunQueue", "in_thread"]
