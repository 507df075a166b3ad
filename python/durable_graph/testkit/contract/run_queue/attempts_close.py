"""Calls under a lease (SPEC §5, sql/80_attempts_close.sql): renew (D18: defaults to the lease's
ttl), release (D19: clears the lease), record_attempt (rule 20) and close, and each on a closed
entry (rule 21).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import EntryClosed, LeaseLost, RunIdTaken
from durable_graph.core.model import (
    Cancelled,
    Commit,
    Completed,
    Exhausted,
    Failed,
    Started,
    ThreadDeleted,
)
from durable_graph.core.run_queue import RunQueue
from durable_graph.testkit.contract.run_queue.support import (
    _LEASE_CALLS,
    DAY,
    HOUR,
    PAST_TTL,
    TTL,
    _attempted,
    _closed,
    _commit,
    _entry,
    _expired,
    _lease,
    _leased,
    _near,
    _reclaim_closed,
    _submit,
    _taken_over,
)
from durable_graph.testkit.harness import ClockControl


class AttemptsCloseTests:
    """renew, release, record_attempt and close under a lease."""

    # --- renew (rule 21; D18: renew defaults to the lease's ttl) --------------------------

    def test_renew_pushes_expiry_keeping_token(self, queue: RunQueue, clock: ClockControl) -> None:
        lease = _leased(queue)
        clock.advance(timedelta(seconds=10))
        renewed = queue.renew(lease)
        assert renewed.token == lease.token
        assert renewed.holder == lease.holder
        _near(renewed.expires_at, lease.expires_at + timedelta(seconds=10))

    def test_renew_updates_entry_lease_expiry(self, queue: RunQueue, clock: ClockControl) -> None:
        lease = _leased(queue)
        clock.advance(timedelta(seconds=10))
        renewed = queue.renew(lease)
        assert _entry(queue, lease.entry.entry_id).lease_expires_at == renewed.expires_at

    def test_renew_keeps_lease_live_past_original_expiry(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        lease = _leased(queue)
        clock.advance(timedelta(seconds=20))
        queue.renew(lease)
        clock.advance(timedelta(seconds=20))
        assert queue.lease("worker-2", TTL) is None

    def test_renew_works_after_expiry_while_current(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        lease = _expired(queue, clock)
        renewed = queue.renew(lease)
        assert renewed.token == lease.token
        assert queue.lease("worker-2", TTL) is None

    def test_renew_with_ttl_overrides_expiry(self, queue: RunQueue) -> None:
        lease = _leased(queue)
        renewed = queue.renew(lease, ttl=HOUR)
        _near(renewed.expires_at, lease.expires_at - TTL + HOUR)

    def test_renew_without_ttl_uses_the_ttl_the_lease_was_taken_with(self, queue: RunQueue) -> None:
        lease = _leased(queue)
        longer = queue.renew(lease, ttl=HOUR)
        assert longer.ttl == TTL
        again = queue.renew(longer)
        _near(again.expires_at, lease.expires_at)

    def test_renew_of_closed_entry_raises_entry_closed(self, queue: RunQueue) -> None:
        lease = _closed(queue)
        with pytest.raises(EntryClosed):
            queue.renew(lease)

    # --- release (D19: release and close clear the lease) ---------------------------------

    def test_release_clears_the_entry_lease(self, queue: RunQueue) -> None:
        lease = _leased(queue)
        queue.release(lease)
        entry = _entry(queue, lease.entry.entry_id)
        assert (entry.lease_holder, entry.lease_expires_at) == (None, None)
        assert entry.closed is False

    def test_released_entry_is_leased_again_at_once(self, queue: RunQueue) -> None:
        first = _leased(queue)
        queue.release(first)
        second = _lease(queue, "worker-2")
        assert second.entry.entry_id == first.entry.entry_id
        assert second.token > first.token

    def test_release_works_after_expiry_while_current(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        lease = _expired(queue, clock)
        queue.release(lease)
        assert _entry(queue, lease.entry.entry_id).lease_holder is None

    @pytest.mark.parametrize("call", sorted(_LEASE_CALLS))
    def test_lease_call_under_released_lease_raises_lease_lost(
        self, queue: RunQueue, call: str
    ) -> None:
        lease = _leased(queue)
        queue.release(lease)
        with pytest.raises(LeaseLost):
            _LEASE_CALLS[call](queue, lease)
        # Nothing written: the entry stays open, unleased and without attempts.
        entry = _entry(queue, lease.entry.entry_id)
        assert (entry.lease_holder, entry.closed, entry.attempts) == (None, False, ())

    # --- lease calls on lost leases and closed entries (rule 21) ----------------------------

    @pytest.mark.parametrize("call", sorted(_LEASE_CALLS))
    def test_lease_call_with_lost_lease_raises_lease_lost(
        self, queue: RunQueue, clock: ClockControl, call: str
    ) -> None:
        stale, current = _taken_over(queue, clock)
        with pytest.raises(LeaseLost):
            _LEASE_CALLS[call](queue, stale)
        # Nothing written: worker-2 holds the entry, still open and without attempts.
        entry = _entry(queue, current.entry.entry_id)
        assert (entry.lease_holder, entry.closed, entry.attempts) == ("worker-2", False, ())

    @pytest.mark.parametrize("call", sorted(_LEASE_CALLS))
    def test_lease_call_on_closed_entry_raises_entry_closed_before_token_check(
        self, queue: RunQueue, clock: ClockControl, call: str
    ) -> None:
        stale, current = _taken_over(queue, clock)
        queue.close(current, Completed())
        with pytest.raises(EntryClosed):
            _LEASE_CALLS[call](queue, stale)

    @pytest.mark.parametrize("call", sorted(_LEASE_CALLS))
    def test_cancelled_entry_worker_learns_it_on_next_call(
        self, queue: RunQueue, call: str
    ) -> None:
        lease = _leased(queue)
        queue.cancel(lease.entry.entry_id)
        with pytest.raises(EntryClosed):
            _LEASE_CALLS[call](queue, lease)

    @pytest.mark.parametrize("call", sorted(_LEASE_CALLS))
    def test_lease_call_on_reclaimed_entry_raises_entry_closed(
        self, queue: RunQueue, clock: ClockControl, call: str
    ) -> None:
        lease = _closed(queue)
        _reclaim_closed(queue, clock)
        with pytest.raises(EntryClosed):  # D25: a reclaimed entry answers EntryClosed
            _LEASE_CALLS[call](queue, lease)

    # --- record_attempt (rule 20) -----------------------------------------------------------

    def test_record_attempt_returns_started_numbers(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id, _ = _attempted(queue, "run-1")
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
        entry_id, _ = _attempted(queue, "run-1")
        assert [a.run_id for a in _entry(queue, entry_id).attempts] == ["run-1"]

    def test_record_attempt_started_at_comes_from_store_clock(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        lease = _leased(queue, ttl=timedelta(days=2))
        clock.advance(DAY)
        queue.record_attempt(lease, "run-1")
        entry = _entry(queue, lease.entry.entry_id)
        _near(entry.attempts[0].started_at, entry.submitted_at + DAY)

    def test_record_attempt_on_closed_entry_raises_entry_closed(self, queue: RunQueue) -> None:
        lease = _closed(queue, Failed("boom"))
        with pytest.raises(EntryClosed):
            queue.record_attempt(lease, "run-1")

    def test_record_attempt_works_after_expiry_while_current(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        lease = _expired(queue, clock)
        assert queue.record_attempt(lease, "run-1") == Started(1)

    def test_record_attempt_on_delete_marked_entry_returns_thread_deleted(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        lease = _leased(queue, "thread-1")
        store.delete_thread("thread-1")
        assert queue.record_attempt(lease, "run-1") == ThreadDeleted()
        entry = _entry(queue, lease.entry.entry_id)
        assert entry.outcome == Cancelled("thread_deleted")
        assert entry.attempts == ()

    def test_record_attempt_checks_lease_before_delete_mark(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        lease = _leased(queue, "thread-1")
        queue.release(lease)
        store.delete_thread("thread-1")
        with pytest.raises(LeaseLost):
            queue.record_attempt(lease, "run-1")
        assert _entry(queue, lease.entry.entry_id).closed is False

    def test_record_attempt_checks_delete_mark_before_exhaustion(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id, lease = _attempted(queue, "run-1", "thread-1", max_attempts=1)
        store.delete_thread("thread-1")
        assert queue.record_attempt(lease, "run-2") == ThreadDeleted()
        assert _entry(queue, entry_id).outcome == Cancelled("thread_deleted")

    def test_record_attempt_checks_delete_mark_before_taken_run_id(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        _, lease = _attempted(queue, "run-1", "thread-1")
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
        entry_id, lease = _attempted(queue, "run-1", max_attempts=1)
        assert queue.record_attempt(lease, "run-2") == Exhausted()
        closed = queue.close(lease, Failed("out of attempts"))
        assert closed.outcome == Failed("out of attempts")
        assert _entry(queue, entry_id).outcome == Failed("out of attempts")

    def test_record_attempt_checks_exhaustion_before_taken_run_id(self, queue: RunQueue) -> None:
        _, lease = _attempted(queue, "run-1", max_attempts=1)
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
        _, lease = _attempted(queue, "run-1")
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
        _, lease = _attempted(queue, "run-1")
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
        _reclaim_closed(queue, clock)
        _submit(queue, "thread-1")
        assert queue.record_attempt(_lease(queue), "run-1") == Started(1)

    # --- close ----------------------------------------------------------------------------

    def test_close_records_outcome_and_returns_closed_entry(self, queue: RunQueue) -> None:
        lease = _leased(queue)
        closed = queue.close(lease, Completed({"answer": 42}))
        assert closed.entry_id == lease.entry.entry_id
        assert closed.outcome == Completed({"answer": 42})
        assert closed.closed is True
        assert _entry(queue, lease.entry.entry_id) == closed

    def test_close_twice_raises_entry_closed(self, queue: RunQueue) -> None:
        lease = _closed(queue)
        with pytest.raises(EntryClosed):
            queue.close(lease, Failed("again"))
        assert _entry(queue, lease.entry.entry_id).outcome == Completed()

    def test_close_keeps_failed_error_text(self, queue: RunQueue) -> None:
        closed = queue.close(_leased(queue), Failed("boom: ünïcode 😀 \u0000"))
        assert closed.outcome == Failed("boom: ünïcode 😀 \u0000")

    def test_close_output_round_trips(self, queue: RunQueue) -> None:
        output = {"nested": [1, 2.5, None, {"k": "a\u0000😀"}], "t": True}
        lease = _closed(queue, Completed(output))
        assert _entry(queue, lease.entry.entry_id).outcome == Completed(output)

    def test_entry_outcome_is_a_fresh_object_each_read(self, queue: RunQueue) -> None:
        entry_id = _closed(queue, Completed({"items": [1]})).entry.entry_id
        outcome = _entry(queue, entry_id).outcome
        assert isinstance(outcome, Completed) and isinstance(outcome.output, dict)
        outcome.output["items"].append(2)
        assert _entry(queue, entry_id).outcome == Completed({"items": [1]})

    def test_close_stamps_closed_at_from_store_clock(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        lease = _leased(queue, ttl=timedelta(days=2))
        clock.advance(DAY)
        closed = queue.close(lease, Completed())
        _near(closed.closed_at, _entry(queue, lease.entry.entry_id).submitted_at + DAY)

    def test_close_clears_the_lease(self, queue: RunQueue) -> None:
        entry = _entry(queue, _closed(queue).entry.entry_id)
        assert (entry.lease_holder, entry.lease_expires_at) == (None, None)

    def test_close_lets_the_next_entry_be_leased(self, queue: RunQueue) -> None:
        _submit(queue)
        following = _submit(queue)
        queue.close(_lease(queue), Completed())
        assert _lease(queue).entry.entry_id == following

    def test_close_works_after_expiry_while_current(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        lease = _expired(queue, clock)
        assert queue.close(lease, Completed()).outcome == Completed()

    def test_closed_at_seq_is_zero_without_events(self, queue: RunQueue) -> None:
        assert queue.close(_leased(queue), Completed()).closed_at_seq == 0

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
        lease = _leased(queue, "thread-1")
        assert store.delete_thread("thread-1") is True
        assert queue.record_attempt(lease, "run-1") == ThreadDeleted()
        assert _entry(queue, lease.entry.entry_id).closed_at_seq == second.seq
