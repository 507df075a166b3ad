"""What every RunQueue concern module shares: constants, helpers and the fixtures."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

import pytest

from ...checkpointer import Checkpointer
from ...model import (
    ANY,
    JSON,
    Checkpoint,
    Commit,
    Completed,
    Lease,
    Mode,
    QueueEntry,
    Started,
    Submission,
    TenantFilter,
)
from ...run_queue import RunQueue
from ..harness import ClockControl, Harness

TTL = timedelta(seconds=30)
"""The lease ttl the tests use."""
PAST_TTL = timedelta(seconds=31)
"""Advancing the store clock this far makes a lease of `TTL` (and a default claim) expire."""
SLACK = timedelta(seconds=5)
"""How far real time may move a PostgreSQL store clock during one test."""
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)

# --- helpers -------------------------------------------------------------------------------


def _submit(
    queue: RunQueue,
    thread_id: str = "thread-1",
    input: JSON = "go",
    *,
    tenant: str | None = None,
    key: str | None = None,
    mode: Mode = Mode.ENQUEUE,
    max_attempts: int = 3,
) -> int:
    ticket = queue.submit(Submission(thread_id, input, tenant, key, mode, max_attempts))
    assert ticket.existing is False
    return ticket.entry_id


def _lease(
    queue: RunQueue,
    holder: str = "worker-1",
    ttl: timedelta = TTL,
    tenant: TenantFilter = ANY,
    run_id: str | None = None,
) -> Lease:
    lease = queue.lease(holder, ttl, tenant=tenant, run_id=run_id)
    assert lease is not None, "expected an entry to lease"
    return lease


def _entry(queue: RunQueue, entry_id: int, tenant: str | None = None) -> QueueEntry:
    entry = queue.entry(entry_id, tenant=tenant)
    assert entry is not None, f"entry {entry_id} should be visible"
    return entry


def _attempted(
    queue: RunQueue,
    run_id: str,
    thread_id: str = "thread-1",
    *,
    tenant: str | None = None,
    max_attempts: int = 3,
) -> tuple[int, Lease]:
    """Submit an entry, lease it and record ``run_id`` as its attempt."""
    entry_id = _submit(queue, thread_id, tenant=tenant, max_attempts=max_attempts)
    lease = _lease(queue)
    assert lease.entry.entry_id == entry_id
    assert queue.record_attempt(lease, run_id) == Started(1)
    return entry_id, lease


def _commit(
    store: Checkpointer,
    thread_id: str,
    run_id: str,
    checkpoint_id: str,
    *,
    parent_id: str | None = None,
    next_nodes: tuple[str, ...] = (),
    parent_thread_id: str | None = None,
) -> Checkpoint:
    """Commit one checkpoint under a fresh claim held by ``run_id``, then release the claim."""
    claim = store.claim(thread_id, run_id)
    try:
        return store.commit(
            claim,
            Commit(
                checkpoint_id=checkpoint_id,
                parent_id=parent_id,
                run_id=run_id,
                state={"step": checkpoint_id},
                next=next_nodes,
                parent_thread_id=parent_thread_id,
            ),
        )
    finally:
        store.release_claim(claim)


def _near(actual: datetime | None, lower: datetime) -> None:
    """``actual`` is the store time ``lower``, or (real time moving on) a few seconds after it."""
    assert actual is not None
    assert lower <= actual <= lower + SLACK, f"{actual} is not within {SLACK} after {lower}"


def _names_no(message: str, *things: object) -> None:
    for thing in things:
        assert not re.search(rf"(?<![\w]){re.escape(str(thing))}(?![\w])", message), (
            f"{message!r} names {thing!r}"
        )


def _open(queue: RunQueue) -> list[QueueEntry]:
    """Everything open, every tenant: what a refused call must leave unchanged."""
    return queue.open_entries(tenant=ANY)


_LEASE_CALLS: dict[str, Callable[[RunQueue, Lease], object]] = {
    "renew": lambda queue, lease: queue.renew(lease),
    "release": lambda queue, lease: queue.release(lease),
    "record_attempt": lambda queue, lease: queue.record_attempt(lease, "run-late"),
    "close": lambda queue, lease: queue.close(lease, Completed()),
}
"""Every call made under a lease (SPEC §8 rule 21)."""


class RunQueueFixtures:
    """The fixtures every concern module uses; a backend overrides ``harness``."""

    @pytest.fixture
    def harness(self) -> Iterator[Harness]:
        raise NotImplementedError("a backend's test class overrides the harness fixture")

    @pytest.fixture
    def store(self, harness: Harness) -> Checkpointer:
        return harness.store

    @pytest.fixture
    def queue(self, store: Checkpointer) -> RunQueue:
        return store.run_queue

    @pytest.fixture
    def clock(self, harness: Harness) -> ClockControl:
        return harness.clock
