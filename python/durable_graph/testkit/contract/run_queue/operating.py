"""Operating the queue (SPEC §13, sql/85_operating.sql): delayed runs, backoff stored as
``not_before`` (`defer`), per-attempt failure reasons, and `retry` of closed entries.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import EntryClosed, LeaseLost, NotFound, ValidationError
from durable_graph.core.model import Cancelled, Completed, Failed, QueueEntry, Started, Submission
from durable_graph.core.run_queue import RunQueue
from durable_graph.testkit.contract.run_queue.support import (
    HOUR,
    PAST_TTL,
    SLACK,
    TTL,
    _attempted,
    _entry,
    _lease,
    _submit,
)
from durable_graph.testkit.harness import ClockControl


class OperatingTests:
    """SPEC §13: delayed runs, backoff, attempt errors, retry."""

    # --- delayed runs ----------------------------------------------------------------------

    def test_delayed_submission_is_not_leased_before_its_not_before(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        start = _entry(queue, _submit(queue, "thread-0")).submitted_at
        queue.cancel(_lease(queue).entry.entry_id)  # the store clock read, the queue empty again
        ticket = queue.submit(Submission("thread-1", "later", not_before=start + HOUR))
        assert _entry(queue, ticket.entry_id).not_before == start + HOUR
        assert queue.lease("worker-1", TTL) is None
        clock.advance(HOUR + SLACK)
        assert _lease(queue).entry.entry_id == ticket.entry_id

    def test_delayed_head_holds_its_threads_later_entries_back(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        start = _entry(queue, _submit(queue, "thread-0")).submitted_at
        queue.cancel(_lease(queue).entry.entry_id)
        delayed = queue.submit(Submission("thread-1", "a", not_before=start + HOUR)).entry_id
        _submit(queue, "thread-1", "b")
        other = _submit(queue, "thread-2", "c")
        assert _lease(queue).entry.entry_id == other
        assert queue.lease("worker-1", TTL) is None
        clock.advance(HOUR + SLACK)
        assert _lease(queue).entry.entry_id == delayed

    def test_submission_not_before_must_be_timezone_aware(self, queue: RunQueue) -> None:
        from datetime import datetime

        with pytest.raises(ValidationError, match="not_before"):
            queue.submit(Submission("thread-1", "x", not_before=datetime(2030, 1, 1)))
        assert queue.open_entries() == []

    # --- backoff (defer) and attempt errors -------------------------------------------------

    def test_defer_holds_the_entry_and_records_the_attempts_error(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id, lease = _attempted(queue, "run-1")
        deferred = queue.defer(lease, timedelta(minutes=5), error="boom")
        assert deferred.lease_holder is None
        assert deferred.attempts[0].error == "boom"
        assert deferred.not_before is not None
        assert _entry(queue, entry_id).not_before == deferred.not_before
        assert queue.lease("worker-2", TTL) is None  # every worker respects it
        clock.advance(timedelta(minutes=5) + SLACK)
        again = _lease(queue, "worker-2")
        assert again.entry.entry_id == entry_id
        assert queue.record_attempt(again, "run-2") == Started(2)
        closed = queue.close(again, Failed("boom again"))
        assert [a.error for a in closed.attempts] == ["boom", "boom again"]
        assert [a.error for a in _entry(queue, entry_id).attempts] == ["boom", "boom again"]

    def test_defer_needs_the_current_lease(self, queue: RunQueue) -> None:
        _entry_id, lease = _attempted(queue, "run-1")
        queue.close(lease, Completed())
        with pytest.raises(EntryClosed):
            queue.defer(lease, timedelta(seconds=1))

    def test_defer_refuses_a_negative_delay_naming_it(self, queue: RunQueue) -> None:
        entry_id, lease = _attempted(queue, "run-1")
        with pytest.raises(ValidationError, match="delay"):
            queue.defer(lease, timedelta(seconds=-1))
        assert _entry(queue, entry_id).lease_holder == "worker-1"

    def test_completed_attempt_has_no_error(self, queue: RunQueue) -> None:
        entry_id, lease = _attempted(queue, "run-1")
        queue.close(lease, Completed("ok"))
        assert _entry(queue, entry_id).attempts[0].error is None

    # --- retry -------------------------------------------------------------------------------

    def test_retry_submits_a_failed_entrys_input_again_recording_retry_of(
        self, queue: RunQueue
    ) -> None:
        entry_id, lease = _attempted(queue, "run-1")
        queue.close(lease, Failed("bad"))
        ticket = queue.retry(entry_id)
        assert ticket.existing is False and ticket.entry_id > entry_id
        again = _entry(queue, ticket.entry_id)
        assert (again.thread_id, again.input, again.retry_of) == ("thread-1", "go", entry_id)
        assert again.attempts == () and not again.closed
        assert _lease(queue).entry.entry_id == ticket.entry_id

    def test_retry_of_a_cancelled_entry(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        queue.cancel(entry_id)
        assert _entry(queue, queue.retry(entry_id).entry_id).retry_of == entry_id

    def test_retry_refuses_open_and_completed_entries(self, queue: RunQueue) -> None:
        done_id, lease = _attempted(queue, "run-1")
        queue.close(lease, Completed())
        with pytest.raises(ValidationError, match="entry_id"):
            queue.retry(done_id)
        open_id = _submit(queue, "thread-2")
        with pytest.raises(ValidationError, match="entry_id"):
            queue.retry(open_id)
        assert [e.entry_id for e in queue.open_entries()] == [open_id]

    def test_retry_is_tenant_scoped_without_an_oracle(self, queue: RunQueue) -> None:
        entry_id = _submit(queue, tenant="acme")
        queue.cancel(entry_id, tenant="acme")
        with pytest.raises(NotFound) as other:
            queue.retry(entry_id, tenant="globex")
        with pytest.raises(NotFound) as unknown:
            queue.retry(10**9, tenant="globex")
        assert str(other.value).replace(str(entry_id), "N") == str(unknown.value).replace(
            str(10**9), "N"
        )
        again = _entry(queue, queue.retry(entry_id, tenant="acme").entry_id, tenant="acme")
        assert again.tenant == "acme"

    def test_a_second_retry_returns_the_first_retrys_ticket(self, queue: RunQueue) -> None:
        # Issue 26 item 8: `queue retry N` twice made two entries, and both ran.
        entry_id = _submit(queue)
        assert queue.cancel(entry_id).outcome == Cancelled("requested")
        first = queue.retry(entry_id)
        second = queue.retry(entry_id)
        assert first.existing is False
        assert (second.entry_id, second.existing) == (first.entry_id, True)
        assert [e.entry_id for e in queue.open_entries()] == [first.entry_id]

    def test_retry_again_submits_one_more(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        queue.cancel(entry_id)
        first = queue.retry(entry_id).entry_id
        more = queue.retry(entry_id, again=True)
        assert more.existing is False and more.entry_id > first
        assert queue.retry(entry_id).entry_id == first  # still the first one
        assert _entry(queue, more.entry_id).retry_of == entry_id

    def test_retry_again_must_be_a_bool(self, queue: RunQueue) -> None:
        entry_id = _submit(queue)
        queue.cancel(entry_id)
        with pytest.raises(ValidationError, match="again"):
            queue.retry(entry_id, again=1)  # type: ignore[arg-type]

    def test_an_attempt_whose_lease_expired_records_why(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        # Issue 26 item 9: its worker died (SIGKILL): the next lease says so in the attempt.
        entry_id, _dead = _attempted(queue, "run-1")
        clock.advance(PAST_TTL + SLACK)
        again = _lease(queue, "worker-2")
        assert again.entry.entry_id == entry_id
        (attempt,) = _entry(queue, entry_id).attempts
        assert attempt.error == "lease expired: worker worker-1 stopped renewing"

    def test_a_released_or_deferred_attempt_is_not_called_expired(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id, lease = _attempted(queue, "run-1")
        queue.defer(lease, timedelta(0), error="kept")
        again = _lease(queue, "worker-2")
        queue.record_attempt(again, "run-2")
        queue.release(again)
        clock.advance(PAST_TTL + SLACK)
        _lease(queue, "worker-3")
        assert [a.error for a in _entry(queue, entry_id).attempts] == ["kept", None]

    def test_attempt_error_keeps_any_text_as_written(self, queue: RunQueue) -> None:
        odd = "boom: ünïcode 😀 \x00 and\nlines"
        entry_id, lease = _attempted(queue, "run-1")
        assert queue.defer(lease, timedelta(0), error=odd).attempts[0].error == odd
        again = _lease(queue)
        queue.record_attempt(again, "run-2")
        queue.close(again, Failed(odd + "!"))
        assert [a.error for a in _entry(queue, entry_id).attempts] == [odd, odd + "!"]

    def test_deferred_head_holds_its_thread_while_other_threads_go_ahead(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id, lease = _attempted(queue, "run-1")
        later = _submit(queue, "thread-1", "later")
        queue.defer(lease, HOUR)
        other = _submit(queue, "thread-2", "other")
        assert _lease(queue).entry.entry_id == other
        assert queue.lease("worker-1", TTL) is None  # neither the deferred head nor `later`
        clock.advance(HOUR + SLACK)
        assert _lease(queue).entry.entry_id == entry_id
        assert later not in {e.entry_id for e in queue.open_entries() if e.lease_holder}

    def test_defer_ends_the_lease(self, queue: RunQueue) -> None:
        _entry_id, lease = _attempted(queue, "run-1")
        queue.defer(lease, timedelta(0))
        with pytest.raises(LeaseLost):
            queue.renew(lease)

    # --- the entry row everywhere ------------------------------------------------------------

    def test_every_call_returning_an_entry_carries_its_not_before_and_retry_of(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        failed, lease = _attempted(queue, "run-1")
        queue.close(lease, Failed("bad"))
        first = queue.retry(failed).entry_id
        second = queue.retry(failed, again=True).entry_id  # behind `first` on the same thread
        held = queue.defer(_lease(queue), timedelta(minutes=5))
        want = (held.not_before, failed)
        assert held.entry_id == first and want[0] is not None

        def ops(rows: list[QueueEntry]) -> tuple[object, object]:
            (row,) = [r for r in rows if r.entry_id == first]
            return (row.not_before, row.retry_of)

        assert ops(queue.open_entries()) == want
        assert ops(queue.entries(state="open")) == want
        clock.advance(timedelta(minutes=5) + SLACK)
        leased = _lease(queue)
        assert (leased.entry.entry_id, leased.entry.not_before) == (first, want[0])
        assert leased.entry.retry_of == failed
        renewed = queue.renew(leased)
        assert (renewed.entry.not_before, renewed.entry.retry_of) == want
        assert ops(queue.entries(state="running")) == want
        closed = queue.close(renewed, Completed())
        assert (closed.not_before, closed.retry_of) == want
        assert ops(queue.entries(state="completed")) == want
        later = queue.defer(_lease(queue), timedelta(minutes=1))
        cancelled = queue.cancel(second)
        assert (cancelled.entry_id, cancelled.retry_of) == (second, failed)
        assert cancelled.not_before == later.not_before is not None

    def test_the_fast_path_rows_carry_not_before_and_retry_of_too(
        self, store: Checkpointer, queue: RunQueue, clock: ClockControl
    ) -> None:
        failed, lease = _attempted(queue, "run-1")
        queue.close(lease, Failed("bad"))
        retried = queue.retry(failed).entry_id
        begun = store.begin_attempt("worker-1", TTL, run_id="run-2")
        assert begun is not None and begun.claim is not None
        assert (begun.lease.entry.entry_id, begun.lease.entry.retry_of) == (retried, failed)
        want = (queue.defer(begun.lease, timedelta(minutes=5)).not_before, failed)
        store.release_claim(begun.claim)
        clock.advance(timedelta(minutes=5) + SLACK)
        again = store.begin_attempt("worker-1", TTL, run_id="run-3")
        assert again is not None and again.claim is not None
        assert (again.lease.entry.not_before, again.lease.entry.retry_of) == want
        assert (again.entry.not_before, again.entry.retry_of) == want
        renewed, claim = store.renew_attempt(again.lease, again.claim)
        assert (renewed.entry.not_before, renewed.entry.retry_of) == want
        closed = store.finish_attempt(renewed, Completed(), claim)
        assert (closed.not_before, closed.retry_of) == want
