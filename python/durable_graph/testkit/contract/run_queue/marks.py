"""Queue marks the Checkpointer makes (SPEC §5 Deletes and Admissions, rules 10 and 17):
delete_thread marks open entries, commit admits and refuses runs.
"""

from __future__ import annotations

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import EntryClosed, RunOfDeletedThread
from durable_graph.core.model import Failed, Started
from durable_graph.core.run_queue import RunQueue
from durable_graph.testkit.contract.run_queue.support import (
    _attempted,
    _commit,
    _delete_marked,
    _entry,
    _lease,
    _leased,
    _reclaim_closed,
    _retracted_turn,
    _submit,
)
from durable_graph.testkit.harness import ClockControl


def _marked_by_deleting(
    queue: RunQueue, store: Checkpointer, entry_id: int, thread_id: str = "thread-1"
) -> bool:
    """Delete ``thread_id``, then read whether that marked ``entry_id`` (rule 17)."""
    store.delete_thread(thread_id)
    return _entry(queue, entry_id).thread_deleted


class MarksTests:
    """delete marks and admissions made by delete_thread and commit."""

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
        lease = _leased(queue, "thread-1")
        assert _marked_by_deleting(queue, store, lease.entry.entry_id) is True

    def test_delete_thread_does_not_mark_closed_entries(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id = _submit(queue, "thread-1")
        queue.cancel(entry_id)
        assert _marked_by_deleting(queue, store, entry_id) is False

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
        assert _marked_by_deleting(queue, store, entry_id) is False

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
        _delete_marked(queue, store)
        with pytest.raises(RunOfDeletedThread):
            _commit(store, "thread-1", "run-1", "cp-1")
        assert store.get("thread-1") is None

    def test_commit_refuses_run_of_marked_entry_after_it_closed(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        queue.close(_delete_marked(queue, store), Failed("thread deleted"))
        with pytest.raises(RunOfDeletedThread):
            _commit(store, "thread-1", "run-1", "cp-1")

    def test_commit_accepts_run_of_marked_entry_after_reclaim(
        self, queue: RunQueue, store: Checkpointer, clock: ClockControl
    ) -> None:
        queue.close(_delete_marked(queue, store), Failed("thread deleted"))
        _reclaim_closed(queue, clock)
        assert _commit(store, "thread-1", "run-1", "cp-1").run_id == "run-1"

    @pytest.mark.parametrize(
        ("thread_id", "run_id"),
        [("thread-2", "run-1"), ("thread-1", "run-2")],
        ids=["the-run-on-another-thread", "another-run-on-the-deleted-thread"],
    )
    def test_commit_refusal_only_for_the_marked_entry_run_on_its_thread(
        self, queue: RunQueue, store: Checkpointer, thread_id: str, run_id: str
    ) -> None:
        _delete_marked(queue, store)
        assert _commit(store, thread_id, run_id, "cp-1").run_id == run_id

    # --- admissions (SPEC §5 Admissions, rule 10) -------------------------------------------

    @pytest.mark.parametrize(
        ("thread_id", "run_id", "admitted"),
        [
            ("thread-1", "run-1", True),
            ("thread-1", "run-other", False),
            ("thread-2", "run-1", False),
        ],
        ids=["the-entry-run", "another-run", "another-thread"],
    )
    def test_commit_admits_open_entry_whose_attempt_is_the_run_on_its_thread(
        self, queue: RunQueue, store: Checkpointer, thread_id: str, run_id: str, admitted: bool
    ) -> None:
        entry_id, _ = _attempted(queue, "run-1", "thread-1")
        _commit(store, thread_id, run_id, "cp-1", next_nodes=("step",))
        assert _entry(queue, entry_id).admitted is admitted

    def test_commit_under_a_closed_entrys_run_is_refused_and_admits_nothing(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id, lease = _attempted(queue, "run-1", "thread-1")
        queue.close(lease, Failed("gave up"))
        with pytest.raises(EntryClosed):  # SPEC §19.1
            _commit(store, "thread-1", "run-1", "cp-1")
        assert _entry(queue, entry_id).admitted is False
        assert store.get("thread-1") is None

    def test_retract_turn_does_not_unmark_admission(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id, _ = _attempted(queue, "run-1", "thread-1")
        _retracted_turn(store, "thread-1", "run-1")
        assert _entry(queue, entry_id).admitted is True
