"""What the store gains for LangGraph's savers (SPEC §12, sql/47_runs_copy.sql): delete_runs
(store-wide delete of given runs' checkpoints and writes; the head falls back to the newest
remaining, as retract_turn's D24) and copy_thread (atomic copy of a thread and its descendants
named ``source + suffix``: checkpoints, writes, head and effects; not events, claims or entries)
and put_writes_and_commit (a step's task writes and the next checkpoint in one transaction).
"""

from __future__ import annotations

from typing import Any

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ClaimLost, NotFound, StaleParent, ThreadBusy, ValidationError
from durable_graph.core.model import Commit, PendingWrite
from durable_graph.testkit.contract.checkpointer.support import (
    T,
    _chain,
    _commit,
    _fenced_child,
    _kinds,
    _new_thread,
    _snapshot,
)


class LangGraphSupportTests:
    """delete_runs and copy_thread."""

    # --- delete_runs ----------------------------------------------------------------------

    def test_delete_runs_removes_those_runs_checkpoints_on_every_thread(
        self, store: Checkpointer
    ) -> None:
        a = store.claim("a", "h")
        _chain(store, a, ["a1"], "run-1")
        _chain(store, a, ["a2"], "run-2", parent_id="a1")
        b = store.claim("b", "h")
        _chain(store, b, ["b1", "b2"], "run-1")
        assert store.delete_runs(["run-1", "run-unknown"]) == 3
        assert [c.checkpoint_id for c in store.history("a")] == ["a2"]
        assert store.history("b") == []
        info = store.thread("b")
        assert info is not None and info.head_id is None

    def test_delete_runs_falls_back_to_the_newest_remaining_head(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        _chain(store, claim, ["c1"], "run-1")
        _chain(store, claim, ["c2", "c3"], "run-2", parent_id="c1")
        store.delete_runs(["run-2"])
        info = store.thread(T)
        assert info is not None and info.head_id == "c1"
        assert _commit(store, claim, "c4", "c1", "run-3").parent_id == "c1"

    def test_delete_runs_removes_the_writes_and_logs_an_event(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        _chain(store, claim, ["c1"], "run-1")
        store.put_writes(claim, "c1", [PendingWrite("t", "ch", 1)])
        store.delete_runs(["run-1"])
        # the id is free again and starts without the old writes
        again = _commit(store, claim, "c1", None, "run-2")
        assert again.writes == ()
        events = store.events_after(T, 0)
        deleted = [e for e in events if e.kind == "store.runs_deleted"]
        assert len(deleted) == 1 and deleted[0].payload == {"checkpoint_ids": ["c1"]}

    def test_delete_runs_of_no_runs_changes_nothing(self, store: Checkpointer) -> None:
        _new_thread(store, ids=("c1",))
        before = _snapshot(store)
        assert store.delete_runs([]) == 0
        assert store.delete_runs(["other"]) == 0
        assert _snapshot(store) == before

    @pytest.mark.parametrize("bad", ["run-1", [""], [None], [1], ("ok", "a\x00b")])
    def test_delete_runs_refuses_bad_run_ids_and_writes_nothing(
        self, store: Checkpointer, bad: object
    ) -> None:
        _new_thread(store, ids=("c1",))
        before = _snapshot(store)
        with pytest.raises(ValidationError, match="run_ids"):
            store.delete_runs(bad)  # type: ignore[arg-type]
        assert _snapshot(store) == before

    # --- copy_thread ----------------------------------------------------------------------

    def test_copy_thread_copies_history_writes_head_and_effects(self, store: Checkpointer) -> None:
        claim = store.claim("src", "h")
        _chain(store, claim, ["c1", "c2"], "run-1")
        store.put_writes(claim, "c2", [PendingWrite("t", "ch", {"v": 1})])
        store.record_effect(claim, "k", "sent", "run-1")
        assert store.copy_thread("src", "dst") is True
        src, dst = store.history("src"), store.history("dst")
        assert [c.checkpoint_id for c in dst] == ["c2", "c1"]
        for s, d in zip(src, dst, strict=True):
            assert (d.parent_id, d.run_id, d.state, d.metadata, d.next, d.writes) == (
                s.parent_id,
                s.run_id,
                s.state,
                s.metadata,
                s.next,
                s.writes,
            )
            assert d.thread_id == "dst"
        info = store.thread("dst")
        assert info is not None and info.head_id == "c2" and info.parent_thread_id is None
        effect = store.get_effect("dst", "k")
        assert effect is not None and effect.value == "sent"
        assert _kinds(store.events_after("dst", 0)) == ["store.checkpoint"] * 2

    def test_copy_thread_copies_descendants_named_after_the_source(
        self, store: Checkpointer
    ) -> None:
        _fenced_child(store, "src")
        other = store.claim("elsewhere", "h")
        _commit(store, other, "o1", None, parent_thread_id="src")
        assert store.copy_thread("src", "dst")
        assert store.children("dst") == ["dst/ns"]
        copied = store.get("dst/ns")
        assert copied is not None and copied.checkpoint_id == "k1"
        assert store.get("dstelsewhere") is None

    def test_copy_thread_leaves_the_source_unchanged(self, store: Checkpointer) -> None:
        _new_thread(store, "src", ids=("c1", "c2"))
        before = _snapshot(store, "src")
        store.copy_thread("src", "dst")
        assert _snapshot(store, "src")[:4] == before[:4]

    def test_copy_thread_of_an_unknown_source_returns_false(self, store: Checkpointer) -> None:
        assert store.copy_thread("nothing", "dst") is False
        assert store.thread("dst") is None

    def test_copy_thread_refuses_an_existing_target(self, store: Checkpointer) -> None:
        _new_thread(store, "src", ids=("c1",))
        _new_thread(store, "dst", ids=("d1",))
        before = _snapshot(store, "dst")
        with pytest.raises(ValidationError, match="target_thread_id"):
            store.copy_thread("src", "dst")
        assert _snapshot(store, "dst") == before

    def test_copy_thread_refuses_a_target_with_a_live_claim(self, store: Checkpointer) -> None:
        _new_thread(store, "src", ids=("c1",))
        store.claim("dst", "other")
        with pytest.raises(ThreadBusy):
            store.copy_thread("src", "dst")
        assert store.thread("dst") is None and store.history("dst") == []

    def test_copy_thread_target_continues_a_deleted_threads_numbering(
        self, store: Checkpointer
    ) -> None:
        _new_thread(store, "dst", ids=("d1", "d2"))
        last = store.events_after("dst", 0)[-1].seq
        assert store.delete_thread("dst")
        _new_thread(store, "src", ids=("c1",))
        store.copy_thread("src", "dst")
        assert [e.seq for e in store.events_after("dst", 0)] == [last + 1]

    def test_copied_thread_takes_commits_on_its_head(self, store: Checkpointer) -> None:
        _new_thread(store, "src", ids=("c1",))
        store.copy_thread("src", "dst")
        claim = store.claim("dst", "h")
        assert _commit(store, claim, "c2", "c1").parent_id == "c1"
        assert [c.checkpoint_id for c in store.history("src")] == ["c1"]

    # --- put_writes_and_commit -----------------------------------------------------------

    def test_put_writes_and_commit_lands_the_writes_and_the_checkpoint(
        self, store: Checkpointer
    ) -> None:
        claim = _new_thread(store, ids=("c1",))
        done = store.put_writes_and_commit(
            claim, "c1", [PendingWrite("t", "ch", 1)], Commit("c2", "c1", "run-1", {"s": 2})
        )
        assert done.checkpoint_id == "c2" and done.parent_id == "c1"
        parent = store.get(T, "c1")
        assert parent is not None and parent.writes == (PendingWrite("t", "ch", 1),)
        info = store.thread(T)
        assert info is not None and info.head_id == "c2"

    def test_put_writes_and_commit_keeps_the_first_write_per_key(self, store: Checkpointer) -> None:
        claim = _new_thread(store, ids=("c1",))
        store.put_writes(claim, "c1", [PendingWrite("t", "ch", "first")])
        store.put_writes_and_commit(
            claim, "c1", [PendingWrite("t", "ch", "second")], Commit("c2", "c1", "run-1", {})
        )
        parent = store.get(T, "c1")
        assert parent is not None and parent.writes == (PendingWrite("t", "ch", "first"),)

    def test_put_writes_and_commit_writes_nothing_when_the_commit_is_refused(
        self, store: Checkpointer
    ) -> None:
        claim = _new_thread(store, ids=("c1", "c2"))
        before = _snapshot(store)
        with pytest.raises(StaleParent):
            store.put_writes_and_commit(
                claim, "c1", [PendingWrite("t", "ch", 1)], Commit("c3", "c1", "run-1", {})
            )
        assert _snapshot(store) == before

    def test_put_writes_and_commit_is_fenced_writes_included(self, store: Checkpointer) -> None:
        root, child = _fenced_child(store, "root")
        store.release_claim(root)
        store.claim("root", "live")
        before = _snapshot(store, "root/ns")
        with pytest.raises(ClaimLost):
            store.put_writes_and_commit(
                child,
                "k1",
                [PendingWrite("t", "ch", 1)],
                Commit("k2", "k1", "run-1", {}, fence=root),
            )
        assert _snapshot(store, "root/ns") == before

    def test_put_writes_and_commit_to_an_unknown_checkpoint_writes_nothing(
        self, store: Checkpointer
    ) -> None:
        claim = _new_thread(store, ids=("c1",))
        before = _snapshot(store)
        with pytest.raises(NotFound):
            store.put_writes_and_commit(
                claim, "nope", [PendingWrite("t", "ch", 1)], Commit("c2", "c1", "run-1", {})
            )
        assert _snapshot(store) == before

    def test_put_writes_and_commit_refuses_bad_writes_and_writes_nothing(
        self, store: Checkpointer
    ) -> None:
        claim = _new_thread(store, ids=("c1",))
        before = _snapshot(store)
        bad_value: Any = (1, 2)  # a tuple does not round-trip through JSON
        with pytest.raises(ValidationError, match="writes"):
            store.put_writes_and_commit(
                claim, "c1", [PendingWrite("t", "ch", bad_value)], Commit("c2", "c1", "r", {})
            )
        with pytest.raises(ValidationError, match="state"):
            store.put_writes_and_commit(
                claim, "c1", [PendingWrite("t", "ch", 1)], Commit("c2", "c1", "r", bad_value)
            )
        assert _snapshot(store) == before

    # --- search (metadata filters evaluated in the store) ---------------------------------

    def test_search_returns_matching_checkpoints_newest_first(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        for i, md in enumerate([{"step": 1, "src": "loop"}, {"step": 2}, {"step": 1, "src": "x"}]):
            _commit(store, claim, f"c{i}", f"c{i - 1}" if i else None, metadata=md)
        assert [c.checkpoint_id for c in store.search(T, {"step": 1})] == ["c2", "c0"]
        assert [c.checkpoint_id for c in store.search(T, {"step": 1, "src": "loop"})] == ["c0"]
        assert [c.checkpoint_id for c in store.search(T, {})] == ["c2", "c1", "c0"]
        assert store.search(T, {"missing": None}) == []

    def test_search_compares_json_values_not_python_ones(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        _commit(store, claim, "c1", None, metadata={"n": 1, "b": True, "o": {"a": [1, "x"]}})
        assert [c.checkpoint_id for c in store.search(T, {"n": 1.0})] == ["c1"]
        assert store.search(T, {"n": True}) == []
        assert store.search(T, {"b": 1}) == []
        assert [c.checkpoint_id for c in store.search(T, {"o": {"a": [1.0, "x"]}})] == ["c1"]
        assert store.search(T, {"o": {"a": [1]}}) == []  # equality, not containment

    def test_search_pages_with_before_and_limit(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        _chain(store, claim, ["c1", "c2", "c3", "c4"])
        first = store.search(T, {}, limit=2)
        assert [c.checkpoint_id for c in first] == ["c4", "c3"]
        rest = store.search(T, {}, before="c3", limit=2)
        assert [c.checkpoint_id for c in rest] == ["c2", "c1"]
        assert store.search(T, {}, before="unknown") == []

    def test_search_skips_checkpoints_whose_metadata_is_not_an_object(
        self, store: Checkpointer
    ) -> None:
        claim = store.claim(T, "h")
        _commit(store, claim, "c1", None, metadata=None)
        _commit(store, claim, "c2", "c1", metadata=[1])
        assert store.search(T, {"a": 1}) == []
        assert [c.checkpoint_id for c in store.search(T, {})] == ["c2", "c1"]
        assert store.search("no-such-thread", {}) == []

    @pytest.mark.parametrize("bad", [None, [("a", 1)], {"a": (1, 2)}, {1: "a"}])
    def test_search_refuses_a_filter_that_is_not_a_json_object(
        self, store: Checkpointer, bad: Any
    ) -> None:
        with pytest.raises(ValidationError, match="metadata"):
            store.search(T, bad)

    # --- put_writes_fenced ----------------------------------------------------------------

    def test_put_writes_fenced_writes_while_the_fence_is_current(self, store: Checkpointer) -> None:
        root, child = _fenced_child(store, "root")
        store.put_writes_fenced(child, "k1", [PendingWrite("t", "ch", 1)], root)
        got = store.get("root/ns", "k1")
        assert got is not None and got.writes == (PendingWrite("t", "ch", 1),)

    def test_put_writes_fenced_refuses_a_stale_fence_and_writes_nothing(
        self, store: Checkpointer
    ) -> None:
        root, child = _fenced_child(store, "root")
        store.release_claim(root)
        store.claim("root", "live")
        with pytest.raises(ClaimLost):
            store.put_writes_fenced(child, "k1", [PendingWrite("t", "ch", 1)], root)
        got = store.get("root/ns", "k1")
        assert got is not None and got.writes == ()

    def test_put_writes_fenced_checks_the_claim_and_the_checkpoint(
        self, store: Checkpointer
    ) -> None:
        root, child = _fenced_child(store, "root")
        with pytest.raises(NotFound):
            store.put_writes_fenced(child, "nope", [PendingWrite("t", "ch", 1)], root)
        store.release_claim(child)
        with pytest.raises(ClaimLost):
            store.put_writes_fenced(child, "k1", [PendingWrite("t", "ch", 1)], root)
        with pytest.raises(ValidationError, match="fence"):
            store.put_writes_fenced(child, "k1", [], None)  # type: ignore[arg-type]
