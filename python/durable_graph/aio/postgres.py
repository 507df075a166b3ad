"""`AsyncPostgresCheckpointer`: native asyncio on psycopg's `AsyncConnectionPool` (SPEC §6, §9).

Every public method builds the same `Call` as the sync store (`durable_graph.postgres.calls`:
validation, the SQL function call, the decoder; there is no second copy of any query) and runs it
with `AsyncExecutor`: one pooled connection, autocommit, one statement, one round trip. The
one-call methods are derived from the sync store's (``commit =
async_sql_call(PostgresCheckpointer.commit)``: the same Protocol signature and builder, as a
coroutine function); ``prune_all``, ``submit_many`` and the waits are written by hand. No
threads are used for calls (opening the store migrates or verifies the schema once, with the
sync migration code, in a worker thread).

Time bound. The server enforces ``call_timeout`` through the session options of the pool's
connections (``PostgresConfig.connection_kwargs``, as the sync store); the client waits at most
``call_timeout`` for the answer, then raises `ProcessingError` and discards the connection.

Cancellation (SPEC §9, §10.8). The statement runs in an inner task that the caller's task
awaits. When the caller is cancelled, a cancel request goes to the server (on a thread of its
own, over a cancel connection: a reachable server ends the statement, so it does not land later)
and the connection's socket is shut down at once, which ends the inner task at once whatever the
network does; the connection is closed and handed back to the pool, which drops closed
connections and opens replacements. When the client-side timeout expires, the cancel request
goes first and the statement gets `CANCEL_GRACE` to answer it before the socket is shut (on a
stalled network its outcome stays unknown). The caller gets `asyncio.CancelledError` (or
`ProcessingError` on a timeout) once the connection is discarded. A write whose statement
reached the server is atomic: it commits entirely or not at all. A cancellation requested before
a call starts is raised before a connection is taken.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Protocol, Self, TypeVar

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from ..errors import ProcessingError, StoreError, ValidationError, error_for_sqlstate
from ..model import Event, PruneResult, QueueEntry, RetentionPolicy, Submission, Ticket, WatchPolicy
from ..postgres import calls
from ..postgres.calls import Call, Rows
from ..postgres.config import PostgresConfig
from ..postgres.connection import PoolState, send_cancel
from ..postgres.notify_async import AsyncListener
from ..postgres.store import (
    AWAIT_CLOSED_POLL,
    PostgresCheckpointer,
    PostgresRunQueue,
    _pool_dsn,
    _prepare_schema,
    sql_parts,
)
from ..surface import arguments_of, derived
from ._watch import await_entry_closed, await_events, subscribe_events

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")
AsyncConn = psycopg.AsyncConnection[Any]

DISCARD_WAIT = 1.0
"""Seconds a discard waits for the statement's task to end after its socket is shut down."""

CANCEL_GRACE = 0.25
"""Seconds a discarded call's statement may take to end on its cancel request (SPEC §10.8)."""


def _check_config(config: object) -> PostgresConfig:
    if not isinstance(config, PostgresConfig):
        raise ValidationError(f"config must be a PostgresConfig, got {type(config).__name__}")
    return config


def _shutdown_socket(conn: AsyncConn) -> None:
    """Shut the connection's socket down: a pending read or write returns at once."""
    with contextlib.suppress(Exception):
        sock = socket.socket(fileno=socket.dup(conn.pgconn.socket))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()


async def _fetch(conn: AsyncConn, call: Call[Any]) -> Rows:
    cursor = conn.cursor(row_factory=dict_row)
    await cursor.execute(call.query, call.params)
    return await cursor.fetchall() if cursor.description is not None else []


class AsyncExecutor(PoolState[AsyncConnectionPool[Any]]):
    """Executes Calls for one async store: its pool, its config, its closed flag."""

    def __init__(
        self, pool: AsyncConnectionPool[Any], config: PostgresConfig, *, owns_pool: bool
    ) -> None:
        super().__init__(pool, config, owns_pool=owns_pool)
        self._discards: set[asyncio.Task[None]] = set()
        self.discarded = 0
        """Connections discarded after a cancellation, a timeout or a failure (for tests)."""

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._discards:
            await asyncio.wait(set(self._discards), timeout=DISCARD_WAIT * 2)
        if self._owns_pool:
            await self.pool.close()

    async def run(self, call: Call[T]) -> T:
        """Execute ``call`` (one statement) and decode its rows; see the module docstring."""
        await asyncio.sleep(0)  # a cancellation requested before the call is raised here
        self.check_open()
        conn = await self._getconn()
        autocommit = conn.autocommit
        statement = asyncio.ensure_future(self._statement(conn, call))
        try:
            done, _ = await asyncio.wait({statement}, timeout=self.config.call_timeout_ms / 1000)
        except BaseException:  # cancelled (or interrupted) mid-call
            await self._discard(conn, statement)
            raise
        if not done:
            await self._discard(conn, statement, grace=CANCEL_GRACE)
            raise ProcessingError(
                f"{call.name}: no answer within call_timeout "
                f"({self.config.call_timeout_ms} ms); connection discarded"
            )
        try:
            rows = statement.result()
        except StoreError as exc:
            if isinstance(exc, ProcessingError):
                await self._discard(conn, statement)
            else:
                await self._putconn(conn, autocommit)
            raise
        await self._putconn(conn, autocommit)
        return call.decode(rows)

    async def _statement(self, conn: AsyncConn, call: Call[Any]) -> Rows:
        if not conn.autocommit:  # a caller's pool: run in autocommit, then put it back
            try:
                await conn.set_autocommit(True)
            except psycopg.Error as exc:
                raise ProcessingError(f"{call.name}: connection not idle: {exc}") from exc
        started = time.monotonic()
        try:
            return await _fetch(conn, call)
        except psycopg.Error as exc:
            store_error = error_for_sqlstate(exc.sqlstate)
            if store_error is not None:
                raise store_error(exc.diag.message_primary or str(exc)) from None
            elapsed = time.monotonic() - started
            raise ProcessingError(f"{call.name} failed after {elapsed:.3f}s: {exc}") from exc

    async def _getconn(self) -> AsyncConn:
        try:
            conn: AsyncConn = await self.pool.getconn(self._pool_wait())
        except Exception as exc:
            raise self._no_connection(exc) from exc
        return conn

    async def _putconn(self, conn: AsyncConn, autocommit: bool) -> None:
        """Give an idle connection back to the pool, as it was lent."""
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            await self._discard(conn, None)
            return
        if conn.autocommit != autocommit:
            try:
                await conn.set_autocommit(autocommit)
            except Exception:
                await self._discard(conn, None)
                return
        await self.pool.putconn(conn)

    async def _discard(
        self, conn: AsyncConn, statement: asyncio.Future[Rows] | None, grace: float = 0.0
    ) -> None:
        """Cancel ``conn``'s statement on the server, close ``conn`` and hand it to the pool,
        which drops it; survives a second cancel. ``grace``: how long the statement may take to
        answer the cancel before the socket is shut."""
        if statement is not None and not statement.done():
            send_cancel(conn.pgconn)  # before the shutdown: a closed connection cancels nothing
            if grace <= 0:
                _shutdown_socket(conn)
        task = asyncio.ensure_future(self._close_and_return(conn, statement, grace))
        self._discards.add(task)
        task.add_done_callback(self._discards.discard)
        await asyncio.shield(task)

    async def _close_and_return(
        self, conn: AsyncConn, statement: asyncio.Future[Rows] | None, grace: float
    ) -> None:
        self.discarded += 1
        if statement is not None and not statement.done() and grace > 0:
            await asyncio.wait({statement}, timeout=grace)
            if not statement.done():
                _shutdown_socket(conn)
        if statement is not None:
            if not statement.done():
                await asyncio.wait({statement}, timeout=DISCARD_WAIT)
            if not statement.done():
                statement.cancel()  # psycopg was not woken by the shutdown: cut it short
                await asyncio.wait({statement}, timeout=DISCARD_WAIT)
            if statement.done() and not statement.cancelled():
                statement.exception()  # retrieved: the caller already has its answer
        with contextlib.suppress(Exception):
            await conn.close()
        with contextlib.suppress(Exception):
            await self.pool.putconn(conn)


class _SqlStore(Protocol):
    _x: AsyncExecutor
    _config: PostgresConfig


def async_sql_call(
    method: Callable[Concatenate[Any, P], R],
) -> Callable[Concatenate[_SqlStore, P], Coroutine[Any, Any, R]]:
    """The sync store's one-call ``method`` (a `sql_call`) as a coroutine function: the same
    Protocol method and builder, run by the async executor."""
    source, build = sql_parts(method)
    complete = arguments_of(source)

    async def call(self: _SqlStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._x.run(build(self._config, *complete(args, kwargs)))

    return derived(call, source, build)


class AsyncPostgresRunQueue:
    """The run queue of an `AsyncPostgresCheckpointer`, in the same schema (SPEC §5)."""

    def __init__(self, executor: AsyncExecutor, changes: AsyncListener | None = None) -> None:
        self._x = executor
        self._config = executor.config
        self._changes = changes

    submit = async_sql_call(PostgresRunQueue.submit)

    async def submit_many(self, submissions: Sequence[Submission]) -> list[Ticket]:
        call = calls.submit_many(self._config, submissions)
        return [] if call is None else await self._x.run(call)

    lease = async_sql_call(PostgresRunQueue.lease)
    renew = async_sql_call(PostgresRunQueue.renew)
    release = async_sql_call(PostgresRunQueue.release)
    record_attempt = async_sql_call(PostgresRunQueue.record_attempt)
    close = async_sql_call(PostgresRunQueue.close)
    cancel = async_sql_call(PostgresRunQueue.cancel)
    defer = async_sql_call(PostgresRunQueue.defer)
    retry = async_sql_call(PostgresRunQueue.retry)
    entry = async_sql_call(PostgresRunQueue.entry)
    open_entries = async_sql_call(PostgresRunQueue.open_entries)
    entries = async_sql_call(PostgresRunQueue.entries)
    stats = async_sql_call(PostgresRunQueue.stats)
    set_trace_context = async_sql_call(PostgresRunQueue.set_trace_context)
    trace_context = async_sql_call(PostgresRunQueue.trace_context)
    reclaim = async_sql_call(PostgresRunQueue.reclaim)

    async def await_closed(
        self, entry_id: int, timeout: timedelta, tenant: str | None = None
    ) -> QueueEntry | None:
        """Poll the entry until it is closed; None at the wall-clock timeout (D21, rule 23)."""
        return await await_entry_closed(
            self.entry, entry_id, timeout, tenant, AWAIT_CLOSED_POLL, self._changes
        )


class AsyncPostgresCheckpointer:
    """The PostgreSQL Checkpointer with coroutine methods (SPEC §4, §6, §9)."""

    def __init__(self, executor: AsyncExecutor, conninfo: str | None = None) -> None:
        """Use `open` or `create`. ``conninfo``: where the notification listener connects
        (None: no notifications, waiters poll)."""
        self._x = executor
        self._config = executor.config
        self._changes = None if conninfo is None else AsyncListener(conninfo, executor.config)
        self._run_queue = AsyncPostgresRunQueue(executor, self._changes)

    @property
    def changes(self) -> AsyncListener | None:
        """The store's LISTEN/NOTIFY listener (SPEC §11), for waiters and idle workers."""
        return self._changes

    @classmethod
    async def open(
        cls, dsn: str, config: PostgresConfig | None = None
    ) -> AsyncPostgresCheckpointer:
        """A store with its own `AsyncConnectionPool` on ``dsn``; migrates or verifies the schema."""
        config = _check_config(PostgresConfig() if config is None else config)
        if not isinstance(dsn, str):
            raise ValidationError(f"dsn must be a str, got {type(dsn).__name__}")
        await asyncio.to_thread(_prepare_schema, dsn, config)
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            dsn,
            min_size=1,
            max_size=config.max_pool_size,
            kwargs=config.connection_kwargs(),
            timeout=config.connection_timeout.total_seconds(),
            name=f"durable_graph.aio:{config.schema}",
            open=False,
        )
        try:
            await pool.open()
        except BaseException as exc:
            await pool.close()
            if isinstance(exc, Exception):
                raise ProcessingError(f"could not open a connection pool: {exc}") from exc
            raise
        return cls(AsyncExecutor(pool, config, owns_pool=True), dsn)

    @classmethod
    async def create(
        cls, pool: AsyncConnectionPool[Any], config: PostgresConfig | None = None
    ) -> AsyncPostgresCheckpointer:
        """A store on the caller's open `AsyncConnectionPool`, which it never closes (rule 29).

        Calls wait for a connection as long as the pool's own timeout allows and for an answer
        at most ``call_timeout``; for the server-side bound, create the pool with
        ``kwargs=config.connection_kwargs()``.
        """
        config = _check_config(PostgresConfig() if config is None else config)
        if not isinstance(pool, AsyncConnectionPool):
            raise ValidationError(
                f"pool must be a psycopg_pool.AsyncConnectionPool, got {type(pool).__name__}"
            )
        conninfo = _pool_dsn(pool)  # type: ignore[arg-type]
        await asyncio.to_thread(_prepare_schema, conninfo, config)
        return cls(AsyncExecutor(pool, config, owns_pool=False), conninfo)

    @property
    def config(self) -> PostgresConfig:
        return self._config

    @property
    def executor(self) -> AsyncExecutor:
        return self._x

    @property
    def run_queue(self) -> AsyncPostgresRunQueue:
        return self._run_queue

    claim = async_sql_call(PostgresCheckpointer.claim)
    renew_claim = async_sql_call(PostgresCheckpointer.renew_claim)
    release_claim = async_sql_call(PostgresCheckpointer.release_claim)
    begin_attempt = async_sql_call(PostgresCheckpointer.begin_attempt)
    renew_attempt = async_sql_call(PostgresCheckpointer.renew_attempt)
    finish_attempt = async_sql_call(PostgresCheckpointer.finish_attempt)
    commit = async_sql_call(PostgresCheckpointer.commit)
    put_writes = async_sql_call(PostgresCheckpointer.put_writes)
    append_events = async_sql_call(PostgresCheckpointer.append_events)
    record_effect = async_sql_call(PostgresCheckpointer.record_effect)
    retract_turn = async_sql_call(PostgresCheckpointer.retract_turn)
    prune = async_sql_call(PostgresCheckpointer.prune)
    delete_thread = async_sql_call(PostgresCheckpointer.delete_thread)
    put_writes_fenced = async_sql_call(PostgresCheckpointer.put_writes_fenced)
    put_writes_and_commit = async_sql_call(PostgresCheckpointer.put_writes_and_commit)
    delete_runs = async_sql_call(PostgresCheckpointer.delete_runs)
    copy_thread = async_sql_call(PostgresCheckpointer.copy_thread)
    get = async_sql_call(PostgresCheckpointer.get)
    history = async_sql_call(PostgresCheckpointer.history)
    latest_of_runs = async_sql_call(PostgresCheckpointer.latest_of_runs)
    search = async_sql_call(PostgresCheckpointer.search)
    thread = async_sql_call(PostgresCheckpointer.thread)
    threads = async_sql_call(PostgresCheckpointer.threads)
    children = async_sql_call(PostgresCheckpointer.children)
    events_after = async_sql_call(PostgresCheckpointer.events_after)
    get_effect = async_sql_call(PostgresCheckpointer.get_effect)
    effects = async_sql_call(PostgresCheckpointer.effects)

    async def prune_all(self, policy: RetentionPolicy, batch: int = 1000) -> PruneResult:
        """Prune every thread, ``batch`` threads per transaction (rule 16); the totals."""
        _, size = calls.check_prune_all(policy, batch)
        checkpoints = events = 0
        after: str | None = None
        while True:
            step = await self._x.run(calls.prune_batch(self._config, policy, size, after))
            checkpoints += step.result.checkpoints_removed
            events += step.result.events_removed
            if step.threads_seen < size:
                return PruneResult(checkpoints, events)
            # A step that ran out of its row budget inside its first thread resumes there.
            if step.last_thread_id is not None:
                after = step.last_thread_id

    async def await_events_after(
        self,
        thread_id: str,
        after_seq: int,
        timeout: timedelta,
        watch: WatchPolicy = WatchPolicy(),
    ) -> list[Event]:
        """Poll at ``watch.poll_interval`` for events; ``[]`` at the wall-clock timeout (D21)."""
        return await await_events(
            self.events_after, thread_id, after_seq, timeout, watch, self._changes
        )

    def subscribe(
        self, thread_id: str, after_seq: int = 0, watch: WatchPolicy = WatchPolicy()
    ) -> AsyncIterator[Event]:
        """Every event after ``after_seq``, forever, polling when caught up (rule 8 on close)."""
        return subscribe_events(
            self.events_after, self._x.check_open, thread_id, after_seq, watch, self._changes
        )

    # --- lifecycle ------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the store (and its own pool, never a caller's); idempotent (rule 8)."""
        if self._changes is not None:
            await self._changes.close()
        await self._x.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


__all__ = ["AsyncExecutor", "AsyncPostgresCheckpointer", "AsyncPostgresRunQueue"]
