"""Async stores over a sync store, one worker thread per call (the in-memory and SQLite stores).

The one-call methods are written out in `durable_graph.embedded.threaded_generated` (generated
from the Protocols): each runs the sync store's method of the same name with the caller's
arguments in a worker thread (`durable_graph.embedded.offload.in_thread`), so lock waits (bounded,
D23: a lock wait gives up after 5 s) never block the event loop; the sync store checks the
arguments. Written by hand: polling (`await_closed` here; `await_events_after` and `subscribe` in
`durable_graph.core.polling.AsyncEventWaits`) runs on the loop with `asyncio.sleep`, the event
waits cut short by the store's writes in this process (`LocalChanges`); the lifecycle.

Cancellation: see `durable_graph.embedded.offload` (a call that has started settles first).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Self, cast

from durable_graph.core.async_protocols import AsyncClosedOnExit
from durable_graph.core.errors import ProcessingError
from durable_graph.core.model import QueueEntry
from durable_graph.core.polling import AsyncEventWaits, await_entry_closed
from durable_graph.core.run_queue import RunQueue, TraceContexts
from durable_graph.embedded.checkpointer import EmbeddedCheckpointer
from durable_graph.embedded.local_changes import LocalChanges
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


class ThreadedCheckpointer(ThreadedCheckpointerCalls, AsyncEventWaits, AsyncClosedOnExit):
    """An `AsyncCheckpointer` over a sync embedded store (which it owns and closes); its event
    waits poll on the loop (`AsyncEventWaits`) and wake at once on the store's writes in this
    process (SPEC §11), as the sync store's do."""

    def __init__(self, sync: EmbeddedCheckpointer) -> None:
        self._sync = sync
        self._run_queue = ThreadedRunQueue(sync.run_queue)
        self._changes = LocalChanges(sync.change_signal)
        self._closed = False

    def _notifications(self) -> LocalChanges:
        return self._changes

    def _check_open(self) -> None:
        if self._closed:
            raise ProcessingError("the store is closed")

    @property
    def run_queue(self) -> ThreadedRunQueue:
        return self._run_queue

    # --- lifecycle ------------------------------------------------------------------------

    async def close(self) -> None:
        await in_thread(self._sync.close)
        self._closed = True
        self._changes.close()

    async def __aenter__(self) -> Self:
        self._check_open()
        return self


__all__ = ["ThreadedCheckpointer", "ThreadedRunQueue", "in_thread"]
