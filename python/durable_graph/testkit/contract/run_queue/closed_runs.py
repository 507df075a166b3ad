"""A closed entry's runs write nothing more; cancel frees the thread (SPEC §19.1, §19.2).

Once an entry is closed — cancelled, completed, failed — every write under the run id of one of
its attempts (`commit`, fused or not, `append_events`, `record_effect`) is refused with
`EntryClosed` and changes nothing, whatever claim it is made under; a delete-marked entry's runs
keep `RunOfDeletedThread` (``marks``). A write that names no run of its own (`put_writes`;
`append_events` and `record_effect` without ``run_id``; `retract_turn`) is under its claim's
holder — a worker claims as its run — so after the worker's own close (which keeps the claim
until it is released) it is refused the same way (SPEC §23.5: whoever closed the entry).
`cancel` ends, with the close, the thread claim held under one of the entry's attempts' run ids,
so the thread's next run can start at once.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ClaimLost, EntryClosed
from durable_graph.core.model import (
    Claim,
    Commit,
    Completed,
    EventIn,
    Failed,
    Lease,
    PendingWrite,
)
from durable_graph.core.run_queue import RunQueue
from durable_graph.testkit.contract.run_queue.support import _attempted

THREAD = "thread-1"


def _running(queue: RunQueue, store: Checkpointer) -> tuple[int, Lease, Claim]:
    """An entry whose attempt ``run-1`` claimed the thread (as a worker: the claim's holder is
    the run id) and committed ``cp-1``."""
    entry_id, lease = _attempted(queue, "run-1")
    claim = store.claim(THREAD, "run-1")
    store.commit(claim, Commit("cp-1", None, "run-1", {"step": 1}, next=("more",)))
    return entry_id, lease, claim


def _closers(queue: RunQueue) -> dict[str, Callable[[int, Lease], object]]:
    return {
        "cancelled": lambda entry_id, lease: queue.cancel(entry_id),
        "completed": lambda entry_id, lease: queue.close(lease, Completed({"done": True})),
        "failed": lambda entry_id, lease: queue.close(lease, Failed("boom")),
    }


CLOSES = ("cancelled", "completed", "failed")


class ClosedRunsTests:
    """SPEC §19.1-§19.2 on every store."""

    @pytest.mark.parametrize("how", CLOSES)
    def test_a_closed_entrys_run_writes_nothing_more(
        self, queue: RunQueue, store: Checkpointer, how: str
    ) -> None:
        entry_id, lease, claim = _running(queue, store)
        _closers(queue)[how](entry_id, lease)
        if how != "cancelled":  # a worker's close gives its claim back (finish_attempt)
            store.release_claim(claim)
        # Whatever claim it holds now: a new one (the thread is free) does not let it write.
        fresh = store.claim(THREAD, "someone-else")
        events_before = store.events_after(THREAD, 0)
        with pytest.raises(EntryClosed):
            store.commit(fresh, Commit("cp-2", "cp-1", "run-1", {"step": 2}))
        with pytest.raises(EntryClosed):
            store.append_events(fresh, [EventIn("token", {"t": "late"})], run_id="run-1")
        with pytest.raises(EntryClosed):
            store.record_effect(fresh, "late-effect", 1, run_id="run-1")
        head = store.get(THREAD)
        assert head is not None and head.checkpoint_id == "cp-1"
        assert store.events_after(THREAD, 0) == events_before
        assert store.get_effect(THREAD, "late-effect") is None
        # Another run writes as before: the refusal is the closed entry's runs'.
        store.commit(fresh, Commit("cp-2", "cp-1", "run-2", {"step": 2}))
        store.append_events(fresh, [EventIn("note")], run_id="run-2")

    @pytest.mark.parametrize("how", ("completed", "failed"))
    def test_writes_under_the_claim_of_a_run_its_worker_closed_are_refused(
        self, queue: RunQueue, store: Checkpointer, how: str
    ) -> None:
        """`close` keeps the claim (only `finish_attempt` releases it): put_writes, events and
        effects without a run id, and retract_turn, made under it after the close change
        nothing."""
        entry_id, lease, claim = _running(queue, store)
        _closers(queue)[how](entry_id, lease)
        events_before = store.events_after(THREAD, 0)
        with pytest.raises(EntryClosed):
            store.put_writes(claim, "cp-1", [PendingWrite("task", "channel", 1)])
        with pytest.raises(EntryClosed):
            store.put_writes(claim, "cp-1", [])
        with pytest.raises(EntryClosed):
            store.append_events(claim, [EventIn("token", {"t": "late"})])
        with pytest.raises(EntryClosed):
            store.record_effect(claim, "late-effect", 1)
        with pytest.raises(EntryClosed):
            store.retract_turn(claim)
        head = store.get(THREAD)
        assert head is not None and head.checkpoint_id == "cp-1" and head.writes == ()
        assert store.events_after(THREAD, 0) == events_before
        assert store.get_effect(THREAD, "late-effect") is None
        # The claim itself is still the thread's until released: the refusal is the run's.
        store.release_claim(claim)

    def test_put_writes_checks_its_claim_before_the_closed_run(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        """A write naming no run is under its claim's holder only while that claim is current:
        a claim that is not is `ClaimLost`, as before."""
        _, lease, claim = _running(queue, store)
        queue.close(lease, Failed("boom"))
        store.release_claim(claim)
        with pytest.raises(ClaimLost):
            store.put_writes(claim, "cp-1", [PendingWrite("task", "channel", 1)])

    def test_writes_under_a_claim_not_held_by_a_closed_run_go_on(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        """An operator's claim (its holder no attempt's run) writes after the entry closed."""
        _, lease, claim = _running(queue, store)
        queue.close(lease, Completed(None))
        store.release_claim(claim)
        other = store.claim(THREAD, "an-operator")
        store.put_writes(other, "cp-1", [PendingWrite("task", "channel", 1)])
        store.append_events(other, [EventIn("note")])
        assert store.record_effect(other, "k", 1).value == 1
        head = store.get(THREAD)
        assert head is not None and len(head.writes) == 1

    def test_cancel_ends_the_claim_held_under_the_entrys_run(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id, _, claim = _running(queue, store)
        queue.cancel(entry_id)
        # The cancelled run's claim is over: its writes without a run id are refused too...
        with pytest.raises(ClaimLost):
            store.put_writes(claim, "cp-1", [PendingWrite("task", "channel", 1)])
        head = store.get(THREAD)
        assert head is not None and head.writes == ()
        # ...and the thread is free at once for its next run.
        nxt = store.claim(THREAD, "run-2")
        store.commit(nxt, Commit("cp-2", "cp-1", "run-2", {"step": 2}))

    def test_cancel_leaves_a_claim_that_is_not_the_entrys_run(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id, _ = _attempted(queue, "run-1")
        other = store.claim(THREAD, "an-operator")
        store.commit(other, Commit("cp-1", None, "an-operator", {}))
        queue.cancel(entry_id)
        store.commit(other, Commit("cp-2", "cp-1", "an-operator", {}))  # still current

    def test_a_fused_finish_after_a_cancel_writes_nothing(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id, lease, claim = _running(queue, store)
        queue.cancel(entry_id)
        with pytest.raises(EntryClosed):
            store.finish_attempt(
                lease,
                Completed(None),
                claim,
                commit=Commit("cp-2", "cp-1", "run-1", {"step": 2}),
            )
        head = store.get(THREAD)
        assert head is not None and head.checkpoint_id == "cp-1"
        entry = queue.entry(entry_id)
        assert entry is not None and entry.outcome is not None
        assert type(entry.outcome).__name__ == "Cancelled"

    def test_an_open_entrys_runs_write_as_before(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        """The check is the close's: an attempt of an open entry (a retry under the same run
        after a deferral, say) commits, appends and records."""
        _, _, claim = _running(queue, store)
        store.commit(claim, Commit("cp-2", "cp-1", "run-1", {"step": 2}))
        store.append_events(claim, [EventIn("token")], run_id="run-1")
        assert store.record_effect(claim, "k", 1, run_id="run-1").value == 1
