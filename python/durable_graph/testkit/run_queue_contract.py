"""`RunQueueContract`: the executable form of SPEC §5 (and the queue parts of §2, §3 and §8).

A backend's tests subclass it and override the ``harness`` fixture to yield a fresh store and the
control of its clock. Every test holds for both kinds of clock: a `ManualClock` that moves only
on ``advance()`` (memory, SQLite) and real time plus an offset raised by ``advance()``
(PostgreSQL). So a test never sleeps to move store time, compares store timestamps with a small
slack (`SLACK`), and lets a lease of ``TTL`` expire by advancing `PAST_TTL`.

Each test proves one sentence of the contract and is named for it; the decisions it relies on
where SPEC is silent are cited as ``Dn`` (docs/decisions.md).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from ..checkpointer import Checkpointer
from ..errors import (
    ClaimLost,
    EntryClosed,
    LeaseLost,
    NotFound,
    ProcessingError,
    RunIdTaken,
    RunOfDeletedThread,
    SubmissionKeyReused,
    ThreadBusy,
    ValidationError,
)
from ..model import (
    ANY,
    JSON,
    Cancelled,
    Checkpoint,
    Commit,
    Completed,
    Exhausted,
    Failed,
    Finished,
    Fresh,
    Interrupted,
    Lease,
    Mode,
    QueueEntry,
    Resume,
    Started,
    Submission,
    TenantFilter,
    ThreadDeleted,
)
from ..run_queue import RunQueue, plan_attempt
from .harness import ClockControl, Harness
from .pagination_contract import RunQueuePaginationContract
from .tenancy_contract import RunQueueIdentityContract, RunQueueTenancyContract

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

_CALLS_AFTER_STORE_CLOSE: dict[str, Callable[[RunQueue, Lease], object]] = {
    "submit": lambda queue, lease: queue.submit(Submission("thread-9", "x")),
    "lease": lambda queue, lease: queue.lease("worker-9", TTL),
    "renew": _LEASE_CALLS["renew"],
    "release": _LEASE_CALLS["release"],
    "record_attempt": _LEASE_CALLS["record_attempt"],
    "close": _LEASE_CALLS["close"],
    "cancel": lambda queue, lease: queue.cancel(lease.entry.entry_id),
    "entry": lambda queue, lease: queue.entry(lease.entry.entry_id),
    "open_entries": lambda queue, lease: queue.open_entries(),
    "await_closed": lambda queue, lease: queue.await_closed(lease.entry.entry_id, timedelta(0)),
    "reclaim": lambda queue, lease: queue.reclaim(timedelta(0)),
}

_BAD_SUBMISSIONS: dict[str, tuple[Any, str]] = {
    "empty_thread_id": (Submission("", 1), "thread_id"),
    "nul_in_thread_id": (Submission("a\x00b", 1), "thread_id"),
    "long_thread_id": (Submission("x" * 513, 1), "thread_id"),
    "surrogate_thread_id": (Submission("a\ud800", 1), "thread_id"),
    "int_thread_id": (Submission(7, 1), "thread_id"),  # type: ignore[arg-type]
    "nan_input": (Submission("thread-1", float("nan")), "input"),
    "int_key_in_input": (Submission("thread-1", {1: "a"}), "input"),  # type: ignore[dict-item]
    "tuple_input": (Submission("thread-1", (1, 2)), "input"),  # type: ignore[arg-type]
    "bytes_input": (Submission("thread-1", b"x"), "input"),  # type: ignore[arg-type]
    "nested_set_input": (Submission("thread-1", {"a": [set()]}), "input"),
    "empty_tenant": (Submission("thread-1", 1, tenant=""), "tenant"),
    "empty_key": (Submission("thread-1", 1, key=""), "key"),
    "zero_max_attempts": (Submission("thread-1", 1, max_attempts=0), "max_attempts"),
    "negative_max_attempts": (Submission("thread-1", 1, max_attempts=-1), "max_attempts"),
    "bool_max_attempts": (Submission("thread-1", 1, max_attempts=True), "max_attempts"),
    "huge_max_attempts": (Submission("thread-1", 1, max_attempts=2**31), "max_attempts"),
    "str_mode": (Submission("thread-1", 1, mode="enqueue"), "mode"),  # type: ignore[arg-type]
    "not_a_submission": ({"thread_id": "thread-1", "input": 1}, "submission"),
}

_BAD_LEASE_ARGS: dict[str, tuple[dict[str, Any], str]] = {
    "empty_holder": ({"holder": ""}, "holder"),
    "int_holder": ({"holder": 5}, "holder"),
    "int_ttl": ({"ttl": 30}, "ttl"),
    "float_ttl": ({"ttl": 30.0}, "ttl"),
    "negative_ttl": ({"ttl": timedelta(seconds=-1)}, "ttl"),
    "zero_ttl": ({"ttl": timedelta(0)}, "ttl"),
    "huge_ttl": ({"ttl": timedelta(days=36501)}, "ttl"),
    "empty_tenant": ({"tenant": ""}, "tenant"),
    "empty_run_id": ({"run_id": ""}, "run_id"),
    "nul_run_id": ({"run_id": "r\x00"}, "run_id"),
}

_BAD_OUTCOMES: dict[str, Any] = {
    "str": "done",
    "none": None,
    "nan_output": Completed(output=float("inf")),
    "int_error": Failed(error=5),  # type: ignore[arg-type]
    "unknown_reason": Cancelled(reason="bored"),  # type: ignore[arg-type]
    "completed_class": Completed,
}


class RunQueueContract(
    RunQueuePaginationContract, RunQueueTenancyContract, RunQueueIdentityContract
):
    """SPEC §5 as tests. Subclass it and override ``harness`` (see module docstring)."""

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

    # --- submit: tickets and entries ----------------------------------------------------

    def test_submit_returns_new_ticket_not_existing(self, queue: RunQueue) -> None:
        ticket = queue.submit(Submission("thread-1", "go"))
        assert ticket.existing is False
        assert isinstance(ticket.entry_id, int)

    def test_submit_entry_ids_increase_in_submission_order(self, queue: RunQueue) -> None:
        ids = [
            _submit(queue, "thread-b"),
            _submit(queue, "thread-a", tenant="t"),
            _submit(queue, "thread-b", mode=Mode.INTERRUPT),
            _submit(queue, "thread-c"),
        ]
        assert ids == sorted(ids)
        assert len(set(ids)) == len(ids)

    def test_submit_entry_ids_are_never_reused_after_reclaim(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        first = _submit(queue)
        queue.cancel(first)
        clock.advance(DAY)
        assert queue.reclaim(HOUR) == 1
        assert _submit(queue) > first

    def test_submit_stores_the_submission(self, queue: RunQueue) -> None:
        entry_id = _submit(
            queue,
            "thread-1",
            {"question": "why?", "n": [1, 2.5, None, True]},
            tenant="acme",
            key="k-1",
            mode=Mode.REJECT,
            max_attempts=5,
        )
        entry = _entry(queue, entry_id, tenant="acme")
        assert entry.entry_id == entry_id
        assert entry.thread_id == "thread-1"
        assert entry.tenant == "acme"
        assert entry.key == "k-1"
        assert entry.input == {"question": "why?", "n": [1, 2.5, None, True]}
        assert entry.mode is Mode.REJECT
        assert entry.max_attempts == 5

    def test_submitted_entry_starts_open_unleased_unattempted(self, queue: RunQueue) -> None:
        entry = _entry(queue, _submit(queue))
        assert entry.attempts == ()
        assert entry.admitted is False
        assert entry.thread_deleted is False
        assert entry.lease_holder is None
        assert entry.lease_expires_at is None
        assert entry.outcome is None
        assert entry.closed is False
        assert entry.closed_at is None
        assert entry.closed_at_seq is None

    def test_submitted_at_comes_from_store_clock(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        first = _entry(queue, _submit(queue, "thread-1"))
        clock.advance(DAY)
        second = _entry(queue, _submit(queue, "thread-2"))
        _near(second.submitted_at, first.submitted_at + DAY)

    def test_submitted_input_round_trips_any_unicode(self, queue: RunQueue) -> None:
        value = {"nul": "a\u0000b", "emoji": "😀", "deep": [[[{"é": 1e-7}]]]}
        assert _entry(queue, _submit(queue, input=value)).input == value

    def test_entry_input_is_a_fresh_object_each_read(self, queue: RunQueue) -> None:
        entry_id = _submit(queue, input={"items": [1, 2]})
        first = _entry(queue, entry_id).input
        assert isinstance(first, dict)
        first["items"].append(3)
        assert _entry(queue, entry_id).input == {"items": [1, 2]}

    # --- submit: keys (rule 19, D17) ------------------------------------------------------

    def test_submit_identical_keyed_submission_returns_existing_ticket(
        self, queue: RunQueue
    ) -> None:
        first = queue.submit(Submission("thread-1", {"a": 1}, key="k"))
        again = queue.submit(Submission("thread-1", {"a": 1}, key="k"))
        assert again.entry_id == first.entry_id
        assert again.existing is True
        assert len(queue.open_entries()) == 1

    def test_submit_identical_keyed_submission_after_close_returns_existing_ticket(
        self, queue: RunQueue
    ) -> None:
        entry_id = _submit(queue, key="k")
        queue.close(_lease(queue), Completed("done"))
        again = queue.submit(Submission("thread-1", "go", key="k"))
        assert (again.entry_id, again.existing) == (entry_id, True)
        assert queue.open_entries() == []

    def test_submit_key_identity_uses_canonical_json(self, queue: RunQueue) -> None:
        first = queue.submit(Submission("thread-1", {"a": 1, "b": {"y": 2, "x": 1}}, key="k"))
        again = queue.submit(Submission("thread-1", {"b": {"x": 1, "y": 2}, "a": 1}, key="k"))
        assert (again.entry_id, again.existing) == (first.entry_id, True)

    def test_submit_same_key_different_input_raises_submission_key_reused(
        self, queue: RunQueue
    ) -> None:
        _submit(queue, input={"a": 1}, key="k")
        with pytest.raises(SubmissionKeyReused):
            queue.submit(Submission("thread-1", {"a": 2}, key="k"))

    def test_submit_same_key_different_thread_raises_submission_key_reused(
        self, queue: RunQueue
    ) -> None:
        _submit(queue, "thread-1", key="k")
        with pytest.raises(SubmissionKeyReused):
            queue.submit(Submission("thread-2", "go", key="k"))

    def test_submit_same_key_different_mode_raises_submission_key_reused(
        self, queue: RunQueue
    ) -> None:
        _submit(queue, key="k")
        with pytest.raises(SubmissionKeyReused):
            queue.submit(Submission("thread-1", "go", key="k", mode=Mode.INTERRUPT))

    def test_submit_same_key_different_max_attempts_raises_submission_key_reused(
        self, queue: RunQueue
    ) -> None:
        _submit(queue, key="k", max_attempts=3)
        with pytest.raises(SubmissionKeyReused):
            queue.submit(Submission("thread-1", "go", key="k", max_attempts=4))

    def test_submit_key_reused_writes_nothing(self, queue: RunQueue) -> None:
        _submit(queue, key="k")
        before = _open(queue)
        with pytest.raises(SubmissionKeyReused):
            queue.submit(Submission("thread-1", "other", key="k"))
        assert _open(queue) == before

    def test_submit_keys_of_none_and_named_tenant_are_separate(self, queue: RunQueue) -> None:
        no_tenant = queue.submit(Submission("thread-1", "go", key="k"))
        tenant_t = queue.submit(Submission("thread-1", "go", tenant="t", key="k"))
        assert tenant_t.existing is False
        assert tenant_t.entry_id != no_tenant.entry_id

    def test_submit_keys_of_two_tenants_are_separate(self, queue: RunQueue) -> None:
        _submit(queue, input="a", tenant="t1", key="k")
        other = queue.submit(Submission("thread-1", "b", tenant="t2", key="k"))
        assert other.existing is False

    def test_submit_without_key_never_deduplicates(self, queue: RunQueue) -> None:
        first = queue.submit(Submission("thread-1", "go"))
        second = queue.submit(Submission("thread-1", "go"))
        assert second.existing is False
        assert second.entry_id != first.entry_id

    def test_submit_key_is_free_after_reclaim(self, queue: RunQueue, clock: ClockControl) -> None:
        entry_id = _submit(queue, input="old", key="k")
        queue.cancel(entry_id)
        clock.advance(DAY)
        assert queue.reclaim(HOUR) == 1
        fresh = queue.submit(Submission("thread-1", "new", key="k"))
        assert fresh.existing is False
        assert fresh.entry_id != entry_id

    def test_submit_checks_key_before_reject(self, queue: RunQueue) -> None:
        first = queue.submit(Submission("thread-1", "go", key="k", mode=Mode.REJECT))
        again = queue.submit(Submission("thread-1", "go", key="k", mode=Mode.REJECT))
        assert (again.entry_id, again.existing) == (first.entry_id, True)

    def test_submit_reports_key_reuse_before_reject(self, queue: RunQueue) -> None:
        _submit(queue, key="k")
        with pytest.raises(SubmissionKeyReused):
            queue.submit(Submission("thread-1", "go", key="k", mode=Mode.REJECT))

    def test_submit_checks_key_before_interrupt(self, queue: RunQueue) -> None:
        first = queue.submit(Submission("thread-1", "go", key="k", mode=Mode.INTERRUPT))
        again = queue.submit(Submission("thread-1", "go", key="k", mode=Mode.INTERRUPT))
        assert (again.entry_id, again.existing) == (first.entry_id, True)
        assert _entry(queue, first.entry_id).outcome is None

    # --- submit: REJECT ------------------------------------------------------------------

    def test_reject_on_thread_without_open_entry_is_accepted(self, queue: RunQueue) -> None:
        _submit(queue, "thread-2")
        entry_id = _submit(queue, "thread-1", mode=Mode.REJECT)
        assert _entry(queue, entry_id).mode is Mode.REJECT

    def test_reject_on_thread_with_open_entry_raises_thread_busy(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1")
        with pytest.raises(ThreadBusy):
            queue.submit(Submission("thread-1", "go", mode=Mode.REJECT))

    def test_reject_counts_open_entries_of_every_tenant(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1", tenant="someone-else")
        with pytest.raises(ThreadBusy):
            queue.submit(Submission("thread-1", "go", tenant="me", mode=Mode.REJECT))

    def test_reject_counts_an_open_reject_entry(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1", mode=Mode.REJECT)
        with pytest.raises(ThreadBusy):
            queue.submit(Submission("thread-1", "again", mode=Mode.REJECT))

    def test_reject_after_the_open_entry_closed_is_accepted(self, queue: RunQueue) -> None:
        entry_id = _submit(queue, "thread-1")
        queue.cancel(entry_id)
        assert _submit(queue, "thread-1", mode=Mode.REJECT) > entry_id

    def test_reject_refusal_writes_nothing(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1")
        before = _open(queue)
        with pytest.raises(ThreadBusy):
            queue.submit(Submission("thread-1", "go", key="k", mode=Mode.REJECT))
        assert _open(queue) == before
        # The refused submission's key was not kept.
        assert queue.submit(Submission("thread-2", "x", key="k")).existing is False

    def test_reject_thread_busy_message_names_no_entry_or_tenant(self, queue: RunQueue) -> None:
        entry_id = _submit(queue, "thread-1", tenant="tenant-secret")
        with pytest.raises(ThreadBusy) as raised:
            queue.submit(Submission("thread-1", "go", tenant="tenant-other", mode=Mode.REJECT))
        _names_no(str(raised.value), entry_id, "tenant-secret", "tenant-other")

    def test_reject_thread_busy_message_is_the_fixed_text(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1")
        with pytest.raises(ThreadBusy, match="thread has an open entry"):  # D22
            queue.submit(Submission("thread-1", "go", mode=Mode.REJECT))

    def test_enqueue_on_busy_thread_is_accepted(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1", mode=Mode.REJECT)
        _submit(queue, "thread-1")
        assert len(queue.open_entries(thread_id="thread-1")) == 2

    # --- submit: INTERRUPT ----------------------------------------------------------------

    def test_interrupt_closes_queued_interrupts(self, queue: RunQueue) -> None:
        first = _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        second = _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        closed = _entry(queue, first)
        assert closed.outcome == Interrupted(by=second)
        assert closed.closed_at is not None
        assert [e.entry_id for e in queue.open_entries(thread_id="thread-1")] == [second]

    def test_interrupt_closes_leased_interrupt_without_attempt(self, queue: RunQueue) -> None:
        first = _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        lease = _lease(queue)
        second = _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        assert _entry(queue, first).outcome == Interrupted(by=second)
        with pytest.raises(EntryClosed):
            queue.renew(lease)

    def test_interrupt_closes_interrupts_of_other_tenants(self, queue: RunQueue) -> None:
        first = _submit(queue, "thread-1", tenant="a", mode=Mode.INTERRUPT)
        second = _submit(queue, "thread-1", tenant="b", mode=Mode.INTERRUPT)
        assert _entry(queue, first, tenant="a").outcome == Interrupted(by=second)

    def test_interrupt_spares_interrupts_that_recorded_an_attempt(self, queue: RunQueue) -> None:
        first = _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        lease = _lease(queue)
        queue.record_attempt(lease, "run-1")
        second = _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        assert _entry(queue, first).outcome is None
        third = _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        assert _entry(queue, first).outcome is None
        assert _entry(queue, second).outcome == Interrupted(by=third)

    def test_interrupt_spares_enqueue_and_reject_entries(self, queue: RunQueue) -> None:
        rejecting = _submit(queue, "thread-1", mode=Mode.REJECT)
        enqueued = _submit(queue, "thread-1")
        _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        assert _entry(queue, rejecting).outcome is None
        assert _entry(queue, enqueued).outcome is None

    def test_interrupt_spares_interrupts_of_other_threads(self, queue: RunQueue) -> None:
        other = _submit(queue, "thread-2", mode=Mode.INTERRUPT)
        _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        assert _entry(queue, other).outcome is None

    def test_enqueue_does_not_close_interrupts(self, queue: RunQueue) -> None:
        interrupt = _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        _submit(queue, "thread-1")
        assert _entry(queue, interrupt).outcome is None

    def test_interrupted_entry_stamps_closed_at_from_store_clock(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        first = _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        clock.advance(DAY)
        _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        entry = _entry(queue, first)
        _near(entry.closed_at, entry.submitted_at + DAY)

    # --- queue order (SPEC §5 Order, rule 24) ----------------------------------------------

    def test_lease_takes_oldest_thread_head_first(self, queue: RunQueue) -> None:
        first = _submit(queue, "thread-b")
        second = _submit(queue, "thread-a")
        assert _lease(queue).entry.entry_id == first
        assert _lease(queue).entry.entry_id == second

    def test_lease_of_empty_queue_returns_none(self, queue: RunQueue) -> None:
        assert queue.lease("worker-1", TTL) is None

    def test_lease_puts_interrupt_before_earlier_enqueued(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1")
        interrupt = _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        assert _lease(queue).entry.entry_id == interrupt

    def test_lease_puts_attempted_entry_before_interrupt(self, queue: RunQueue) -> None:
        enqueued = _submit(queue, "thread-1")
        lease = _lease(queue)
        queue.record_attempt(lease, "run-1")
        queue.release(lease)
        _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        assert _lease(queue).entry.entry_id == enqueued

    def test_lease_takes_rest_by_entry_id(self, queue: RunQueue) -> None:
        first = _submit(queue, "thread-1")
        second = _submit(queue, "thread-1")
        lease = _lease(queue)
        assert lease.entry.entry_id == first
        queue.close(lease, Completed())
        assert _lease(queue).entry.entry_id == second

    def test_open_entries_of_thread_in_queue_order(self, queue: RunQueue) -> None:
        enqueued = _submit(queue, "thread-1")
        attempted = _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        lease = _lease(queue)
        queue.record_attempt(lease, "run-1")
        queue.release(lease)
        interrupt = _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        later = _submit(queue, "thread-1")
        listed = [e.entry_id for e in queue.open_entries(thread_id="thread-1")]
        assert listed == [attempted, interrupt, enqueued, later]

    def test_open_entries_groups_threads_by_head_entry_id(self, queue: RunQueue) -> None:
        a_first = _submit(queue, "thread-a")
        b_first = _submit(queue, "thread-b")
        a_interrupt = _submit(queue, "thread-a", mode=Mode.INTERRUPT)
        c_first = _submit(queue, "thread-c")
        b_later = _submit(queue, "thread-b")
        # Heads: thread-a -> a_interrupt (3), thread-b -> b_first (2), thread-c -> c_first (4).
        listed = [e.entry_id for e in queue.open_entries()]
        assert listed == [b_first, b_later, a_interrupt, a_first, c_first]

    def test_lease_follows_head_entry_id_across_threads(self, queue: RunQueue) -> None:
        _submit(queue, "thread-a")
        b_first = _submit(queue, "thread-b")
        a_interrupt = _submit(queue, "thread-a", mode=Mode.INTERRUPT)
        assert _lease(queue).entry.entry_id == b_first
        assert _lease(queue).entry.entry_id == a_interrupt

    def test_open_entries_excludes_closed_entries(self, queue: RunQueue) -> None:
        closed = _submit(queue, "thread-1")
        kept = _submit(queue, "thread-2")
        queue.cancel(closed)
        assert [e.entry_id for e in queue.open_entries()] == [kept]

    def test_open_entries_filters_by_thread(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1")
        mine = _submit(queue, "thread-2")
        assert [e.entry_id for e in queue.open_entries(thread_id="thread-2")] == [mine]

    # --- lease ---------------------------------------------------------------------------

    def test_lease_only_takes_the_head(self, queue: RunQueue) -> None:
        head = _submit(queue, "thread-1")
        _submit(queue, "thread-1")
        lease = _lease(queue)
        queue.release(lease)
        assert _lease(queue).entry.entry_id == head

    def test_lease_skips_thread_whose_head_holds_live_lease(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1")
        _submit(queue, "thread-1")
        _lease(queue)
        assert queue.lease("worker-2", TTL) is None

    def test_lease_skips_thread_while_another_entry_holds_live_lease(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1")
        _lease(queue)
        _submit(queue, "thread-1", mode=Mode.INTERRUPT)  # the new head, not leased
        assert queue.lease("worker-2", TTL) is None

    def test_lease_stays_live_before_ttl(self, queue: RunQueue, clock: ClockControl) -> None:
        _submit(queue)
        _lease(queue)
        clock.advance(TTL - timedelta(seconds=1))
        assert queue.lease("worker-2", TTL) is None

    def test_lease_expires_at_its_expiry_instant(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue)
        _lease(queue)
        clock.advance(TTL)  # D1: live strictly before expires_at
        assert _lease(queue, "worker-2").entry.entry_id == entry_id

    def test_expired_lease_is_leased_again_with_greater_token(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue)
        first = _lease(queue)
        clock.advance(PAST_TTL)
        second = _lease(queue, "worker-2")
        assert second.entry.entry_id == entry_id
        assert second.token > first.token
        assert second.holder == "worker-2"

    def test_old_lease_is_lost_after_re_lease(self, queue: RunQueue, clock: ClockControl) -> None:
        _submit(queue)
        first = _lease(queue)
        clock.advance(PAST_TTL)
        _lease(queue, "worker-2")
        with pytest.raises(LeaseLost):
            queue.renew(first)

    def test_lease_waits_for_other_entry_live_lease_to_expire(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        _submit(queue, "thread-1")
        _lease(queue)
        interrupt = _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        clock.advance(PAST_TTL)
        assert _lease(queue, "worker-2").entry.entry_id == interrupt

    def test_lease_ends_expired_leases_of_other_entries_of_thread(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        _submit(queue, "thread-1")
        stale = _lease(queue)
        _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        clock.advance(PAST_TTL)
        _lease(queue, "worker-2")
        with pytest.raises(LeaseLost):
            queue.record_attempt(stale, "run-stale")
        assert _entry(queue, stale.entry.entry_id).attempts == ()

    def test_lease_sets_holder_token_ttl_and_expiry(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        submitted = _entry(queue, entry_id).submitted_at
        lease = _lease(queue, "worker-7", timedelta(seconds=45))
        assert lease.holder == "worker-7"
        assert lease.ttl == timedelta(seconds=45)
        assert isinstance(lease.token, int) and lease.token >= 1
        _near(lease.expires_at, submitted + timedelta(seconds=45))

    def test_lease_entry_reflects_the_lease(self, queue: RunQueue) -> None:
        _submit(queue)
        lease = _lease(queue, "worker-7")
        assert lease.entry.lease_holder == "worker-7"
        assert lease.entry.lease_expires_at == lease.expires_at

    def test_entry_shows_lease_holder_and_expiry(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        lease = _lease(queue, "worker-7")
        entry = _entry(queue, entry_id)
        assert entry.lease_holder == "worker-7"
        assert entry.lease_expires_at == lease.expires_at

    def test_lease_without_run_id_records_no_attempt(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        assert _lease(queue).attempt is None
        assert _entry(queue, entry_id).attempts == ()

    def test_lease_tokens_increase_across_leases_and_claims(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        _submit(queue, "thread-1")
        _submit(queue, "thread-2")
        claim_1 = store.claim("other-1", "holder")
        lease_1 = _lease(queue)
        claim_2 = store.claim("other-2", "holder")
        lease_2 = _lease(queue)
        assert claim_1.token < lease_1.token < claim_2.token < lease_2.token

    def test_closed_entries_are_never_leased(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        queue.cancel(entry_id)
        assert queue.lease("worker-1", TTL) is None

    # --- lease: tenants (rule 18) -------------------------------------------------------------

    def test_lease_any_tenant_by_default(self, queue: RunQueue) -> None:
        entry_id = _submit(queue, tenant="acme")
        assert _lease(queue).entry.entry_id == entry_id

    def test_lease_named_tenant_takes_only_its_entries(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1", tenant="other")
        _submit(queue, "thread-2")
        mine = _submit(queue, "thread-3", tenant="acme")
        assert _lease(queue, tenant="acme").entry.entry_id == mine
        assert queue.lease("worker-2", TTL, tenant="acme") is None

    def test_lease_tenant_none_takes_only_no_tenant_entries(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1", tenant="acme")
        mine = _submit(queue, "thread-2")
        assert _lease(queue, tenant=None).entry.entry_id == mine
        assert queue.lease("worker-2", TTL, tenant=None) is None

    def test_tenant_lease_takes_head_only_when_it_is_that_tenants(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1", tenant="a")
        _submit(queue, "thread-1", tenant="b")
        assert queue.lease("worker-1", TTL, tenant="b") is None

    def test_tenant_lease_head_counts_other_tenants_interrupt(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1", tenant="b")
        interrupt = _submit(queue, "thread-1", tenant="a", mode=Mode.INTERRUPT)
        assert queue.lease("worker-1", TTL, tenant="b") is None
        assert _lease(queue, tenant="a").entry.entry_id == interrupt

    def test_tenant_lease_respects_other_tenants_live_lease(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1", tenant="a")
        _lease(queue, tenant="a")
        _submit(queue, "thread-1", tenant="b", mode=Mode.INTERRUPT)
        assert queue.lease("worker-2", TTL, tenant="b") is None

    # --- lease with run_id --------------------------------------------------------------------

    def test_lease_with_run_id_records_the_attempt(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        lease = _lease(queue, run_id="run-1")
        assert lease.attempt == Started(1)
        attempts = _entry(queue, entry_id).attempts
        assert [(a.number, a.run_id) for a in attempts] == [(1, "run-1")]

    def test_lease_with_run_id_stamps_started_at_with_lease_time(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue)
        clock.advance(DAY)
        lease = _lease(queue, run_id="run-1")
        started_at = _entry(queue, entry_id).attempts[0].started_at
        assert started_at == lease.expires_at - TTL

    def test_lease_with_run_id_of_another_entry_of_thread_takes_lease_without_attempt(
        self, queue: RunQueue
    ) -> None:
        _, first = _attempted(queue, "run-1", "thread-1")
        queue.close(first, Completed())
        entry_id = _submit(queue, "thread-1")
        lease = _lease(queue, run_id="run-1")
        assert (lease.entry.entry_id, lease.attempt) == (entry_id, None)
        assert _entry(queue, entry_id).lease_holder == "worker-1"

    def test_lease_with_run_id_entry_shows_the_attempt(self, queue: RunQueue) -> None:
        _submit(queue)
        lease = _lease(queue, run_id="run-1")
        assert [a.run_id for a in lease.entry.attempts] == ["run-1"]

    def test_lease_with_taken_run_id_still_takes_the_lease(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        _commit(store, "thread-1", "run-taken", "cp-1")
        entry_id = _submit(queue, "thread-1")
        lease = _lease(queue, run_id="run-taken")
        assert lease.entry.entry_id == entry_id
        assert lease.attempt is None
        assert _entry(queue, entry_id).attempts == ()
        assert queue.lease("worker-2", TTL) is None

    def test_lease_with_run_id_on_delete_marked_entry_closes_it(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id = _submit(queue, "thread-1")
        store.delete_thread("thread-1")
        lease = _lease(queue, run_id="run-1")
        assert lease.attempt == ThreadDeleted()
        entry = _entry(queue, entry_id)
        assert entry.outcome == Cancelled("thread_deleted")
        assert entry.attempts == ()

    def test_lease_with_run_id_on_exhausted_entry_returns_exhausted(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue, max_attempts=1)
        _lease(queue, run_id="run-1")
        clock.advance(PAST_TTL)
        lease = _lease(queue, "worker-2", run_id="run-2")
        assert lease.attempt == Exhausted()
        entry = _entry(queue, entry_id)
        assert [a.run_id for a in entry.attempts] == ["run-1"]
        assert entry.closed is False

    # --- renew (rule 21, D18) -----------------------------------------------------------------

    def test_renew_pushes_expiry_keeping_token(self, queue: RunQueue, clock: ClockControl) -> None:
        _submit(queue)
        lease = _lease(queue)
        clock.advance(timedelta(seconds=10))
        renewed = queue.renew(lease)
        assert renewed.token == lease.token
        assert renewed.holder == lease.holder
        _near(renewed.expires_at, lease.expires_at + timedelta(seconds=10))

    def test_renew_updates_entry_lease_expiry(self, queue: RunQueue, clock: ClockControl) -> None:
        entry_id = _submit(queue)
        lease = _lease(queue)
        clock.advance(timedelta(seconds=10))
        renewed = queue.renew(lease)
        assert _entry(queue, entry_id).lease_expires_at == renewed.expires_at

    def test_renew_keeps_lease_live_past_original_expiry(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        _submit(queue)
        lease = _lease(queue)
        clock.advance(timedelta(seconds=20))
        queue.renew(lease)
        clock.advance(timedelta(seconds=20))
        assert queue.lease("worker-2", TTL) is None

    def test_renew_works_after_expiry_while_current(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        _submit(queue)
        lease = _lease(queue)
        clock.advance(PAST_TTL)
        renewed = queue.renew(lease)
        assert renewed.token == lease.token
        assert queue.lease("worker-2", TTL) is None

    def test_renew_with_ttl_overrides_expiry(self, queue: RunQueue) -> None:
        _submit(queue)
        lease = _lease(queue)
        renewed = queue.renew(lease, ttl=HOUR)
        _near(renewed.expires_at, lease.expires_at - TTL + HOUR)

    def test_renew_without_ttl_uses_the_ttl_the_lease_was_taken_with(self, queue: RunQueue) -> None:
        _submit(queue)
        lease = _lease(queue)
        longer = queue.renew(lease, ttl=HOUR)
        assert longer.ttl == TTL
        again = queue.renew(longer)
        _near(again.expires_at, lease.expires_at)

    def test_renew_after_re_lease_raises_lease_lost(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        _submit(queue)
        lease = _lease(queue)
        clock.advance(PAST_TTL)
        _lease(queue, "worker-2")
        with pytest.raises(LeaseLost):
            queue.renew(lease)

    def test_renew_of_closed_entry_raises_entry_closed(self, queue: RunQueue) -> None:
        _submit(queue)
        lease = _lease(queue)
        queue.close(lease, Completed())
        with pytest.raises(EntryClosed):
            queue.renew(lease)

    # --- release (D19) ------------------------------------------------------------------------

    def test_release_clears_the_entry_lease(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        queue.release(_lease(queue))
        entry = _entry(queue, entry_id)
        assert (entry.lease_holder, entry.lease_expires_at) == (None, None)
        assert entry.closed is False

    def test_released_entry_is_leased_again_at_once(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        first = _lease(queue)
        queue.release(first)
        second = _lease(queue, "worker-2")
        assert second.entry.entry_id == entry_id
        assert second.token > first.token

    def test_release_works_after_expiry_while_current(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue)
        lease = _lease(queue)
        clock.advance(PAST_TTL)
        queue.release(lease)
        assert _entry(queue, entry_id).lease_holder is None

    def test_release_twice_raises_lease_lost(self, queue: RunQueue) -> None:
        _submit(queue)
        lease = _lease(queue)
        queue.release(lease)
        with pytest.raises(LeaseLost):
            queue.release(lease)

    def test_release_after_re_lease_raises_lease_lost(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        _submit(queue)
        lease = _lease(queue)
        clock.advance(PAST_TTL)
        current = _lease(queue, "worker-2")
        with pytest.raises(LeaseLost):
            queue.release(lease)
        assert _entry(queue, current.entry.entry_id).lease_holder == "worker-2"

    def test_released_lease_cannot_record_attempt(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        lease = _lease(queue)
        queue.release(lease)
        with pytest.raises(LeaseLost):
            queue.record_attempt(lease, "run-1")
        assert _entry(queue, entry_id).attempts == ()

    # --- lease calls on closed entries (rule 21) -------------------------------------------

    @pytest.mark.parametrize("call", sorted(_LEASE_CALLS))
    def test_lease_call_on_closed_entry_raises_entry_closed_before_token_check(
        self, queue: RunQueue, clock: ClockControl, call: str
    ) -> None:
        _submit(queue)
        stale = _lease(queue)
        clock.advance(PAST_TTL)
        queue.close(_lease(queue, "worker-2"), Completed())
        with pytest.raises(EntryClosed):
            _LEASE_CALLS[call](queue, stale)

    @pytest.mark.parametrize("call", sorted(_LEASE_CALLS))
    def test_cancelled_entry_worker_learns_it_on_next_call(
        self, queue: RunQueue, call: str
    ) -> None:
        entry_id = _submit(queue)
        lease = _lease(queue)
        queue.cancel(entry_id)
        with pytest.raises(EntryClosed):
            _LEASE_CALLS[call](queue, lease)

    @pytest.mark.parametrize("call", sorted(_LEASE_CALLS))
    def test_lease_call_on_reclaimed_entry_raises_entry_closed(
        self, queue: RunQueue, clock: ClockControl, call: str
    ) -> None:
        _submit(queue)
        lease = _lease(queue)
        queue.close(lease, Completed())
        clock.advance(DAY)
        assert queue.reclaim(HOUR) == 1
        with pytest.raises(EntryClosed):  # D25
            _LEASE_CALLS[call](queue, lease)

    # --- record_attempt (rule 20) -----------------------------------------------------------

    def test_record_attempt_returns_started_numbers(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue)
        first = _lease(queue)
        assert queue.record_attempt(first, "run-1") == Started(1)
        clock.advance(PAST_TTL)
        second = _lease(queue, "worker-2")
        assert queue.record_attempt(second, "run-2") == Started(2)
        attempts = _entry(queue, entry_id).attempts
        assert [(a.number, a.run_id) for a in attempts] == [(1, "run-1"), (2, "run-2")]

    def test_record_attempt_numbers_are_per_entry(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1")
        _submit(queue, "thread-2")
        assert queue.record_attempt(_lease(queue), "run-1") == Started(1)
        assert queue.record_attempt(_lease(queue), "run-2") == Started(1)

    def test_record_attempt_is_visible_to_readers(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        queue.record_attempt(_lease(queue), "run-1")
        assert [a.run_id for a in _entry(queue, entry_id).attempts] == ["run-1"]

    def test_record_attempt_started_at_comes_from_store_clock(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue)
        lease = _lease(queue, ttl=timedelta(days=2))
        clock.advance(DAY)
        queue.record_attempt(lease, "run-1")
        entry = _entry(queue, entry_id)
        _near(entry.attempts[0].started_at, entry.submitted_at + DAY)

    def test_record_attempt_on_closed_entry_raises_entry_closed(self, queue: RunQueue) -> None:
        _submit(queue)
        lease = _lease(queue)
        queue.close(lease, Failed("boom"))
        with pytest.raises(EntryClosed):
            queue.record_attempt(lease, "run-1")

    def test_record_attempt_with_lost_lease_raises_lease_lost(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue)
        stale = _lease(queue)
        clock.advance(PAST_TTL)
        _lease(queue, "worker-2")
        with pytest.raises(LeaseLost):
            queue.record_attempt(stale, "run-1")
        assert _entry(queue, entry_id).attempts == ()

    def test_record_attempt_works_after_expiry_while_current(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        _submit(queue)
        lease = _lease(queue)
        clock.advance(PAST_TTL)
        assert queue.record_attempt(lease, "run-1") == Started(1)

    def test_record_attempt_on_delete_marked_entry_returns_thread_deleted(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id = _submit(queue, "thread-1")
        lease = _lease(queue)
        store.delete_thread("thread-1")
        assert queue.record_attempt(lease, "run-1") == ThreadDeleted()
        entry = _entry(queue, entry_id)
        assert entry.outcome == Cancelled("thread_deleted")
        assert entry.attempts == ()

    def test_record_attempt_checks_lease_before_delete_mark(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id = _submit(queue, "thread-1")
        lease = _lease(queue)
        queue.release(lease)
        store.delete_thread("thread-1")
        with pytest.raises(LeaseLost):
            queue.record_attempt(lease, "run-1")
        assert _entry(queue, entry_id).closed is False

    def test_record_attempt_checks_delete_mark_before_exhaustion(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id = _submit(queue, "thread-1", max_attempts=1)
        lease = _lease(queue)
        queue.record_attempt(lease, "run-1")
        store.delete_thread("thread-1")
        assert queue.record_attempt(lease, "run-2") == ThreadDeleted()
        assert _entry(queue, entry_id).outcome == Cancelled("thread_deleted")

    def test_record_attempt_checks_delete_mark_before_taken_run_id(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        _submit(queue, "thread-1")
        lease = _lease(queue)
        queue.record_attempt(lease, "run-1")
        store.delete_thread("thread-1")
        assert queue.record_attempt(lease, "run-1") == ThreadDeleted()

    def test_record_attempt_after_max_attempts_returns_exhausted(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue, max_attempts=2)
        for number, worker in ((1, "worker-1"), (2, "worker-2")):
            lease = _lease(queue, worker)
            assert queue.record_attempt(lease, f"run-{number}") == Started(number)
            clock.advance(PAST_TTL)
        lease = _lease(queue, "worker-3")
        assert queue.record_attempt(lease, "run-3") == Exhausted()
        entry = _entry(queue, entry_id)
        assert [a.run_id for a in entry.attempts] == ["run-1", "run-2"]
        assert entry.closed is False

    def test_exhausted_entry_is_closed_by_its_worker(self, queue: RunQueue) -> None:
        entry_id = _submit(queue, max_attempts=1)
        lease = _lease(queue)
        queue.record_attempt(lease, "run-1")
        assert queue.record_attempt(lease, "run-2") == Exhausted()
        closed = queue.close(lease, Failed("out of attempts"))
        assert closed.outcome == Failed("out of attempts")
        assert _entry(queue, entry_id).outcome == Failed("out of attempts")

    def test_record_attempt_checks_exhaustion_before_taken_run_id(self, queue: RunQueue) -> None:
        _submit(queue, max_attempts=1)
        lease = _lease(queue)
        queue.record_attempt(lease, "run-1")
        assert queue.record_attempt(lease, "run-1") == Exhausted()

    def test_record_attempt_refuses_run_id_of_thread_history(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        _commit(store, "thread-1", "run-1", "cp-1")
        entry_id = _submit(queue, "thread-1")
        with pytest.raises(RunIdTaken):
            queue.record_attempt(_lease(queue), "run-1")
        assert _entry(queue, entry_id).attempts == ()

    def test_record_attempt_refuses_run_id_of_same_entry(self, queue: RunQueue) -> None:
        _submit(queue)
        lease = _lease(queue)
        queue.record_attempt(lease, "run-1")
        with pytest.raises(RunIdTaken):
            queue.record_attempt(lease, "run-1")

    def test_record_attempt_refuses_run_id_of_closed_entry_of_thread(self, queue: RunQueue) -> None:
        _, lease = _attempted(queue, "run-1", "thread-1")
        queue.close(lease, Completed())
        _submit(queue, "thread-1")
        with pytest.raises(RunIdTaken):
            queue.record_attempt(_lease(queue), "run-1")

    def test_record_attempt_refuses_run_id_of_other_tenants_entry(self, queue: RunQueue) -> None:
        _, lease = _attempted(queue, "run-1", "thread-1", tenant="a")
        queue.close(lease, Completed())
        _submit(queue, "thread-1", tenant="b")
        with pytest.raises(RunIdTaken):
            queue.record_attempt(_lease(queue), "run-1")

    def test_record_attempt_accepts_run_id_used_on_another_thread(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        _commit(store, "thread-2", "run-1", "cp-1")
        _attempted(queue, "run-1", "thread-3")
        _submit(queue, "thread-1")
        assert queue.record_attempt(_lease(queue), "run-1") == Started(1)

    def test_record_attempt_after_run_id_taken_leaves_lease_usable(self, queue: RunQueue) -> None:
        _submit(queue)
        lease = _lease(queue)
        queue.record_attempt(lease, "run-1")
        with pytest.raises(RunIdTaken):
            queue.record_attempt(lease, "run-1")
        assert queue.record_attempt(lease, "run-2") == Started(2)

    def test_run_id_of_retracted_checkpoint_is_free(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        claim = store.claim("thread-1", "holder")
        store.commit(claim, Commit("cp-1", None, "run-1", {"s": 1}))
        store.retract_turn(claim)
        store.release_claim(claim)
        _submit(queue, "thread-1")
        assert queue.record_attempt(_lease(queue), "run-1") == Started(1)

    def test_run_ids_of_reclaimed_entry_are_free(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        _, lease = _attempted(queue, "run-1", "thread-1")
        queue.close(lease, Failed("gave up"))
        clock.advance(DAY)
        assert queue.reclaim(HOUR) == 1
        _submit(queue, "thread-1")
        assert queue.record_attempt(_lease(queue), "run-1") == Started(1)

    # --- close ----------------------------------------------------------------------------

    def test_close_records_outcome_and_returns_closed_entry(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        closed = queue.close(_lease(queue), Completed({"answer": 42}))
        assert closed.entry_id == entry_id
        assert closed.outcome == Completed({"answer": 42})
        assert closed.closed is True
        assert _entry(queue, entry_id) == closed

    def test_close_twice_raises_entry_closed(self, queue: RunQueue) -> None:
        _submit(queue)
        lease = _lease(queue)
        queue.close(lease, Completed())
        with pytest.raises(EntryClosed):
            queue.close(lease, Failed("again"))
        assert _entry(queue, lease.entry.entry_id).outcome == Completed()

    def test_close_keeps_failed_error_text(self, queue: RunQueue) -> None:
        _submit(queue)
        closed = queue.close(_lease(queue), Failed("boom: ünïcode 😀 \u0000"))
        assert closed.outcome == Failed("boom: ünïcode 😀 \u0000")

    def test_close_output_round_trips(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        output = {"nested": [1, 2.5, None, {"k": "a\u0000😀"}], "t": True}
        queue.close(_lease(queue), Completed(output))
        assert _entry(queue, entry_id).outcome == Completed(output)

    def test_entry_outcome_is_a_fresh_object_each_read(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        queue.close(_lease(queue), Completed({"items": [1]}))
        outcome = _entry(queue, entry_id).outcome
        assert isinstance(outcome, Completed) and isinstance(outcome.output, dict)
        outcome.output["items"].append(2)
        assert _entry(queue, entry_id).outcome == Completed({"items": [1]})

    def test_close_stamps_closed_at_from_store_clock(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue)
        lease = _lease(queue, ttl=timedelta(days=2))
        clock.advance(DAY)
        closed = queue.close(lease, Completed())
        _near(closed.closed_at, _entry(queue, entry_id).submitted_at + DAY)

    def test_close_clears_the_lease(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        queue.close(_lease(queue), Completed())
        entry = _entry(queue, entry_id)
        assert (entry.lease_holder, entry.lease_expires_at) == (None, None)

    def test_close_lets_the_next_entry_be_leased(self, queue: RunQueue) -> None:
        _submit(queue)
        following = _submit(queue)
        queue.close(_lease(queue), Completed())
        assert _lease(queue).entry.entry_id == following

    def test_close_with_lost_lease_raises_lease_lost(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue)
        stale = _lease(queue)
        clock.advance(PAST_TTL)
        _lease(queue, "worker-2")
        with pytest.raises(LeaseLost):
            queue.close(stale, Completed())
        assert _entry(queue, entry_id).closed is False

    def test_close_works_after_expiry_while_current(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        _submit(queue)
        lease = _lease(queue)
        clock.advance(PAST_TTL)
        assert queue.close(lease, Completed()).outcome == Completed()

    def test_closed_at_seq_is_zero_without_events(self, queue: RunQueue) -> None:
        _submit(queue)
        assert queue.close(_lease(queue), Completed()).closed_at_seq == 0

    def test_closed_at_seq_is_thread_last_seq_at_close(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        first = _commit(store, "thread-1", "run-0", "cp-1")
        _commit(store, "thread-1", "run-0", "cp-2", parent_id=first.checkpoint_id)
        _submit(queue, "thread-1")
        info = store.thread("thread-1")
        assert info is not None and info.last_seq > 0
        closed = queue.close(_lease(queue), Completed())
        assert closed.closed_at_seq == info.last_seq

    def test_closed_at_seq_does_not_move_with_later_commits(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        first = _commit(store, "thread-1", "run-0", "cp-1")
        entry_id = _submit(queue, "thread-1")
        closed = queue.close(_lease(queue), Completed())
        _commit(store, "thread-1", "run-9", "cp-2", parent_id=first.checkpoint_id)
        assert _entry(queue, entry_id).closed_at_seq == closed.closed_at_seq == first.seq

    def test_closed_at_seq_after_delete_is_tombstone_seq(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        first = _commit(store, "thread-1", "run-0", "cp-1")
        second = _commit(store, "thread-1", "run-0", "cp-2", parent_id=first.checkpoint_id)
        entry_id = _submit(queue, "thread-1")
        lease = _lease(queue)
        assert store.delete_thread("thread-1") is True
        assert queue.record_attempt(lease, "run-1") == ThreadDeleted()
        assert _entry(queue, entry_id).closed_at_seq == second.seq

    # --- cancel (rule 22, D16) ----------------------------------------------------------------

    def test_cancel_closes_entry_as_requested(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        cancelled = queue.cancel(entry_id)
        assert cancelled.entry_id == entry_id
        assert cancelled.outcome == Cancelled("requested")
        assert cancelled.closed_at is not None
        assert _entry(queue, entry_id).outcome == Cancelled("requested")

    def test_cancel_stamps_closed_at_from_store_clock(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue)
        clock.advance(DAY)
        cancelled = queue.cancel(entry_id)
        _near(cancelled.closed_at, cancelled.submitted_at + DAY)
        assert _entry(queue, entry_id).closed_at == cancelled.closed_at

    def test_cancel_of_tenant_entry_with_its_tenant(self, queue: RunQueue) -> None:
        entry_id = _submit(queue, tenant="acme")
        assert queue.cancel(entry_id, tenant="acme").outcome == Cancelled("requested")

    def test_cancel_of_other_tenants_entry_raises_not_found(self, queue: RunQueue) -> None:
        entry_id = _submit(queue, tenant="acme")
        with pytest.raises(NotFound):
            queue.cancel(entry_id, tenant="other")
        with pytest.raises(NotFound):
            queue.cancel(entry_id)
        assert _entry(queue, entry_id, tenant="acme").closed is False

    def test_cancel_of_no_tenant_entry_with_a_tenant_raises_not_found(
        self, queue: RunQueue
    ) -> None:
        entry_id = _submit(queue)
        with pytest.raises(NotFound):
            queue.cancel(entry_id, tenant="acme")

    def test_cancel_of_unknown_entry_raises_not_found(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        with pytest.raises(NotFound):
            queue.cancel(entry_id + 1000)

    def test_cancel_of_closed_entry_raises_entry_closed(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        queue.cancel(entry_id)
        with pytest.raises(EntryClosed):
            queue.cancel(entry_id)

    def test_cancel_checks_visibility_before_closed(self, queue: RunQueue) -> None:
        entry_id = _submit(queue, tenant="acme")
        queue.cancel(entry_id, tenant="acme")
        with pytest.raises(NotFound):
            queue.cancel(entry_id, tenant="other")

    def test_cancel_of_leased_entry_clears_lease_and_frees_thread(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        following = _submit(queue)
        _lease(queue)
        cancelled = queue.cancel(entry_id)
        assert (cancelled.lease_holder, cancelled.lease_expires_at) == (None, None)
        assert _lease(queue, "worker-2").entry.entry_id == following

    def test_interrupted_entry_lease_ends_and_thread_is_free(self, queue: RunQueue) -> None:
        first = _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        _lease(queue)
        second = _submit(queue, "thread-1", mode=Mode.INTERRUPT)
        interrupted = _entry(queue, first)
        assert (interrupted.lease_holder, interrupted.lease_expires_at) == (None, None)  # D27
        assert _lease(queue, "worker-2").entry.entry_id == second

    def test_thread_deleted_closing_ends_lease_and_frees_thread(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id = _submit(queue, "thread-1")
        lease = _lease(queue)
        store.delete_thread("thread-1")
        following = _submit(queue, "thread-1")
        assert queue.record_attempt(lease, "run-1") == ThreadDeleted()
        closed = _entry(queue, entry_id)
        assert (closed.lease_holder, closed.lease_expires_at) == (None, None)  # D27
        assert _lease(queue, "worker-2").entry.entry_id == following

    # --- tenant-scoped reads (D16) -------------------------------------------------------

    def test_entry_of_other_tenant_is_none(self, queue: RunQueue) -> None:
        entry_id = _submit(queue, tenant="acme")
        assert queue.entry(entry_id, tenant="other") is None
        assert queue.entry(entry_id) is None
        assert _entry(queue, entry_id, tenant="acme").tenant == "acme"

    def test_entry_of_no_tenant_is_hidden_from_named_tenant(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        assert queue.entry(entry_id, tenant="acme") is None

    def test_entry_of_unknown_id_is_none(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        assert queue.entry(entry_id + 1000) is None

    def test_open_entries_default_lists_no_tenant_entries_only(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1", tenant="acme")
        mine = _submit(queue, "thread-2")
        assert [e.entry_id for e in queue.open_entries()] == [mine]

    def test_open_entries_of_tenant_lists_only_its_entries(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1")
        mine = _submit(queue, "thread-2", tenant="acme")
        _submit(queue, "thread-3", tenant="other")
        assert [e.entry_id for e in queue.open_entries(tenant="acme")] == [mine]

    def test_open_entries_any_lists_every_tenant(self, queue: RunQueue) -> None:
        ids = [
            _submit(queue, "thread-1"),
            _submit(queue, "thread-2", tenant="acme"),
            _submit(queue, "thread-3", tenant="other"),
        ]
        assert [e.entry_id for e in queue.open_entries(tenant=ANY)] == ids

    def test_await_closed_returns_when_another_thread_closes(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        lease = _lease(queue)

        def close_soon() -> None:
            time.sleep(0.1)
            queue.close(lease, Completed("done"))

        closer = threading.Thread(target=close_soon)
        started = time.monotonic()
        closer.start()
        try:
            result = queue.await_closed(entry_id, timedelta(seconds=20))
        finally:
            closer.join()
        assert result is not None
        assert result.outcome == Completed("done")
        assert time.monotonic() - started < 10

    def test_await_closed_returns_none_at_timeout(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        started = time.monotonic()
        assert queue.await_closed(entry_id, timedelta(seconds=0.2)) is None
        assert time.monotonic() - started >= 0.15

    def test_await_closed_with_zero_timeout_on_open_entry_is_none(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        assert queue.await_closed(entry_id, timedelta(0)) is None

    def test_await_closed_of_unknown_entry_is_none(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        assert queue.await_closed(entry_id + 1000, timedelta(seconds=0.1)) is None

    def test_await_closed_timeout_is_wall_clock_not_store_clock(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue)
        mover = threading.Timer(0.05, clock.advance, args=(timedelta(days=365),))
        started = time.monotonic()
        mover.start()
        try:
            assert queue.await_closed(entry_id, timedelta(seconds=0.3)) is None
        finally:
            mover.join()
        assert time.monotonic() - started >= 0.25

    def test_await_closed_of_closed_entry_returns_at_once(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        queue.cancel(entry_id)
        result = queue.await_closed(entry_id, timedelta(0))
        assert result is not None and result.outcome == Cancelled("requested")

    def test_await_closed_of_other_tenants_entry_is_none(self, queue: RunQueue) -> None:
        entry_id = _submit(queue, tenant="acme")
        queue.cancel(entry_id, tenant="acme")
        assert queue.await_closed(entry_id, timedelta(seconds=0.1), tenant="other") is None
        assert queue.await_closed(entry_id, timedelta(seconds=0.1)) is None
        assert queue.await_closed(entry_id, timedelta(0), tenant="acme") is not None

    # --- reclaim (rule 25, D17) -----------------------------------------------------------

    def test_reclaim_removes_entries_closed_before_cutoff(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue)
        queue.cancel(entry_id)
        clock.advance(2 * HOUR)
        assert queue.reclaim(HOUR) == 1
        assert queue.entry(entry_id) is None

    def test_reclaim_keeps_entries_closed_after_cutoff(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        old = _submit(queue, "thread-1")
        recent = _submit(queue, "thread-2")
        queue.cancel(old)
        clock.advance(timedelta(minutes=30))
        queue.cancel(recent)
        clock.advance(timedelta(minutes=40))
        assert queue.reclaim(HOUR) == 1
        assert queue.entry(old) is None
        assert _entry(queue, recent).closed is True

    def test_reclaim_never_removes_open_entries(self, queue: RunQueue, clock: ClockControl) -> None:
        entry_id = _submit(queue)
        _lease(queue)
        clock.advance(timedelta(days=30))
        assert queue.reclaim(timedelta(0)) == 0
        assert _entry(queue, entry_id).closed is False

    def test_reclaim_removes_oldest_closed_first(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        lower_id = _submit(queue, "thread-1")
        higher_id = _submit(queue, "thread-2")
        queue.cancel(higher_id)
        clock.advance(timedelta(minutes=1))
        queue.cancel(lower_id)
        clock.advance(DAY)
        assert queue.reclaim(HOUR, batch=1) == 1
        assert queue.entry(higher_id) is None
        assert queue.entry(lower_id) is not None

    def test_reclaim_removes_at_most_batch_and_returns_count(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        for n in range(5):
            queue.cancel(_submit(queue, f"thread-{n}"))
        clock.advance(DAY)
        assert queue.reclaim(HOUR, batch=2) == 2
        assert queue.reclaim(HOUR, batch=2) == 2
        assert queue.reclaim(HOUR, batch=2) == 1
        assert queue.reclaim(HOUR, batch=2) == 0

    def test_reclaimed_entry_is_unknown_to_await_closed(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue)
        queue.cancel(entry_id)
        clock.advance(DAY)
        queue.reclaim(HOUR)
        assert queue.await_closed(entry_id, timedelta(seconds=0.1)) is None

    def test_reclaimed_entry_cannot_be_cancelled(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue)
        queue.cancel(entry_id)
        clock.advance(DAY)
        queue.reclaim(HOUR)
        with pytest.raises(NotFound):
            queue.cancel(entry_id)

    def test_reclaim_of_tenant_entries(self, queue: RunQueue, clock: ClockControl) -> None:
        entry_id = _submit(queue, tenant="acme")
        queue.cancel(entry_id, tenant="acme")
        clock.advance(DAY)
        assert queue.reclaim(HOUR) == 1
        assert queue.entry(entry_id, tenant="acme") is None

    # --- delete marks (SPEC §5 Deletes, rule 17) -------------------------------------------

    def test_delete_thread_marks_its_open_entries(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        _commit(store, "thread-1", "run-0", "cp-1")
        queued = _submit(queue, "thread-1")
        other_tenant = _submit(queue, "thread-1", tenant="acme")
        assert store.delete_thread("thread-1") is True
        assert _entry(queue, queued).thread_deleted is True
        assert _entry(queue, other_tenant, tenant="acme").thread_deleted is True

    def test_delete_thread_marks_leased_entry(self, queue: RunQueue, store: Checkpointer) -> None:
        entry_id = _submit(queue, "thread-1")
        _lease(queue)
        store.delete_thread("thread-1")
        assert _entry(queue, entry_id).thread_deleted is True

    def test_delete_thread_does_not_mark_closed_entries(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id = _submit(queue, "thread-1")
        queue.cancel(entry_id)
        store.delete_thread("thread-1")
        assert _entry(queue, entry_id).thread_deleted is False

    def test_delete_thread_does_not_mark_later_entries(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        _commit(store, "thread-1", "run-0", "cp-1")
        store.delete_thread("thread-1")
        entry_id = _submit(queue, "thread-1")
        assert _entry(queue, entry_id).thread_deleted is False
        assert queue.record_attempt(_lease(queue), "run-1") == Started(1)

    def test_delete_thread_does_not_mark_other_threads(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        _commit(store, "thread-1", "run-0", "cp-1")
        entry_id = _submit(queue, "thread-2")
        store.delete_thread("thread-1")
        assert _entry(queue, entry_id).thread_deleted is False

    def test_delete_thread_marks_entries_of_descendants(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        _commit(store, "parent", "run-0", "cp-p")
        _commit(store, "child", "run-1", "cp-c", parent_thread_id="parent")
        _commit(store, "grandchild", "run-2", "cp-g", parent_thread_id="child")
        on_child = _submit(queue, "child")
        on_grandchild = _submit(queue, "grandchild")
        store.delete_thread("parent")
        assert _entry(queue, on_child).thread_deleted is True
        assert _entry(queue, on_grandchild).thread_deleted is True

    def test_delete_of_never_committed_thread_still_marks(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id = _submit(queue, "thread-1")
        assert store.delete_thread("thread-1") is False
        assert _entry(queue, entry_id).thread_deleted is True

    def test_delete_marked_entry_stays_open_until_its_worker_learns(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id = _submit(queue, "thread-1")
        store.delete_thread("thread-1")
        listed = queue.open_entries(thread_id="thread-1")
        assert [(e.entry_id, e.thread_deleted, e.closed) for e in listed] == [
            (entry_id, True, False)
        ]

    def test_delete_marked_entry_can_still_be_leased(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id = _submit(queue, "thread-1")
        store.delete_thread("thread-1")
        assert _lease(queue).entry.entry_id == entry_id

    def test_commit_refuses_run_of_marked_entry(self, queue: RunQueue, store: Checkpointer) -> None:
        _attempted(queue, "run-1", "thread-1")
        store.delete_thread("thread-1")
        claim = store.claim("thread-1", "run-1")
        with pytest.raises(RunOfDeletedThread):
            store.commit(claim, Commit("cp-1", None, "run-1", {"s": 1}))
        assert store.get("thread-1") is None

    def test_commit_refuses_run_of_marked_entry_after_it_closed(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        _, lease = _attempted(queue, "run-1", "thread-1")
        store.delete_thread("thread-1")
        queue.close(lease, Failed("thread deleted"))
        claim = store.claim("thread-1", "run-1")
        with pytest.raises(RunOfDeletedThread):
            store.commit(claim, Commit("cp-1", None, "run-1", {"s": 1}))

    def test_commit_accepts_run_of_marked_entry_after_reclaim(
        self, queue: RunQueue, store: Checkpointer, clock: ClockControl
    ) -> None:
        _, lease = _attempted(queue, "run-1", "thread-1")
        store.delete_thread("thread-1")
        queue.close(lease, Failed("thread deleted"))
        clock.advance(DAY)
        assert queue.reclaim(HOUR) == 1
        claim = store.claim("thread-1", "run-1")
        assert store.commit(claim, Commit("cp-1", None, "run-1", {"s": 1})).run_id == "run-1"

    def test_commit_refusal_only_for_marked_entries_of_committing_thread(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        _attempted(queue, "run-1", "thread-1")
        store.delete_thread("thread-1")
        claim = store.claim("thread-2", "run-1")
        assert store.commit(claim, Commit("cp-1", None, "run-1", {"s": 1})).run_id == "run-1"

    def test_commit_accepts_other_runs_on_deleted_thread(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        _attempted(queue, "run-1", "thread-1")
        store.delete_thread("thread-1")
        assert _commit(store, "thread-1", "run-2", "cp-1").run_id == "run-2"

    # --- admissions (SPEC §5 Admissions, rule 10) -------------------------------------------

    def test_commit_admits_open_entry_whose_attempt_is_the_run(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id, _ = _attempted(queue, "run-1", "thread-1")
        _commit(store, "thread-1", "run-1", "cp-1", next_nodes=("step",))
        assert _entry(queue, entry_id).admitted is True

    def test_commit_of_another_run_does_not_admit(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id, _ = _attempted(queue, "run-1", "thread-1")
        _commit(store, "thread-1", "run-other", "cp-1")
        assert _entry(queue, entry_id).admitted is False

    def test_commit_admits_only_entries_of_committing_thread(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id, _ = _attempted(queue, "run-1", "thread-1")
        _commit(store, "thread-2", "run-1", "cp-1")
        assert _entry(queue, entry_id).admitted is False

    def test_commit_does_not_admit_closed_entries(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id, lease = _attempted(queue, "run-1", "thread-1")
        queue.close(lease, Failed("gave up"))
        _commit(store, "thread-1", "run-1", "cp-1")
        assert _entry(queue, entry_id).admitted is False

    def test_retract_turn_does_not_unmark_admission(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id, _ = _attempted(queue, "run-1", "thread-1")
        claim = store.claim("thread-1", "run-1")
        store.commit(claim, Commit("cp-1", None, "run-1", {"s": 1}))
        assert store.retract_turn(claim) is None
        assert _entry(queue, entry_id).admitted is True

    # --- plan_attempt (SPEC §2) --------------------------------------------------------------

    def test_plan_is_fresh_when_nothing_was_applied(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id, _ = _attempted(queue, "run-1", "thread-1")
        entry = _entry(queue, entry_id)
        latest = store.latest_of_runs("thread-1", [a.run_id for a in entry.attempts])
        assert latest is None
        assert plan_attempt(entry, latest) == Fresh()

    def test_plan_resumes_unfinished_checkpoint(self, queue: RunQueue, store: Checkpointer) -> None:
        entry_id, _ = _attempted(queue, "run-1", "thread-1")
        cp = _commit(store, "thread-1", "run-1", "cp-1", next_nodes=("step",))
        entry = _entry(queue, entry_id)
        latest = store.latest_of_runs("thread-1", [a.run_id for a in entry.attempts])
        assert latest == cp
        assert plan_attempt(entry, latest) == Resume(cp)

    def test_plan_is_finished_with_final_checkpoint(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id, _ = _attempted(queue, "run-1", "thread-1")
        cp = _commit(store, "thread-1", "run-1", "cp-1")
        entry = _entry(queue, entry_id)
        latest = store.latest_of_runs("thread-1", [a.run_id for a in entry.attempts])
        assert plan_attempt(entry, latest) == Finished(cp)

    def test_plan_is_finished_without_checkpoint_after_retraction(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id, _ = _attempted(queue, "run-1", "thread-1")
        claim = store.claim("thread-1", "run-1")
        store.commit(claim, Commit("cp-1", None, "run-1", {"s": 1}))
        store.retract_turn(claim)
        entry = _entry(queue, entry_id)
        latest = store.latest_of_runs("thread-1", [a.run_id for a in entry.attempts])
        assert latest is None
        assert plan_attempt(entry, latest) == Finished(None)

    # --- the at-most-once worker protocol (SPEC §5) -----------------------------------------

    def test_worker_protocol_applies_input_once_and_closes(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id = _submit(queue, "thread-1", {"question": "hi"})
        lease = _lease(queue, "worker-1")
        assert queue.record_attempt(lease, "run-1") == Started(1)
        claim = store.claim("thread-1", "run-1")
        entry = _entry(queue, entry_id)
        latest = store.latest_of_runs("thread-1", [a.run_id for a in entry.attempts])
        assert plan_attempt(entry, latest) == Fresh()
        cp = store.commit(claim, Commit("cp-1", None, "run-1", {"answer": entry.input}))
        store.release_claim(claim)
        closed = queue.close(lease, Completed({"checkpoint": cp.checkpoint_id}))
        assert closed.outcome == Completed({"checkpoint": "cp-1"})
        assert closed.admitted is True
        assert closed.closed_at_seq == cp.seq
        assert queue.lease("worker-2", TTL) is None

    def test_worker_protocol_with_run_id_on_lease(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id = _submit(queue, "thread-1")
        lease = _lease(queue, run_id="run-1")
        assert lease.attempt == Started(1)
        claim = store.claim("thread-1", "run-1")
        entry = _entry(queue, entry_id)
        latest = store.latest_of_runs("thread-1", [a.run_id for a in entry.attempts])
        assert plan_attempt(entry, latest) == Fresh()
        store.commit(claim, Commit("cp-1", None, "run-1", {"s": 1}))
        assert queue.close(lease, Completed()).admitted is True

    def test_worker_after_crash_before_commit_plans_fresh(
        self, queue: RunQueue, store: Checkpointer, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue, "thread-1")
        first = _lease(queue, "worker-1")
        queue.record_attempt(first, "run-1")
        store.claim("thread-1", "run-1")  # crashes holding lease and claim
        clock.advance(PAST_TTL)
        second = _lease(queue, "worker-2")
        assert queue.record_attempt(second, "run-2") == Started(2)
        store.claim("thread-1", "run-2")
        entry = _entry(queue, entry_id)
        latest = store.latest_of_runs("thread-1", [a.run_id for a in entry.attempts])
        assert plan_attempt(entry, latest) == Fresh()

    def test_worker_resumes_after_crash_past_non_final_checkpoint(
        self, queue: RunQueue, store: Checkpointer, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue, "thread-1", {"task": "two steps"})
        first = _lease(queue, "worker-1")
        queue.record_attempt(first, "run-1")
        claim_1 = store.claim("thread-1", "run-1")
        step_1 = store.commit(claim_1, Commit("cp-1", None, "run-1", {"n": 1}, next=("b",)))
        clock.advance(PAST_TTL)  # worker-1 crashed: its lease and claim expire
        second = _lease(queue, "worker-2")
        assert second.token > first.token
        assert queue.record_attempt(second, "run-2") == Started(2)
        claim_2 = store.claim("thread-1", "run-2")
        entry = _entry(queue, entry_id)
        assert [a.run_id for a in entry.attempts] == ["run-1", "run-2"]
        latest = store.latest_of_runs("thread-1", [a.run_id for a in entry.attempts])
        plan = plan_attempt(entry, latest)
        assert plan == Resume(step_1)
        assert isinstance(plan, Resume)
        step_2 = store.commit(
            claim_2, Commit("cp-2", plan.checkpoint.checkpoint_id, "run-2", {"n": 2})
        )
        queue.close(second, Completed({"n": 2}))
        assert [cp.checkpoint_id for cp in store.history("thread-1")] == ["cp-2", "cp-1"]
        assert step_2.parent_id == "cp-1"

    def test_worker_finds_finished_after_crash_past_final_checkpoint(
        self, queue: RunQueue, store: Checkpointer, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue, "thread-1")
        first = _lease(queue, "worker-1")
        queue.record_attempt(first, "run-1")
        claim_1 = store.claim("thread-1", "run-1")
        final = store.commit(claim_1, Commit("cp-1", None, "run-1", {"done": True}))
        clock.advance(PAST_TTL)  # worker-1 crashed before close
        second = _lease(queue, "worker-2")
        assert queue.record_attempt(second, "run-2") == Started(2)
        store.claim("thread-1", "run-2")
        entry = _entry(queue, entry_id)
        latest = store.latest_of_runs("thread-1", [a.run_id for a in entry.attempts])
        assert plan_attempt(entry, latest) == Finished(final)
        queue.close(second, Completed({"done": True}))
        assert [cp.checkpoint_id for cp in store.history("thread-1")] == ["cp-1"]

    def test_late_worker_is_fenced_out_after_takeover(
        self, queue: RunQueue, store: Checkpointer, clock: ClockControl
    ) -> None:
        _submit(queue, "thread-1")
        first = _lease(queue, "worker-1")
        queue.record_attempt(first, "run-1")
        claim_1 = store.claim("thread-1", "run-1")
        clock.advance(PAST_TTL)  # worker-1 stalls
        second = _lease(queue, "worker-2")
        queue.record_attempt(second, "run-2")
        store.claim("thread-1", "run-2")
        with pytest.raises(ClaimLost):
            store.commit(claim_1, Commit("cp-late", None, "run-1", {"late": True}))
        with pytest.raises(LeaseLost):
            queue.close(first, Completed())
        assert store.get("thread-1") is None

    def test_entry_read_after_claim_sees_other_workers_attempts(
        self, queue: RunQueue, store: Checkpointer, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue, "thread-1")
        first = _lease(queue, "worker-1", run_id="run-1")
        clock.advance(PAST_TTL)
        second = _lease(queue, "worker-2", run_id="run-2")
        # worker-1's snapshot predates worker-2's attempt; the entry read now does not.
        assert [a.run_id for a in first.entry.attempts] == ["run-1"]
        assert [a.run_id for a in second.entry.attempts] == ["run-1", "run-2"]
        assert [a.run_id for a in _entry(queue, entry_id).attempts] == ["run-1", "run-2"]

    # --- validation: nothing written on bad arguments ---------------------------------------

    @pytest.mark.parametrize("case", sorted(_BAD_SUBMISSIONS))
    def test_submit_with_bad_argument_raises_validation_error(
        self, queue: RunQueue, case: str
    ) -> None:
        _submit(queue, "thread-0", key="k")
        submission, name = _BAD_SUBMISSIONS[case]
        before = _open(queue)
        with pytest.raises(ValidationError, match=name):
            queue.submit(submission)
        assert _open(queue) == before

    @pytest.mark.parametrize("case", sorted(_BAD_LEASE_ARGS))
    def test_lease_with_bad_argument_raises_validation_error(
        self, queue: RunQueue, case: str
    ) -> None:
        _submit(queue)
        overrides, name = _BAD_LEASE_ARGS[case]
        args: dict[str, Any] = {"holder": "worker-1", "ttl": TTL, "tenant": ANY, "run_id": "r-1"}
        args.update(overrides)
        before = _open(queue)
        with pytest.raises(ValidationError, match=name):
            queue.lease(**args)
        assert _open(queue) == before

    @pytest.mark.parametrize("ttl", [timedelta(seconds=-1), timedelta(0), 30])
    def test_renew_with_bad_ttl_raises_validation_error(self, queue: RunQueue, ttl: Any) -> None:
        _submit(queue)
        lease = _lease(queue)
        before = _open(queue)
        with pytest.raises(ValidationError, match="ttl"):
            queue.renew(lease, ttl=ttl)
        assert _open(queue) == before

    @pytest.mark.parametrize("call", sorted(_LEASE_CALLS))
    def test_lease_call_with_non_lease_raises_validation_error(
        self, queue: RunQueue, call: str
    ) -> None:
        _submit(queue)
        lease = _lease(queue)
        before = _open(queue)
        with pytest.raises(ValidationError, match="lease"):
            _LEASE_CALLS[call](queue, lease.entry)  # type: ignore[arg-type]
        assert _open(queue) == before

    @pytest.mark.parametrize("run_id", ["", "r\x00", 7, "x" * 513])
    def test_record_attempt_with_bad_run_id_raises_validation_error(
        self, queue: RunQueue, run_id: Any
    ) -> None:
        entry_id = _submit(queue)
        lease = _lease(queue)
        with pytest.raises(ValidationError, match="run_id"):
            queue.record_attempt(lease, run_id)
        assert _entry(queue, entry_id).attempts == ()

    @pytest.mark.parametrize("case", sorted(_BAD_OUTCOMES))
    def test_close_with_bad_outcome_raises_validation_error(
        self, queue: RunQueue, case: str
    ) -> None:
        _submit(queue)
        lease = _lease(queue)
        before = _open(queue)
        with pytest.raises(ValidationError, match="outcome"):
            queue.close(lease, _BAD_OUTCOMES[case])
        assert _open(queue) == before

    @pytest.mark.parametrize(
        ("args", "name"),
        [(("1",), "entry_id"), ((True,), "entry_id"), ((1, ""), "tenant")],
    )
    def test_cancel_with_bad_argument_raises_validation_error(
        self, queue: RunQueue, args: tuple[Any, ...], name: str
    ) -> None:
        _submit(queue)
        before = _open(queue)
        with pytest.raises(ValidationError, match=name):
            queue.cancel(*args)
        assert _open(queue) == before

    @pytest.mark.parametrize(
        ("args", "name"), [(("1",), "entry_id"), ((1, ""), "tenant"), ((1, 5), "tenant")]
    )
    def test_entry_with_bad_argument_raises_validation_error(
        self, queue: RunQueue, args: tuple[Any, ...], name: str
    ) -> None:
        _submit(queue)
        with pytest.raises(ValidationError, match=name):
            queue.entry(*args)

    @pytest.mark.parametrize(
        ("kwargs", "name"),
        [
            ({"tenant": ""}, "tenant"),
            ({"thread_id": ""}, "thread_id"),
            ({"thread_id": 3}, "thread_id"),
        ],
    )
    def test_open_entries_with_bad_argument_raises_validation_error(
        self, queue: RunQueue, kwargs: dict[str, Any], name: str
    ) -> None:
        with pytest.raises(ValidationError, match=name):
            queue.open_entries(**kwargs)

    @pytest.mark.parametrize(
        ("timeout", "tenant"),
        [(1.0, None), (timedelta(seconds=-1), None), (timedelta(seconds=1), "")],
    )
    def test_await_closed_with_bad_argument_raises_validation_error(
        self, queue: RunQueue, timeout: Any, tenant: Any
    ) -> None:
        entry_id = _submit(queue)
        with pytest.raises(ValidationError):
            queue.await_closed(entry_id, timeout, tenant=tenant)

    @pytest.mark.parametrize(
        ("older_than", "batch", "name"),
        [
            (timedelta(seconds=-1), 10, "older_than"),
            (3600, 10, "older_than"),
            (HOUR, 0, "batch"),
            (HOUR, -1, "batch"),
            (HOUR, True, "batch"),
            (HOUR, 1.5, "batch"),
        ],
    )
    def test_reclaim_with_bad_argument_raises_validation_error(
        self,
        queue: RunQueue,
        clock: ClockControl,
        older_than: Any,
        batch: Any,
        name: str,
    ) -> None:
        entry_id = _submit(queue)
        queue.cancel(entry_id)
        clock.advance(DAY)
        with pytest.raises(ValidationError, match=name):
            queue.reclaim(older_than, batch=batch)
        assert queue.entry(entry_id) is not None

    # --- rule 8: a closed store ---------------------------------------------------------------

    @pytest.mark.parametrize("call", sorted(_CALLS_AFTER_STORE_CLOSE))
    def test_queue_call_after_store_close_raises_processing_error(
        self, queue: RunQueue, store: Checkpointer, call: str
    ) -> None:
        _submit(queue)
        lease = _lease(queue)
        store.close()
        with pytest.raises(ProcessingError):
            _CALLS_AFTER_STORE_CLOSE[call](queue, lease)

    # --- concurrency ------------------------------------------------------------------------

    def test_racing_leases_on_one_head_have_one_winner(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1")
        _submit(queue, "thread-1")
        results = _race(8, lambda n: queue.lease(f"worker-{n}", TTL))
        winners = [lease for lease in results if lease is not None]
        assert len(winners) == 1

    def test_racing_leases_on_many_threads_take_distinct_entries(self, queue: RunQueue) -> None:
        ids = {_submit(queue, f"thread-{n}") for n in range(8)}
        results = _race(8, lambda n: queue.lease(f"worker-{n}", TTL))
        taken = [lease.entry.entry_id for lease in results if lease is not None]
        assert len(taken) == len(set(taken))
        assert set(taken) <= ids

    def test_racing_identical_keyed_submits_make_one_entry(self, queue: RunQueue) -> None:
        tickets = _race(8, lambda n: queue.submit(Submission("thread-1", {"a": 1}, key="k")))
        assert len({t.entry_id for t in tickets}) == 1
        assert sorted(t.existing for t in tickets) == [False] + [True] * 7
        assert len(queue.open_entries()) == 1


def _race(count: int, call: Callable[[int], Any]) -> list[Any]:
    """Run ``call(n)`` in ``count`` Python threads released together; re-raise any failure."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[n] = call(n)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    if errors:
        raise errors[0]
    return results


__all__ = ["HOUR", "PAST_TTL", "SLACK", "TTL", "RunQueueContract"]
