"""LISTEN/NOTIFY on PostgreSQL (SPEC §11): waiters and idle workers wake when notified, polling
stays the fallback, notifications carry no tenant data and are sent only while someone waits.

Every wait here polls every 30 s: a waiter that wakes within a second was woken by a
notification.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from durable_graph import Commit, Completed, EventIn, Mode, Submission, WatchPolicy
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.postgres.notify import APPLICATION_NAME, KINDS
from durable_graph.worker.sync import RunContext, Worker

SLOW = WatchPolicy(poll_interval=timedelta(seconds=30))
WAIT = timedelta(seconds=20)
PROMPT = 1.5  # seconds: far below the poll interval


@pytest.fixture
def store(pg_dsn: str, pg_schema: str) -> Iterator[PostgresCheckpointer]:
    with PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=pg_schema)) as s:
        yield s


@pytest.fixture
def raw(pg_dsn: str, pg_schema: str) -> Iterator[psycopg.Connection[Any]]:
    """A plain connection LISTENing on the store's channel, as any other client could."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(pg_schema)))
        yield conn


def _later(seconds: float, fn: Any) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        fn()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _commit(store: PostgresCheckpointer, thread_id: str, events: int = 0) -> None:
    claim = store.claim(thread_id, "h")
    head = store.get(thread_id)
    store.commit(
        claim,
        Commit(
            uuid.uuid4().hex,
            None if head is None else head.checkpoint_id,
            "run",
            {"n": 1},
            events=tuple(EventIn("note", {"i": i}) for i in range(events)),
        ),
    )
    store.release_claim(claim)


def _received(conn: psycopg.Connection[Any], settle: float = 0.3) -> list[tuple[str, str]]:
    return [(n.channel, n.payload) for n in conn.notifies(timeout=settle)]


def _watch(pg_dsn: str, schema: str, *watches: tuple[str, str]) -> None:
    """Register ``watches`` as (kind, key) pairs for a test listener (replacing its others)."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("SELECT {}.dg_watch_v1(%s, %s, %s, '60 s')").format(sql.Identifier(schema)),
            ("test-listener", [k for k, _ in watches], [key for _, key in watches]),
        )


# --- waiters wake when notified -----------------------------------------------------------


def test_await_events_after_wakes_on_a_commit(store: PostgresCheckpointer) -> None:
    _commit(store, "t1")
    last = store.events_after("t1", 0)[-1].seq
    _later(0.3, lambda: _commit(store, "t1"))
    started = time.monotonic()
    events = store.await_events_after("t1", last, WAIT, SLOW)
    assert events and time.monotonic() - started < PROMPT


def test_subscribe_wakes_on_a_commit(store: PostgresCheckpointer) -> None:
    _commit(store, "t1")
    last = store.events_after("t1", 0)[-1].seq
    feed = store.subscribe("t1", last, SLOW)
    _later(0.3, lambda: _commit(store, "t1"))
    started = time.monotonic()
    assert next(feed).seq > last
    assert time.monotonic() - started < PROMPT


def test_await_closed_is_notified_of_the_close(
    store: PostgresCheckpointer, raw: psycopg.Connection[Any]
) -> None:
    queue = store.run_queue
    entry_id = queue.submit(Submission("t1", 1)).entry_id
    lease = queue.lease("w", timedelta(seconds=30))
    assert lease is not None
    _later(0.3, lambda: queue.close(lease, Completed(7)))
    closed = queue.await_closed(entry_id, WAIT)
    assert closed is not None and closed.outcome == Completed(7)
    assert ("closed" in {p for _, p in _received(raw)}) is True


def test_an_idle_worker_wakes_on_a_submit(store: PostgresCheckpointer) -> None:
    started = threading.Event()

    def handler(ctx: RunContext) -> None:
        started.set()

    worker = Worker(store, handler, poll_interval=timedelta(seconds=30))
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    try:
        time.sleep(0.5)  # the worker found nothing and waits
        submitted = time.monotonic()
        store.run_queue.submit(Submission("t1", 1))
        assert started.wait(PROMPT), "the idle worker was not woken"
        assert time.monotonic() - submitted < PROMPT
    finally:
        worker.stop()
        runner.join(10)


def test_waiters_share_one_listener_connection(
    store: PostgresCheckpointer, pg_dsn: str, pg_schema: str
) -> None:
    _commit(store, "t1")
    waiters = [
        threading.Thread(
            target=store.await_events_after, args=("t1", 10**6, timedelta(seconds=1), SLOW)
        )
        for _ in range(5)
    ]
    for w in waiters:
        w.start()
    time.sleep(0.5)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s",
            (APPLICATION_NAME,),
        ).fetchone()
    for w in waiters:
        w.join()
    assert row is not None and row[0] == 1


# --- what is sent --------------------------------------------------------------------------


def test_nothing_is_notified_while_nobody_waits(
    store: PostgresCheckpointer, raw: psycopg.Connection[Any]
) -> None:
    queue = store.run_queue
    entry_id = queue.submit(Submission("t1", 1, tenant="acme")).entry_id
    _commit(store, "t1", events=2)
    lease = queue.lease("w", timedelta(seconds=30))
    assert lease is not None
    queue.close(lease, Completed())
    queue.cancel(queue.submit(Submission("t2", 1)).entry_id)
    assert entry_id and _received(raw) == []


def test_notifications_carry_the_kind_alone(
    store: PostgresCheckpointer, raw: psycopg.Connection[Any], pg_dsn: str, pg_schema: str
) -> None:
    thread_id, tenant = "thread-secret-42", "tenant-secret"
    entry_id = store.run_queue.submit(Submission(thread_id, {"in": 1}, tenant=tenant)).entry_id
    _watch(pg_dsn, pg_schema, ("events", thread_id), ("closed", str(entry_id)), ("queue", ""))
    store.run_queue.submit(Submission(thread_id, {"in": 2}, tenant=tenant))
    _commit(store, thread_id, events=3)
    store.run_queue.cancel(entry_id, tenant=tenant)
    got = _received(raw)
    assert {p for _, p in got} == set(KINDS)
    for channel, payload in got:
        assert channel == pg_schema and payload in KINDS
        assert thread_id not in payload and tenant not in payload


def test_a_commit_notifies_once_whatever_its_events(
    store: PostgresCheckpointer, raw: psycopg.Connection[Any], pg_dsn: str, pg_schema: str
) -> None:
    _commit(store, "t1")
    _watch(pg_dsn, pg_schema, ("events", "t1"))
    _commit(store, "t1", events=5)
    assert _received(raw) == [(pg_schema, "events")]


def test_a_batch_of_submits_notifies_once(
    store: PostgresCheckpointer, raw: psycopg.Connection[Any], pg_dsn: str, pg_schema: str
) -> None:
    _watch(pg_dsn, pg_schema, ("queue", ""))
    store.run_queue.submit_many([Submission(f"t{i}", i) for i in range(10)])
    assert _received(raw) == [(pg_schema, "queue")]


def test_a_lease_ended_without_a_close_wakes_idle_workers(
    store: PostgresCheckpointer, raw: psycopg.Connection[Any], pg_dsn: str, pg_schema: str
) -> None:
    """A release, a defer and a lease that ends another entry's expired lease each notify
    'queue': the thread's head may be leased again (D223: the lease lives on the thread's queue
    row, and the functions that end it wake the idle workers). Taking a lease notifies nothing."""
    queue = store.run_queue
    queue.submit(Submission("t1", 1))
    _watch(pg_dsn, pg_schema, ("queue", ""))
    lease = queue.lease("w", timedelta(seconds=30))
    assert lease is not None and _received(raw) == []
    queue.release(lease)
    assert _received(raw) == [(pg_schema, "queue")]
    lease = queue.lease("w", timedelta(seconds=30))
    assert lease is not None
    queue.defer(lease, timedelta(0))
    assert _received(raw) == [(pg_schema, "queue")]
    expiring = queue.lease("w", timedelta(milliseconds=50))
    assert expiring is not None
    queue.submit(Submission("t1", 2, mode=Mode.INTERRUPT))  # the thread's head now
    _received(raw)  # the submit's own notification
    time.sleep(0.1)
    taken = queue.lease("w", timedelta(seconds=30))
    assert taken is not None and taken.entry.entry_id != expiring.entry.entry_id
    assert _received(raw) == [(pg_schema, "queue")]


def test_only_watched_threads_notify_their_events(
    store: PostgresCheckpointer, raw: psycopg.Connection[Any], pg_dsn: str, pg_schema: str
) -> None:
    _watch(pg_dsn, pg_schema, ("events", "watched"))
    _commit(store, "other", events=1)
    assert _received(raw) == []
    _commit(store, "watched")
    assert _received(raw) == [(pg_schema, "events")]


def test_an_expired_registration_stops_notifications(
    store: PostgresCheckpointer, raw: psycopg.Connection[Any], pg_dsn: str, pg_schema: str
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("SELECT {}.dg_watch_v1('gone', '{{queue}}', '{{\"\"}}', '1 ms')").format(
                sql.Identifier(pg_schema)
            )
        )
    time.sleep(0.05)
    store.run_queue.submit(Submission("t1", 1))
    assert _received(raw) == []


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (("", ["queue"], [""], "1 s"), "listener"),
        (("l", ["queue"], [], "1 s"), "kinds and keys"),
        (("l", ["bogus"], [""], "1 s"), "each watch"),
        (("l", ["queue"], [""], "0 s"), "ttl"),
        (("l", ["queue"], [""], "2 hours"), "ttl"),
    ],
)
def test_dg_watch_refuses_bad_arguments_with_dg000(
    pg_dsn: str, pg_schema: str, store: PostgresCheckpointer, args: tuple[Any, ...], name: str
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn, pytest.raises(psycopg.Error) as caught:
        conn.execute(
            sql.SQL("SELECT {}.dg_watch_v1(%s, %s, %s, %s::interval)").format(
                sql.Identifier(pg_schema)
            ),
            args,
        )
    assert caught.value.sqlstate == "DG000" and name in str(caught.value)


# --- the async store ------------------------------------------------------------------------


def test_async_waiters_and_an_idle_async_worker_wake_when_notified(
    pg_dsn: str, pg_schema: str
) -> None:
    import asyncio

    from durable_graph.aio import AsyncWorker
    from durable_graph.postgres.async_store import AsyncPostgresCheckpointer

    async def main() -> None:
        store = await AsyncPostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=pg_schema))
        try:
            claim = await store.claim("t1", "h")
            await store.commit(claim, Commit("c1", None, "r", {"n": 1}))
            last = (await store.events_after("t1", 0))[-1].seq

            async def commit_later() -> None:
                await asyncio.sleep(0.3)
                await store.commit(claim, Commit("c2", "c1", "r", {"n": 2}))

            later = asyncio.ensure_future(commit_later())
            started = time.monotonic()
            assert await store.await_events_after("t1", last, WAIT, SLOW)
            assert time.monotonic() - started < PROMPT
            await later
            await store.release_claim(claim)

            ran = asyncio.Event()

            async def handler(ctx: Any) -> None:
                ran.set()

            worker = AsyncWorker(store, handler, poll_interval=timedelta(seconds=30))
            running = asyncio.ensure_future(worker.run())
            await asyncio.sleep(0.5)  # idle, registered
            submitted = time.monotonic()
            ticket = await store.run_queue.submit(Submission("t2", 1))
            await asyncio.wait_for(ran.wait(), PROMPT)
            assert time.monotonic() - submitted < PROMPT
            closed = await store.run_queue.await_closed(ticket.entry_id, WAIT)
            assert closed is not None and closed.outcome == Completed(None)
            worker.stop()
            await asyncio.wait_for(running, 10)
        finally:
            await store.close()

    asyncio.run(main())


def test_owner_side_dml_fires_the_notify_triggers_under_any_search_path(
    store: PostgresCheckpointer, pg_dsn: str, pg_schema: str
) -> None:
    """Maintenance DML by the owner on ``events`` / ``queue_entries`` with another search_path
    (issue #24, finding 7): the trigger functions pin the schema's, so ``watchers`` is found and
    a watched change still notifies."""
    queue = store.run_queue
    entry = queue.submit(Submission(thread_id="maint", input=1))
    _commit(store, "maint", events=1)
    s = sql.Identifier(pg_schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "SELECT {}.dg_watch_v1('maint-listener', ARRAY['events', 'queue', 'closed'],"
                " ARRAY['maint', '', %s], interval '1 minute')"
            ).format(s),
            (str(entry.entry_id),),
        )
        conn.execute(sql.SQL("LISTEN {}").format(s))
        conn.execute("SET search_path TO public")
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.events (thread_id, seq, kind, payload, run_id, created_at,"
                " committed_at) SELECT thread_id, seq + 100, kind, payload, run_id, created_at,"
                " committed_at FROM {}.events WHERE thread_id = 'maint' ORDER BY seq DESC LIMIT 1"
            ).format(s, s)
        )
        conn.execute(  # a statement trigger: it fires for no row too
            sql.SQL(
                "INSERT INTO {}.queue_entries (thread_id)"
                " SELECT thread_id FROM {}.queue_entries WHERE false"
            ).format(s, s)
        )
        conn.execute(
            sql.SQL(
                "UPDATE {}.queue_entries SET outcome_kind = 'cancelled' WHERE entry_id = %s"
            ).format(s),
            (entry.entry_id,),
        )
        got = sorted({n.payload for n in conn.notifies(timeout=2.0, stop_after=3)})
    assert got == ["closed", "events", "queue"]
