"""Reads (SPEC §4, sql/50_reads.sql): get, history, latest_of_runs, threads, events_after,
await_events_after and subscribe.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ValidationError
from durable_graph.core.model import EventIn, ThreadInfo
from durable_graph.testkit.contract.checkpointer.support import (
    FAST,
    T,
    _await_while,
    _commit,
    _kinds,
    _new_thread,
)


class ReadsTests:
    """get, history, latest_of_runs, thread(s), children, events_after, subscribe."""

    # --- reads ----------------------------------------------------------------------------

    def test_get_without_id_returns_the_head(self, store: Checkpointer) -> None:
        _new_thread(store, ids=["c1", "c2"])
        head = store.get(T)
        assert head is not None and head.checkpoint_id == "c2"

    def test_get_with_id_returns_that_checkpoint(self, store: Checkpointer) -> None:
        _new_thread(store, ids=["c1", "c2"])
        older = store.get(T, "c1")
        assert older is not None and (older.checkpoint_id, older.state) == ("c1", {"at": "c1"})

    def test_get_of_unknown_checkpoint_or_thread_is_none(self, store: Checkpointer) -> None:
        _new_thread(store)
        assert store.get(T, "nope") is None
        assert store.get("unknown") is None
        assert store.get("unknown", "c1") is None

    def test_get_does_not_see_checkpoints_of_other_threads(self, store: Checkpointer) -> None:
        _new_thread(store, "t-other", ids=["elsewhere"])
        _new_thread(store)
        assert store.get(T, "elsewhere") is None

    def test_history_is_newest_first(self, store: Checkpointer) -> None:
        _new_thread(store, ids=["c1", "c2", "c3"])
        history = store.history(T)
        assert [c.checkpoint_id for c in history] == ["c3", "c2", "c1"]
        assert [c.seq for c in history] == [3, 2, 1]

    def test_history_before_is_exclusive(self, store: Checkpointer) -> None:
        _new_thread(store, ids=["c1", "c2", "c3", "c4"])
        assert [c.checkpoint_id for c in store.history(T, before="c3")] == ["c2", "c1"]

    def test_history_before_the_oldest_is_empty(self, store: Checkpointer) -> None:
        _new_thread(store, ids=["c1", "c2"])
        assert store.history(T, before="c1") == []

    def test_history_before_an_unknown_id_is_empty(self, store: Checkpointer) -> None:
        _new_thread(store, ids=["c1", "c2"])
        assert store.history(T, before="nope") == []

    def test_history_limit(self, store: Checkpointer) -> None:
        _new_thread(store, ids=["c1", "c2", "c3", "c4"])
        assert [c.checkpoint_id for c in store.history(T, limit=2)] == ["c4", "c3"]

    def test_history_before_with_limit(self, store: Checkpointer) -> None:
        _new_thread(store, ids=["c1", "c2", "c3", "c4"])
        assert [c.checkpoint_id for c in store.history(T, before="c4", limit=2)] == ["c3", "c2"]

    def test_history_default_limit_is_100(self, store: Checkpointer) -> None:
        _new_thread(store, ids=[f"c{i:03}" for i in range(101)])
        history = store.history(T)
        assert len(history) == 100 and history[-1].checkpoint_id == "c001"

    def test_history_of_unknown_thread_is_empty(self, store: Checkpointer) -> None:
        assert store.history("unknown") == []

    def test_latest_of_runs_is_the_newest_committed_of_those_runs(
        self, store: Checkpointer
    ) -> None:
        claim = store.claim(T, "h")
        late = datetime(2099, 1, 1, tzinfo=UTC)
        _commit(store, claim, "c1", None, "run-1", created_at=late)
        _commit(store, claim, "c2", "c1", "run-2", created_at=late)
        _commit(store, claim, "c3", "c2", "run-1", created_at=datetime(1999, 1, 1, tzinfo=UTC))
        _commit(store, claim, "c4", "c3", "run-3")
        latest = store.latest_of_runs(T, ["run-2", "run-1"])
        assert latest is not None and latest.checkpoint_id == "c3"
        only = store.latest_of_runs(T, ["run-2"])
        assert only is not None and only.checkpoint_id == "c2"

    def test_latest_of_runs_without_a_match_is_none(self, store: Checkpointer) -> None:
        _new_thread(store)
        assert store.latest_of_runs(T, ["other"]) is None
        assert store.latest_of_runs(T, []) is None
        assert store.latest_of_runs("unknown", ["run-1"]) is None

    def test_latest_of_runs_looks_only_at_the_thread(self, store: Checkpointer) -> None:
        _new_thread(store, "t-other", run_id="run-x")
        _new_thread(store)
        assert store.latest_of_runs(T, ["run-x"]) is None

    def test_thread_of_unknown_id_is_none(self, store: Checkpointer) -> None:
        assert store.thread("unknown") is None

    def test_threads_lists_committed_threads_in_id_order(self, store: Checkpointer) -> None:
        for name in ["t-c", "t-a", "t-b"]:
            _new_thread(store, name)
        store.claim("t-0-claimed-only", "h")
        infos = store.threads()
        assert [i.thread_id for i in infos] == ["t-a", "t-b", "t-c"]
        assert all(isinstance(i, ThreadInfo) for i in infos)
        assert infos[0] == store.thread("t-a")

    def test_threads_are_in_utf8_byte_order(self, store: Checkpointer) -> None:
        names = ["é", "a", "B", "😀", "ab", "a b", "Z", "\uffef"]
        for name in names:
            _new_thread(store, name)
        expected = sorted(names, key=lambda n: n.encode("utf-8"))
        assert expected[:3] == ["B", "Z", "a"]
        assert [i.thread_id for i in store.threads()] == expected

    def test_threads_after_starts_after_that_id(self, store: Checkpointer) -> None:
        for name in ["a", "b", "c"]:
            _new_thread(store, name)
        assert [i.thread_id for i in store.threads(after="a")] == ["b", "c"]

    def test_threads_after_an_unknown_id(self, store: Checkpointer) -> None:
        for name in ["a", "b", "c"]:
            _new_thread(store, name)
        assert [i.thread_id for i in store.threads(after="aa")] == ["b", "c"]
        assert store.threads(after="c") == []

    def test_threads_limit(self, store: Checkpointer) -> None:
        for name in ["a", "b", "c"]:
            _new_thread(store, name)
        assert [i.thread_id for i in store.threads(limit=2)] == ["a", "b"]
        assert [i.thread_id for i in store.threads(after="a", limit=1)] == ["b"]

    def test_threads_lists_a_fully_retracted_thread(self, store: Checkpointer) -> None:
        store.retract_turn(_new_thread(store))
        (info,) = store.threads()
        assert (info.thread_id, info.head_id) == (T, None)

    def test_events_after_returns_events_after_the_seq(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.append_events(claim, [EventIn("a"), EventIn("b"), EventIn("c")])
        assert [e.seq for e in store.events_after(T, 2)] == [3, 4]
        assert store.events_after(T, 4) == []

    def test_events_after_limit(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.append_events(claim, [EventIn("a"), EventIn("b"), EventIn("c")])
        assert [e.seq for e in store.events_after(T, 0, limit=2)] == [1, 2]

    def test_events_after_of_unknown_thread_is_empty(self, store: Checkpointer) -> None:
        assert store.events_after("unknown", 0) == []

    def test_events_after_returns_full_events(self, store: Checkpointer) -> None:
        produced = datetime(2020, 5, 5, tzinfo=UTC)
        claim = _new_thread(store)
        (appended,) = store.append_events(claim, [EventIn("a", {"p": 1}, produced)], "run-9")
        (read,) = store.events_after(T, 1)
        assert read == appended
        assert (read.thread_id, read.kind, read.payload, read.run_id, read.created_at) == (
            T,
            "a",
            {"p": 1},
            "run-9",
            produced,
        )

    def test_await_events_after_returns_existing_events_at_once(self, store: Checkpointer) -> None:
        _new_thread(store)
        started = time.monotonic()
        events = store.await_events_after(T, 0, timedelta(seconds=30), FAST)
        assert _kinds(events) == ["store.checkpoint"]
        assert time.monotonic() - started < 5

    def test_await_events_after_returns_empty_at_the_timeout(self, store: Checkpointer) -> None:
        _new_thread(store)
        started = time.monotonic()
        assert store.await_events_after(T, 1, timedelta(milliseconds=200), FAST) == []
        elapsed = time.monotonic() - started
        assert 0.19 <= elapsed < 5

    def test_await_events_after_with_zero_timeout_does_not_wait(self, store: Checkpointer) -> None:
        _new_thread(store)
        assert store.await_events_after(T, 1, timedelta(0)) == []
        assert len(store.await_events_after(T, 0, timedelta(0))) == 1

    def test_await_events_after_returns_when_another_thread_appends(
        self, store: Checkpointer
    ) -> None:
        claim = _new_thread(store)
        started = time.monotonic()
        events = _await_while(store, 1, lambda: store.append_events(claim, [EventIn("ping")]))
        assert _kinds(events) == ["ping"]
        assert time.monotonic() - started < 10

    def test_await_events_after_sees_the_first_commit(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        events = _await_while(store, 0, lambda: _commit(store, claim, "c1", None))
        assert _kinds(events) == ["store.checkpoint"]

    def test_await_events_after_refuses_a_non_timedelta_timeout(self, store: Checkpointer) -> None:
        with pytest.raises(ValidationError):
            store.await_events_after(T, 0, 0.1)  # type: ignore[arg-type]

    def test_subscribe_yields_existing_events_in_order(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.append_events(claim, [EventIn("a"), EventIn("b")])
        iterator = store.subscribe(T, 0, FAST)
        assert [next(iterator).seq for _ in range(3)] == [1, 2, 3]

    def test_subscribe_starts_after_the_given_seq(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.append_events(claim, [EventIn("a"), EventIn("b")])
        assert next(store.subscribe(T, 2, FAST)).kind == "b"

    def test_subscribe_yields_events_appended_later(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        iterator = store.subscribe(T, 1, FAST)
        timer = threading.Timer(0.1, lambda: store.append_events(claim, [EventIn("late")]))
        timer.start()
        try:
            event = next(iterator)
        finally:
            timer.join()
        assert (event.seq, event.kind) == (2, "late")
