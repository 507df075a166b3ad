"""Waiting for runs without a thread, or a store call, per waiter (SPEC §20.1).

A join waits for its run to close; a stream of a queued run waits for it to start. However many
clients wait, one task per API process (`EntryWatch`) reads the entries they wait for, one store
call at a time, every `WATCH_EVERY`, and wakes each waiter whose condition holds. So a thousand
idle joins or streams cost one read per waited-for run per round and never more than one store
call in flight: another client's request never queues behind them (the async SQLite store runs
each call in a small pool of worker threads, PostgreSQL's in a pool of connections). A run's own
stream, once it has started, follows its events with `afollow` (the store's waits, woken by
NOTIFY on PostgreSQL).

A waiter that is cancelled (its client went away) is forgotten at once; the task ends when no
one waits and starts again with the next waiter.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Final

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.errors import NotFound
from durable_graph.core.model import QueueEntry

WATCH_EVERY: Final = 0.1
"""Seconds between two rounds of reads (a round itself takes one read per waited-for run)."""

Condition = Callable[[QueueEntry], bool]


class EntryWatch:
    """The waits of one API process on queue entries (see the module)."""

    def __init__(self, store: AsyncCheckpointer, every: float = WATCH_EVERY) -> None:
        self._store = store
        self._every = every
        self._waiters: dict[int, list[tuple[Condition, asyncio.Future[QueueEntry]]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._tenants: dict[int, str | None] = {}  # an entry's tenant, to read it by

    async def until(self, entry: QueueEntry, condition: Condition) -> QueueEntry:
        """``entry`` as read once ``condition`` holds for it (at once if it already does);
        `NotFound` if the entry disappears meanwhile."""
        if condition(entry):
            return entry
        future: asyncio.Future[QueueEntry] = asyncio.get_running_loop().create_future()
        waiter = (condition, future)
        self._waiters.setdefault(entry.entry_id, []).append(waiter)
        self._tenants[entry.entry_id] = entry.tenant
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._watch(), name="durable_graph.service.watch")
        try:
            return await future
        finally:
            waiting = self._waiters.get(entry.entry_id, [])
            with contextlib.suppress(ValueError):
                waiting.remove(waiter)
            if not waiting:
                self._waiters.pop(entry.entry_id, None)
                self._tenants.pop(entry.entry_id, None)

    async def _watch(self) -> None:
        while self._waiters:
            for entry_id in list(self._waiters):
                waiting = [w for w in self._waiters.get(entry_id, []) if not w[1].done()]
                if not waiting:
                    continue
                try:
                    tenant = self._tenants.get(entry_id)
                    entry = await self._store.run_queue.entry(entry_id, tenant=tenant)
                    if entry is None:
                        raise NotFound(f"entry {entry_id} is unknown")
                except Exception as exc:  # the waiters' to handle, as if they had read it
                    for _, future in waiting:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for condition, future in waiting:
                    if not future.done() and condition(entry):
                        future.set_result(entry)
            await asyncio.sleep(self._every)


def closed(entry: QueueEntry) -> bool:
    return entry.closed


def started(entry: QueueEntry) -> bool:
    """An attempt has begun (its events may come), or the run is over."""
    return entry.closed or bool(entry.attempts)


__all__ = ["WATCH_EVERY", "EntryWatch", "closed", "started"]
