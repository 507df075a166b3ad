"""Claimed writes besides commit (SPEC §4, sql/30_writes_events_effects.sql): put_writes,
append_events, record_effect / get_effect and the effects() listing.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ClaimLost, NotFound, ValidationError
from durable_graph.core.model import EffectRecord, EventIn, PendingWrite
from durable_graph.testkit.contract.checkpointer.support import (
    HOUR,
    T,
    _commit,
    _first_commit_an_hour_ago,
    _head,
    _kinds,
    _new_thread,
    _released_claim,
    _snapshot,
    _within,
)
from durable_graph.testkit.harness import ClockControl


class WritesEventsEffectsTests:
    """put_writes, append_events, record_effect and get_effect."""

    # --- put_writes (rule 12; D10: claim checks first; D15: reads include writes) ---------

    def test_put_writes_attaches_writes_to_the_checkpoint(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.put_writes(claim, "c1", [PendingWrite("task", "ch", {"v": 1})])
        assert _head(store).writes == (PendingWrite("task", "ch", {"v": 1}),)

    def test_put_writes_is_idempotent_per_task_channel_index(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        writes = [PendingWrite("t", "a", 1), PendingWrite("t", "b", 2)]
        store.put_writes(claim, "c1", writes)
        store.put_writes(claim, "c1", writes)
        assert _head(store).writes == tuple(writes)

    def test_put_writes_first_value_wins(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.put_writes(claim, "c1", [PendingWrite("t", "a", "first")])
        store.put_writes(claim, "c1", [PendingWrite("t", "a", "second")])
        assert _head(store).writes == (PendingWrite("t", "a", "first"),)

    def test_put_writes_index_is_the_position_in_the_list(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.put_writes(claim, "c1", [PendingWrite("t", "a", 1), PendingWrite("t", "a", 2)])
        store.put_writes(claim, "c1", [PendingWrite("t", "a", 9)])
        assert _head(store).writes == (PendingWrite("t", "a", 1), PendingWrite("t", "a", 2))

    def test_put_writes_later_index_adds_a_write(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.put_writes(claim, "c1", [PendingWrite("t", "a", 1)])
        store.put_writes(claim, "c1", [PendingWrite("t", "a", 1), PendingWrite("t", "b", 2)])
        assert _head(store).writes == (PendingWrite("t", "a", 1), PendingWrite("t", "b", 2))

    def test_writes_are_ordered_by_task_then_index(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.put_writes(
            claim, "c1", [PendingWrite("task-b", "z", 1), PendingWrite("task-b", "a", 2)]
        )
        store.put_writes(claim, "c1", [PendingWrite("task-a", "y", 3)])
        head = _head(store)
        assert [(w.task_id, w.channel) for w in head.writes] == [
            ("task-a", "y"),
            ("task-b", "z"),
            ("task-b", "a"),
        ]

    def test_put_writes_to_an_older_checkpoint(self, store: Checkpointer) -> None:
        claim = _new_thread(store, ids=["c1", "c2"])
        store.put_writes(claim, "c1", [PendingWrite("t", "ch", 1)])
        older, head = store.get(T, "c1"), store.get(T)
        assert older is not None and older.writes == (PendingWrite("t", "ch", 1),)
        assert head is not None and head.writes == ()

    def test_writes_are_part_of_every_read(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        write = PendingWrite("t", "ch", [1])
        store.put_writes(claim, "c1", [write])
        history = store.history(T)
        latest = store.latest_of_runs(T, ["run-1"])
        assert history[0].writes == (write,)
        assert latest is not None and latest.writes == (write,)

    def test_put_writes_to_unknown_checkpoint_is_not_found(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        with pytest.raises(NotFound):
            store.put_writes(claim, "nope", [PendingWrite("t", "ch", 1)])

    def test_put_writes_to_checkpoint_of_another_thread_is_not_found(
        self, store: Checkpointer
    ) -> None:
        _new_thread(store, "t-other", ids=["elsewhere"])
        claim = _new_thread(store)
        with pytest.raises(NotFound):
            store.put_writes(claim, "elsewhere", [PendingWrite("t", "ch", 1)])

    def test_put_writes_on_thread_without_commit_is_not_found(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        with pytest.raises(NotFound):
            store.put_writes(claim, "c1", [PendingWrite("t", "ch", 1)])

    def test_put_writes_with_stale_claim_is_claim_lost_before_not_found(
        self, store: Checkpointer
    ) -> None:
        claim = _released_claim(store, ids=["c1"])
        with pytest.raises(ClaimLost):
            store.put_writes(claim, "nope", [PendingWrite("t", "ch", 1)])
        assert _head(store).writes == ()

    def test_put_writes_with_empty_list_still_checks(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.put_writes(claim, "c1", [])
        with pytest.raises(NotFound):
            store.put_writes(claim, "nope", [])

    # --- append_events (rule 11; D10: claim checks before existence checks) ---------------

    def test_append_events_returns_the_numbered_events(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        events = store.append_events(claim, [EventIn("a", {"x": 1}), EventIn("b")])
        assert [(e.thread_id, e.seq, e.kind, e.payload) for e in events] == [
            (T, 2, "a", {"x": 1}),
            (T, 3, "b", None),
        ]
        assert store.events_after(T, 1) == events

    def test_append_events_moves_last_seq_not_the_head(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.append_events(claim, [EventIn("a")])
        info = store.thread(T)
        assert info is not None and (info.last_seq, info.head_id) == (2, "c1")
        assert _head(store).seq == 1

    def test_append_events_carry_the_given_run_id(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        (event,) = store.append_events(claim, [EventIn("a")], run_id="run-z")
        assert event.run_id == "run-z"

    def test_append_events_run_id_defaults_to_none(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        (event,) = store.append_events(claim, [EventIn("a")])
        assert event.run_id is None

    def test_append_events_committed_at_from_store_clock(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim, checkpoint = _first_commit_an_hour_ago(store, clock)
        (event,) = store.append_events(claim, [EventIn("a")])
        assert _within(event.committed_at - checkpoint.committed_at, HOUR)
        assert event.created_at == event.committed_at

    def test_append_events_on_thread_without_commit_is_not_found(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        with pytest.raises(NotFound):
            store.append_events(claim, [EventIn("a")])
        assert store.events_after(T, 0) == []

    def test_append_events_with_stale_claim_is_claim_lost(self, store: Checkpointer) -> None:
        claim = _released_claim(store)
        with pytest.raises(ClaimLost):
            store.append_events(claim, [EventIn("a")])

    def test_append_events_with_empty_list_returns_empty(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        assert store.append_events(claim, []) == []
        info = store.thread(T)
        assert info is not None and info.last_seq == 1

    def test_append_events_with_empty_list_still_checks(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        with pytest.raises(NotFound):
            store.append_events(claim, [])

    @pytest.mark.parametrize("kind", ["store.checkpoint", "store.retracted", "store.x"])
    def test_append_events_refuses_store_kinds(self, store: Checkpointer, kind: str) -> None:
        claim = _new_thread(store)
        before = _snapshot(store)
        with pytest.raises(ValidationError):
            store.append_events(claim, [EventIn("fine"), EventIn(kind)])
        assert _snapshot(store) == before

    def test_commit_refuses_store_kinds(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        with pytest.raises(ValidationError):
            _commit(store, claim, "c1", None, events=(EventIn("store.checkpoint"),))
        assert store.thread(T) is None

    def test_kinds_merely_containing_store_are_accepted(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        events = store.append_events(claim, [EventIn("store"), EventIn("my.store.x")])
        assert _kinds(events) == ["store", "my.store.x"]

    # --- effects (D12: get_effect returns the record with existing=True) ------------------

    def test_record_effect_first_write_is_not_existing(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        record = store.record_effect(claim, "email", {"id": 7}, run_id="run-1")
        assert (record.thread_id, record.key, record.value, record.run_id, record.existing) == (
            T,
            "email",
            {"id": 7},
            "run-1",
            False,
        )

    def test_record_effect_second_call_returns_the_first_record(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = _new_thread(store)
        first = store.record_effect(claim, "email", {"id": 7}, run_id="run-1")
        clock.advance(HOUR)
        second = store.record_effect(claim, "email", {"id": 8}, run_id="run-2")
        assert second == EffectRecord(T, "email", {"id": 7}, "run-1", first.recorded_at, True)

    def test_record_effect_run_id_defaults_to_none(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        assert store.record_effect(claim, "k", 1).run_id is None

    def test_effect_recorded_at_comes_from_store_clock(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim, checkpoint = _first_commit_an_hour_ago(store, clock)
        record = store.record_effect(claim, "k", 1)
        assert _within(record.recorded_at - checkpoint.committed_at, HOUR)

    def test_get_effect_returns_the_record_as_existing(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        first = store.record_effect(claim, "k", [1, 2], run_id="r")
        assert store.get_effect(T, "k") == EffectRecord(
            T, "k", [1, 2], "r", first.recorded_at, True
        )

    def test_get_effect_of_unknown_key_is_none(self, store: Checkpointer) -> None:
        _new_thread(store)
        assert store.get_effect(T, "nope") is None
        assert store.get_effect("unknown-thread", "k") is None

    def test_effects_are_per_thread(self, store: Checkpointer) -> None:
        claim_a = _new_thread(store, "t-a")
        claim_b = _new_thread(store, "t-b")
        store.record_effect(claim_a, "k", "a")
        record = store.record_effect(claim_b, "k", "b")
        assert record.existing is False and record.value == "b"

    def test_record_effect_with_null_value_is_recorded(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.record_effect(claim, "k", None)
        again = store.record_effect(claim, "k", 5)
        assert (again.value, again.existing) == (None, True)

    def test_record_effect_on_thread_without_commit_is_not_found(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        with pytest.raises(NotFound):
            store.record_effect(claim, "k", 1)
        assert store.get_effect(T, "k") is None

    def test_record_effect_with_stale_claim_is_claim_lost(self, store: Checkpointer) -> None:
        claim = _released_claim(store, ids=["c1"])
        with pytest.raises(ClaimLost):
            store.record_effect(claim, "k", 1)
        assert store.get_effect(T, "k") is None

    def test_record_effect_leaves_the_event_log_alone(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.record_effect(claim, "k", 1)
        assert _kinds(store.events_after(T, 0)) == ["store.checkpoint"]

    # --- effects(): one page of the thread's effects in key byte order (issue #17) --------

    # Byte order differs from a locale's ("B" < "a") and from UTF-16's (U+FF21 < U+10000).
    _KEYS = ("a", "B", "é", "\U00010000", "\uff21", "z")

    def test_effects_lists_the_threads_effects_in_key_byte_order_as_existing(
        self, store: Checkpointer
    ) -> None:
        claim = _new_thread(store)
        recorded = {
            k: store.record_effect(claim, k, {"key": k, "n": [i, None, 1.5]}, run_id=f"r{i}")
            for i, k in enumerate(self._KEYS)
        }
        store.record_effect(_new_thread(store, "t-other"), "a", "other thread")
        listed = store.effects(T)
        assert [e.key for e in listed] == sorted(self._KEYS, key=lambda k: k.encode())
        assert listed == [replace(recorded[e.key], existing=True) for e in listed]
        assert listed == [store.get_effect(T, e.key) for e in listed]

    def test_effects_pages_after_a_key_exclusive(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        for k in self._KEYS:
            store.record_effect(claim, k, k)
        ordered = sorted(self._KEYS, key=lambda k: k.encode())
        pages: list[str] = []
        after: str | None = None
        while page := store.effects(T, after=after, limit=2):
            assert len(page) <= 2
            pages += [e.key for e in page]
            after = page[-1].key
        assert pages == ordered
        # `after` need not be a recorded key: the page starts at the next key in byte order.
        assert [e.key for e in store.effects(T, after="b", limit=100_000)] == ["z", *ordered[-3:]]

    def test_effects_of_unknown_thread_or_thread_without_effects_is_empty(
        self, store: Checkpointer
    ) -> None:
        _new_thread(store)
        assert store.effects(T) == []
        assert store.effects("unknown-thread") == []

    def test_effects_rejects_bad_arguments_naming_them(self, store: Checkpointer) -> None:
        _new_thread(store)
        bad: list[tuple[str, dict[str, object]]] = [
            ("thread_id", {"thread_id": ""}),
            ("after", {"after": ""}),
            ("limit", {"limit": 0}),
            ("limit", {"limit": 100_001}),
            ("limit", {"limit": True}),
        ]
        for name, kwargs in bad:
            args: dict[str, object] = {"thread_id": T, **kwargs}
            with pytest.raises(ValidationError, match=name):
                store.effects(**args)  # type: ignore[arg-type]
