"""Commit (SPEC §4, sql/20_commit.sql): chaining; check order (D9: claim, fence, parent, deleted
run, duplicate id); its events (D8: the caller's before store.checkpoint); store time (D4: read
once a call; D7: None created_at = commit time); thread info and parents (D6: a thread exists
from its first commit); and the queue marks it reads and makes (§5).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import (
    ClaimLost,
    DuplicateCheckpoint,
    RunOfDeletedThread,
    StaleParent,
    ValidationError,
)
from durable_graph.core.model import EventIn, Failed, PendingWrite
from durable_graph.testkit.contract.checkpointer.support import (
    HOUR,
    T,
    _assert_run_refused,
    _attempt,
    _chain,
    _commit,
    _expired_claim,
    _first_commit_an_hour_ago,
    _head,
    _info,
    _kinds,
    _new_thread,
    _released_claim,
    _snapshot,
    _superseded_claim,
    _within,
)
from durable_graph.testkit.harness import ClockControl


class CommitTests:
    """commit: chaining, check order, its events, store time, thread info, queue marks."""

    # --- commit ---------------------------------------------------------------------------

    def test_commit_on_new_thread_creates_it(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        checkpoint = _commit(store, claim, "c1", None)
        info = _info(store)
        assert (info.thread_id, info.head_id, info.last_seq) == (T, "c1", checkpoint.seq)
        assert info.parent_thread_id is None

    def test_commit_returns_the_checkpoint_as_stored(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        checkpoint = _commit(
            store, claim, "c1", None, "run-9", {"s": [1]}, metadata={"m": "x"}, next=("a", "b")
        )
        assert checkpoint.thread_id == T
        assert (checkpoint.checkpoint_id, checkpoint.parent_id, checkpoint.run_id) == (
            "c1",
            None,
            "run-9",
        )
        assert (checkpoint.state, checkpoint.metadata) == ({"s": [1]}, {"m": "x"})
        assert checkpoint.next == ("a", "b") and isinstance(checkpoint.next, tuple)
        assert checkpoint.writes == ()
        assert store.get(T) == checkpoint

    def test_commit_metadata_defaults_to_none_and_next_to_empty(self, store: Checkpointer) -> None:
        checkpoint = _commit(store, store.claim(T, "h"), "c1", None)
        assert checkpoint.metadata is None and checkpoint.next == ()

    def test_commit_chains_on_the_head(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        _chain(store, claim, ["c1", "c2", "c3"])
        head = _head(store)
        assert (head.checkpoint_id, head.parent_id) == ("c3", "c2")

    def test_commit_on_new_thread_with_a_parent_is_stale_parent(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        with pytest.raises(StaleParent):
            _commit(store, claim, "c1", "c0")
        assert store.thread(T) is None

    def test_commit_with_parent_that_is_not_the_head_is_stale_parent(
        self, store: Checkpointer
    ) -> None:
        claim = _new_thread(store, ids=["c1", "c2"])
        with pytest.raises(StaleParent):
            _commit(store, claim, "c3", "c1")
        assert [c.checkpoint_id for c in store.history(T)] == ["c2", "c1"]

    def test_commit_with_parent_none_on_existing_thread_is_stale_parent(
        self, store: Checkpointer
    ) -> None:
        claim = _new_thread(store)
        with pytest.raises(StaleParent):
            _commit(store, claim, "c2", None)

    def test_commit_with_existing_checkpoint_id_is_duplicate(self, store: Checkpointer) -> None:
        claim = _new_thread(store, ids=["c1", "c2"])
        with pytest.raises(DuplicateCheckpoint):
            _commit(store, claim, "c1", "c2")

    def test_commit_repeating_the_head_id_is_duplicate(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        with pytest.raises(DuplicateCheckpoint):
            _commit(store, claim, "c1", "c1")

    def test_refused_commit_changes_nothing(self, store: Checkpointer) -> None:
        claim = _new_thread(store, ids=["c1", "c2"])
        before = _snapshot(store)
        with pytest.raises(DuplicateCheckpoint):
            _commit(store, claim, "c1", "c2", events=(EventIn("e"),))
        assert _snapshot(store) == before

    def test_same_checkpoint_id_may_be_used_on_other_threads(self, store: Checkpointer) -> None:
        _new_thread(store, "t-a")
        _new_thread(store, "t-b")
        assert store.get("t-a") is not None and store.get("t-b") is not None

    def test_commit_with_current_fence_succeeds(self, store: Checkpointer) -> None:
        fence = store.claim("parent", "h")
        claim = store.claim(T, "h")
        assert _commit(store, claim, "c1", None, fence=fence).checkpoint_id == "c1"

    def test_commit_with_released_fence_is_claim_lost(self, store: Checkpointer) -> None:
        fence = _released_claim(store, "parent")
        claim = store.claim(T, "h")
        with pytest.raises(ClaimLost):
            _commit(store, claim, "c1", None, fence=fence)
        assert store.thread(T) is None

    def test_commit_with_superseded_fence_is_claim_lost(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        fence, _ = _superseded_claim(store, clock, "parent")
        claim = store.claim(T, "h")
        with pytest.raises(ClaimLost):
            _commit(store, claim, "c1", None, fence=fence)

    def test_commit_with_expired_but_current_fence_succeeds(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        fence = _expired_claim(store, clock, "parent")
        claim = store.claim(T, "h")
        assert _commit(store, claim, "c1", None, fence=fence).checkpoint_id == "c1"

    def test_commit_with_fence_of_deleted_thread_is_claim_lost(self, store: Checkpointer) -> None:
        fence = _new_thread(store, "parent")
        store.delete_thread("parent")
        claim = store.claim(T, "h")
        with pytest.raises(ClaimLost):
            _commit(store, claim, "c1", None, fence=fence)

    # --- commit check order (D9: claim, fence, parent, deleted run, duplicate id) ---------

    def test_stale_claim_is_reported_before_stale_parent(self, store: Checkpointer) -> None:
        claim = _released_claim(store, ids=["c1"])
        with pytest.raises(ClaimLost):
            _commit(store, claim, "c2", "wrong")

    def test_stale_claim_is_reported_before_duplicate_checkpoint(self, store: Checkpointer) -> None:
        claim = _released_claim(store, ids=["c1"])
        with pytest.raises(ClaimLost):
            _commit(store, claim, "c1", "c1")

    def test_stale_fence_is_reported_before_stale_parent(self, store: Checkpointer) -> None:
        fence = _released_claim(store, "parent")
        claim = _new_thread(store)
        with pytest.raises(ClaimLost):
            _commit(store, claim, "c2", "wrong", fence=fence)

    def test_stale_parent_is_reported_before_duplicate_checkpoint(
        self, store: Checkpointer
    ) -> None:
        claim = _new_thread(store, ids=["c1", "c2"])
        with pytest.raises(StaleParent):
            _commit(store, claim, "c2", "c1")

    def test_stale_parent_is_reported_before_run_of_deleted_thread(
        self, store: Checkpointer
    ) -> None:
        _attempt(store, T, "run-x")
        store.delete_thread(T)
        claim = store.claim(T, "run-x")
        with pytest.raises(StaleParent):
            _commit(store, claim, "c1", "nope", "run-x")

    def test_run_of_deleted_thread_is_reported_before_duplicate_checkpoint(
        self, store: Checkpointer
    ) -> None:
        _attempt(store, T, "run-x")
        store.delete_thread(T)
        claim = _new_thread(store, run_id="run-y")
        with pytest.raises(RunOfDeletedThread):
            _commit(store, claim, "c1", "c1", "run-x")

    # --- events of a commit (rule 11; D8: caller's events before store.checkpoint) --------

    def test_commit_numbers_caller_events_before_store_checkpoint(
        self, store: Checkpointer
    ) -> None:
        claim = store.claim(T, "h")
        _commit(store, claim, "c1", None, events=(EventIn("a", 1), EventIn("b", 2)))
        events = store.events_after(T, 0)
        assert [(e.seq, e.kind, e.payload) for e in events] == [
            (1, "a", 1),
            (2, "b", 2),
            (3, "store.checkpoint", {"checkpoint_id": "c1", "run_id": "run-1"}),
        ]

    def test_checkpoint_seq_is_the_threads_last_seq_after_commit(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        checkpoint = _commit(store, claim, "c1", None, events=(EventIn("a"), EventIn("b")))
        assert checkpoint.seq == 3 and _info(store).last_seq == 3

    def test_event_numbers_continue_across_commits_and_appends(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.append_events(claim, [EventIn("x"), EventIn("y")])
        second = _commit(store, claim, "c2", "c1", events=(EventIn("z"),))
        assert [e.seq for e in store.events_after(T, 0)] == [1, 2, 3, 4, 5]
        assert second.seq == 5

    def test_commit_without_events_appends_only_store_checkpoint(self, store: Checkpointer) -> None:
        _new_thread(store)
        assert _kinds(store.events_after(T, 0)) == ["store.checkpoint"]

    def test_commit_events_carry_the_commit_run_id(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        _commit(store, claim, "c1", None, "run-7", events=(EventIn("a"),))
        assert [e.run_id for e in store.events_after(T, 0)] == ["run-7", "run-7"]

    def test_commit_events_belong_to_the_thread(self, store: Checkpointer) -> None:
        _new_thread(store, events=(EventIn("a"),))
        assert {e.thread_id for e in store.events_after(T, 0)} == {T}

    def test_store_checkpoint_event_payload_names_checkpoint_and_run(
        self, store: Checkpointer
    ) -> None:
        claim = store.claim(T, "h")
        _commit(store, claim, "cp-x", None, "run-q")
        (event,) = store.events_after(T, 0)
        assert event.payload == {"checkpoint_id": "cp-x", "run_id": "run-q"}

    def test_store_checkpoint_event_has_seq_of_checkpoint(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        checkpoint = _commit(store, claim, "c2", "c1", events=(EventIn("a"),))
        last = store.events_after(T, checkpoint.seq - 1)
        assert [(e.seq, e.kind) for e in last] == [(checkpoint.seq, "store.checkpoint")]

    # --- time (rule 3; D4: read once a call; D7: None created_at = commit time) -----------

    def test_committed_at_comes_from_the_store_clock(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim, first = _first_commit_an_hour_ago(store, clock)
        second = _commit(store, claim, "c2", "c1")
        assert _within(second.committed_at - first.committed_at, HOUR)

    def test_committed_at_is_timezone_aware_utc(self, store: Checkpointer) -> None:
        checkpoint = _commit(store, store.claim(T, "h"), "c1", None)
        assert checkpoint.committed_at.utcoffset() == timedelta(0)

    def test_commit_events_share_the_checkpoints_committed_at(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        checkpoint = _commit(store, claim, "c1", None, events=(EventIn("a"),))
        assert {e.committed_at for e in store.events_after(T, 0)} == {checkpoint.committed_at}

    def test_created_at_kept_to_the_microsecond(self, store: Checkpointer) -> None:
        produced = datetime(2001, 2, 3, 4, 5, 6, 789012, tzinfo=UTC)
        checkpoint = _commit(store, store.claim(T, "h"), "c1", None, created_at=produced)
        assert checkpoint.created_at == produced
        assert _head(store).created_at == produced

    def test_created_at_in_another_zone_is_kept_as_the_same_instant(
        self, store: Checkpointer
    ) -> None:
        produced = datetime(2030, 6, 1, 23, 59, 59, 1, tzinfo=timezone(timedelta(hours=-7)))
        _commit(store, store.claim(T, "h"), "c1", None, created_at=produced)
        stored = _head(store)
        assert stored.created_at == produced
        assert stored.created_at.utcoffset() == timedelta(0)

    def test_created_at_none_means_commit_time(self, store: Checkpointer) -> None:
        checkpoint = _commit(store, store.claim(T, "h"), "c1", None)
        assert checkpoint.created_at == checkpoint.committed_at

    def test_producer_created_at_orders_nothing(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        late = datetime(2099, 1, 1, tzinfo=UTC)
        early = datetime(1999, 1, 1, tzinfo=UTC)
        _commit(store, claim, "c1", None, created_at=late)
        _commit(store, claim, "c2", "c1", created_at=early)
        assert [c.checkpoint_id for c in store.history(T)] == ["c2", "c1"]
        assert _head(store).checkpoint_id == "c2"

    def test_event_created_at_kept_to_the_microsecond(self, store: Checkpointer) -> None:
        produced = datetime(2011, 12, 13, 14, 15, 16, 171819, tzinfo=UTC)
        claim = store.claim(T, "h")
        _commit(store, claim, "c1", None, events=(EventIn("a", None, produced),))
        assert store.events_after(T, 0)[0].created_at == produced

    def test_event_created_at_none_means_commit_time(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        _commit(store, claim, "c1", None, events=(EventIn("a"),))
        event = store.events_after(T, 0)[0]
        assert event.created_at == event.committed_at

    def test_store_events_have_created_at_equal_to_committed_at(self, store: Checkpointer) -> None:
        produced = datetime(2001, 1, 1, tzinfo=UTC)
        claim = store.claim(T, "h")
        _commit(store, claim, "c1", None, created_at=produced)
        (event,) = store.events_after(T, 0)
        assert event.kind == "store.checkpoint" and event.created_at == event.committed_at

    def test_naive_commit_created_at_is_refused(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        with pytest.raises(ValidationError, match="created_at"):
            _commit(store, claim, "c1", None, created_at=datetime(2020, 1, 1))
        assert store.thread(T) is None

    def test_naive_event_created_at_is_refused(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        before = _snapshot(store)
        with pytest.raises(ValidationError, match="created_at"):
            store.append_events(claim, [EventIn("a", None, datetime(2020, 1, 1))])
        assert _snapshot(store) == before

    # --- thread info, parents and children (D6: a thread exists from its first commit) ----

    def test_thread_created_and_updated_at_first_and_last_commit(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim, first = _first_commit_an_hour_ago(store, clock)
        second = _commit(store, claim, "c2", "c1")
        info = _info(store)
        assert (info.created_at, info.updated_at) == (first.committed_at, second.committed_at)

    def test_thread_updated_at_moves_with_append_events(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim, _ = _first_commit_an_hour_ago(store, clock)
        (event,) = store.append_events(claim, [EventIn("a")])
        info = _info(store)
        assert info.updated_at == event.committed_at
        assert _within(info.updated_at - info.created_at, HOUR)

    def test_thread_updated_at_moves_with_retract_turn(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim, _ = _first_commit_an_hour_ago(store, clock)
        store.retract_turn(claim)
        info = _info(store)
        assert info.updated_at == store.events_after(T, 0)[-1].committed_at
        assert _within(info.updated_at - info.created_at, HOUR)

    def test_thread_updated_at_unchanged_by_writes_effects_and_claims(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = _new_thread(store)
        before = store.thread(T)
        clock.advance(HOUR)
        store.put_writes(claim, "c1", [PendingWrite("t", "ch", 1)])
        store.record_effect(claim, "k", 1)
        store.renew_claim(claim)
        after = store.thread(T)
        assert before is not None and after is not None
        assert (after.updated_at, after.last_seq) == (before.updated_at, before.last_seq)

    def test_thread_info_has_no_head_of_other_threads(self, store: Checkpointer) -> None:
        _new_thread(store, "t-a", ids=["a1", "a2"])
        _new_thread(store, "t-b", ids=["b1"])
        assert (_info(store, "t-a").head_id, _info(store, "t-b").head_id) == ("a2", "b1")

    def test_parent_thread_id_recorded_on_first_commit(self, store: Checkpointer) -> None:
        _new_thread(store, "parent")
        _new_thread(store, "child", parent_thread_id="parent")
        assert _info(store, "child").parent_thread_id == "parent"

    def test_parent_thread_id_of_later_commits_is_ignored(self, store: Checkpointer) -> None:
        _new_thread(store, "p1")
        _new_thread(store, "p2")
        claim = store.claim("child", "h")
        _commit(store, claim, "c1", None, parent_thread_id="p1")
        _commit(store, claim, "c2", "c1", parent_thread_id="p2")
        assert _info(store, "child").parent_thread_id == "p1"
        assert store.children("p1") == ["child"] and store.children("p2") == []

    def test_parent_thread_id_not_set_by_a_later_commit(self, store: Checkpointer) -> None:
        _new_thread(store, "p1")
        claim = _new_thread(store, "child")
        _commit(store, claim, "c2", "c1", parent_thread_id="p1")
        assert _info(store, "child").parent_thread_id is None
        assert store.children("p1") == []

    def test_children_listed_in_first_commit_order(self, store: Checkpointer) -> None:
        _new_thread(store, "parent")
        claims = {child: store.claim(child, "h") for child in ["kid-a", "kid-m", "kid-z"]}
        for child in ["kid-m", "kid-z", "kid-a"]:
            _commit(store, claims[child], "c1", None, parent_thread_id="parent")
        assert store.children("parent") == ["kid-m", "kid-z", "kid-a"]

    def test_children_not_repeated_by_later_commits(self, store: Checkpointer) -> None:
        _new_thread(store, "parent")
        claim = _new_thread(store, "kid", parent_thread_id="parent")
        _commit(store, claim, "c2", "c1", parent_thread_id="parent")
        assert store.children("parent") == ["kid"]

    def test_children_of_a_thread_without_children_is_empty(self, store: Checkpointer) -> None:
        _new_thread(store)
        assert store.children(T) == []
        assert store.children("unknown") == []

    # --- queue marks made by commit (§5, rule 10) -----------------------------------------

    def test_commit_marks_admitted_the_open_entry_that_recorded_the_run(
        self, store: Checkpointer
    ) -> None:
        lease = _attempt(store, T, "run-a")
        entry_id = lease.entry.entry_id
        before = store.run_queue.entry(entry_id)
        assert before is not None and before.admitted is False
        _commit(store, store.claim(T, "run-a"), "c1", None, "run-a")
        after = store.run_queue.entry(entry_id)
        assert after is not None and after.admitted is True

    def test_commit_of_another_run_does_not_admit_the_entry(self, store: Checkpointer) -> None:
        lease = _attempt(store, T, "run-a")
        _commit(store, store.claim(T, "h"), "c1", None, "run-other")
        entry = store.run_queue.entry(lease.entry.entry_id)
        assert entry is not None and entry.admitted is False

    def test_commit_marks_only_entries_of_the_committing_thread(self, store: Checkpointer) -> None:
        lease = _attempt(store, "t-other", "run-a")
        _commit(store, store.claim(T, "h"), "c1", None, "run-a")
        entry = store.run_queue.entry(lease.entry.entry_id)
        assert entry is not None and entry.admitted is False

    def test_commit_of_a_run_of_a_delete_marked_entry_is_refused(self, store: Checkpointer) -> None:
        _attempt(store, T, "run-a")
        assert store.delete_thread(T) is False
        _assert_run_refused(store, "run-a")
        assert store.thread(T) is None

    def test_run_of_deleted_thread_refused_after_the_thread_existed(
        self, store: Checkpointer
    ) -> None:
        _attempt(store, T, "run-a")
        _new_thread(store, run_id="run-a")
        assert store.delete_thread(T) is True
        _assert_run_refused(store, "run-a")

    def test_run_of_deleted_thread_refused_after_the_entry_closed(
        self, store: Checkpointer
    ) -> None:
        lease = _attempt(store, T, "run-a")
        store.delete_thread(T)
        closed = store.run_queue.close(lease, Failed("gone"))
        assert closed.closed
        _assert_run_refused(store, "run-a")

    def test_other_runs_commit_on_a_thread_with_a_delete_marked_entry(
        self, store: Checkpointer
    ) -> None:
        _attempt(store, T, "run-a")
        store.delete_thread(T)
        assert _commit(store, store.claim(T, "h"), "c1", None, "run-b").run_id == "run-b"

    def test_delete_mark_of_another_thread_does_not_refuse_the_run(
        self, store: Checkpointer
    ) -> None:
        _attempt(store, "t-other", "run-a")
        store.delete_thread("t-other")
        assert _commit(store, store.claim(T, "h"), "c1", None, "run-a").run_id == "run-a"
