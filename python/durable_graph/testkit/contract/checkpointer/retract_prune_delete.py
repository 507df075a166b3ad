"""Taking history away (SPEC §4, sql/40_retract_prune_delete.sql): retract_turn (D11: with no
head, a no-op), prune and prune_all (D13: keep the head, evidence, keep_last and the young),
delete_thread (D14: fence first, cascades to descendants).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ClaimLost, NotFound, StaleParent, ValidationError
from durable_graph.core.model import (
    Cancelled,
    EventIn,
    Failed,
    PendingWrite,
    PruneResult,
    RetentionPolicy,
    Submission,
)
from durable_graph.testkit.contract.checkpointer.support import (
    HOUR,
    T,
    _attempt,
    _chain,
    _commit,
    _new_thread,
    _released_claim,
    _snapshot,
)
from durable_graph.testkit.harness import ClockControl


class RetractPruneDeleteTests:
    """retract_turn, prune, prune_all and delete_thread."""

    # --- retract_turn (rule 13; D11: with no head, returns None and appends nothing) ------

    def test_retract_turn_removes_the_head_run_of_one_run_id(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        _chain(store, claim, ["c1"], "run-1")
        _chain(store, claim, ["c2", "c3"], "run-2", parent_id="c1")
        new_head = store.retract_turn(claim)
        assert new_head is not None and new_head.checkpoint_id == "c1"
        assert store.get(T, "c2") is None and store.get(T, "c3") is None
        assert [c.checkpoint_id for c in store.history(T)] == ["c1"]

    def test_retract_turn_makes_the_parent_the_head(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        _chain(store, claim, ["c1"], "run-1")
        _chain(store, claim, ["c2"], "run-2", parent_id="c1")
        store.retract_turn(claim)
        info = store.thread(T)
        assert info is not None and info.head_id == "c1"
        assert _commit(store, claim, "c3", "c1").parent_id == "c1"

    def test_retract_turn_stops_at_the_first_other_run(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        _chain(store, claim, ["c1", "c2"], "run-1")
        _chain(store, claim, ["c3"], "run-2", parent_id="c2")
        _chain(store, claim, ["c4"], "run-1", parent_id="c3")
        new_head = store.retract_turn(claim)
        assert new_head is not None and new_head.checkpoint_id == "c3"
        assert [c.checkpoint_id for c in store.history(T)] == ["c3", "c2", "c1"]

    def test_retract_turn_returns_the_new_head_with_its_writes(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        _chain(store, claim, ["c1"], "run-1")
        store.put_writes(claim, "c1", [PendingWrite("t", "ch", 1)])
        _chain(store, claim, ["c2"], "run-2", parent_id="c1")
        new_head = store.retract_turn(claim)
        assert new_head == store.get(T)
        assert new_head is not None and new_head.writes == (PendingWrite("t", "ch", 1),)

    def test_retract_turn_removes_writes_of_the_retracted(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        _chain(store, claim, ["c1"], "run-1")
        _chain(store, claim, ["c2"], "run-2", parent_id="c1")
        store.put_writes(claim, "c2", [PendingWrite("t", "ch", "gone")])
        store.retract_turn(claim)
        # the id is free again: a new c2 starts without the old writes
        again = _commit(store, claim, "c2", "c1", "run-3")
        assert again.writes == ()
        head = store.get(T)
        assert head is not None and head.writes == ()

    def test_retract_turn_appends_store_retracted(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        _chain(store, claim, ["c1"], "run-1")
        _chain(store, claim, ["c2", "c3"], "run-2", parent_id="c1")
        last = store.thread(T)
        store.retract_turn(claim)
        assert last is not None
        (event,) = store.events_after(T, last.last_seq)
        assert (event.seq, event.kind, event.run_id) == (last.last_seq + 1, "store.retracted", None)
        assert event.payload == {"run_id": "run-2", "checkpoint_ids": ["c3", "c2"]}
        assert event.created_at == event.committed_at

    def test_retract_turn_keeps_the_event_log(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        _chain(store, claim, ["c1", "c2"], "run-1")
        before = store.events_after(T, 0)
        store.retract_turn(claim)
        assert store.events_after(T, 0)[: len(before)] == before

    def test_retracting_every_checkpoint_leaves_thread_with_no_head(
        self, store: Checkpointer
    ) -> None:
        claim = _new_thread(store, ids=["c1", "c2"])
        assert store.retract_turn(claim) is None
        info = store.thread(T)
        assert info is not None and info.head_id is None and info.last_seq == 3
        assert store.get(T) is None and store.history(T) == []

    def test_commit_after_full_retraction_needs_parent_none(self, store: Checkpointer) -> None:
        claim = _new_thread(store, ids=["c1"])
        store.retract_turn(claim)
        with pytest.raises(StaleParent):
            _commit(store, claim, "c2", "c1")
        assert _commit(store, claim, "c2", None).parent_id is None

    def test_fully_retracted_thread_keeps_its_parent_thread(self, store: Checkpointer) -> None:
        _new_thread(store, "parent")
        claim = _new_thread(store, parent_thread_id="parent")
        store.retract_turn(claim)
        _commit(store, claim, "c9", None, parent_thread_id="other")
        info = store.thread(T)
        assert info is not None and info.parent_thread_id == "parent"

    def test_retract_turn_with_no_head_returns_none_and_appends_nothing(
        self, store: Checkpointer
    ) -> None:
        claim = _new_thread(store)
        store.retract_turn(claim)
        before = store.thread(T)
        assert store.retract_turn(claim) is None
        assert store.thread(T) == before

    def test_retracted_checkpoint_id_may_be_committed_again(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.retract_turn(claim)
        assert _commit(store, claim, "c1", None, "run-2").run_id == "run-2"

    def test_retract_turn_on_thread_without_commit_is_not_found(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        with pytest.raises(NotFound):
            store.retract_turn(claim)

    def test_retract_turn_with_stale_claim_is_claim_lost(self, store: Checkpointer) -> None:
        claim = _released_claim(store, ids=["c1"])
        with pytest.raises(ClaimLost):
            store.retract_turn(claim)
        assert [c.checkpoint_id for c in store.history(T)] == ["c1"]

    def test_retract_turn_after_prune_falls_back_to_newest_remaining(
        self, store: Checkpointer
    ) -> None:
        # D24: retract after prune falls back to the newest remaining checkpoint; here the parent
        # of the oldest retracted checkpoint was pruned
        _attempt(store, T, "run-e")
        claim = store.claim(T, "run-e")
        _chain(store, claim, ["e1"], "run-e")
        _chain(store, claim, ["c2"], "run-1", parent_id="e1")
        _chain(store, claim, ["c3", "c4"], "run-2", parent_id="c2")
        store.prune(T, RetentionPolicy(keep_last=2))
        assert [c.checkpoint_id for c in store.history(T)] == ["c4", "c3", "e1"]
        new_head = store.retract_turn(claim)
        assert new_head is not None and new_head.checkpoint_id == "e1"
        info = store.thread(T)
        assert info is not None and info.head_id == "e1"

    def test_admission_marks_survive_retract_turn(self, store: Checkpointer) -> None:
        lease = _attempt(store, T, "run-a")
        claim = store.claim(T, "run-a")
        _commit(store, claim, "c1", None, "run-a")
        store.retract_turn(claim)
        entry = store.run_queue.entry(lease.entry.entry_id)
        assert entry is not None and entry.admitted is True
        assert store.latest_of_runs(T, ["run-a"]) is None

    # --- prune (rule 16; D13: keeps the head, evidence, keep_last and the young) ----------

    def test_prune_keep_last_removes_older_checkpoints(self, store: Checkpointer) -> None:
        _new_thread(store, ids=["c1", "c2", "c3", "c4", "c5"])
        result = store.prune(T, RetentionPolicy(keep_last=2))
        assert result == PruneResult(checkpoints_removed=3, events_removed=0)
        assert [c.checkpoint_id for c in store.history(T)] == ["c5", "c4"]

    def test_prune_leaves_a_kept_checkpoint_whose_parent_it_removed_with_none(
        self, store: Checkpointer
    ) -> None:
        """SPEC §14.1: a kept checkpoint whose parent was pruned reports no parent."""
        _new_thread(store, ids=["c1", "c2", "c3", "c4"])
        store.prune(T, RetentionPolicy(keep_last=2))
        assert [(c.checkpoint_id, c.parent_id) for c in store.history(T)] == [
            ("c4", "c3"),
            ("c3", None),
        ]
        store.prune(T, RetentionPolicy(keep_last=1))
        assert [(c.checkpoint_id, c.parent_id) for c in store.history(T)] == [("c4", None)]

    def test_prune_keep_last_counts_the_head(self, store: Checkpointer) -> None:
        _new_thread(store, ids=["c1", "c2", "c3"])
        store.prune(T, RetentionPolicy(keep_last=1))
        assert [c.checkpoint_id for c in store.history(T)] == ["c3"]

    def test_prune_keep_last_alone_removes_no_events(self, store: Checkpointer) -> None:
        _new_thread(store, ids=["c1", "c2", "c3"])
        store.prune(T, RetentionPolicy(keep_last=1))
        assert [e.seq for e in store.events_after(T, 0)] == [1, 2, 3]

    def test_prune_max_age_removes_checkpoints_committed_before_it(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = _new_thread(store, ids=["c1", "c2"])
        clock.advance(2 * HOUR)
        _commit(store, claim, "c3", "c2")
        _commit(store, claim, "c4", "c3")
        result = store.prune(T, RetentionPolicy(max_age=HOUR))
        assert result.checkpoints_removed == 2
        assert [c.checkpoint_id for c in store.history(T)] == ["c4", "c3"]

    def test_prune_max_age_keeps_younger_checkpoints(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        _new_thread(store, ids=["c1", "c2", "c3"])
        clock.advance(timedelta(minutes=30))
        assert store.prune(T, RetentionPolicy(max_age=HOUR)).checkpoints_removed == 0
        assert len(store.history(T)) == 3

    def test_prune_never_removes_the_head(self, store: Checkpointer, clock: ClockControl) -> None:
        _new_thread(store, ids=["c1", "c2"])
        clock.advance(2 * HOUR)
        store.prune(T, RetentionPolicy(max_age=HOUR))
        assert [c.checkpoint_id for c in store.history(T)] == ["c2"]

    def test_prune_with_both_keeps_the_newest_keep_last_even_when_old(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = _new_thread(store, ids=["c1", "c2", "c3"])
        clock.advance(2 * HOUR)
        _commit(store, claim, "c4", "c3")
        store.prune(T, RetentionPolicy(keep_last=3, max_age=HOUR))
        assert [c.checkpoint_id for c in store.history(T)] == ["c4", "c3", "c2"]

    def test_prune_with_both_keeps_young_checkpoints_beyond_keep_last(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = _new_thread(store, ids=["c1", "c2"])
        clock.advance(2 * HOUR)
        _chain(store, claim, ["c3", "c4", "c5"], parent_id="c2")
        result = store.prune(T, RetentionPolicy(keep_last=1, max_age=HOUR))
        assert result.checkpoints_removed == 2
        assert [c.checkpoint_id for c in store.history(T)] == ["c5", "c4", "c3"]

    def test_prune_age_is_commit_time_not_created_at(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = store.claim(T, "h")
        ancient = datetime(1990, 1, 1, tzinfo=UTC)
        _commit(store, claim, "c1", None, created_at=ancient)
        _commit(store, claim, "c2", "c1", created_at=ancient)
        assert store.prune(T, RetentionPolicy(max_age=HOUR)) == PruneResult(0, 0)

    def test_prune_removes_events_older_than_max_age(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = _new_thread(store, events=(EventIn("old"),))
        clock.advance(2 * HOUR)
        store.append_events(claim, [EventIn("new")])
        result = store.prune(T, RetentionPolicy(max_age=HOUR))
        assert result.events_removed == 2
        assert [(e.seq, e.kind) for e in store.events_after(T, 0)] == [(3, "new")]

    def test_prune_removes_old_events_even_of_kept_checkpoints(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        _new_thread(store, events=(EventIn("a"),))
        clock.advance(2 * HOUR)
        result = store.prune(T, RetentionPolicy(max_age=HOUR))
        assert result == PruneResult(checkpoints_removed=0, events_removed=2)
        assert store.events_after(T, 0) == []
        assert store.get(T) is not None

    def test_prune_keeps_event_numbering(self, store: Checkpointer, clock: ClockControl) -> None:
        claim = _new_thread(store, ids=["c1", "c2"])
        clock.advance(2 * HOUR)
        store.prune(T, RetentionPolicy(max_age=HOUR))
        info = store.thread(T)
        assert info is not None and info.last_seq == 2
        assert _commit(store, claim, "c3", "c2").seq == 3

    def test_prune_removes_writes_with_their_checkpoint(self, store: Checkpointer) -> None:
        claim = _new_thread(store, ids=["c1", "c2"])
        store.put_writes(claim, "c1", [PendingWrite("t", "ch", 1)])
        store.prune(T, RetentionPolicy(keep_last=1))
        assert store.get(T, "c1") is None
        assert store.latest_of_runs(T, ["run-1"]) == store.get(T)

    def test_prune_of_thread_without_commit_is_zero(self, store: Checkpointer) -> None:
        assert store.prune("unknown", RetentionPolicy(keep_last=1)) == PruneResult(0, 0)

    def test_prune_leaves_other_threads_alone(self, store: Checkpointer) -> None:
        _new_thread(store, "t-a", ids=["a1", "a2"])
        _new_thread(store, "t-b", ids=["b1", "b2"])
        store.prune("t-a", RetentionPolicy(keep_last=1))
        assert len(store.history("t-b")) == 2

    def test_prune_keeps_evidence_of_open_entries_beyond_keep_last(
        self, store: Checkpointer
    ) -> None:
        _attempt(store, T, "run-e")
        claim = store.claim(T, "run-e")
        _chain(store, claim, ["e1", "e2"], "run-e")
        _chain(store, claim, ["x1", "x2"], "run-x", parent_id="e2")
        result = store.prune(T, RetentionPolicy(keep_last=1))
        assert result.checkpoints_removed == 2
        assert [c.checkpoint_id for c in store.history(T)] == ["x2", "e2"]

    def test_prune_keeps_evidence_of_open_entries_beyond_max_age(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        _attempt(store, T, "run-e")
        claim = store.claim(T, "run-e")
        _chain(store, claim, ["e1", "e2"], "run-e")
        _chain(store, claim, ["x1"], "run-x", parent_id="e2")
        clock.advance(2 * HOUR)
        claim = store.claim(T, "late")
        _commit(store, claim, "x2", "x1", "run-x")
        store.prune(T, RetentionPolicy(max_age=HOUR))
        assert [c.checkpoint_id for c in store.history(T)] == ["x2", "e2"]

    def test_prune_drops_evidence_once_the_entry_closed(self, store: Checkpointer) -> None:
        lease = _attempt(store, T, "run-e")
        claim = store.claim(T, "run-e")
        _chain(store, claim, ["e1"], "run-e")
        _chain(store, claim, ["x1"], "run-x", parent_id="e1")
        store.run_queue.close(lease, Failed("done"))
        store.prune(T, RetentionPolicy(keep_last=1))
        assert [c.checkpoint_id for c in store.history(T)] == ["x1"]

    def test_prune_all_prunes_every_thread_and_sums(self, store: Checkpointer) -> None:
        for name in ["t-a", "t-b", "t-c"]:
            _new_thread(store, name, ids=["c1", "c2", "c3"])
        result = store.prune_all(RetentionPolicy(keep_last=1))
        assert result == PruneResult(checkpoints_removed=6, events_removed=0)
        assert all(len(store.history(name)) == 1 for name in ["t-a", "t-b", "t-c"])

    def test_prune_all_in_batches_of_one_prunes_every_thread(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        for name in ["t-a", "t-b", "t-c"]:
            _new_thread(store, name, ids=["c1", "c2"])
        clock.advance(2 * HOUR)
        result = store.prune_all(RetentionPolicy(max_age=HOUR), batch=1)
        assert result == PruneResult(checkpoints_removed=3, events_removed=6)
        assert all(len(store.history(name)) == 1 for name in ["t-a", "t-b", "t-c"])

    def test_prune_all_on_empty_store_is_zero(self, store: Checkpointer) -> None:
        assert store.prune_all(RetentionPolicy(keep_last=1)) == PruneResult(0, 0)

    @pytest.mark.parametrize("batch", [0, -1, 1.5, "10", None])
    def test_prune_all_refuses_a_bad_batch(self, store: Checkpointer, batch: Any) -> None:
        _new_thread(store, ids=["c1", "c2"])
        with pytest.raises(ValidationError):
            store.prune_all(RetentionPolicy(keep_last=1), batch=batch)
        assert len(store.history(T)) == 2

    @pytest.mark.parametrize(
        "policy",
        [
            pytest.param("keep 1", id="str"),
            pytest.param(None, id="none"),
            pytest.param({"keep_last": 1}, id="dict"),
        ],
    )
    def test_prune_refuses_something_not_a_retention_policy(
        self, store: Checkpointer, policy: Any
    ) -> None:
        _new_thread(store, ids=["c1", "c2"])
        with pytest.raises(ValidationError):
            store.prune(T, policy)
        with pytest.raises(ValidationError):
            store.prune_all(policy)
        assert len(store.history(T)) == 2

    @pytest.mark.parametrize(
        "fields",
        [
            pytest.param({}, id="neither"),
            pytest.param({"keep_last": 0}, id="keep_last-0"),
            pytest.param({"keep_last": -1}, id="keep_last-negative"),
            pytest.param({"keep_last": True}, id="keep_last-bool"),
            pytest.param({"keep_last": 1.0}, id="keep_last-float"),
            pytest.param({"max_age": timedelta(0)}, id="max_age-0"),
            pytest.param({"max_age": -HOUR}, id="max_age-negative"),
            pytest.param({"max_age": 3600}, id="max_age-int"),
            pytest.param({"max_age": 3600.0}, id="max_age-float"),
        ],
    )
    def test_retention_policy_refuses_bad_fields(self, fields: dict[str, Any]) -> None:
        with pytest.raises(ValidationError):
            RetentionPolicy(**fields)

    # --- delete_thread (rule 17; D14: fence first, cascades to descendants) ---------------

    def test_delete_thread_returns_true_when_the_thread_existed(self, store: Checkpointer) -> None:
        _new_thread(store)
        assert store.delete_thread(T) is True

    def test_delete_thread_returns_false_for_an_unknown_thread(self, store: Checkpointer) -> None:
        assert store.delete_thread("unknown") is False

    def test_delete_thread_twice_returns_false_the_second_time(self, store: Checkpointer) -> None:
        _new_thread(store)
        store.delete_thread(T)
        assert store.delete_thread(T) is False

    def test_delete_thread_of_claimed_but_uncommitted_id_is_false(
        self, store: Checkpointer
    ) -> None:
        store.claim(T, "h")
        assert store.delete_thread(T) is False

    def test_delete_thread_removes_everything_of_the_thread(self, store: Checkpointer) -> None:
        claim = _new_thread(store, ids=["c1", "c2"])
        store.put_writes(claim, "c2", [PendingWrite("t", "ch", 1)])
        store.record_effect(claim, "k", 1)
        store.append_events(claim, [EventIn("e")])
        store.delete_thread(T)
        assert store.thread(T) is None and store.get(T) is None and store.get(T, "c1") is None
        assert store.history(T) == [] and store.events_after(T, 0) == []
        assert store.get_effect(T, "k") is None and store.threads() == []
        assert store.effects(T) == []
        assert store.latest_of_runs(T, ["run-1"]) is None

    def test_delete_thread_cascades_to_descendants(self, store: Checkpointer) -> None:
        _new_thread(store, "root")
        _new_thread(store, "child", parent_thread_id="root")
        _new_thread(store, "grandchild", parent_thread_id="child")
        assert store.delete_thread("root") is True
        for name in ["root", "child", "grandchild"]:
            assert store.thread(name) is None and store.history(name) == []

    def test_delete_thread_spares_parents_and_siblings(self, store: Checkpointer) -> None:
        _new_thread(store, "root")
        _new_thread(store, "child-a", parent_thread_id="root")
        _new_thread(store, "child-b", parent_thread_id="root")
        store.delete_thread("child-a")
        assert store.thread("root") is not None and store.thread("child-b") is not None
        assert store.children("root") == ["child-b"]

    def test_new_thread_after_delete_continues_the_event_numbering(
        self, store: Checkpointer
    ) -> None:
        claim = _new_thread(store, ids=["c1", "c2"])
        store.append_events(claim, [EventIn("e")])
        store.delete_thread(T)
        claim = store.claim(T, "h")
        checkpoint = _commit(store, claim, "c1", None)
        assert checkpoint.seq == 4
        assert [e.seq for e in store.events_after(T, 0)] == [4]

    def test_descendants_leave_tombstones_too(self, store: Checkpointer) -> None:
        _new_thread(store, "root")
        _new_thread(store, "child", ids=["c1", "c2", "c3"], parent_thread_id="root")
        store.delete_thread("root")
        assert _commit(store, store.claim("child", "h"), "c1", None).seq == 4

    def test_new_thread_after_delete_is_a_new_thread(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        _new_thread(store, "root")
        claim = _new_thread(store, parent_thread_id="root")
        store.delete_thread(T)
        clock.advance(HOUR)
        checkpoint = _commit(store, store.claim(T, "h"), "c1", None)
        info = store.thread(T)
        assert info is not None
        assert (info.parent_thread_id, info.created_at) == (None, checkpoint.committed_at)
        assert checkpoint.seq == 2
        with pytest.raises(ClaimLost):
            store.renew_claim(claim)

    def test_delete_thread_ends_its_claims(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.delete_thread(T)
        with pytest.raises(ClaimLost):
            _commit(store, claim, "c1", None)
        with pytest.raises(ClaimLost):
            store.renew_claim(claim)

    def test_delete_thread_frees_the_id_for_a_new_claim(self, store: Checkpointer) -> None:
        _new_thread(store)
        store.delete_thread(T)
        assert store.claim(T, "other").holder == "other"

    def test_delete_thread_ends_claims_on_an_uncommitted_id(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        store.delete_thread(T)
        with pytest.raises(ClaimLost):
            store.renew_claim(claim)

    def test_delete_thread_ends_claims_of_descendants(self, store: Checkpointer) -> None:
        _new_thread(store, "root")
        child_claim = _new_thread(store, "child", parent_thread_id="root")
        store.delete_thread("root")
        with pytest.raises(ClaimLost):
            _commit(store, child_claim, "c1", None)

    def test_delete_thread_with_current_fence_deletes(self, store: Checkpointer) -> None:
        fence = store.claim("supervisor", "h")
        _new_thread(store)
        assert store.delete_thread(T, fence=fence) is True

    def test_delete_thread_with_stale_fence_is_claim_lost(self, store: Checkpointer) -> None:
        fence = store.claim("supervisor", "h")
        store.release_claim(fence)
        _new_thread(store)
        before = _snapshot(store)
        with pytest.raises(ClaimLost):
            store.delete_thread(T, fence=fence)
        assert _snapshot(store) == before

    def test_delete_thread_checks_the_fence_before_existence(self, store: Checkpointer) -> None:
        fence = store.claim("supervisor", "h")
        store.release_claim(fence)
        with pytest.raises(ClaimLost):
            store.delete_thread("unknown", fence=fence)

    def test_delete_thread_fenced_by_its_own_claim(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        assert store.delete_thread(T, fence=claim) is True

    def test_delete_thread_marks_its_open_entries(self, store: Checkpointer) -> None:
        lease = _attempt(store, T, "run-a")
        _new_thread(store, run_id="run-a")
        store.delete_thread(T)
        entry = store.run_queue.entry(lease.entry.entry_id)
        assert entry is not None and entry.thread_deleted is True

    def test_delete_thread_marks_open_entries_of_descendants(self, store: Checkpointer) -> None:
        _new_thread(store, "root")
        _new_thread(store, "child", parent_thread_id="root")
        ticket = store.run_queue.submit(Submission(thread_id="child", input=1))
        store.delete_thread("root")
        entry = store.run_queue.entry(ticket.entry_id)
        assert entry is not None and entry.thread_deleted is True

    def test_delete_of_uncommitted_id_still_marks_its_open_entries(
        self, store: Checkpointer
    ) -> None:
        ticket = store.run_queue.submit(Submission(thread_id=T, input=1))
        assert store.delete_thread(T) is False
        entry = store.run_queue.entry(ticket.entry_id)
        assert entry is not None and entry.thread_deleted is True

    def test_delete_thread_does_not_mark_entries_submitted_later(self, store: Checkpointer) -> None:
        _new_thread(store)
        store.delete_thread(T)
        ticket = store.run_queue.submit(Submission(thread_id=T, input=1))
        entry = store.run_queue.entry(ticket.entry_id)
        assert entry is not None and entry.thread_deleted is False

    def test_delete_thread_does_not_mark_entries_of_other_threads(
        self, store: Checkpointer
    ) -> None:
        ticket = store.run_queue.submit(Submission(thread_id="t-other", input=1))
        _new_thread(store)
        store.delete_thread(T)
        entry = store.run_queue.entry(ticket.entry_id)
        assert entry is not None and entry.thread_deleted is False

    def test_marked_entry_attempt_is_cancelled_as_thread_deleted(self, store: Checkpointer) -> None:
        ticket = store.run_queue.submit(Submission(thread_id=T, input=1))
        store.delete_thread(T)
        lease = store.run_queue.lease("w", timedelta(seconds=30))
        assert lease is not None and lease.entry.entry_id == ticket.entry_id
        store.run_queue.record_attempt(lease, "run-a")
        entry = store.run_queue.entry(ticket.entry_id)
        assert entry is not None and entry.outcome == Cancelled("thread_deleted")
