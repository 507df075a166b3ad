"""What the in-memory store holds: `State`, the dicts that follow the tables of
``migrations/0001.tables.sql``, with a `ThreadData` per live thread and a `QueueThread` (a
``queue_threads`` row) per thread with queue entries. Only a `durable_graph.memory.store.MemoryTx`
of the lock's holder reads or changes them.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from durable_graph.core.items import StoredItem
from durable_graph.core.model import Attempt
from durable_graph.core.workers import WorkerSeen
from durable_graph.embedded.rows import (
    CheckpointRow,
    ClaimRow,
    EffectRow,
    EntryRow,
    Place,
    ScheduleRow,
    ThreadRow,
    TtlRow,
)

Head = tuple[int, str]
"""``(head_entry_id, thread_id)``: how the sorted head lists order threads."""
LeaseHead = tuple[int, int, str]
"""``(-priority, head_entry_id, thread_id)``: lease order (SPEC §15), highest priority first."""


@dataclass(slots=True)
class EventRow:
    seq: int
    kind: str
    payload: str
    run_id: str | None
    created_at: datetime
    committed_at: datetime


@dataclass(slots=True)
class ThreadData:
    """A live thread's row and everything stored under it."""

    row: ThreadRow
    checkpoints: dict[str, CheckpointRow] = field(default_factory=dict)
    """In commit order, i.e. by ``seq`` (insertion order of the dict)."""
    writes: dict[str, dict[tuple[str, str, int], tuple[str, str]]] = field(default_factory=dict)
    """``checkpoint_id -> (task_id, channel, idx) -> (value, task_path)`` (``pending_writes``)."""
    events: list[EventRow] = field(default_factory=list)
    effects: dict[str, EffectRow] = field(default_factory=dict)


@dataclass(slots=True)
class QueueThread:
    """A ``queue_threads`` row: the thread's open entries by queue rank, head and leased entry."""

    ranks: tuple[dict[int, EntryRow], dict[int, EntryRow], dict[int, EntryRow]] = field(
        default_factory=lambda: ({}, {}, {})
    )
    """Rank 0 (attempted), 1 (INTERRUPT), 2 (the rest); ranks 1 and 2 in entry-id order."""
    head: EntryRow | None = None
    leased: EntryRow | None = None
    """The one entry of the thread holding a lease (live or expired), if any."""
    runs: dict[str, set[int]] = field(default_factory=dict)
    """``run_id -> ids of kept entries`` with an attempt of that run (``queue_attempts``)."""

    def in_order(self) -> list[EntryRow]:
        return [e for rank in self.ranks for _, e in sorted(rank.items())]


class State:
    """Everything the store holds. Only a `MemoryTx` of the lock's holder touches it."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.lock = threading.RLock()
        self.closed = False
        self.changed = threading.Event()
        self.threads: dict[str, ThreadData] = {}
        self.claims: dict[str, ClaimRow] = {}
        self.tombstones: dict[str, int] = {}
        """``thread_id -> last_seq`` of a deleted thread: a new thread of the id continues it."""
        self.deleted_at: dict[str, datetime] = {}
        """``thread_id -> when a live thread of the id was last deleted`` (D241)."""
        self.tokens = itertools.count(1)  # one counter for claims and leases (D3)
        self.first_commits = itertools.count(1)
        self.entry_ids = itertools.count(1)
        self.entries: dict[int, EntryRow] = {}
        self.attempts: dict[int, list[Attempt]] = {}
        self.trace_contexts: dict[int, tuple[str, str | None]] = {}
        self.keys: dict[tuple[str | None, str], int] = {}
        self.queues: dict[str, QueueThread] = {}
        self.heads: list[Head] = []
        self.heads_of_tenant: dict[str | None, list[Head]] = {}
        self.listing: list[Place] = []
        """Every open entry's `EntryRow.list_place`, sorted: `open_page` bisects it."""
        self.listing_of_tenant: dict[str | None, list[Place]] = {}
        self.journal: list[Callable[[], None]] | None = None
        """While `composed(undo=True)` runs: how to take back each queue write, newest last."""
        self.lease_heads: list[LeaseHead] = []
        self.lease_heads_of_tenant: dict[str | None, list[LeaseHead]] = {}
        self.limits: dict[tuple[str, str], int] = {}
        """``(scope, name) -> max_leases`` (SPEC §15)."""
        self.schedules: dict[str, ScheduleRow] = {}
        self.workers: dict[str, WorkerSeen] = {}
        self.items: dict[tuple[str | None, tuple[str, ...], str], StoredItem] = {}
        self.item_vectors: dict[
            tuple[str | None, tuple[str, ...], str],
            tuple[datetime, dict[str, tuple[float, ...]]],
        ] = {}
        """``(tenant, namespace, key) -> (updated_at, field -> vector)`` (D296)."""
        self.thread_ttls: dict[str, TtlRow] = {}
        """``(tenant, namespace, key) -> item`` (SPEC §20.3)."""
        """``holder -> row`` of the worker registry (durable_graph.core.workers)."""


__all__ = ["EventRow", "Head", "LeaseHead", "QueueThread", "State", "ThreadData"]
