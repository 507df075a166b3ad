"""What every RunQueue concern module shares: constants, helpers and the fixtures."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import NamedTuple

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ValidationError
from durable_graph.core.model import (
    ANY,
    JSON,
    AttemptPlan,
    Checkpoint,
    Claim,
    Commit,
    Completed,
    EntryOutcome,
    Lease,
    Mode,
    QueueEntry,
    Started,
    Submission,
    TenantFilter,
)
from durable_graph.core.run_queue import RunQueue, plan_attempt
from durable_graph.testkit.contract.checkpointer.support import _commit as commit_under
from durable_graph.testkit.fixtures import StoreFixtures
from durable_graph.testkit.harness import ClockControl

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


def _leased(
    queue: RunQueue,
    thread_id: str = "thread-1",
    *,
    tenant: str | None = None,
    max_attempts: int = 3,
    ttl: timedelta = TTL,
) -> Lease:
    """Submit one entry and lease it as worker-1: the lease names the entry."""
    entry_id = _submit(queue, thread_id, tenant=tenant, max_attempts=max_attempts)
    lease = _lease(queue, ttl=ttl)
    assert lease.entry.entry_id == entry_id
    return lease


def _expired(queue: RunQueue, clock: ClockControl) -> Lease:
    """A leased entry whose lease expired with no one leasing it since: the lease is current."""
    lease = _leased(queue)
    clock.advance(PAST_TTL)
    return lease


def _taken_over(queue: RunQueue, clock: ClockControl) -> tuple[Lease, Lease]:
    """A leased entry whose lease expired and worker-2 leased it: (the stale lease, worker-2's)."""
    stale = _expired(queue, clock)
    return stale, _lease(queue, "worker-2")


def _closed(queue: RunQueue, outcome: EntryOutcome | None = None) -> Lease:
    """A leased entry its worker closed with ``outcome`` (`Completed()` if none): its lease."""
    lease = _leased(queue)
    queue.close(lease, Completed() if outcome is None else outcome)
    return lease


def _reclaim_closed(queue: RunQueue, clock: ClockControl) -> None:
    """A day on, reclaim removes the one closed entry (rule 25): its id is unknown from now."""
    clock.advance(DAY)
    assert queue.reclaim(HOUR) == 1


def _reclaimed(queue: RunQueue, clock: ClockControl, tenant: str | None = None) -> int:
    """An entry cancelled, then reclaimed a day later: its id, unknown from now."""
    entry_id = _submit(queue, tenant=tenant)
    queue.cancel(entry_id, tenant=tenant)
    _reclaim_closed(queue, clock)
    return entry_id


def _attempted(
    queue: RunQueue,
    run_id: str,
    thread_id: str = "thread-1",
    *,
    tenant: str | None = None,
    max_attempts: int = 3,
) -> tuple[int, Lease]:
    """Submit an entry, lease it and record ``run_id`` as its attempt."""
    lease = _leased(queue, thread_id, tenant=tenant, max_attempts=max_attempts)
    assert queue.record_attempt(lease, run_id) == Started(1)
    return lease.entry.entry_id, lease


def _delete_marked(queue: RunQueue, store: Checkpointer) -> Lease:
    """An entry on thread-1 whose attempt is run-1, then thread-1 deleted, so the entry is
    delete-marked (rule 17): its lease."""
    _, lease = _attempted(queue, "run-1", "thread-1")
    store.delete_thread("thread-1")
    return lease


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
        return commit_under(
            store,
            claim,
            checkpoint_id,
            parent_id,
            run_id,
            next=next_nodes,
            parent_thread_id=parent_thread_id,
        )
    finally:
        store.release_claim(claim)


def _retracted_turn(store: Checkpointer, thread_id: str, run_id: str) -> Claim:
    """``run_id`` commits checkpoint cp-1 on a new thread and retracts the turn: the thread has no
    checkpoint again; the claim is returned still held."""
    claim = store.claim(thread_id, run_id)
    store.commit(claim, Commit("cp-1", None, run_id, {"s": 1}))
    assert store.retract_turn(claim) is None
    return claim


class Planned(NamedTuple):
    """What a worker reads to plan an attempt (SPEC §2), and the plan."""

    entry: QueueEntry
    latest: Checkpoint | None
    plan: AttemptPlan


def _planned(queue: RunQueue, store: Checkpointer, entry_id: int) -> Planned:
    """What a worker plans for ``entry_id`` now: the entry as read, the latest checkpoint of its
    recorded runs, and the plan."""
    entry = _entry(queue, entry_id)
    latest = store.latest_of_runs(entry.thread_id, [a.run_id for a in entry.attempts])
    return Planned(entry, latest, plan_attempt(entry, latest))


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


def _refused(
    queue: RunQueue,
    call: Callable[[], object],
    error: type[Exception] = ValidationError,
    match: str | None = None,
) -> None:
    """``call()`` raises ``error`` (its text matching ``match``, e.g. the bad argument's name)
    and writes nothing: `_open` is as before."""
    before = _open(queue)
    with pytest.raises(error, match=match):
        call()
    assert _open(queue) == before


_LEASE_CALLS: dict[str, Callable[[RunQueue, Lease], object]] = {
    "renew": lambda queue, lease: queue.renew(lease),
    "release": lambda queue, lease: queue.release(lease),
    "record_attempt": lambda queue, lease: queue.record_attempt(lease, "run-late"),
    "close": lambda queue, lease: queue.close(lease, Completed()),
}
"""Every call made under a lease (SPEC §8 rule 21)."""


class RunQueueFixtures(StoreFixtures):
    """The fixtures every concern module uses; a backend overrides ``harness``."""

    @pytest.fixture
    def queue(self, store: Checkpointer) -> RunQueue:
        return store.run_queue
