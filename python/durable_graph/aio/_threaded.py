"""Async stores over a sync store, one worker thread per call (the in-memory and SQLite stores).

Every method is derived from the sync Protocol's (`durable_graph.surface.forward_async`: the
signature is `RunQueue`'s or `Checkpointer`'s, not written again here) and runs the sync store's
method of the same name with `asyncio.to_thread`, so lock waits (bounded, D23: a lock wait gives
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
from types import TracebackType
from typing import Any, Self, TypeVar

from ..checkpointer import Checkpointer
from ..errors import ProcessingError
from ..model import Event, QueueEntry, WatchPolicy
from ..run_queue import RunQueue
from ..surface import TraceContexts, forward_async
from ._watch import await_entry_closed, await_events, subscribe_events

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


class _OverSync:
    """Forwards a derived method to the sync store's method of the same name, in a thread."""

    _sync: Any

    def _forward(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Awaitable[Any]:
        return in_thread(functools.partial(getattr(self._sync, name), *args, **kwargs))


class ThreadedRunQueue(_OverSync):
    """An `AsyncRunQueue` over a sync `RunQueue`."""

    def __init__(self, sync: RunQueue) -> None:
        self._sync = sync

    submit = forward_async(RunQueue.submit)
    submit_many = forward_async(RunQueue.submit_many)
    lease = forward_async(RunQueue.lease)
    renew = forward_async(RunQueue.renew)
    release = forward_async(RunQueue.release)
    record_attempt = forward_async(RunQueue.record_attempt)
    close = forward_async(RunQueue.close)
    cancel = forward_async(RunQueue.cancel)
    defer = forward_async(RunQueue.defer)
    retry = forward_async(RunQueue.retry)
    entry = forward_async(RunQueue.entry)
    set_trace_context = forward_async(TraceContexts.set_trace_context)
    trace_context = forward_async(TraceContexts.trace_context)
    open_entries = forward_async(RunQueue.open_entries)
    entries = forward_async(RunQueue.entries)
    stats = forward_async(RunQueue.stats)
    reclaim = forward_async(RunQueue.reclaim)

    async def await_closed(
        self, entry_id: int, timeout: timedelta, tenant: str | None = None
    ) -> QueueEntry | None:
        return await await_entry_closed(self.entry, entry_id, timeout, tenant, self._poll)

    _poll = timedelta(milliseconds=20)
    """Local stores are cheap to read: `await_closed` polls them often."""


class ThreadedCheckpointer(_OverSync):
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

    claim = forward_async(Checkpointer.claim)
    renew_claim = forward_async(Checkpointer.renew_claim)
    release_claim = forward_async(Checkpointer.release_claim)
    begin_attempt = forward_async(Checkpointer.begin_attempt)
    renew_attempt = forward_async(Checkpointer.renew_attempt)
    finish_attempt = forward_async(Checkpointer.finish_attempt)
    commit = forward_async(Checkpointer.commit)
    put_writes = forward_async(Checkpointer.put_writes)
    append_events = forward_async(Checkpointer.append_events)
    record_effect = forward_async(Checkpointer.record_effect)
    retract_turn = forward_async(Checkpointer.retract_turn)
    prune = forward_async(Checkpointer.prune)
    prune_all = forward_async(Checkpointer.prune_all)
    delete_thread = forward_async(Checkpointer.delete_thread)
    put_writes_fenced = forward_async(Checkpointer.put_writes_fenced)
    put_writes_and_commit = forward_async(Checkpointer.put_writes_and_commit)
    delete_runs = forward_async(Checkpointer.delete_runs)
    copy_thread = forward_async(Checkpointer.copy_thread)
    get = forward_async(Checkpointer.get)
    history = forward_async(Checkpointer.history)
    latest_of_runs = forward_async(Checkpointer.latest_of_runs)
    search = forward_async(Checkpointer.search)
    thread = forward_async(Checkpointer.thread)
    threads = forward_async(Checkpointer.threads)
    children = forward_async(Checkpointer.children)
    events_after = forward_async(Checkpointer.events_after)
    get_effect = forward_async(Checkpointer.get_effect)
    effects = forward_async(Checkpointer.effects)

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

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
