"""Bad-input fuzzing: every public method, on all three backends, refuses a bad argument with a
`ValidationError` that names the argument, and leaves the store exactly as it was.

Each test draws one call (a method with one argument replaced by a bad value) and a bad value for
it, runs the call against a seeded store, and checks:

- it raises `ValidationError` whose message contains the argument's name (``thread_id``,
  ``commit.state``, ``events[0].payload``...);
- a full dump of the store is unchanged: `threads()`, each thread's `thread()`, history (with
  pending writes), events, effects and children, `open_entries(ANY)` and `entry()` of every known
  id.

Configuration values (`PostgresConfig`, `SqliteConfig`, `InMemoryCheckpointer(...)`, policies)
are fuzzed too; a bad schema name (SQL-injection strings included) never reaches the database.
"""

from __future__ import annotations

import decimal
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from durable_graph import (
    ANY,
    Claim,
    ClaimPolicy,
    Commit,
    Completed,
    EventIn,
    Failed,
    Lease,
    Mode,
    PendingWrite,
    RetentionPolicy,
    Submission,
    ValidationError,
    WatchPolicy,
)
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.sqlite import SqliteCheckpointer, SqliteConfig

EXAMPLES = int(os.environ.get("DURABLE_GRAPH_FUZZ_EXAMPLES", "40"))
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
HOUR = timedelta(hours=1)
EFFECT_KEYS = ("k", "k2")


# --- a seeded store ------------------------------------------------------------------------------


@dataclass
class Seeded:
    name: str
    store: Any
    claim: Claim
    lease: Lease
    entry_ids: list[tuple[int, str | None]]

    @property
    def queue(self) -> Any:
        return self.store.run_queue


def _seed(name: str, store: Any) -> Seeded:
    claim = store.claim("seed", "holder", ClaimPolicy(ttl=HOUR, renew_every=timedelta(minutes=1)))
    store.commit(claim, Commit("c1", None, "r1", {"n": 1}, next=("a",)))
    store.commit(
        claim,
        Commit("c2", "c1", "r1", {"n": 2}, events=(EventIn("note", {"x": [1, 2]}),), next=("b",)),
    )
    store.put_writes(claim, "c2", [PendingWrite("t", "ch", "w")])
    store.append_events(claim, [EventIn("log", "line")], run_id="r1")
    store.record_effect(claim, "k", {"v": 1})
    child_claim = store.claim("child", "holder")
    store.commit(child_claim, Commit("cc1", None, "r9", [], parent_thread_id="seed"))
    store.release_claim(child_claim)
    queue = store.run_queue
    e1 = queue.submit(Submission("q1", {"in": 1})).entry_id
    e2 = queue.submit(Submission("q2", [1], tenant="ta", key="key")).entry_id
    e3 = queue.submit(Submission("q3", None, mode=Mode.INTERRUPT)).entry_id
    lease = queue.lease("worker", HOUR, tenant=None, run_id="run-1")
    assert lease is not None
    return Seeded(name, store, claim, lease, [(e1, None), (e2, "ta"), (e3, None), (999, None)])


def dump(seeded: Seeded) -> object:
    """Everything the store holds, as its public reads show it."""
    store = seeded.store
    out: list[object] = []
    infos = store.threads(limit=1000)
    out.append(infos)
    for info in infos:
        tid = info.thread_id
        out.append(store.thread(tid))
        out.append(store.history(tid, limit=1000))
        out.append(store.events_after(tid, 0))
        out.append(store.children(tid))
        out.append([store.get_effect(tid, k) for k in EFFECT_KEYS])
    out.append(seeded.queue.open_entries(tenant=ANY))
    out.append([seeded.queue.entry(i, tenant=t) for i, t in seeded.entry_ids])
    return out


@pytest.fixture(scope="module", params=["memory", "sqlite", "postgres"])
def seeded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, pg_dsn: str
) -> Iterator[Seeded]:
    name = request.param
    schema = f"f_{uuid.uuid4().hex[:16]}"
    store: Any
    if name == "memory":
        store = InMemoryCheckpointer()
    elif name == "sqlite":
        path = tmp_path_factory.mktemp("fuzz") / "fuzz.db"
        store = SqliteCheckpointer.open(path, SqliteConfig(synchronous="NORMAL"))
    else:
        store = PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=schema, max_pool_size=2))
    try:
        yield _seed(name, store)
    finally:
        store.close()
        if name == "postgres":
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )


def assert_refused(seeded: Seeded, call: Callable[[Seeded], object], argument: str) -> None:
    before = dump(seeded)
    with pytest.raises(ValidationError) as caught:
        call(seeded)
    assert argument in str(caught.value), (
        f"{seeded.name}: message {str(caught.value)!r} does not name {argument!r}"
    )
    assert dump(seeded) == before, f"{seeded.name}: a refused call changed the store"


# --- bad values ----------------------------------------------------------------------------------


class Custom:
    """An object that is not a JSON value (and has a misleading __str__)."""

    def __str__(self) -> str:
        return "{}"


def bad_identifiers(optional: bool) -> st.SearchStrategy[object]:
    not_str: list[object] = [1, 2.5, True, b"bytes", ["a"], ("a",), {"a": 1}, Custom()]
    if not optional:
        not_str.append(None)
    return st.one_of(
        st.just(""),
        st.text(max_size=5).map(lambda s: s + "\x00"),
        st.text(max_size=5).map(lambda s: "\x00" + s),
        st.integers(513, 700).map(lambda n: "x" * n),
        st.integers(257, 300).map(lambda n: "é" * n),  # 2 bytes each: over 512 bytes, not chars
        st.integers(129, 140).map(lambda n: "😀" * n),
        st.sampled_from(["\ud800", "a\udfffb", "\udc00" * 3]),
        st.sampled_from(not_str),
    )


def _nest(depth: int, leaf: object, as_dict: bool) -> object:
    value = leaf
    for _ in range(depth):
        value = {"d": value} if as_dict else [value]
    return value


BAD_LEAVES: list[object] = [
    (1, 2),
    (),
    float("nan"),
    float("inf"),
    float("-inf"),
    {1: "int key"},
    {None: "none key"},
    {("t",): 1},
    b"bytes",
    bytearray(b"x"),
    datetime(2024, 1, 1, tzinfo=UTC),
    timedelta(seconds=1),
    {1, 2},
    frozenset(),
    decimal.Decimal("1.5"),
    Custom(),
    "\ud800",
    {"\udc00": 1},
    Mode.ENQUEUE,
]

BAD_JSON: st.SearchStrategy[object] = st.one_of(
    st.sampled_from(BAD_LEAVES),
    st.tuples(st.sampled_from(BAD_LEAVES), st.integers(1, 4), st.booleans()).map(
        lambda t: _nest(t[1], t[0], t[2])
    ),
    st.tuples(st.sampled_from(BAD_LEAVES), st.text(max_size=3)).map(
        lambda t: {"ok": [1, "two", None], t[1] or "k": [0, {"x": t[0]}]}
    ),
    st.booleans().map(lambda d: _nest(513, 0, d)),  # rule 5: 512 containers accepted, 513 not
)


def bad_durations(zero_ok: bool, none_ok: bool) -> st.SearchStrategy[object]:
    values: list[object] = [
        1,
        1.5,
        "1s",
        -1,
        datetime(2024, 1, 1, tzinfo=UTC),
        timedelta(seconds=-1),
        timedelta(microseconds=-1),
        timedelta(days=36501),
        timedelta.max,
        timedelta.min,
    ]
    if not zero_ok:
        values.append(timedelta(0))
    if not none_ok:
        values.append(None)
    return st.one_of(
        st.sampled_from(values),
        st.integers(36_501, 999_999_999).map(lambda d: timedelta(days=d)),
        st.integers(1, 10**9).map(lambda s: timedelta(seconds=-s)),
    )


BAD_INTS = st.one_of(
    st.integers(max_value=-1),
    st.sampled_from([None, 1.0, "3", True, False, [1]]),
)
BAD_POSITIVE_INTS = st.one_of(st.integers(max_value=0), st.sampled_from([None, 1.0, "3", True]))


# --- the calls -----------------------------------------------------------------------------------

Call = Callable[[Seeded, Any], object]
"""``call(seeded, bad)``: one public method with one argument replaced by ``bad``."""


def _commit(s: Seeded, **kw: Any) -> object:
    fields: dict[str, Any] = {
        "checkpoint_id": "c-new",
        "parent_id": "c2",
        "run_id": "r-new",
        "state": {"ok": True},
    }
    fields.update(kw)
    return s.store.commit(s.claim, Commit(**fields))


IDENTIFIER_CALLS: dict[str, tuple[str, bool, Call]] = {
    # name: (argument named in the message, None allowed?, call)
    "claim.thread_id": ("thread_id", False, lambda s, b: s.store.claim(b, "h")),
    "claim.holder": ("holder", False, lambda s, b: s.store.claim("fresh", b)),
    "commit.checkpoint_id": (
        "commit.checkpoint_id",
        False,
        lambda s, b: _commit(s, checkpoint_id=b),
    ),
    "commit.parent_id": ("commit.parent_id", True, lambda s, b: _commit(s, parent_id=b)),
    "commit.run_id": ("commit.run_id", False, lambda s, b: _commit(s, run_id=b)),
    "commit.next": ("commit.next", False, lambda s, b: _commit(s, next=("ok", b))),
    "commit.events.kind": ("commit.events", False, lambda s, b: _commit(s, events=(EventIn(b),))),
    "commit.parent_thread_id": (
        "commit.parent_thread_id",
        True,
        lambda s, b: _commit(s, parent_thread_id=b),
    ),
    "put_writes.checkpoint_id": (
        "checkpoint_id",
        False,
        lambda s, b: s.store.put_writes(s.claim, b, []),
    ),
    "put_writes.task_id": (
        "writes",
        False,
        lambda s, b: s.store.put_writes(
            s.claim, "c2", [PendingWrite("t", "c", 1), PendingWrite(b, "c", 1)]
        ),
    ),
    "put_writes.channel": (
        "writes",
        False,
        lambda s, b: s.store.put_writes(s.claim, "c2", [PendingWrite("t", b, 1)]),
    ),
    "append_events.kind": (
        "events",
        False,
        lambda s, b: s.store.append_events(s.claim, [EventIn(b)]),
    ),
    "append_events.run_id": (
        "run_id",
        True,
        lambda s, b: s.store.append_events(s.claim, [EventIn("k")], run_id=b),
    ),
    "record_effect.key": ("key", False, lambda s, b: s.store.record_effect(s.claim, b, 1)),
    "record_effect.run_id": (
        "run_id",
        True,
        lambda s, b: s.store.record_effect(s.claim, "k3", 1, run_id=b),
    ),
    "prune.thread_id": ("thread_id", False, lambda s, b: s.store.prune(b, RetentionPolicy(1))),
    "delete_thread.thread_id": ("thread_id", False, lambda s, b: s.store.delete_thread(b)),
    "get.thread_id": ("thread_id", False, lambda s, b: s.store.get(b)),
    "get.checkpoint_id": ("checkpoint_id", True, lambda s, b: s.store.get("seed", b)),
    "history.thread_id": ("thread_id", False, lambda s, b: s.store.history(b)),
    "history.before": ("before", True, lambda s, b: s.store.history("seed", before=b)),
    "latest_of_runs.thread_id": ("thread_id", False, lambda s, b: s.store.latest_of_runs(b, [])),
    "latest_of_runs.run_ids": (
        "run_ids",
        False,
        lambda s, b: s.store.latest_of_runs("seed", ["r1", b]),
    ),
    "thread.thread_id": ("thread_id", False, lambda s, b: s.store.thread(b)),
    "threads.after": ("after", True, lambda s, b: s.store.threads(after=b)),
    "children.thread_id": ("thread_id", False, lambda s, b: s.store.children(b)),
    "events_after.thread_id": ("thread_id", False, lambda s, b: s.store.events_after(b, 0)),
    "await_events_after.thread_id": (
        "thread_id",
        False,
        lambda s, b: s.store.await_events_after(b, 0, timedelta(0)),
    ),
    "subscribe.thread_id": ("thread_id", False, lambda s, b: next(iter(s.store.subscribe(b)))),
    "get_effect.thread_id": ("thread_id", False, lambda s, b: s.store.get_effect(b, "k")),
    "get_effect.key": ("key", False, lambda s, b: s.store.get_effect("seed", b)),
    "submit.thread_id": (
        "submission.thread_id",
        False,
        lambda s, b: s.queue.submit(Submission(b, 1)),
    ),
    "submit.tenant": (
        "submission.tenant",
        True,
        lambda s, b: s.queue.submit(Submission("q9", 1, tenant=b)),
    ),
    "submit.key": ("submission.key", True, lambda s, b: s.queue.submit(Submission("q9", 1, key=b))),
    "lease.holder": ("holder", False, lambda s, b: s.queue.lease(b, HOUR)),
    "lease.tenant": ("tenant", True, lambda s, b: s.queue.lease("w", HOUR, tenant=b)),
    "lease.run_id": ("run_id", True, lambda s, b: s.queue.lease("w", HOUR, run_id=b)),
    "record_attempt.run_id": ("run_id", False, lambda s, b: s.queue.record_attempt(s.lease, b)),
    "cancel.tenant": ("tenant", True, lambda s, b: s.queue.cancel(1, tenant=b)),
    "entry.tenant": ("tenant", True, lambda s, b: s.queue.entry(1, tenant=b)),
    "open_entries.tenant": ("tenant", True, lambda s, b: s.queue.open_entries(tenant=b)),
    "open_entries.thread_id": ("thread_id", True, lambda s, b: s.queue.open_entries(thread_id=b)),
    "await_closed.tenant": (
        "tenant",
        True,
        lambda s, b: s.queue.await_closed(1, timedelta(0), tenant=b),
    ),
}

JSON_CALLS: dict[str, tuple[str, Call]] = {
    "commit.state": ("commit.state", lambda s, b: _commit(s, state=b)),
    "commit.metadata": ("commit.metadata", lambda s, b: _commit(s, metadata=b)),
    "commit.events.payload": (
        "commit.events[1].payload",
        lambda s, b: _commit(s, events=(EventIn("ok"), EventIn("k", b))),
    ),
    "put_writes.value": (
        "writes[0].value",
        lambda s, b: s.store.put_writes(s.claim, "c2", [PendingWrite("t", "c", b)]),
    ),
    "append_events.payload": (
        "events[0].payload",
        lambda s, b: s.store.append_events(s.claim, [EventIn("k", b)]),
    ),
    "record_effect.value": ("value", lambda s, b: s.store.record_effect(s.claim, "k3", b)),
    "submit.input": ("submission.input", lambda s, b: s.queue.submit(Submission("q9", b))),
    "close.output": ("outcome.output", lambda s, b: s.queue.close(s.lease, Completed(b))),
}

DURATION_CALLS: dict[str, tuple[str, bool, bool, Call]] = {
    # name: (argument, zero allowed?, None allowed?, call)
    "lease.ttl": ("ttl", False, False, lambda s, b: s.queue.lease("w", b)),
    "renew.ttl": ("ttl", False, True, lambda s, b: s.queue.renew(s.lease, b)),
    "await_events_after.timeout": (
        "timeout",
        True,
        False,
        lambda s, b: s.store.await_events_after("seed", 0, b),
    ),
    "await_closed.timeout": ("timeout", True, False, lambda s, b: s.queue.await_closed(1, b)),
    "reclaim.older_than": ("older_than", True, False, lambda s, b: s.queue.reclaim(b)),
    "ClaimPolicy.ttl": ("ttl", False, False, lambda s, b: ClaimPolicy(ttl=b)),
    "ClaimPolicy.renew_every": (
        "renew_every",
        False,
        False,
        lambda s, b: ClaimPolicy(renew_every=b),
    ),
    "RetentionPolicy.max_age": ("max_age", False, True, lambda s, b: RetentionPolicy(max_age=b)),
    "WatchPolicy.poll_interval": (
        "poll_interval",
        False,
        False,
        lambda s, b: WatchPolicy(poll_interval=b),
    ),
}

NOT_A: list[object] = [None, 1, "x", object(), {"ttl": 1}]
FAILED_NOT_STR = Failed(1)  # type: ignore[arg-type]

OTHER_CALLS: dict[str, tuple[str, st.SearchStrategy[object], Call]] = {
    # Policies and composite arguments of the wrong type.
    "claim.policy": ("policy", st.sampled_from(NOT_A), lambda s, b: s.store.claim("fresh", "h", b)),
    "prune.policy": ("policy", st.sampled_from(NOT_A), lambda s, b: s.store.prune("seed", b)),
    "prune_all.policy": ("policy", st.sampled_from(NOT_A), lambda s, b: s.store.prune_all(b)),
    "await_events_after.watch": (
        "watch",
        st.sampled_from(NOT_A),
        lambda s, b: s.store.await_events_after("seed", 0, timedelta(0), watch=b),
    ),
    "subscribe.watch": (
        "watch",
        st.sampled_from(NOT_A),
        lambda s, b: next(iter(s.store.subscribe("seed", watch=b))),
    ),
    "commit.claim": (
        "claim",
        st.sampled_from(NOT_A),
        lambda s, b: s.store.commit(b, Commit("c", None, "r", 1)),
    ),
    "commit.commit": ("commit", st.sampled_from(NOT_A), lambda s, b: s.store.commit(s.claim, b)),
    "commit.fence": (
        "commit.fence",
        st.sampled_from([1, "x", object()]),
        lambda s, b: _commit(s, fence=b),
    ),
    "commit.created_at": (
        "commit.created_at",
        st.sampled_from([datetime(2024, 1, 1), "2024-01-01", 0]),
        lambda s, b: _commit(s, created_at=b),
    ),
    "commit.events.created_at": (
        "commit.events[0].created_at",
        st.sampled_from([datetime(2024, 1, 1), 1.5]),
        lambda s, b: _commit(s, events=(EventIn("k", created_at=b),)),
    ),
    "commit.events": (
        "commit.events",
        st.sampled_from(["ab", 1, [1], [None]]),
        lambda s, b: _commit(s, events=b),
    ),
    "commit.next": (
        "commit.next",
        st.sampled_from(["node", 1, None]),
        lambda s, b: _commit(s, next=b),
    ),
    "renew_claim.claim": ("claim", st.sampled_from(NOT_A), lambda s, b: s.store.renew_claim(b)),
    "release_claim.claim": ("claim", st.sampled_from(NOT_A), lambda s, b: s.store.release_claim(b)),
    "put_writes.writes": (
        "writes",
        st.sampled_from(["ab", 1, None, [("t", "c", 1)]]),
        lambda s, b: s.store.put_writes(s.claim, "c2", b),
    ),
    "append_events.events": (
        "events",
        st.sampled_from(["ab", 1, None, [{"kind": "k"}]]),
        lambda s, b: s.store.append_events(s.claim, b),
    ),
    "append_events.store_kind": (
        "events[0].kind",
        st.sampled_from(["store.checkpoint", "store.retracted", "store.x"]),
        lambda s, b: s.store.append_events(s.claim, [EventIn(b)]),
    ),
    "retract_turn.claim": ("claim", st.sampled_from(NOT_A), lambda s, b: s.store.retract_turn(b)),
    "delete_thread.fence": (
        "fence",
        st.sampled_from([1, "x", object()]),
        lambda s, b: s.store.delete_thread("seed", fence=b),
    ),
    "latest_of_runs.run_ids": (
        "run_ids",
        st.sampled_from(["r1", None, 1, b"r"]),
        lambda s, b: s.store.latest_of_runs("seed", b),
    ),
    "history.limit": ("limit", BAD_POSITIVE_INTS, lambda s, b: s.store.history("seed", limit=b)),
    "threads.limit": ("limit", BAD_POSITIVE_INTS, lambda s, b: s.store.threads(limit=b)),
    "events_after.after_seq": ("after_seq", BAD_INTS, lambda s, b: s.store.events_after("seed", b)),
    "events_after.limit": (
        "limit",
        BAD_POSITIVE_INTS,
        lambda s, b: s.store.events_after("seed", 0, limit=b),
    ),
    "await_events_after.after_seq": (
        "after_seq",
        BAD_INTS,
        lambda s, b: s.store.await_events_after("seed", b, timedelta(0)),
    ),
    "prune_all.batch": (
        "batch",
        BAD_POSITIVE_INTS,
        lambda s, b: s.store.prune_all(RetentionPolicy(1), batch=b),
    ),
    "submit.submission": ("submission", st.sampled_from(NOT_A), lambda s, b: s.queue.submit(b)),
    "submit.mode": (
        "submission.mode",
        st.sampled_from(["enqueue", 1, None]),
        lambda s, b: s.queue.submit(Submission("q9", 1, mode=b)),
    ),
    "submit.max_attempts": (
        "submission.max_attempts",
        BAD_POSITIVE_INTS | st.just(2**31),
        lambda s, b: s.queue.submit(Submission("q9", 1, max_attempts=b)),
    ),
    "lease.tenant_any_is_not_a_str": (
        "tenant",
        st.sampled_from([1, b"t"]),
        lambda s, b: s.queue.lease("w", HOUR, tenant=b),
    ),
    "renew.lease": ("lease", st.sampled_from(NOT_A), lambda s, b: s.queue.renew(b)),
    "release.lease": ("lease", st.sampled_from(NOT_A), lambda s, b: s.queue.release(b)),
    "record_attempt.lease": (
        "lease",
        st.sampled_from(NOT_A),
        lambda s, b: s.queue.record_attempt(b, "r"),
    ),
    "close.lease": ("lease", st.sampled_from(NOT_A), lambda s, b: s.queue.close(b, Completed())),
    "close.outcome": (
        "outcome",
        st.sampled_from([*NOT_A, FAILED_NOT_STR]),
        lambda s, b: s.queue.close(s.lease, b),
    ),
    "cancel.entry_id": ("entry_id", BAD_INTS, lambda s, b: s.queue.cancel(b)),
    "entry.entry_id": ("entry_id", BAD_INTS, lambda s, b: s.queue.entry(b)),
    "await_closed.entry_id": (
        "entry_id",
        BAD_INTS,
        lambda s, b: s.queue.await_closed(b, timedelta(0)),
    ),
    "reclaim.batch": ("batch", BAD_POSITIVE_INTS, lambda s, b: s.queue.reclaim(HOUR, batch=b)),
    "entry.tenant_any": ("tenant", st.just(ANY), lambda s, b: s.queue.entry(1, tenant=b)),
    "RetentionPolicy.keep_last": (
        "keep_last",
        BAD_POSITIVE_INTS.filter(lambda v: v is not None),
        lambda s, b: RetentionPolicy(keep_last=b),
    ),
}


# --- the tests -----------------------------------------------------------------------------------


@FUZZ_SETTINGS
@given(data=st.data())
def test_bad_identifiers_are_refused_naming_the_argument(
    seeded: Seeded, data: st.DataObject
) -> None:
    name = data.draw(st.sampled_from(sorted(IDENTIFIER_CALLS)), label="call")
    argument, optional, call = IDENTIFIER_CALLS[name]
    bad = data.draw(bad_identifiers(optional), label="bad")
    assert_refused(seeded, lambda s: call(s, bad), argument)


@FUZZ_SETTINGS
@given(data=st.data())
def test_bad_json_values_are_refused_naming_the_argument(
    seeded: Seeded, data: st.DataObject
) -> None:
    name = data.draw(st.sampled_from(sorted(JSON_CALLS)), label="call")
    argument, call = JSON_CALLS[name]
    bad = data.draw(BAD_JSON, label="bad")
    assert_refused(seeded, lambda s: call(s, bad), argument)


@FUZZ_SETTINGS
@given(data=st.data())
def test_bad_durations_are_refused_naming_the_argument(seeded: Seeded, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(DURATION_CALLS)), label="call")
    argument, zero_ok, none_ok, call = DURATION_CALLS[name]
    bad = data.draw(bad_durations(zero_ok, none_ok), label="bad")
    assert_refused(seeded, lambda s: call(s, bad), argument)


@FUZZ_SETTINGS
@given(data=st.data())
def test_bad_policies_and_other_arguments_are_refused_naming_the_argument(
    seeded: Seeded, data: st.DataObject
) -> None:
    name = data.draw(st.sampled_from(sorted(OTHER_CALLS)), label="call")
    argument, strategy, call = OTHER_CALLS[name]
    bad = data.draw(strategy, label="bad")
    assert_refused(seeded, lambda s: call(s, bad), argument)


def test_json_nested_512_deep_is_accepted_and_returned_equal(seeded: Seeded) -> None:
    """The boundary of rule 5 from the accepting side: 512 containers round-trip."""
    value = _nest(512, "leaf", True)
    record = seeded.store.record_effect(seeded.claim, f"deep-{uuid.uuid4().hex[:6]}", value)
    assert record.value == value


# --- configuration -------------------------------------------------------------------------------

BAD_SCHEMAS: list[object] = [
    'x"; drop table y; --',
    "x; drop schema public cascade",
    "x' or '1'='1",
    "pg_x",
    "pg_",
    "a" * 64,
    "Upper",
    "UPPER",
    "",
    "1abc",
    "a-b",
    "a b",
    "é",
    "a\x00",
    "public.x",
    None,
    5,
    b"llm4s",
]

CONFIG_CALLS: dict[str, tuple[str, st.SearchStrategy[object], Callable[[Any], object]]] = {
    "PostgresConfig.schema": (
        "schema",
        st.sampled_from(BAD_SCHEMAS),
        lambda b: PostgresConfig(schema=b),
    ),
    "PostgresConfig.call_timeout": (
        "call_timeout",
        bad_durations(zero_ok=False, none_ok=False).filter(
            lambda v: not (isinstance(v, timedelta) and timedelta(0) < v <= timedelta(days=24))
        ),
        lambda b: PostgresConfig(call_timeout=b),
    ),
    "PostgresConfig.connection_timeout": (
        "connection_timeout",
        st.one_of(
            st.sampled_from(
                [None, 1, timedelta(0), timedelta(milliseconds=249), timedelta(days=25)]
            ),
            st.integers(1, 249_000).map(lambda us: timedelta(microseconds=us)),
        ),
        lambda b: PostgresConfig(connection_timeout=b),
    ),
    "PostgresConfig.max_pool_size": (
        "max_pool_size",
        BAD_POSITIVE_INTS,
        lambda b: PostgresConfig(max_pool_size=b),
    ),
    "PostgresConfig.auto_migrate": (
        "auto_migrate",
        st.sampled_from([1, 0, "yes", None]),
        lambda b: PostgresConfig(auto_migrate=b),
    ),
    "PostgresConfig.max_value_bytes": (
        "max_value_bytes",
        BAD_POSITIVE_INTS,
        lambda b: PostgresConfig(max_value_bytes=b),
    ),
    "SqliteConfig.busy_timeout": (
        "busy_timeout",
        bad_durations(zero_ok=False, none_ok=False),
        lambda b: SqliteConfig(busy_timeout=b),
    ),
    "SqliteConfig.max_value_bytes": (
        "max_value_bytes",
        BAD_POSITIVE_INTS,
        lambda b: SqliteConfig(max_value_bytes=b),
    ),
    "SqliteConfig.synchronous": (
        "synchronous",
        st.sampled_from(["OFF", "full", "EXTRA", None, 1]),
        lambda b: SqliteConfig(synchronous=b),
    ),
    "InMemoryCheckpointer.clock": (
        "clock",
        st.sampled_from([None, 1, "time"]),
        lambda b: InMemoryCheckpointer(clock=b),
    ),
    "InMemoryCheckpointer.max_value_bytes": (
        "max_value_bytes",
        BAD_POSITIVE_INTS,
        lambda b: InMemoryCheckpointer(max_value_bytes=b),
    ),
}


@settings(max_examples=EXAMPLES, deadline=None)
@given(data=st.data())
def test_bad_configuration_is_refused_naming_the_field(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(CONFIG_CALLS)), label="config")
    argument, strategy, call = CONFIG_CALLS[name]
    bad = data.draw(strategy, label="bad")
    with pytest.raises(ValidationError) as caught:
        call(bad)
    assert argument in str(caught.value)


def _schemas(dsn: str) -> set[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {r[0] for r in conn.execute("SELECT nspname FROM pg_namespace").fetchall()}


@pytest.mark.parametrize("schema", [s for s in BAD_SCHEMAS if isinstance(s, str)], ids=repr)
def test_bad_schema_names_never_reach_the_database(pg_dsn: str, schema: str) -> None:
    before = _schemas(pg_dsn)

    class Loose:
        """A config-like object that skipped PostgresConfig's checks."""

    with pytest.raises(ValidationError):
        PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=schema))
    with pytest.raises(ValidationError, match="config"):
        PostgresCheckpointer.open(pg_dsn, Loose())  # type: ignore[arg-type]
    assert _schemas(pg_dsn) == before


@pytest.mark.parametrize("path", ["", ":memory:", "file:x.db?mode=memory", 5, None])
def test_sqlite_open_refuses_paths_that_name_no_file(path: object, tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="path"):
        SqliteCheckpointer.open(path)  # type: ignore[arg-type]


def test_sqlite_open_refuses_a_config_of_the_wrong_type(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="config"):
        SqliteCheckpointer.open(tmp_path / "x.db", config={"busy_timeout": 1})  # type: ignore[arg-type]
    assert not (tmp_path / "x.db").exists()
