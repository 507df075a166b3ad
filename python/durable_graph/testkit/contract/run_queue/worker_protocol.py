"""plan_attempt (SPEC §2) and the at-most-once worker protocol (SPEC §5) end to end."""

from __future__ import annotations

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ClaimLost, LeaseLost
from durable_graph.core.model import Commit, Completed, Finished, Fresh, Resume, Started
from durable_graph.core.run_queue import RunQueue
from durable_graph.testkit.contract.run_queue.support import (
    PAST_TTL,
    TTL,
    _attempted,
    _commit,
    _entry,
    _lease,
    _planned,
    _retracted_turn,
    _submit,
)
from durable_graph.testkit.harness import ClockControl


class WorkerProtocolTests:
    """plan_attempt and the at-most-once worker protocol."""

    # --- plan_attempt (SPEC §2) --------------------------------------------------------------

    def test_plan_is_fresh_when_nothing_was_applied(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id, _ = _attempted(queue, "run-1", "thread-1")
        _, latest, plan = _planned(queue, store, entry_id)
        assert latest is None
        assert plan == Fresh()

    def test_plan_resumes_unfinished_checkpoint(self, queue: RunQueue, store: Checkpointer) -> None:
        entry_id, _ = _attempted(queue, "run-1", "thread-1")
        cp = _commit(store, "thread-1", "run-1", "cp-1", next_nodes=("step",))
        _, latest, plan = _planned(queue, store, entry_id)
        assert latest == cp
        assert plan == Resume(cp)

    def test_plan_is_finished_with_final_checkpoint(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id, _ = _attempted(queue, "run-1", "thread-1")
        cp = _commit(store, "thread-1", "run-1", "cp-1")
        assert _planned(queue, store, entry_id).plan == Finished(cp)

    def test_plan_is_finished_without_checkpoint_after_retraction(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id, _ = _attempted(queue, "run-1", "thread-1")
        _retracted_turn(store, "thread-1", "run-1")
        _, latest, plan = _planned(queue, store, entry_id)
        assert latest is None
        assert plan == Finished(None)

    # --- the at-most-once worker protocol (SPEC §5) -----------------------------------------

    def test_worker_protocol_applies_input_once_and_closes(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id = _submit(queue, "thread-1", {"question": "hi"})
        lease = _lease(queue, "worker-1")
        assert queue.record_attempt(lease, "run-1") == Started(1)
        claim = store.claim("thread-1", "run-1")
        entry, _, plan = _planned(queue, store, entry_id)
        assert plan == Fresh()
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
        assert _planned(queue, store, entry_id).plan == Fresh()
        store.commit(claim, Commit("cp-1", None, "run-1", {"s": 1}))
        assert queue.close(lease, Completed()).admitted is True

    def test_worker_after_crash_before_commit_plans_fresh(
        self, queue: RunQueue, store: Checkpointer, clock: ClockControl
    ) -> None:
        entry_id, _ = _attempted(queue, "run-1", "thread-1")
        store.claim("thread-1", "run-1")  # crashes holding lease and claim
        clock.advance(PAST_TTL)
        second = _lease(queue, "worker-2")
        assert queue.record_attempt(second, "run-2") == Started(2)
        store.claim("thread-1", "run-2")
        assert _planned(queue, store, entry_id).plan == Fresh()

    def test_worker_resumes_after_crash_past_non_final_checkpoint(
        self, queue: RunQueue, store: Checkpointer, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue, "thread-1", {"task": "two steps"})
        first = _lease(queue, "worker-1")
        assert queue.record_attempt(first, "run-1") == Started(1)
        claim_1 = store.claim("thread-1", "run-1")
        step_1 = store.commit(claim_1, Commit("cp-1", None, "run-1", {"n": 1}, next=("b",)))
        clock.advance(PAST_TTL)  # worker-1 crashed: its lease and claim expire
        second = _lease(queue, "worker-2")
        assert second.token > first.token
        assert queue.record_attempt(second, "run-2") == Started(2)
        claim_2 = store.claim("thread-1", "run-2")
        entry, _, plan = _planned(queue, store, entry_id)
        assert [a.run_id for a in entry.attempts] == ["run-1", "run-2"]
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
        entry_id, _ = _attempted(queue, "run-1", "thread-1")
        claim_1 = store.claim("thread-1", "run-1")
        final = store.commit(claim_1, Commit("cp-1", None, "run-1", {"done": True}))
        clock.advance(PAST_TTL)  # worker-1 crashed before close
        second = _lease(queue, "worker-2")
        assert queue.record_attempt(second, "run-2") == Started(2)
        store.claim("thread-1", "run-2")
        assert _planned(queue, store, entry_id).plan == Finished(final)
        queue.close(second, Completed({"done": True}))
        assert [cp.checkpoint_id for cp in store.history("thread-1")] == ["cp-1"]

    def test_late_worker_is_fenced_out_after_takeover(
        self, queue: RunQueue, store: Checkpointer, clock: ClockControl
    ) -> None:
        _, first = _attempted(queue, "run-1", "thread-1")
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
