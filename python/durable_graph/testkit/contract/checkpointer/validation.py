"""JSON values and validation (SPEC §2, rules 1, 3, 5): exact round trips, fresh objects, and
bad input refused by argument name with nothing written.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ClaimLost, ValidationError
from durable_graph.core.model import (
    Claim,
    ClaimPolicy,
    Commit,
    EventIn,
    PendingWrite,
    RetentionPolicy,
    WatchPolicy,
)
from durable_graph.testkit.contract.checkpointer.support import (
    FAST,
    T,
    _commit,
    _deep,
    _grow,
    _new_thread,
    _refused_naming,
    _released_claim,
    _same_json,
    _snapshot,
)

# --- parameter tables ------------------------------------------------------------------------

BAD_IDENTIFIERS = [
    pytest.param("", id="empty"),
    pytest.param("x" * 513, id="513-bytes"),
    pytest.param("é" * 257, id="514-bytes-in-257-chars"),
    pytest.param("a\x00b", id="nul"),
    pytest.param("a\ud800b", id="lone-surrogate"),
    pytest.param(7, id="int"),
    pytest.param(b"abc", id="bytes"),
]

Site = Callable[[Checkpointer, Claim, Any], object]
"""A store call with one argument replaced by the value under test; ``claim`` is current on T."""

_IDENTIFIER_SITES: list[tuple[str, str, Site]] = [
    ("claim.thread_id", "thread_id", lambda s, c, v: s.claim(v, "h")),
    ("claim.holder", "holder", lambda s, c, v: s.claim("other", v)),
    (
        "commit.checkpoint_id",
        "checkpoint_id",
        lambda s, c, v: s.commit(c, Commit(v, "c1", "r", {})),
    ),
    ("commit.parent_id", "parent_id", lambda s, c, v: s.commit(c, Commit("c2", v, "r", {}))),
    ("commit.run_id", "run_id", lambda s, c, v: s.commit(c, Commit("c2", "c1", v, {}))),
    (
        "commit.parent_thread_id",
        "parent_thread_id",
        lambda s, c, v: s.commit(c, Commit("c2", "c1", "r", {}, parent_thread_id=v)),
    ),
    ("commit.next", "next", lambda s, c, v: s.commit(c, Commit("c2", "c1", "r", {}, next=(v,)))),
    (
        "commit.events.kind",
        "kind",
        lambda s, c, v: s.commit(c, Commit("c2", "c1", "r", {}, events=(EventIn(v),))),
    ),
    ("put_writes.checkpoint_id", "checkpoint_id", lambda s, c, v: s.put_writes(c, v, [])),
    (
        "put_writes.task_id",
        "task_id",
        lambda s, c, v: s.put_writes(c, "c1", [PendingWrite(v, "ch", 1)]),
    ),
    (
        "put_writes.channel",
        "channel",
        lambda s, c, v: s.put_writes(c, "c1", [PendingWrite("t", v, 1)]),
    ),
    ("append_events.kind", "kind", lambda s, c, v: s.append_events(c, [EventIn(v)])),
    (
        "append_events.run_id",
        "run_id",
        lambda s, c, v: s.append_events(c, [EventIn("e")], run_id=v),
    ),
    ("record_effect.key", "key", lambda s, c, v: s.record_effect(c, v, 1)),
    ("record_effect.run_id", "run_id", lambda s, c, v: s.record_effect(c, "k2", 1, run_id=v)),
    ("get.thread_id", "thread_id", lambda s, c, v: s.get(v)),
    ("get.checkpoint_id", "checkpoint_id", lambda s, c, v: s.get(T, v)),
    ("history.thread_id", "thread_id", lambda s, c, v: s.history(v)),
    ("history.before", "before", lambda s, c, v: s.history(T, before=v)),
    ("latest_of_runs.thread_id", "thread_id", lambda s, c, v: s.latest_of_runs(v, ["r"])),
    ("latest_of_runs.run_ids", "run_ids", lambda s, c, v: s.latest_of_runs(T, ["run-1", v])),
    ("thread.thread_id", "thread_id", lambda s, c, v: s.thread(v)),
    ("threads.after", "after", lambda s, c, v: s.threads(after=v)),
    ("children.thread_id", "thread_id", lambda s, c, v: s.children(v)),
    ("events_after.thread_id", "thread_id", lambda s, c, v: s.events_after(v, 0)),
    (
        "await_events_after.thread_id",
        "thread_id",
        lambda s, c, v: s.await_events_after(v, 0, timedelta(0)),
    ),
    ("subscribe.thread_id", "thread_id", lambda s, c, v: next(s.subscribe(v, 0, FAST))),
    ("get_effect.thread_id", "thread_id", lambda s, c, v: s.get_effect(v, "k")),
    ("get_effect.key", "key", lambda s, c, v: s.get_effect(T, v)),
    ("effects.thread_id", "thread_id", lambda s, c, v: s.effects(v)),
    ("effects.after", "after", lambda s, c, v: s.effects(T, after=v)),
    ("prune.thread_id", "thread_id", lambda s, c, v: s.prune(v, RetentionPolicy(keep_last=1))),
    ("delete_thread.thread_id", "thread_id", lambda s, c, v: s.delete_thread(v)),
]
IDENTIFIER_SITES = [pytest.param(name, call, id=site) for site, name, call in _IDENTIFIER_SITES]

BAD_JSON = [
    pytest.param((1, 2), id="tuple"),
    pytest.param([1, (2,)], id="nested-tuple"),
    pytest.param(float("nan"), id="nan"),
    pytest.param(float("inf"), id="inf"),
    pytest.param({1: "a"}, id="int-key"),
    pytest.param({None: "a"}, id="none-key"),
    pytest.param(b"bytes", id="bytes"),
    pytest.param(datetime(2024, 1, 1, tzinfo=UTC), id="datetime"),
    pytest.param({1, 2}, id="set"),
    pytest.param(object(), id="object"),
    pytest.param("a\udc00", id="lone-surrogate"),
    pytest.param({"\ud800": 1}, id="lone-surrogate-key"),
    pytest.param(_deep(513), id="depth-513"),
]

_JSON_SITES: list[tuple[str, str, Site]] = [
    ("commit.state", "state", lambda s, c, v: s.commit(c, Commit("c2", "c1", "r", v))),
    (
        "commit.metadata",
        "metadata",
        lambda s, c, v: s.commit(c, Commit("c2", "c1", "r", {}, metadata=v)),
    ),
    (
        "commit.events.payload",
        "payload",
        lambda s, c, v: s.commit(c, Commit("c2", "c1", "r", {}, events=(EventIn("e", v),))),
    ),
    ("append_events.payload", "payload", lambda s, c, v: s.append_events(c, [EventIn("e", v)])),
    (
        "put_writes.value",
        "value",
        lambda s, c, v: s.put_writes(c, "c1", [PendingWrite("t", "ch", v)]),
    ),
    ("record_effect.value", "value", lambda s, c, v: s.record_effect(c, "k2", v)),
]
JSON_SITES = [pytest.param(name, call, id=site) for site, name, call in _JSON_SITES]

ROUND_TRIP = [
    pytest.param("\u0000", id="nul-char"),
    pytest.param("a\u0000b\u0001\u001f", id="control-chars"),
    pytest.param("😀🎉 emoji", id="emoji"),
    pytest.param("\u2028\u2029\ud7ff\ue000\ufeff\U0010ffff", id="edge-scalars"),
    pytest.param(2**64 + 1, id="int-2**64+1"),
    pytest.param(-(2**64 + 1), id="int-minus-2**64-1"),
    pytest.param(-0.0, id="negative-zero"),
    pytest.param([0.1, 1.0, 1e308, 5e-324, -2.5e-10, 123456789.123456789], id="floats"),
    pytest.param([True, False, None, 0, 1, ""], id="scalars"),
    pytest.param(_deep(512), id="depth-512"),
    pytest.param({"ключ": "значение", "日本": [1], "": None, "😀": {"\u0000": True}}, id="keys"),
    pytest.param({"a": [], "b": {}, "c": [[], {}]}, id="empty-containers"),
    pytest.param(None, id="null"),
    pytest.param("x" * 100_000, id="long-string"),
]

COMPOSITE: Any = [
    "\u0000",
    "😀",
    2**64 + 1,
    -0.0,
    [0.1, 1e308, 5e-324],
    {"ключ": "значение", "": None, "😀": {"\u0000": True}},
    _deep(510),
]
"""Every tricky value at once, 512 containers deep at most."""


class ValidationTests:
    """JSON values round-trip exactly; bad input is refused by name, nothing written."""

    # --- JSON values (§2, rule 5) ---------------------------------------------------------

    @pytest.mark.parametrize("value", ROUND_TRIP)
    def test_state_round_trips_exactly(self, store: Checkpointer, value: Any) -> None:
        returned = _commit(store, store.claim(T, "h"), "c1", None, state=value)
        stored = store.get(T)
        assert stored is not None
        assert _same_json(returned.state, value) and _same_json(stored.state, value)

    def test_metadata_round_trips_exactly(self, store: Checkpointer) -> None:
        _commit(store, store.claim(T, "h"), "c1", None, metadata=COMPOSITE)
        stored = store.get(T)
        assert stored is not None and _same_json(stored.metadata, COMPOSITE)

    def test_commit_event_payload_round_trips_exactly(self, store: Checkpointer) -> None:
        _commit(store, store.claim(T, "h"), "c1", None, events=(EventIn("e", COMPOSITE),))
        assert _same_json(store.events_after(T, 0)[0].payload, COMPOSITE)

    def test_appended_event_payload_round_trips_exactly(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        (appended,) = store.append_events(claim, [EventIn("e", COMPOSITE)])
        assert _same_json(appended.payload, COMPOSITE)
        assert _same_json(store.events_after(T, 1)[0].payload, COMPOSITE)

    def test_write_value_round_trips_exactly(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.put_writes(claim, "c1", [PendingWrite("t", "ch", COMPOSITE)])
        head = store.get(T)
        assert head is not None and _same_json(head.writes[0].value, COMPOSITE)

    def test_effect_value_round_trips_exactly(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        assert _same_json(store.record_effect(claim, "k", COMPOSITE).value, COMPOSITE)
        record = store.get_effect(T, "k")
        assert record is not None and _same_json(record.value, COMPOSITE)

    def test_unicode_identifiers_round_trip(self, store: Checkpointer) -> None:
        thread_id, run_id = "thr-😀-é-\u2028", "run-ключ"
        claim = store.claim(thread_id, "h-日本")
        _commit(store, claim, "cp-\U0010ffff", None, run_id, next=("node-é",))
        head = store.get(thread_id)
        assert head is not None
        assert (head.thread_id, head.checkpoint_id, head.run_id, head.next) == (
            thread_id,
            "cp-\U0010ffff",
            run_id,
            ("node-é",),
        )
        info = store.thread(thread_id)
        assert info is not None and info.claim_holder == "h-日本"

    @pytest.mark.parametrize("value", ["x" * 512, "é" * 256, "😀" * 128])
    def test_identifiers_of_512_bytes_are_accepted(self, store: Checkpointer, value: str) -> None:
        claim = store.claim(value, value)
        _commit(store, claim, value, None, value)
        head = store.get(value, value)
        assert head is not None and head.run_id == value

    def test_returned_state_is_a_fresh_object(self, store: Checkpointer) -> None:
        _commit(store, store.claim(T, "h"), "c1", None, state={"list": [1]})
        first = store.get(T)
        assert first is not None
        _grow(first.state, "list")
        second = store.get(T)
        assert second is not None and second.state == {"list": [1]}
        assert second.state is not first.state

    def test_state_returned_by_commit_is_a_fresh_object(self, store: Checkpointer) -> None:
        returned = _commit(store, store.claim(T, "h"), "c1", None, state={"list": [1]})
        _grow(returned.state, "list")
        stored = store.get(T)
        assert stored is not None and stored.state == {"list": [1]}

    def test_mutating_the_committed_value_afterwards_changes_nothing(
        self, store: Checkpointer
    ) -> None:
        state: dict[str, Any] = {"list": [1]}
        _commit(store, store.claim(T, "h"), "c1", None, state=state)
        state["list"].append(2)
        stored = store.get(T)
        assert stored is not None and stored.state == {"list": [1]}

    def test_returned_history_values_are_fresh_objects(self, store: Checkpointer) -> None:
        _commit(store, store.claim(T, "h"), "c1", None, state={"list": [1]}, metadata={"m": []})
        first = store.history(T)[0]
        _grow(first.state, "list")
        _grow(first.metadata, "m")
        again = store.history(T)[0]
        assert (again.state, again.metadata) == ({"list": [1]}, {"m": []})

    def test_returned_event_payloads_are_fresh_objects(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        (appended,) = store.append_events(claim, [EventIn("e", {"list": [1]})])
        _grow(appended.payload, "list")
        _grow(store.events_after(T, 1)[0].payload, "list")
        assert store.events_after(T, 1)[0].payload == {"list": [1]}

    def test_returned_write_values_are_fresh_objects(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.put_writes(claim, "c1", [PendingWrite("t", "ch", {"list": [1]})])
        head = store.get(T)
        assert head is not None
        _grow(head.writes[0].value, "list")
        again = store.get(T)
        assert again is not None and again.writes[0].value == {"list": [1]}

    def test_returned_effect_values_are_fresh_objects(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        _grow(store.record_effect(claim, "k", {"list": [1]}).value, "list")
        read = store.get_effect(T, "k")
        assert read is not None
        _grow(read.value, "list")
        again = store.get_effect(T, "k")
        assert again is not None and again.value == {"list": [1]}

    # --- validation: bad input changes nothing (§2, rules 1, 3, 5) ------------------------

    @pytest.mark.parametrize("bad", BAD_IDENTIFIERS)
    @pytest.mark.parametrize(
        "name,call", [IDENTIFIER_SITES[0], IDENTIFIER_SITES[2], IDENTIFIER_SITES[9]]
    )
    def test_every_kind_of_bad_identifier_is_refused(
        self, store: Checkpointer, seeded: Claim, name: str, call: Site, bad: Any
    ) -> None:
        _refused_naming(store, name, lambda: call(store, seeded, bad))

    @pytest.mark.parametrize("name,call", IDENTIFIER_SITES)
    def test_bad_identifier_argument_is_refused_by_name(
        self, store: Checkpointer, seeded: Claim, name: str, call: Site
    ) -> None:
        _refused_naming(store, name, lambda: call(store, seeded, ""))
        store.claim("other", "ok")  # a refused claim took nothing

    @pytest.mark.parametrize("bad", BAD_JSON)
    def test_every_kind_of_bad_json_state_is_refused(
        self, store: Checkpointer, seeded: Claim, bad: Any
    ) -> None:
        _refused_naming(
            store,
            "state",
            lambda: store.commit(seeded, Commit("c2", "c1", "run-1", {"a": [0, bad]})),
        )

    @pytest.mark.parametrize("name,call", JSON_SITES)
    @pytest.mark.parametrize(
        "bad",
        [
            pytest.param((1,), id="tuple"),
            pytest.param(float("nan"), id="nan"),
            pytest.param(_deep(513), id="depth-513"),
        ],
    )
    def test_bad_json_argument_is_refused_by_name(
        self, store: Checkpointer, seeded: Claim, name: str, call: Site, bad: Any
    ) -> None:
        _refused_naming(store, name, lambda: call(store, seeded, bad))

    def test_bad_json_error_names_the_path(self, store: Checkpointer, seeded: Claim) -> None:
        with pytest.raises(ValidationError) as raised:
            store.commit(seeded, Commit("c2", "c1", "r", {"a": [0, {"b": float("nan")}]}))
        assert 'state["a"][1]["b"]' in str(raised.value)

    def test_validation_error_is_a_value_error(self, store: Checkpointer) -> None:
        with pytest.raises(ValueError):
            store.claim("", "h")

    @pytest.mark.parametrize(
        "call",
        [
            pytest.param(lambda s, c: s.commit(c, "not a commit"), id="commit-not-a-Commit"),
            pytest.param(
                lambda s, c: s.commit("not a claim", Commit("c2", "c1", "r", {})),
                id="claim-not-a-Claim",
            ),
            pytest.param(lambda s, c: s.put_writes(c, "c1", "tw"), id="writes-a-str"),
            pytest.param(lambda s, c: s.put_writes(c, "c1", [("t", "ch", 1)]), id="write-a-tuple"),
            pytest.param(lambda s, c: s.append_events(c, "e"), id="events-a-str"),
            pytest.param(lambda s, c: s.append_events(c, [{"kind": "e"}]), id="event-a-dict"),
            pytest.param(
                lambda s, c: s.commit(c, Commit("c2", "c1", "r", {}, next="ab")),  # type: ignore[arg-type]
                id="next-a-str",
            ),
            pytest.param(
                lambda s, c: s.commit(c, Commit("c2", "c1", "r", {}, created_at="2020-01-01")),  # type: ignore[arg-type]
                id="created_at-a-str",
            ),
            pytest.param(
                lambda s, c: s.commit(c, Commit("c2", "c1", "r", {}, fence="x")),  # type: ignore[arg-type]
                id="fence-not-a-Claim",
            ),
            pytest.param(lambda s, c: s.renew_claim("x"), id="renew-not-a-Claim"),
            pytest.param(lambda s, c: s.release_claim(None), id="release-not-a-Claim"),
            pytest.param(lambda s, c: s.delete_thread(T, fence="x"), id="delete-fence-not-a-Claim"),
        ],
    )
    def test_arguments_of_the_wrong_type_are_refused(
        self, store: Checkpointer, seeded: Claim, call: Callable[[Checkpointer, Claim], object]
    ) -> None:
        before = _snapshot(store)
        with pytest.raises(ValidationError):
            call(store, seeded)
        assert _snapshot(store) == before

    @pytest.mark.parametrize(
        "fields",
        [
            pytest.param({"ttl": 30}, id="ttl-int"),
            pytest.param({"renew_every": 10.0}, id="renew_every-float"),
            pytest.param({"ttl": timedelta(seconds=10)}, id="renew_every-not-below-ttl"),
            pytest.param({"ttl": timedelta(0)}, id="ttl-zero"),
        ],
    )
    def test_claim_policy_refuses_bad_durations(self, fields: dict[str, Any]) -> None:
        with pytest.raises(ValidationError):
            ClaimPolicy(**fields)

    @pytest.mark.parametrize("interval", [0.25, 250, timedelta(0), -timedelta(seconds=1)])
    def test_watch_policy_refuses_bad_intervals(self, interval: Any) -> None:
        with pytest.raises(ValidationError):
            WatchPolicy(poll_interval=interval)

    @pytest.mark.parametrize(
        "call",
        [
            pytest.param(lambda s, c: s.history(T, limit=-1), id="history-limit-negative"),
            pytest.param(lambda s, c: s.history(T, limit="5"), id="history-limit-str"),
            pytest.param(lambda s, c: s.threads(limit=-1), id="threads-limit-negative"),
            pytest.param(lambda s, c: s.events_after(T, -1), id="events_after-seq-negative"),
            pytest.param(lambda s, c: s.events_after(T, "0"), id="events_after-seq-str"),
            pytest.param(lambda s, c: s.events_after(T, 0, limit=-1), id="events_after-limit"),
            pytest.param(lambda s, c: s.latest_of_runs(T, "run-1"), id="run_ids-a-str"),
            pytest.param(
                lambda s, c: s.await_events_after(T, 0, -timedelta(seconds=1)),
                id="await-timeout-negative",
            ),
            pytest.param(
                lambda s, c: s.await_events_after(T, 0, timedelta(days=36501)),
                id="await-timeout-over-a-century",
            ),
            pytest.param(lambda s, c: s.await_events_after(T, 0, 1), id="await-timeout-int"),
            pytest.param(lambda s, c: s.subscribe(T, -1, FAST).__next__(), id="subscribe-seq"),
        ],
    )
    def test_bad_read_arguments_are_refused(
        self, store: Checkpointer, seeded: Claim, call: Callable[[Checkpointer, Claim], object]
    ) -> None:
        with pytest.raises(ValidationError):
            call(store, seeded)

    def test_claim_policy_refuses_durations_over_a_century(self) -> None:
        with pytest.raises(ValidationError):
            ClaimPolicy(ttl=timedelta(days=36501), renew_every=timedelta(days=1))

    @pytest.mark.parametrize(
        "call",
        [
            pytest.param(lambda s, c: s.put_writes(c, "c1", []), id="put_writes"),
            pytest.param(lambda s, c: s.append_events(c, [EventIn("e")]), id="append_events"),
            pytest.param(lambda s, c: s.record_effect(c, "k", 1), id="record_effect"),
            pytest.param(lambda s, c: s.retract_turn(c), id="retract_turn"),
        ],
    )
    def test_claim_writes_check_the_claim_before_the_thread(
        self, store: Checkpointer, call: Callable[[Checkpointer, Claim], object]
    ) -> None:
        # D10: a stale claim on an id with no commit is ClaimLost, not NotFound
        claim = _released_claim(store)
        with pytest.raises(ClaimLost):
            call(store, claim)
