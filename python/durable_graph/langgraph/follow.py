"""Follow one graph run's stream from any machine (SPEC §14.5): `follow` and `afollow`.

A run is a queue entry; its stream is the ``lg.*`` events its attempts wrote into the thread's
log (`streaming`). A follower reads the log after a sequence number (0, or the last one it saw
before a disconnect: it resumes there and misses nothing), keeps the events of the entry's
attempts, and stops once the entry is closed and the log has been read up to the entry's
``closed_at_seq``: that is the end of the run. It waits with `await_events_after` (woken by
NOTIFY on PostgreSQL, at once in-process on the embedded stores, polling across SQLite
processes), and re-reads the entry at most every `ENTRY_CHECK` while nothing arrives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Final

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import NotFound
from durable_graph.core.model import Event, QueueEntry, WatchPolicy
from durable_graph.langgraph.streaming import EVENT_PREFIX

ENTRY_CHECK: Final = timedelta(milliseconds=500)
"""How long a follower waits for new events before it looks at the entry again."""

PAGE: Final = 1000


def _known(entry: QueueEntry | None, entry_id: int) -> QueueEntry:
    if entry is None:
        raise NotFound(f"entry {entry_id} is unknown")
    return entry


def _runs(entry: QueueEntry) -> set[str]:
    return {a.run_id for a in entry.attempts}


def _ours(event: Event) -> bool:
    return event.kind.startswith(EVENT_PREFIX)


def run_ended(entry: QueueEntry, seen: int) -> bool:
    """The run is over for a reader of its thread's log up to ``seen``: its entry is closed and
    the log has been read to the event it closed at."""
    return entry.closed and (entry.closed_at_seq is None or seen >= entry.closed_at_seq)


def follow(
    store: Checkpointer,
    entry_id: int,
    after_seq: int = 0,
    *,
    tenant: str | None = None,
    watch: WatchPolicy = WatchPolicy(),
) -> Iterator[Event]:
    """The run's stream events after ``after_seq``, as they land, until the run has ended.

    `NotFound` when the entry is unknown (or another tenant's).
    """
    entry = _known(store.run_queue.entry(entry_id, tenant=tenant), entry_id)
    runs = _runs(entry)
    seen = after_seq
    while True:
        events = store.events_after(entry.thread_id, seen, PAGE)
        for event in events:
            if _ours(event) and event.run_id not in runs:  # a new attempt's?
                entry = store.run_queue.entry(entry_id, tenant=tenant) or entry
                runs = _runs(entry)
            seen = event.seq
            if _ours(event) and event.run_id in runs:
                yield event
        if events:
            continue
        entry = store.run_queue.entry(entry_id, tenant=tenant) or entry
        runs = _runs(entry)
        if run_ended(entry, seen):
            return
        store.await_events_after(entry.thread_id, seen, ENTRY_CHECK, watch)


async def afollow(
    store: AsyncCheckpointer,
    entry_id: int,
    after_seq: int = 0,
    *,
    tenant: str | None = None,
    watch: WatchPolicy = WatchPolicy(),
) -> AsyncIterator[Event]:
    """`follow` on an async store: the same code, awaited."""
    entry = _known(await store.run_queue.entry(entry_id, tenant=tenant), entry_id)
    runs = _runs(entry)
    seen = after_seq
    while True:
        events = await store.events_after(entry.thread_id, seen, PAGE)
        for event in events:
            if _ours(event) and event.run_id not in runs:  # a new attempt's?
                entry = await store.run_queue.entry(entry_id, tenant=tenant) or entry
                runs = _runs(entry)
            seen = event.seq
            if _ours(event) and event.run_id in runs:
                yield event
        if events:
            continue
        entry = await store.run_queue.entry(entry_id, tenant=tenant) or entry
        runs = _runs(entry)
        if run_ended(entry, seen):
            return
        await store.await_events_after(entry.thread_id, seen, ENTRY_CHECK, watch)
