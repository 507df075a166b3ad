"""Lease (SPEC §5, sql/70_lease.sql): queue order (rule 24), heads and live leases, tenants
(rule 18), and leasing with a run_id.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import LeaseLost
from durable_graph.core.model import Cancelled, Completed, Exhausted, Mode, Started, ThreadDeleted
from durable_graph.core.run_queue import RunQueue
from durable_graph.testkit.contract.run_queue.support import (
    DAY,
    PAST_TTL,
    TTL,
    _attempted,
    _commit,
    _entry,
    _lease,
    _near,
    _submit,
)
from durable_graph.testkit.harness import ClockControl


class LeaseTests:
    """lease: queue order, heads, live leases, tenants and run_id."""

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

    def test_open_entries_groups_threads_by_the_entry_that_opened_them(
        self, queue: RunQueue
    ) -> None:
        a_first = _submit(queue, "thread-a")
        b_first = _submit(queue, "thread-b")
        a_interrupt = _submit(queue, "thread-a", mode=Mode.INTERRUPT)
        c_first = _submit(queue, "thread-c")
        b_later = _submit(queue, "thread-b")
        # D65: thread-a opened with a_first (1), thread-b with b_first (2), thread-c with
        # c_first (4), whatever the heads are now; INTERRUPT first inside a thread.
        listed = [e.entry_id for e in queue.open_entries()]
        assert listed == [a_interrupt, a_first, b_first, b_later, c_first]
        queue.cancel(a_interrupt)
        queue.cancel(a_first)
        a_again = _submit(queue, "thread-a")  # thread-a's next stretch comes after the others
        assert [e.entry_id for e in queue.open_entries()] == [b_first, b_later, c_first, a_again]

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
