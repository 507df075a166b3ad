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

from collections.abc import AsyncIterator, Generator, Iterator
from datetime import timedelta
from typing import Any, Final

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import NotFound
from durable_graph.core.model import Event, QueueEntry, WatchPolicy
from durable_graph.core.ops import StoreOp, hand_out, hand_out_async, store_op
from durable_graph.langgraph.streaming import EVENT_PREFIX

ENTRY_CHECK: Final = timedelta(milliseconds=500)
"""How long a follower waits for new events before it looks at the entry again."""

PAGE: Final = 1000


def _ended(entry: QueueEntry, seen: int) -> bool:
    return entry.closed and (entry.closed_at_seq is None or seen >= entry.closed_at_seq)


def _keep(event: Event, runs: set[str]) -> bool:
    return event.kind.startswith(EVENT_PREFIX) and event.run_id in runs


def _following(
    entry_id: int, after_seq: int, tenant: str | None, watch: WatchPolicy
) -> Generator[StoreOp | Event, Any, None]:
    """The follower written once for both stores (`durable_graph.core.ops`): it yields the store
    calls it needs, and the events to hand out."""
    read_entry = store_op("run_queue.entry", entry_id, tenant=tenant)
    entry: QueueEntry | None = yield read_entry
    if entry is None:
        raise NotFound(f"entry {entry_id} is unknown")
    runs = {a.run_id for a in entry.attempts}
    seen = after_seq
    while True:
        events: list[Event] = yield store_op("events_after", entry.thread_id, seen, PAGE)
        for event in events:
            if event.kind.startswith(EVENT_PREFIX) and event.run_id not in runs:
                entry = (yield read_entry) or entry  # a new attempt's?
                runs = {a.run_id for a in entry.attempts}
            seen = event.seq
            if _keep(event, runs):
                yield event
        if events:
            continue
        entry = (yield read_entry) or entry
        runs = {a.run_id for a in entry.attempts}
        if _ended(entry, seen):
            return
        yield store_op("await_events_after", entry.thread_id, seen, ENTRY_CHECK, watch)


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
    flow = _following(entry_id, after_seq, tenant, watch)
    return hand_out(flow, lambda op: op.on(store), Event)


def afollow(
    store: AsyncCheckpointer,
    entry_id: int,
    after_seq: int = 0,
    *,
    tenant: str | None = None,
    watch: WatchPolicy = WatchPolicy(),
) -> AsyncIterator[Event]:
    """`follow` on an async store."""
    flow = _following(entry_id, after_seq, tenant, watch)
    return hand_out_async(flow, lambda op: op.on(store), Event)
