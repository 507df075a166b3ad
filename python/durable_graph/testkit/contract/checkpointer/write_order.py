"""The order of a checkpoint's pending writes (SPEC §14.1; sql/00_clock.sql `_dg_writes`,
migrations/0008.task_path.sql): every read returns them in LangGraph's ``writes_sort_key``
order, ``(task_path, task_id, index)``, ties in the order written. A write's task path is stored
with it (``""``: none, sorting first) and read back; it is not part of the write's key.
"""

from __future__ import annotations

from typing import Any

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ValidationError
from durable_graph.core.model import Commit, PendingWrite
from durable_graph.testkit.contract.checkpointer.support import (
    T,
    _fenced_child,
    _head,
    _new_thread,
    _snapshot,
)

# Task ids in the reverse order of their paths: ordering by task id alone would permute them.
_PARALLEL = [
    PendingWrite("task-z", "messages", "first", "~__pregel_pull, a"),
    PendingWrite("task-y", "messages", "second", "~__pregel_pull, b"),
    PendingWrite("task-x", "messages", "third", "~__pregel_pull, c"),
]


class WriteOrderTests:
    """Pending writes in ``writes_sort_key`` order, with their task paths, on every read."""

    def test_writes_are_read_by_task_path_then_task_then_index(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.put_writes(claim, "c1", [_PARALLEL[2], _PARALLEL[0]])
        store.put_writes(claim, "c1", [_PARALLEL[1]])
        store.put_writes(
            claim, "c1", [PendingWrite("task-b", "x", 1), PendingWrite("task-b", "y", 2)]
        )
        store.put_writes(claim, "c1", [PendingWrite("task-a", "z", 3)])
        writes = _head(store).writes
        # No path first (by task id, then index), then by path.
        assert writes == (
            PendingWrite("task-a", "z", 3),
            PendingWrite("task-b", "x", 1),
            PendingWrite("task-b", "y", 2),
            *_PARALLEL,
        )
        assert store.history(T)[0].writes == writes
        assert store.search(T, {})[0].writes == writes

    def test_paths_compare_by_code_point_as_python_does(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        paths = ["~b", "~a", "~é", "~Z", "~a, 10", "~a, 2", "~\U0001f600"]
        store.put_writes(
            claim, "c1", [PendingWrite(f"t{i}", "ch", i, p) for i, p in enumerate(paths)]
        )
        assert [w.task_path for w in _head(store).writes] == sorted(paths)

    def test_a_task_path_is_kept_and_not_part_of_the_writes_key(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.put_writes(claim, "c1", [PendingWrite("t", "ch", "first", "~p, 1")])
        store.put_writes(claim, "c1", [PendingWrite("t", "ch", "second", "~p, 2")])
        assert _head(store).writes == (PendingWrite("t", "ch", "first", "~p, 1"),)

    def test_put_writes_and_commit_and_fenced_writes_keep_their_paths(
        self, store: Checkpointer
    ) -> None:
        claim = _new_thread(store)
        store.put_writes_and_commit(
            claim, "c1", list(reversed(_PARALLEL)), Commit("c2", "c1", "run-1", {})
        )
        assert _head(store, T, "c1").writes == tuple(_PARALLEL)
        root, child = _fenced_child(store, "root")
        store.put_writes_fenced(child, "k1", list(reversed(_PARALLEL)), root)
        assert _head(store, "root/ns", "k1").writes == tuple(_PARALLEL)

    def test_copy_thread_keeps_the_paths_and_the_order(self, store: Checkpointer) -> None:
        claim = store.claim("src", "h")
        store.commit(claim, Commit("c1", None, "run-1", {}))
        store.put_writes(claim, "c1", list(reversed(_PARALLEL)))
        assert store.copy_thread("src", "dst") is True
        assert _head(store, "dst").writes == tuple(_PARALLEL)

    def test_a_long_task_path_is_allowed(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        path = "é" * 2048  # 4096 UTF-8 bytes
        store.put_writes(claim, "c1", [PendingWrite("t", "ch", 1, path)])
        assert _head(store).writes == (PendingWrite("t", "ch", 1, path),)

    @pytest.mark.parametrize("bad", [None, 7, "a\x00b", "x" * 4097, "\ud800"])
    def test_a_bad_task_path_is_refused_and_nothing_is_written(
        self, store: Checkpointer, bad: Any
    ) -> None:
        claim = _new_thread(store, ids=("c1",))
        before = _snapshot(store)
        good = PendingWrite("t", "ch", 1)
        for call in (
            lambda: store.put_writes(claim, "c1", [good, PendingWrite("t", "ch", 2, bad)]),
            lambda: store.put_writes_and_commit(
                claim, "c1", [PendingWrite("t", "ch", 2, bad)], Commit("c2", "c1", "r", {})
            ),
        ):
            with pytest.raises(ValidationError, match=r"writes\[\d\]\.task_path"):
                call()
        assert _snapshot(store) == before
