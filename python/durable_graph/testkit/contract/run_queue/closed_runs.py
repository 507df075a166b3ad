"""A closed entry's runs write nothing more; cancel frees the thread (SPEC §19.1, §19.2).

Once an entry is closed — cancelled, completed, failed — every write under the run id of one of
its attempts (`commit`, fused or not, `append_events`, `record_effect`) is refused with
`EntryClosed` and changes nothing, whatever claim it is made under; a delete-marked entry's runs
keep `RunOfDeletedThread` (``marks``). `cancel` ends, with the close, the thread claim held under
one of the entry's attempts' run ids, so the thread's next run can start at once.
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
