"""Submit (SPEC §5, sql/60_submit.sql): tickets, keys (D17: a kept key deduplicates until
reclaim), REJECT and INTERRUPT.
"""

from __future__ import annotations

import pytest

from durable_graph.core.errors import EntryClosed, SubmissionKeyReused, ThreadBusy
from durable_graph.core.model import Completed, Interrupted, Mode, Submission
from durable_graph.core.run_queue import RunQueue
from durable_graph.testkit.contract.run_queue.support import (
    DAY,
    HOUR,
    _entry,
    _lease,
    _names_no,
    _near,
    _reclaimed,
    _refused,
    _submit,
)
from durable_graph.testkit.harness import ClockControl


class SubmitTests:
    """submit: tickets, keys, REJECT and INTERRUPT."""

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
        first = _reclaimed(queue, clock)
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

    # --- submit: keys (rule 19; D17: a kept key deduplicates until reclaim) ---------------

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
        _refused(
            queue,
            lambda: queue.submit(Submission("thread-1", "other", key="k")),
            SubmissionKeyReused,
        )

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
        rejected = Submission("thread-1", "go", key="k", mode=Mode.REJECT)
        _refused(queue, lambda: queue.submit(rejected), ThreadBusy)
        # The refused submission's key was not kept.
        assert queue.submit(Submission("thread-2", "x", key="k")).existing is False

    def test_reject_thread_busy_message_names_no_entry_or_tenant(self, queue: RunQueue) -> None:
        entry_id = _submit(queue, "thread-1", tenant="tenant-secret")
        with pytest.raises(ThreadBusy) as raised:
            queue.submit(Submission("thread-1", "go", tenant="tenant-other", mode=Mode.REJECT))
        _names_no(str(raised.value), entry_id, "tenant-secret", "tenant-other")

    def test_reject_thread_busy_message_is_the_fixed_text(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1")
        with pytest.raises(ThreadBusy, match="thread has an open entry"):  # D22: a fixed text
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
