"""The executable contract of the Checkpointer (SPEC §4, with §2 values, §3 errors, §8 rules 1-17
and docs/decisions.md D1-D15, D22-D23).

A backend's test module subclasses `CheckpointerContract` and overrides the ``harness`` fixture::

    class TestMemoryCheckpointer(CheckpointerContract):
        @pytest.fixture
        def harness(self) -> Iterator[Harness]:
            clock = ManualClock()
            store = InMemoryCheckpointer(clock=clock)
            yield Harness(store, clock)
            store.close()

Every test holds for both kinds of store clock: a `ManualClock` that moves only on ``advance`` and
a real clock plus an offset that ``advance`` raises (PostgreSQL). So tests move store time only
with ``clock.advance`` and compare store timestamps with each other, allowing `SLACK` for real time
passing; they never sleep to move store time. Short real sleeps (<= 0.3 s) appear only where a
wall-clock timeout is the behaviour under test.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from ..checkpointer import Checkpointer
from ..errors import (
    ClaimLost,
    DuplicateCheckpoint,
    GraphError,
    NotFound,
    ProcessingError,
    RunOfDeletedThread,
    StaleParent,
    StoreError,
    ThreadBusy,
    ValidationError,
)
from ..model import (
    Cancelled,
    Checkpoint,
    Claim,
    ClaimPolicy,
    Commit,
    EffectRecord,
    Event,
    EventIn,
    Failed,
    Lease,
    PendingWrite,
    PruneResult,
    RetentionPolicy,
    Started,
    Submission,
    ThreadInfo,
    WatchPolicy,
)
from .harness import ClockControl, Harness
from .pagination_contract import CheckpointerPaginationContract

T = "thread-1"
"""The thread most tests work on."""

SLACK = timedelta(seconds=10)
"""How much real time a test may take between two store-clock readings (PostgreSQL's clock runs)."""

FAST = WatchPolicy(poll_interval=timedelta(milliseconds=20))
HOUR = timedelta(hours=1)


# --- helpers -------------------------------------------------------------------------------

_AUTO: Any = object()
"""`_commit`'s default state: ``{"at": checkpoint_id}`` (None is a state worth testing)."""


def _commit(
    store: Checkpointer,
    claim: Claim,
    checkpoint_id: str,
    parent_id: str | None,
    run_id: str = "run-1",
    state: Any = _AUTO,
    **fields: Any,
) -> Checkpoint:
    return store.commit(
        claim,
        Commit(
            checkpoint_id=checkpoint_id,
            parent_id=parent_id,
            run_id=run_id,
            state={"at": checkpoint_id} if state is _AUTO else state,
            **fields,
        ),
    )


def _chain(
    store: Checkpointer,
    claim: Claim,
    ids: Sequence[str],
    run_id: str = "run-1",
    parent_id: str | None = None,
) -> list[Checkpoint]:
    """Commit ``ids`` one after another, each on the previous one."""
    out = []
    for checkpoint_id in ids:
        out.append(_commit(store, claim, checkpoint_id, parent_id, run_id))
        parent_id = checkpoint_id
    return out


def _new_thread(
    store: Checkpointer, thread_id: str = T, ids: Sequence[str] = ("c1",), **fields: Any
) -> Claim:
    """Claim ``thread_id`` and commit ``ids`` on it; return the (still current) claim."""
    claim = store.claim(thread_id, "worker")
    parent: str | None = None
    for checkpoint_id in ids:
        _commit(store, claim, checkpoint_id, parent, **fields)
        parent = checkpoint_id
    return claim


def _attempt(store: Checkpointer, thread_id: str, run_id: str) -> Lease:
    """Submit a run for ``thread_id``, lease it and record ``run_id`` as its first attempt."""
    queue = store.run_queue
    ticket = queue.submit(Submission(thread_id=thread_id, input={"q": thread_id}))
    lease = queue.lease("queue-worker", timedelta(minutes=5))
    assert lease is not None and lease.entry.entry_id == ticket.entry_id
    assert queue.record_attempt(lease, run_id) == Started(1)
    return lease


def _snapshot(store: Checkpointer, thread_id: str = T) -> tuple[object, ...]:
    """Everything a test can read about one thread (to show a refused call changed nothing)."""
    return (
        store.thread(thread_id),
        store.history(thread_id),
        store.events_after(thread_id, 0),
        store.get_effect(thread_id, "k"),
        store.threads(),
        store.children(thread_id),
    )


def _kinds(events: Sequence[Event]) -> list[str]:
    return [e.kind for e in events]


def _same_json(a: object, b: object) -> bool:
    """Equal as JSON values, telling apart 1 / 1.0 / True and 0.0 / -0.0 (key order aside)."""
    return a == b and json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _deep(depth: int) -> Any:
    """``depth`` nested lists around 0 (depth 0 is the scalar itself, SPEC §8 rule 5)."""
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def _grow(value: Any, key: str) -> None:
    """Mutate a returned JSON object in place (to show the store kept its own copy)."""
    value[key].append(99)


def _within(delta: timedelta, expected: timedelta) -> bool:
    """``delta`` is ``expected`` plus at most `SLACK` of real time."""
    return expected <= delta <= expected + SLACK


def _run_threads(n: int, target: Callable[[int], object]) -> list[object]:
    """Run ``target(i)`` in ``n`` threads released together; each result or raised exception."""
    barrier = threading.Barrier(n)
    results: list[object] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = target(i)
        except BaseException as exc:  # collected and asserted on by the test
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


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


# --- the contract --------------------------------------------------------------------------


class CheckpointerContract(CheckpointerPaginationContract):
    """SPEC §4 as tests. Subclass it and override ``harness`` to yield a fresh store."""

    @pytest.fixture
    def harness(self) -> Iterator[Harness]:
        raise NotImplementedError("override `harness` to yield a Harness with a fresh store")

    @pytest.fixture
    def store(self, harness: Harness) -> Checkpointer:
        return harness.store

    @pytest.fixture
    def clock(self, harness: Harness) -> ClockControl:
        return harness.clock

    @pytest.fixture
    def seeded(self, store: Checkpointer) -> Claim:
        """Thread T with checkpoint c1 (two events), a write and effect "k"; its current claim."""
        claim = store.claim(T, "worker")
        _commit(store, claim, "c1", None, events=(EventIn("e", 1),))
        store.put_writes(claim, "c1", [PendingWrite("t", "ch", 1)])
        store.record_effect(claim, "k", {"v": 1})
        return claim

    # --- claims ---------------------------------------------------------------------------

    def test_claim_returns_claim_for_thread_and_holder(self, store: Checkpointer) -> None:
        policy = ClaimPolicy(ttl=timedelta(seconds=45), renew_every=timedelta(seconds=15))
        claim = store.claim(T, "holder-a", policy)
        assert (claim.thread_id, claim.holder, claim.ttl) == (T, "holder-a", policy.ttl)
        assert claim.token >= 1

    def test_claim_default_policy_ttl_is_30_seconds(self, store: Checkpointer) -> None:
        assert store.claim(T, "h").ttl == timedelta(seconds=30)

    def test_claim_expires_at_store_now_plus_ttl(self, store: Checkpointer) -> None:
        policy = ClaimPolicy(ttl=timedelta(seconds=45), renew_every=timedelta(seconds=15))
        claim = store.claim(T, "h", policy)
        committed = _commit(store, claim, "c1", None)
        gap = claim.expires_at - committed.committed_at
        assert policy.ttl - SLACK <= gap <= policy.ttl

    def test_claim_expires_at_is_timezone_aware_utc(self, store: Checkpointer) -> None:
        assert store.claim(T, "h").expires_at.utcoffset() == timedelta(0)

    def test_first_token_of_a_fresh_store_is_one(self, store: Checkpointer) -> None:
        assert store.claim(T, "h").token == 1

    def test_claim_creates_no_visible_thread(self, store: Checkpointer) -> None:
        store.claim(T, "h")
        assert store.thread(T) is None
        assert store.threads() == []
        assert store.get(T) is None
        assert store.history(T) == []
        assert store.events_after(T, 0) == []

    def test_claim_refused_while_another_claim_is_live(self, store: Checkpointer) -> None:
        store.claim(T, "holder-a")
        with pytest.raises(ThreadBusy):
            store.claim(T, "holder-b")

    def test_thread_busy_is_a_graph_error(self, store: Checkpointer) -> None:
        store.claim(T, "holder-a")
        with pytest.raises(GraphError):
            store.claim(T, "holder-b")

    def test_thread_busy_message_names_no_holder_or_token(self, store: Checkpointer) -> None:
        holder = "secret-holder-7d41c9"
        claim = store.claim(T, holder)
        with pytest.raises(ThreadBusy) as raised:
            store.claim(T, "someone-else")
        message = str(raised.value)
        assert holder not in message
        assert f"token {claim.token}" not in message and f"token={claim.token}" not in message

    def test_thread_busy_message_is_the_fixed_text(self, store: Checkpointer) -> None:
        store.claim(T, "holder-a")
        with pytest.raises(ThreadBusy) as raised:
            store.claim(T, "holder-b")
        assert str(raised.value) == "thread has a live claim"

    def test_claims_are_not_reentrant_for_the_same_holder(self, store: Checkpointer) -> None:
        store.claim(T, "holder-a")
        with pytest.raises(ThreadBusy):
            store.claim(T, "holder-a")

    def test_claim_is_still_live_just_before_expiry(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        store.claim(T, "holder-a")
        clock.advance(timedelta(seconds=20))
        with pytest.raises(ThreadBusy):
            store.claim(T, "holder-b")

    def test_claim_taken_once_previous_claim_expired(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        first = store.claim(T, "holder-a")
        clock.advance(timedelta(seconds=31))
        second = store.claim(T, "holder-b")
        assert second.holder == "holder-b" and second.token > first.token

    def test_claim_has_expired_at_its_expires_at(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        store.claim(T, "holder-a")
        clock.advance(timedelta(seconds=30))
        store.claim(T, "holder-b")

    def test_claim_taken_at_once_after_release(self, store: Checkpointer) -> None:
        first = store.claim(T, "holder-a")
        store.release_claim(first)
        assert store.claim(T, "holder-b").token > first.token

    def test_claims_on_different_threads_are_independent(self, store: Checkpointer) -> None:
        store.claim("t-a", "h")
        store.claim("t-b", "h")

    def test_tokens_strictly_increase_across_claims(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        tokens = [store.claim(f"t-{i}", "h").token for i in range(3)]
        claim = store.claim(T, "h")
        store.release_claim(claim)
        tokens.append(claim.token)
        tokens.append(store.claim(T, "h").token)
        clock.advance(timedelta(seconds=31))
        tokens.append(store.claim(T, "h").token)
        assert tokens == sorted(set(tokens))

    def test_tokens_keep_increasing_across_delete_thread(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        assert store.delete_thread(T) is True
        assert store.claim(T, "h").token > claim.token

    def test_claim_and_lease_tokens_share_one_counter(self, store: Checkpointer) -> None:
        first = store.claim(T, "h")
        store.run_queue.submit(Submission(thread_id="q", input=None))
        lease = store.run_queue.lease("w", timedelta(seconds=30))
        assert lease is not None
        last = store.claim("t-2", "h")
        assert first.token < lease.token < last.token

    def test_renew_claim_keeps_token_and_pushes_expiry(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = store.claim(T, "h")
        clock.advance(timedelta(seconds=20))
        renewed = store.renew_claim(claim)
        assert (renewed.token, renewed.thread_id, renewed.holder) == (claim.token, T, "h")
        assert _within(renewed.expires_at - claim.expires_at, timedelta(seconds=20))

    def test_renew_claim_uses_the_claims_ttl(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        policy = ClaimPolicy(ttl=timedelta(minutes=5), renew_every=timedelta(minutes=1))
        claim = store.claim(T, "h", policy)
        clock.advance(timedelta(minutes=2))
        renewed = store.renew_claim(claim)
        assert renewed.ttl == policy.ttl
        assert _within(renewed.expires_at - claim.expires_at, timedelta(minutes=2))

    def test_renewed_claim_stays_live_past_original_expiry(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = store.claim(T, "holder-a")
        clock.advance(timedelta(seconds=20))
        store.renew_claim(claim)
        clock.advance(timedelta(seconds=20))
        with pytest.raises(ThreadBusy):
            store.claim(T, "holder-b")

    def test_renew_claim_after_expiry_while_still_current(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = store.claim(T, "holder-a")
        clock.advance(timedelta(seconds=31))
        renewed = store.renew_claim(claim)
        assert renewed.token == claim.token
        with pytest.raises(ThreadBusy):
            store.claim(T, "holder-b")

    def test_renew_claim_lost_after_another_claim(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = store.claim(T, "holder-a")
        clock.advance(timedelta(seconds=31))
        store.claim(T, "holder-b")
        with pytest.raises(ClaimLost):
            store.renew_claim(claim)

    def test_renew_claim_lost_after_release(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        store.release_claim(claim)
        with pytest.raises(ClaimLost):
            store.renew_claim(claim)

    def test_release_claim_lost_when_already_released(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        store.release_claim(claim)
        with pytest.raises(ClaimLost):
            store.release_claim(claim)

    def test_release_claim_lost_after_another_claim(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = store.claim(T, "holder-a")
        clock.advance(timedelta(seconds=31))
        newer = store.claim(T, "holder-b")
        with pytest.raises(ClaimLost):
            store.release_claim(claim)
        with pytest.raises(ThreadBusy):  # the newer claim was not released
            store.claim(T, "holder-c")
        store.release_claim(newer)

    def test_release_of_expired_current_claim_succeeds(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = store.claim(T, "h")
        clock.advance(timedelta(seconds=31))
        store.release_claim(claim)
        with pytest.raises(ClaimLost):
            store.renew_claim(claim)

    def test_claim_with_forged_token_is_claim_lost(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        forged = Claim(T, "h", claim.token + 1000, claim.expires_at, claim.ttl)
        with pytest.raises(ClaimLost):
            _commit(store, forged, "c1", None)

    def test_expired_current_claim_can_still_commit(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = store.claim(T, "h")
        clock.advance(timedelta(seconds=31))
        assert _commit(store, claim, "c1", None).checkpoint_id == "c1"

    def test_commit_with_released_claim_is_claim_lost(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        store.release_claim(claim)
        with pytest.raises(ClaimLost):
            _commit(store, claim, "c1", None)
        assert store.thread(T) is None

    def test_commit_with_superseded_claim_is_claim_lost(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = _new_thread(store)
        clock.advance(timedelta(seconds=31))
        store.claim(T, "newer")
        with pytest.raises(ClaimLost):
            _commit(store, claim, "c2", "c1")
        assert store.thread(T) is not None and store.thread(T).head_id == "c1"  # type: ignore[union-attr]

    # --- ThreadInfo claim fields (rule 9) -------------------------------------------------

    def test_thread_info_describes_the_live_claim(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        info = store.thread(T)
        assert info is not None
        assert (info.claim_holder, info.claim_expires_at) == ("worker", claim.expires_at)

    def test_thread_info_describes_an_expired_current_claim(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = _new_thread(store)
        clock.advance(timedelta(minutes=5))
        info = store.thread(T)
        assert info is not None
        assert (info.claim_holder, info.claim_expires_at) == ("worker", claim.expires_at)

    def test_thread_info_follows_a_renewed_claim(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = _new_thread(store)
        clock.advance(timedelta(seconds=5))
        renewed = store.renew_claim(claim)
        info = store.thread(T)
        assert info is not None and info.claim_expires_at == renewed.expires_at

    def test_thread_info_shows_the_newest_claim(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        _new_thread(store)
        clock.advance(timedelta(seconds=31))
        newer = store.claim(T, "newer")
        info = store.thread(T)
        assert info is not None
        assert (info.claim_holder, info.claim_expires_at) == ("newer", newer.expires_at)

    def test_thread_info_claim_fields_none_after_release(self, store: Checkpointer) -> None:
        store.release_claim(_new_thread(store))
        info = store.thread(T)
        assert info is not None
        assert (info.claim_holder, info.claim_expires_at) == (None, None)

    # --- commit ---------------------------------------------------------------------------

    def test_commit_on_new_thread_creates_it(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        checkpoint = _commit(store, claim, "c1", None)
        info = store.thread(T)
        assert info is not None
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
        head = store.get(T)
        assert head is not None and (head.checkpoint_id, head.parent_id) == ("c3", "c2")

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
        fence = store.claim("parent", "h")
        store.release_claim(fence)
        claim = store.claim(T, "h")
        with pytest.raises(ClaimLost):
            _commit(store, claim, "c1", None, fence=fence)
        assert store.thread(T) is None

    def test_commit_with_superseded_fence_is_claim_lost(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        fence = store.claim("parent", "h")
        clock.advance(timedelta(seconds=31))
        store.claim("parent", "h2")
        claim = store.claim(T, "h")
        with pytest.raises(ClaimLost):
            _commit(store, claim, "c1", None, fence=fence)

    def test_commit_with_expired_but_current_fence_succeeds(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        fence = store.claim("parent", "h")
        clock.advance(timedelta(seconds=31))
        claim = store.claim(T, "h")
        assert _commit(store, claim, "c1", None, fence=fence).checkpoint_id == "c1"

    def test_commit_with_fence_of_deleted_thread_is_claim_lost(self, store: Checkpointer) -> None:
        fence = _new_thread(store, "parent")
        store.delete_thread("parent")
        claim = store.claim(T, "h")
        with pytest.raises(ClaimLost):
            _commit(store, claim, "c1", None, fence=fence)

    # --- commit check order (D9) ----------------------------------------------------------

    def test_stale_claim_is_reported_before_stale_parent(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.release_claim(claim)
        with pytest.raises(ClaimLost):
            _commit(store, claim, "c2", "wrong")

    def test_stale_claim_is_reported_before_duplicate_checkpoint(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.release_claim(claim)
        with pytest.raises(ClaimLost):
            _commit(store, claim, "c1", "c1")

    def test_stale_fence_is_reported_before_stale_parent(self, store: Checkpointer) -> None:
        fence = store.claim("parent", "h")
        store.release_claim(fence)
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

    # --- events of a commit (D8, rule 11) -------------------------------------------------

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
        info = store.thread(T)
        assert checkpoint.seq == 3 and info is not None and info.last_seq == 3

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

    # --- time (rule 3, D4, D7) ------------------------------------------------------------

    def test_committed_at_comes_from_the_store_clock(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = store.claim(T, "h")
        first = _commit(store, claim, "c1", None)
        clock.advance(HOUR)
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
        stored = store.get(T)
        assert checkpoint.created_at == produced
        assert stored is not None and stored.created_at == produced

    def test_created_at_in_another_zone_is_kept_as_the_same_instant(
        self, store: Checkpointer
    ) -> None:
        produced = datetime(2030, 6, 1, 23, 59, 59, 1, tzinfo=timezone(timedelta(hours=-7)))
        _commit(store, store.claim(T, "h"), "c1", None, created_at=produced)
        stored = store.get(T)
        assert stored is not None and stored.created_at == produced
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
        head = store.get(T)
        assert head is not None and head.checkpoint_id == "c2"

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

    # --- thread info, parents and children (D6) -------------------------------------------

    def test_thread_created_and_updated_at_first_and_last_commit(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = store.claim(T, "h")
        first = _commit(store, claim, "c1", None)
        clock.advance(HOUR)
        second = _commit(store, claim, "c2", "c1")
        info = store.thread(T)
        assert info is not None
        assert (info.created_at, info.updated_at) == (first.committed_at, second.committed_at)

    def test_thread_updated_at_moves_with_append_events(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = _new_thread(store)
        clock.advance(HOUR)
        (event,) = store.append_events(claim, [EventIn("a")])
        info = store.thread(T)
        assert info is not None and info.updated_at == event.committed_at
        assert _within(info.updated_at - info.created_at, HOUR)

    def test_thread_updated_at_moves_with_retract_turn(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = _new_thread(store)
        clock.advance(HOUR)
        store.retract_turn(claim)
        info = store.thread(T)
        assert info is not None
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
        info_a, info_b = store.thread("t-a"), store.thread("t-b")
        assert info_a is not None and info_b is not None
        assert (info_a.head_id, info_b.head_id) == ("a2", "b1")

    def test_parent_thread_id_recorded_on_first_commit(self, store: Checkpointer) -> None:
        _new_thread(store, "parent")
        _new_thread(store, "child", parent_thread_id="parent")
        info = store.thread("child")
        assert info is not None and info.parent_thread_id == "parent"

    def test_parent_thread_id_of_later_commits_is_ignored(self, store: Checkpointer) -> None:
        _new_thread(store, "p1")
        _new_thread(store, "p2")
        claim = store.claim("child", "h")
        _commit(store, claim, "c1", None, parent_thread_id="p1")
        _commit(store, claim, "c2", "c1", parent_thread_id="p2")
        info = store.thread("child")
        assert info is not None and info.parent_thread_id == "p1"
        assert store.children("p1") == ["child"] and store.children("p2") == []

    def test_parent_thread_id_not_set_by_a_later_commit(self, store: Checkpointer) -> None:
        _new_thread(store, "p1")
        claim = _new_thread(store, "child")
        _commit(store, claim, "c2", "c1", parent_thread_id="p1")
        info = store.thread("child")
        assert info is not None and info.parent_thread_id is None
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
        claim = store.claim(T, "run-a")
        with pytest.raises(RunOfDeletedThread):
            _commit(store, claim, "c1", None, "run-a")
        assert store.thread(T) is None

    def test_run_of_deleted_thread_refused_after_the_thread_existed(
        self, store: Checkpointer
    ) -> None:
        _attempt(store, T, "run-a")
        _new_thread(store, run_id="run-a")
        assert store.delete_thread(T) is True
        claim = store.claim(T, "run-a")
        with pytest.raises(RunOfDeletedThread):
            _commit(store, claim, "c1", None, "run-a")

    def test_run_of_deleted_thread_refused_after_the_entry_closed(
        self, store: Checkpointer
    ) -> None:
        lease = _attempt(store, T, "run-a")
        store.delete_thread(T)
        closed = store.run_queue.close(lease, Failed("gone"))
        assert closed.closed
        claim = store.claim(T, "run-a")
        with pytest.raises(RunOfDeletedThread):
            _commit(store, claim, "c1", None, "run-a")

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

    # --- put_writes (rule 12, D10, D15) ---------------------------------------------------

    def test_put_writes_attaches_writes_to_the_checkpoint(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.put_writes(claim, "c1", [PendingWrite("task", "ch", {"v": 1})])
        head = store.get(T)
        assert head is not None and head.writes == (PendingWrite("task", "ch", {"v": 1}),)

    def test_put_writes_is_idempotent_per_task_channel_index(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        writes = [PendingWrite("t", "a", 1), PendingWrite("t", "b", 2)]
        store.put_writes(claim, "c1", writes)
        store.put_writes(claim, "c1", writes)
        head = store.get(T)
        assert head is not None and head.writes == tuple(writes)

    def test_put_writes_first_value_wins(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.put_writes(claim, "c1", [PendingWrite("t", "a", "first")])
        store.put_writes(claim, "c1", [PendingWrite("t", "a", "second")])
        head = store.get(T)
        assert head is not None and head.writes == (PendingWrite("t", "a", "first"),)

    def test_put_writes_index_is_the_position_in_the_list(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.put_writes(claim, "c1", [PendingWrite("t", "a", 1), PendingWrite("t", "a", 2)])
        store.put_writes(claim, "c1", [PendingWrite("t", "a", 9)])
        head = store.get(T)
        assert head is not None
        assert head.writes == (PendingWrite("t", "a", 1), PendingWrite("t", "a", 2))

    def test_put_writes_later_index_adds_a_write(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.put_writes(claim, "c1", [PendingWrite("t", "a", 1)])
        store.put_writes(claim, "c1", [PendingWrite("t", "a", 1), PendingWrite("t", "b", 2)])
        head = store.get(T)
        assert head is not None
        assert head.writes == (PendingWrite("t", "a", 1), PendingWrite("t", "b", 2))

    def test_writes_are_ordered_by_task_then_index(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.put_writes(
            claim, "c1", [PendingWrite("task-b", "z", 1), PendingWrite("task-b", "a", 2)]
        )
        store.put_writes(claim, "c1", [PendingWrite("task-a", "y", 3)])
        head = store.get(T)
        assert head is not None
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
        claim = _new_thread(store)
        store.release_claim(claim)
        with pytest.raises(ClaimLost):
            store.put_writes(claim, "nope", [PendingWrite("t", "ch", 1)])
        head = store.get(T)
        assert head is not None and head.writes == ()

    def test_put_writes_with_empty_list_still_checks(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.put_writes(claim, "c1", [])
        with pytest.raises(NotFound):
            store.put_writes(claim, "nope", [])

    # --- append_events (rule 11, D10) -----------------------------------------------------

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
        head = store.get(T)
        assert head is not None and head.seq == 1

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
        claim = store.claim(T, "h")
        checkpoint = _commit(store, claim, "c1", None)
        clock.advance(HOUR)
        (event,) = store.append_events(claim, [EventIn("a")])
        assert _within(event.committed_at - checkpoint.committed_at, HOUR)
        assert event.created_at == event.committed_at

    def test_append_events_on_thread_without_commit_is_not_found(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        with pytest.raises(NotFound):
            store.append_events(claim, [EventIn("a")])
        assert store.events_after(T, 0) == []

    def test_append_events_with_stale_claim_is_claim_lost(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        store.release_claim(claim)
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

    # --- effects (D12) --------------------------------------------------------------------

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
        claim = store.claim(T, "h")
        checkpoint = _commit(store, claim, "c1", None)
        clock.advance(HOUR)
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
        claim = _new_thread(store)
        store.release_claim(claim)
        with pytest.raises(ClaimLost):
            store.record_effect(claim, "k", 1)
        assert store.get_effect(T, "k") is None

    def test_record_effect_leaves_the_event_log_alone(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        store.record_effect(claim, "k", 1)
        assert _kinds(store.events_after(T, 0)) == ["store.checkpoint"]

    # --- retract_turn (rule 13, D11) ------------------------------------------------------

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
        claim = _new_thread(store)
        store.release_claim(claim)
        with pytest.raises(ClaimLost):
            store.retract_turn(claim)
        assert [c.checkpoint_id for c in store.history(T)] == ["c1"]

    def test_retract_turn_after_prune_falls_back_to_newest_remaining(
        self, store: Checkpointer
    ) -> None:
        # D24: the parent of the oldest retracted checkpoint was pruned
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

    # --- prune (rule 16, D13) -------------------------------------------------------------

    def test_prune_keep_last_removes_older_checkpoints(self, store: Checkpointer) -> None:
        _new_thread(store, ids=["c1", "c2", "c3", "c4", "c5"])
        result = store.prune(T, RetentionPolicy(keep_last=2))
        assert result == PruneResult(checkpoints_removed=3, events_removed=0)
        assert [c.checkpoint_id for c in store.history(T)] == ["c5", "c4"]

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

    # --- delete_thread (rule 17, D14) -----------------------------------------------------

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
        timer = threading.Timer(0.2, lambda: store.append_events(claim, [EventIn("ping")]))
        started = time.monotonic()
        timer.start()
        try:
            events = store.await_events_after(T, 1, timedelta(seconds=20), FAST)
        finally:
            timer.join()
        assert _kinds(events) == ["ping"]
        assert time.monotonic() - started < 10

    def test_await_events_after_sees_the_first_commit(self, store: Checkpointer) -> None:
        claim = store.claim(T, "h")
        timer = threading.Timer(0.2, lambda: _commit(store, claim, "c1", None))
        timer.start()
        try:
            events = store.await_events_after(T, 0, timedelta(seconds=20), FAST)
        finally:
            timer.join()
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
        before = _snapshot(store)
        with pytest.raises(ValidationError) as raised:
            call(store, seeded, bad)
        assert name in str(raised.value)
        assert _snapshot(store) == before

    @pytest.mark.parametrize("name,call", IDENTIFIER_SITES)
    def test_bad_identifier_argument_is_refused_by_name(
        self, store: Checkpointer, seeded: Claim, name: str, call: Site
    ) -> None:
        before = _snapshot(store)
        with pytest.raises(ValidationError) as raised:
            call(store, seeded, "")
        assert name in str(raised.value)
        assert _snapshot(store) == before
        store.claim("other", "ok")  # a refused claim took nothing

    @pytest.mark.parametrize("bad", BAD_JSON)
    def test_every_kind_of_bad_json_state_is_refused(
        self, store: Checkpointer, seeded: Claim, bad: Any
    ) -> None:
        before = _snapshot(store)
        with pytest.raises(ValidationError) as raised:
            store.commit(seeded, Commit("c2", "c1", "run-1", {"a": [0, bad]}))
        assert "state" in str(raised.value)
        assert _snapshot(store) == before

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
        before = _snapshot(store)
        with pytest.raises(ValidationError) as raised:
            call(store, seeded, bad)
        assert name in str(raised.value)
        assert _snapshot(store) == before

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
        claim = store.claim(T, "h")
        store.release_claim(claim)
        with pytest.raises(ClaimLost):
            call(store, claim)

    # --- close (rule 8) -------------------------------------------------------------------

    def test_close_is_idempotent(self, store: Checkpointer) -> None:
        store.close()
        store.close()

    def test_store_is_a_context_manager_that_closes(self, store: Checkpointer) -> None:
        with store as entered:
            assert entered is store
            _new_thread(store)
        with pytest.raises(ProcessingError):
            store.thread(T)

    @pytest.mark.parametrize(
        "call",
        [
            pytest.param(lambda s, c: s.claim("other", "h"), id="claim"),
            pytest.param(lambda s, c: s.renew_claim(c), id="renew_claim"),
            pytest.param(lambda s, c: s.release_claim(c), id="release_claim"),
            pytest.param(lambda s, c: _commit(s, c, "c2", "c1"), id="commit"),
            pytest.param(lambda s, c: s.put_writes(c, "c1", []), id="put_writes"),
            pytest.param(lambda s, c: s.append_events(c, [EventIn("e")]), id="append_events"),
            pytest.param(lambda s, c: s.record_effect(c, "k2", 1), id="record_effect"),
            pytest.param(lambda s, c: s.retract_turn(c), id="retract_turn"),
            pytest.param(lambda s, c: s.prune(T, RetentionPolicy(keep_last=1)), id="prune"),
            pytest.param(lambda s, c: s.prune_all(RetentionPolicy(keep_last=1)), id="prune_all"),
            pytest.param(lambda s, c: s.delete_thread(T), id="delete_thread"),
            pytest.param(lambda s, c: s.get(T), id="get"),
            pytest.param(lambda s, c: s.history(T), id="history"),
            pytest.param(lambda s, c: s.latest_of_runs(T, ["run-1"]), id="latest_of_runs"),
            pytest.param(lambda s, c: s.thread(T), id="thread"),
            pytest.param(lambda s, c: s.threads(), id="threads"),
            pytest.param(lambda s, c: s.children(T), id="children"),
            pytest.param(lambda s, c: s.events_after(T, 0), id="events_after"),
            pytest.param(
                lambda s, c: s.await_events_after(T, 0, timedelta(seconds=1), FAST),
                id="await_events_after",
            ),
            pytest.param(lambda s, c: next(s.subscribe(T, 0, FAST)), id="subscribe"),
            pytest.param(lambda s, c: s.get_effect(T, "k"), id="get_effect"),
        ],
    )
    def test_every_method_raises_processing_error_after_close(
        self, store: Checkpointer, seeded: Claim, call: Callable[[Checkpointer, Claim], object]
    ) -> None:
        store.close()
        with pytest.raises(ProcessingError):
            call(store, seeded)

    def test_subscribe_iterator_raises_processing_error_after_close(
        self, store: Checkpointer
    ) -> None:
        _new_thread(store)
        iterator = store.subscribe(T, 0, FAST)
        assert next(iterator).seq == 1
        store.close()
        with pytest.raises(ProcessingError):
            next(iterator)

    def test_waiting_subscribe_iterator_raises_processing_error_on_close(
        self, store: Checkpointer
    ) -> None:
        _new_thread(store)
        iterator = store.subscribe(T, 1, FAST)
        outcome: list[object] = []

        def wait() -> None:
            try:
                outcome.append(next(iterator))
            except BaseException as exc:  # asserted below
                outcome.append(exc)

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.2)
        store.close()
        waiter.join(timeout=10)
        assert not waiter.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], ProcessingError)

    def test_processing_error_is_a_store_error(self, store: Checkpointer) -> None:
        store.close()
        with pytest.raises(StoreError):
            store.threads()

    # --- concurrency (§4: every method is safe from many threads) -------------------------

    def test_racing_claims_exactly_one_wins(self, store: Checkpointer) -> None:
        results = _run_threads(8, lambda i: store.claim(T, f"racer-{i}"))
        winners = [r for r in results if isinstance(r, Claim)]
        assert len(winners) == 1
        assert all(isinstance(r, ThreadBusy) for r in results if not isinstance(r, Claim))
        info = store.renew_claim(winners[0])
        assert info.holder == winners[0].holder

    def test_racing_commits_on_one_parent_exactly_one_succeeds(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        results = _run_threads(2, lambda i: _commit(store, claim, f"c2-{i}", "c1"))
        winners = [r for r in results if isinstance(r, Checkpoint)]
        assert len(winners) == 1
        assert [type(r) for r in results if not isinstance(r, Checkpoint)] == [StaleParent]
        head = store.get(T)
        assert head is not None and head.checkpoint_id == winners[0].checkpoint_id
        assert [e.seq for e in store.events_after(T, 0)] == [1, 2]

    def test_racing_appends_get_distinct_gapless_numbers(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        results = _run_threads(
            4, lambda i: store.append_events(claim, [EventIn(f"e{i}"), EventIn(f"e{i}")])
        )
        batches = [r for r in results if isinstance(r, list)]
        assert len(batches) == 4
        assert sorted(e.seq for batch in batches for e in batch) == list(range(2, 10))
        for first, second in batches:  # each call's events are numbered together
            assert second.seq == first.seq + 1

    def test_racing_effects_first_write_wins_once(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        results = _run_threads(6, lambda i: store.record_effect(claim, "k", i))
        records = [r for r in results if isinstance(r, EffectRecord)]
        assert len(records) == 6
        assert sum(not r.existing for r in records) == 1
        assert len({json.dumps(r.value) for r in records}) == 1
