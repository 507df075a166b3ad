"""Cancelling async PostgreSQL calls never leaks a connection nor half a write (SPEC §6, §9).

Real PostgreSQL, real sockets. Tasks making calls are cancelled at random points of

(a) a long lock wait: another connection holds the thread's row lock (``FOR UPDATE``) for long
    stretches, releasing it briefly now and then, so cancellations land before the statement is
    sent, while it waits for the lock, while it runs and after it answered;
(b) a stalled network: the store talks to the server through a loopback TCP proxy (a Python
    thread) that stops forwarding in both directions at random moments;

many times over, and then the pool is shown healthy (size within its maximum, every connection
idle, none of the store's sessions left in a transaction), the store still serves calls, and
every commit is all there (its checkpoint with all its events) or not there at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import selectors
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta

import psycopg
import pytest
from psycopg import sql

from durable_graph import Claim, ClaimPolicy, Commit, EventIn, ProcessingError, StaleParent
from durable_graph.postgres.async_store import AsyncPostgresCheckpointer
from durable_graph.postgres.config import PostgresConfig

APP = "dg_aio_cancel"
THREAD = "t"
EVENTS_PER_COMMIT = 3
LOCK_WAIT_ROUNDS = 170
STALL_ROUNDS_MAX = 400
MAX_POOL = 4


# --- a loopback TCP proxy that can stall ---------------------------------------------------


@dataclass
class StallingProxy:
    """Forwards 127.0.0.1:port to the server; `stall()` stops forwarding in both directions.

    A stalled proxy still accepts connections (as a kernel would) but moves no byte until
    `resume()`; a side that closes is noticed when forwarding resumes, and the other side is then
    closed too.
    """

    upstream: tuple[str, int]
    port: int = 0
    _stalled: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    connections: int = 0

    def start(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(512)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._main, name="stalling-proxy", daemon=True)
        self._thread.start()

    def stall(self) -> None:
        self._stalled.set()

    def resume(self) -> None:
        self._stalled.clear()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _main(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._listener, selectors.EVENT_READ, None)
        peers: dict[socket.socket, socket.socket] = {}

        def drop(sock: socket.socket) -> None:
            other = peers.pop(sock, None)
            for s in (sock, other):
                if s is None:
                    continue
                peers.pop(s, None)
                with contextlib.suppress(Exception):
                    sel.unregister(s)
                s.close()

        while not self._stop.is_set():
            for key, _ in sel.select(timeout=0.005):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    client, _ = self._listener.accept()
                    server = socket.create_connection(self.upstream)
                    peers[client], peers[server] = server, client
                    for s in (client, server):
                        s.setblocking(True)
                        sel.register(s, selectors.EVENT_READ, None)
                    self.connections += 1
                    continue
                if self._stalled.is_set() or sock not in peers:
                    continue  # stalled: bytes stay in the kernel's buffers
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    drop(sock)
                    continue
                try:
                    peers[sock].sendall(data)
                except OSError:
                    drop(sock)
            if self._stalled.is_set():
                time.sleep(0.002)  # the selector reports ready sockets at once: don't spin
        for sock in list(peers):
            drop(sock)
        self._listener.close()


@pytest.fixture(autouse=True)
def quiet_pool() -> Iterator[None]:
    """The pool logs a warning for every discarded connection: hundreds here, on purpose."""
    logger = logging.getLogger("psycopg.pool")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


@pytest.fixture
def proxy(pg_dsn: str) -> Iterator[StallingProxy]:
    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    p = StallingProxy((str(info.get("host") or "127.0.0.1"), int(info.get("port") or 5432)))
    p.start()
    yield p
    p.stop()


def _via(dsn: str, port: int | None = None) -> str:
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    info["application_name"] = APP
    if port is not None:
        info["host"], info["port"] = "127.0.0.1", str(port)
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items()})


# --- helpers -------------------------------------------------------------------------------


@dataclass
class Tally:
    outcomes: Counter[str] = field(default_factory=Counter)
    cancel_latency: list[float] = field(default_factory=list)

    @property
    def cancellations(self) -> int:
        return self.outcomes["cancelled"]


def _commit(i: int, parent: str | None) -> Commit:
    return Commit(
        checkpoint_id=f"c{i}",
        parent_id=parent,
        run_id=f"r{i}",
        state={"i": i},
        events=tuple(EventIn("step", {"i": i, "j": j}) for j in range(EVENTS_PER_COMMIT)),
    )


async def _head(store: AsyncPostgresCheckpointer) -> str | None:
    got = await store.get(THREAD)
    return None if got is None else got.checkpoint_id


async def _read(store: AsyncPostgresCheckpointer) -> object:
    return await store.events_after(THREAD, 0)


async def _write(
    store: AsyncPostgresCheckpointer, claim: Claim, i: int, parent: str | None
) -> object:
    return await store.commit(claim, _commit(i, parent))


async def _cancel_at_random(
    tally: Tally,
    store: AsyncPostgresCheckpointer,
    claim: Claim,
    i: int,
    delay: float,
    on_start: Callable[[], object] = lambda: None,
) -> None:
    """Commit #i (or read), cancel it after ``delay``; record what happened."""
    parent = await _head(store)
    on_start()
    if i % 4 == 3:
        task: asyncio.Task[object] = asyncio.create_task(_read(store))
    else:
        task = asyncio.create_task(_write(store, claim, i, parent))
    await asyncio.sleep(delay)
    task.cancel()
    asked = time.monotonic()
    try:
        await task
        tally.outcomes["answered"] += 1
    except asyncio.CancelledError:
        tally.cancel_latency.append(time.monotonic() - asked)
        tally.outcomes["cancelled"] += 1
    except StaleParent:  # an orphaned statement of an earlier cancelled commit landed first
        tally.outcomes["stale parent"] += 1


async def _sessions(dsn: str, counts: str) -> tuple[int, ...]:
    """``counts``, a row of counts over pg_stat_activity for the store's sessions (their
    application name is its ``%s``), read on a connection of its own."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(counts, (APP,))
        row = await cur.fetchone()
    assert row is not None
    return tuple(int(v) for v in row)


async def _settle(store: AsyncPostgresCheckpointer, dsn: str, timeout: float = 15.0) -> None:
    """Wait until the pool holds all its connections idle and no orphan statement still runs."""
    pool = store.executor.pool
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stats = pool.get_stats()
        (busy,) = await _sessions(
            dsn,
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND state <> 'idle'",
        )
        if busy == 0 and stats["pool_available"] == stats["pool_size"]:
            return
        await asyncio.sleep(0.1)


async def _health(store: AsyncPostgresCheckpointer, dsn: str) -> dict[str, int]:
    stats = store.executor.pool.get_stats()
    row = await _sessions(
        dsn,
        "SELECT count(*) FILTER (WHERE state LIKE 'idle in transaction%%'), count(*) "
        "FROM pg_stat_activity WHERE application_name = %s",
    )
    return {
        "pool_size": stats["pool_size"],
        "pool_available": stats["pool_available"],
        "pool_max": stats["pool_max"],
        "in_transaction": int(row[0]),
        "server_sessions": int(row[1]),
        "returns_bad": stats.get("returns_bad", 0),
    }


async def _check_data(store: AsyncPostgresCheckpointer) -> tuple[int, int]:
    """Every checkpoint has all its events, and no event belongs to a missing checkpoint."""
    history = await store.history(THREAD, limit=100_000)
    events = await store.events_after(THREAD, 0, limit=100_000)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    by_run = Counter(e.run_id for e in events)
    runs = {c.run_id for c in history}
    assert set(by_run) == runs, "events of a commit that is not there"
    for run in runs:
        assert by_run[run] == EVENTS_PER_COMMIT + 1, f"commit {run} is not whole"
    return len(history), len(events)


def _print(title: str, tally: Tally, health: dict[str, int], discarded: int) -> None:
    lat = sorted(tally.cancel_latency) or [0.0]
    print(
        f"\n[{title}] outcomes={dict(tally.outcomes)} cancellations={tally.cancellations} "
        f"cancel->CancelledError max={lat[-1] * 1000:.1f}ms "
        f"p50={lat[len(lat) // 2] * 1000:.1f}ms discarded_connections={discarded} "
        f"after: {health}"
    )


# --- the tests ------------------------------------------------------------------------------


def test_cancelled_calls_during_lock_waits_leak_nothing_and_write_all_or_nothing(
    pg_dsn: str, pg_schema: str
) -> None:
    config = PostgresConfig(
        schema=pg_schema, call_timeout=timedelta(seconds=2), max_pool_size=MAX_POOL
    )
    rng = random.Random(20240601)

    async def main() -> None:
        store = await AsyncPostgresCheckpointer.open(_via(pg_dsn), config)
        try:
            claim = await store.claim(THREAD, "h", policy=_long_claim())
            await store.commit(claim, _commit(0, None))
            tally = Tally()
            stop = threading.Event()
            blocker = threading.Thread(
                target=_hold_thread_lock, args=(pg_dsn, pg_schema, stop, rng.random()), daemon=True
            )
            blocker.start()
            try:
                for i in range(1, LOCK_WAIT_ROUNDS + 1):
                    await _cancel_at_random(tally, store, claim, i, rng.uniform(0, 0.03))
            finally:
                stop.set()
                blocker.join(10)
            await _settle(store, pg_dsn)
            health = await _health(store, pg_dsn)
            _print("lock wait", tally, health, store.executor.discarded)
            _assert_healthy(health)
            assert tally.cancellations >= 100
            # the store still serves calls, and the data is whole
            await store.commit(claim, _commit(10_000, await _head(store)))
            checkpoints, events = await _check_data(store)
            print(f"[lock wait] checkpoints={checkpoints} events={events}")
        finally:
            await store.close()

    asyncio.run(main())


def test_cancelled_calls_on_a_stalled_network_leak_nothing_and_write_all_or_nothing(
    pg_dsn: str, pg_schema: str, proxy: StallingProxy
) -> None:
    config = PostgresConfig(
        schema=pg_schema,
        call_timeout=timedelta(seconds=2),
        connection_timeout=timedelta(seconds=3),
        max_pool_size=MAX_POOL,
    )
    rng = random.Random(20240602)

    async def main() -> None:
        store = await AsyncPostgresCheckpointer.open(_via(pg_dsn, proxy.port), config)
        try:
            claim = await store.claim(THREAD, "h", policy=_long_claim())
            await store.commit(claim, _commit(0, None))
            tally = Tally()
            loop = asyncio.get_running_loop()
            # Rounds until 100 calls were cancelled mid-flight (a call that answers before its
            # cancel counts as answered; how many do depends on the machine's load), at most
            # STALL_ROUNDS_MAX.
            i = 0
            while tally.cancellations < 100 and i < STALL_ROUNDS_MAX:
                i += 1
                handles: list[asyncio.TimerHandle] = []

                def stall_soon(
                    after: float = rng.uniform(0, 0.004),
                    handles: list[asyncio.TimerHandle] = handles,
                ) -> None:
                    handles.append(loop.call_later(after, proxy.stall))

                try:
                    await _cancel_at_random(
                        tally, store, claim, i, rng.uniform(0.001, 0.02), stall_soon
                    )
                finally:
                    for handle in handles:
                        handle.cancel()
                    proxy.resume()
            await _settle(store, pg_dsn)
            health = await _health(store, pg_dsn)
            _print("stalled network", tally, health, store.executor.discarded)
            print(f"[stalled network] proxy connections opened={proxy.connections}")
            _assert_healthy(health)
            assert tally.cancellations >= 100
            assert max(tally.cancel_latency) < 1.0, "a cancellation waited on the network"
            await store.commit(claim, _commit(10_000, await _head(store)))
            checkpoints, events = await _check_data(store)
            print(f"[stalled network] checkpoints={checkpoints} events={events}")
        finally:
            await store.close()

    asyncio.run(main())


def _long_claim() -> ClaimPolicy:
    return ClaimPolicy(ttl=timedelta(hours=1), renew_every=timedelta(minutes=1))


def _assert_healthy(health: dict[str, int], max_pool: int = MAX_POOL) -> None:
    assert health["pool_size"] <= health["pool_max"] == max_pool
    assert health["pool_available"] == health["pool_size"]
    assert health["in_transaction"] == 0
    assert health["server_sessions"] <= max_pool


def _hold_thread_lock(dsn: str, schema: str, stop: threading.Event, seed: float) -> None:
    """Hold the thread's row lock for long stretches (150-400 ms), free it briefly (5-30 ms)."""
    rng = random.Random(seed)
    query = sql.SQL("SELECT 1 FROM {}.threads WHERE thread_id = %s FOR UPDATE").format(
        sql.Identifier(schema)
    )
    with psycopg.connect(dsn) as conn:
        while not stop.is_set():
            with conn.transaction():
                conn.execute(query, (THREAD,))
                stop.wait(rng.uniform(0.15, 0.4))
            time.sleep(rng.uniform(0.005, 0.03))


def test_a_call_past_call_timeout_on_a_stalled_network_fails_and_discards_its_connection(
    pg_dsn: str, pg_schema: str, proxy: StallingProxy
) -> None:
    config = PostgresConfig(schema=pg_schema, call_timeout=timedelta(milliseconds=300))

    async def main() -> None:
        store = await AsyncPostgresCheckpointer.open(_via(pg_dsn, proxy.port), config)
        try:
            claim = await store.claim(THREAD, "h")
            proxy.stall()
            started = time.monotonic()
            with pytest.raises(ProcessingError, match="call_timeout"):
                await store.commit(claim, _commit(1, None))
            elapsed = time.monotonic() - started
            proxy.resume()
            assert 0.25 < elapsed < 2.0
            assert store.executor.discarded == 1
            # A timed-out call's outcome is unknown by contract: the commit may land once the
            # network resumes (even after this point), or never. Either way the store works:
            # the next commit, on a fresh connection, lands on whatever the head then is.
            await _settle(store, pg_dsn)
            for _ in range(20):
                head = await _head(store)
                try:
                    await store.commit(claim, _commit(2, head))
                    break
                except StaleParent:  # c1 landed between our read and our commit
                    await asyncio.sleep(0.05)
            else:
                raise AssertionError("no commit landed after the stalled one")
            assert await _head(store) == "c2"
            await _settle(store, pg_dsn)
            _assert_healthy(await _health(store, pg_dsn), max_pool=config.max_pool_size)
            # the timed-out commit landed whole or not at all
            history, _ = await _check_data(store)
            assert history in (1, 2)
        finally:
            proxy.resume()
            await store.close()

    asyncio.run(main())


def test_a_task_cancelled_while_waiting_for_a_pooled_connection_leaks_nothing(
    pg_dsn: str, pg_schema: str
) -> None:
    config = PostgresConfig(schema=pg_schema, max_pool_size=1)

    async def main() -> None:
        store = await AsyncPostgresCheckpointer.open(_via(pg_dsn), config)
        try:
            claim = await store.claim(THREAD, "h")
            await store.commit(claim, _commit(0, None))
            stop = threading.Event()
            locked = threading.Event()
            blocker = threading.Thread(
                target=_hold_until, args=(pg_dsn, pg_schema, locked, stop), daemon=True
            )
            blocker.start()
            locked.wait(5)
            holder = asyncio.create_task(store.commit(claim, _commit(1, "c0")))
            await asyncio.sleep(0.05)  # holds the only connection, waiting for the lock
            waiter = asyncio.create_task(store.get(THREAD))
            await asyncio.sleep(0.05)  # waits in the pool's queue
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            stop.set()
            blocker.join(5)
            assert (await holder).checkpoint_id == "c1"
            assert store.executor.discarded == 0  # nothing was discarded: it never had one
            got = await store.get(THREAD)
            assert got is not None and got.checkpoint_id == "c1"
            _assert_healthy(await _health(store, pg_dsn), max_pool=1)
        finally:
            await store.close()

    asyncio.run(main())


def _hold_until(dsn: str, schema: str, locked: threading.Event, stop: threading.Event) -> None:
    query = sql.SQL("SELECT 1 FROM {}.threads WHERE thread_id = %s FOR UPDATE").format(
        sql.Identifier(schema)
    )
    with psycopg.connect(dsn) as conn, conn.transaction():
        conn.execute(query, (THREAD,))
        locked.set()
        stop.wait(10)
