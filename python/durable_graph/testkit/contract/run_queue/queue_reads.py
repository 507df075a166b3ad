"""Cancel and reads of the queue (SPEC §5, sql/90_queue_reads.sql): cancel, entry, open_entries
and await_closed by tenant (D16: an entry is visible to its own tenant only, checked before
closed), reclaim (D17: a kept key deduplicates until reclaim).
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import EntryClosed, NotFound
from durable_graph.core.model import ANY, Cancelled, Completed, Mode, ThreadDeleted
from durable_graph.core.run_queue import RunQueue
from durable_graph.testkit.contract.run_queue.support import (
    DAY,
    HOUR,
    _entry,
    _lease,
    _near,
    _reclaimed,
    _submit,
)
from durable_graph.testkit.harness import ClockControl


def _closed_ago(queue: RunQueue, clock: ClockControl, *ages: timedelta) -> list[int]:
    """One entry per age, submitted in that order, each cancelled so that it has now been closed
    for its age: their ids. The oldest is cancelled first, the clock moving on between cancels."""
    ids = [_submit(queue, f"thread-{n}") for n in range(len(ages))]
    by_age = sorted(zip(ages, ids, strict=True), reverse=True)
    for (age, entry_id), (next_age, _) in zip(
        by_age, [*by_age[1:], (timedelta(0), 0)], strict=True
    ):
        queue.cancel(entry_id)
        clock.advance(age - next_age)
    return ids


class QueueReadsTests:
    """cancel, entry, open_entries, await_closed and reclaim."""

    # --- cancel (rule 22; D16: visibility checked before closed) --------------------------

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
        # D27: every way of closing ends the lease
        assert (interrupted.lease_holder, interrupted.lease_expires_at) == (None, None)
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
        # D27: every way of closing ends the lease
        assert (closed.lease_holder, closed.lease_expires_at) == (None, None)
        assert _lease(queue, "worker-2").entry.entry_id == following

    # --- tenant-scoped reads (D16: an entry is visible to its own tenant only) ------------

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

    # --- reclaim (rule 25; D17: a kept key deduplicates until reclaim) --------------------

    def test_reclaim_removes_entries_closed_before_cutoff(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        (entry_id,) = _closed_ago(queue, clock, 2 * HOUR)
        assert queue.reclaim(HOUR) == 1
        assert queue.entry(entry_id) is None

    def test_reclaim_keeps_entries_closed_after_cutoff(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        old, recent = _closed_ago(queue, clock, timedelta(minutes=70), timedelta(minutes=40))
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
        lower_id, higher_id = _closed_ago(queue, clock, DAY, DAY + timedelta(minutes=1))
        assert queue.reclaim(HOUR, batch=1) == 1
        assert queue.entry(higher_id) is None
        assert queue.entry(lower_id) is not None

    def test_reclaim_removes_at_most_batch_and_returns_count(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        _closed_ago(queue, clock, *[DAY] * 5)
        assert queue.reclaim(HOUR, batch=2) == 2
        assert queue.reclaim(HOUR, batch=2) == 2
        assert queue.reclaim(HOUR, batch=2) == 1
        assert queue.reclaim(HOUR, batch=2) == 0

    def test_reclaimed_entry_is_unknown_to_await_closed(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id = _reclaimed(queue, clock)
        assert queue.await_closed(entry_id, timedelta(seconds=0.1)) is None

    def test_reclaimed_entry_cannot_be_cancelled(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id = _reclaimed(queue, clock)
        with pytest.raises(NotFound):
            queue.cancel(entry_id)

    def test_reclaim_of_tenant_entries(self, queue: RunQueue, clock: ClockControl) -> None:
        entry_id = _reclaimed(queue, clock, tenant="acme")
        assert queue.entry(entry_id, tenant="acme") is None
