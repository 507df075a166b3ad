"""`AsyncPostgresCheckpointer`: native asyncio on psycopg's `AsyncConnectionPool` (SPEC §6, §9).

Every public method builds the same `Call` as the sync store (`durable_graph.postgres.calls`:
validation, the SQL function call, the decoder; there is no second copy of any query) and runs it
with `AsyncExecutor`: one pooled connection, autocommit, one statement, one round trip. No
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
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Self, TypeVar

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ..errors import ProcessingError, StoreError, ValidationError, error_for_sqlstate
from ..listing import EntryState
from ..model import (
    ANY,
    AttemptBegun,
    AttemptStart,
    Checkpoint,
    Claim,
    ClaimPolicy,
    Commit,
    EffectRecord,
    EntryOutcome,
    Event,
    EventIn,
    Lease,
    PendingWrite,
    PruneResult,
    QueueEntry,
    QueueStats,
    RetentionPolicy,
    Submission,
    TenantFilter,
    ThreadInfo,
    Ticket,
    WatchPolicy,
)
from ..observe import TraceContext
from ..postgres import calls, operating
from ..postgres.calls import Call, Rows
from ..postgres.config import PostgresConfig
from ..postgres.connection import send_cancel
from ..postgres.notify_async import AsyncListener
from ..postgres.store import AWAIT_CLOSED_POLL, _pool_dsn, _prepare_schema
from ._watch import await_entry_closed, await_events, subscribe_events

T = TypeVar("T")
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


class AsyncExecutor:
    """Executes Calls for one async store: its pool, its config, its closed flag."""

    def __init__(
        self, pool: AsyncConnectionPool[Any], config: PostgresConfig, *, owns_pool: bool
    ) -> None:
        self.pool = pool
        self.config = config
        self._owns_pool = owns_pool
        self._closed = False
        self._discards: set[asyncio.Task[None]] = set()
        self.discarded = 0
        """Connections discarded after a cancellation, a timeout or a failure (for tests)."""

    @property
    def closed(self) -> bool:
        return self._closed

    def check_open(self) -> None:
        if self._closed:
            raise ProcessingError("the store is closed")

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
            if self._owns_pool:
                timeout = self.config.connection_timeout.total_seconds()
                conn: AsyncConn = await self.pool.getconn(timeout=timeout)
            else:
                conn = await self.pool.getconn()
            return conn
        except PoolTimeout as exc:
            raise ProcessingError(f"no database connection available: {exc}") from exc
        except psycopg.Error as exc:
            raise ProcessingError(f"could not get a database connection: {exc}") from exc
        except Exception as exc:
            if self._closed:
                raise ProcessingError("the store is closed") from exc
            raise ProcessingError(f"could not get a database connection: {exc}") from exc

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


class AsyncPostgresRunQueue:
    """The run queue of an `AsyncPostgresCheckpointer`, in the same schema (SPEC §5)."""

    def __init__(self, executor: AsyncExecutor, changes: AsyncListener | None = None) -> None:
        self._x = executor
        self._config = executor.config
        self._changes = changes

    async def submit(self, submission: Submission) -> Ticket:
        return await self._x.run(calls.submit(self._config, submission))

    async def submit_many(self, submissions: Sequence[Submission]) -> list[Ticket]:
        call = calls.submit_many(self._config, submissions)
        return [] if call is None else await self._x.run(call)

    async def lease(
        self,
        holder: str,
        ttl: timedelta,
        tenant: TenantFilter = ANY,
        run_id: str | None = None,
    ) -> Lease | None:
        return await self._x.run(calls.lease(self._config, holder, ttl, tenant, run_id))

    async def renew(self, lease: Lease, ttl: timedelta | None = None) -> Lease:
        return await self._x.run(calls.renew(self._config, lease, ttl))

    async def release(self, lease: Lease) -> None:
        await self._x.run(calls.release(self._config, lease))

    async def record_attempt(self, lease: Lease, run_id: str) -> AttemptStart:
        return await self._x.run(calls.record_attempt(self._config, lease, run_id))

    async def close(self, lease: Lease, outcome: EntryOutcome) -> QueueEntry:
        return await self._x.run(calls.close(self._config, lease, outcome))

    async def cancel(self, entry_id: int, tenant: str | None = None) -> QueueEntry:
        return await self._x.run(calls.cancel(self._config, entry_id, tenant))

    async def defer(self, lease: Lease, delay: timedelta, error: str | None = None) -> QueueEntry:
        return await self._x.run(operating.defer(self._config, lease, delay, error))

    async def retry(self, entry_id: int, tenant: str | None = None) -> Ticket:
        return await self._x.run(operating.retry(self._config, entry_id, tenant))

    async def entry(self, entry_id: int, tenant: str | None = None) -> QueueEntry | None:
        return await self._x.run(calls.entry(self._config, entry_id, tenant))

    async def open_entries(
        self,
        tenant: TenantFilter = None,
        thread_id: str | None = None,
        after: int | None = None,
        limit: int = 1000,
    ) -> list[QueueEntry]:
        return await self._x.run(calls.open_entries(self._config, tenant, thread_id, after, limit))

    async def entries(
        self,
        state: EntryState | None = None,
        tenant: TenantFilter = ANY,
        thread_id: str | None = None,
        after: int | None = None,
        limit: int = 100,
    ) -> list[QueueEntry]:
        return await self._x.run(
            calls.entries(self._config, state, tenant, thread_id, after, limit)
        )

    async def stats(self, tenant: TenantFilter = ANY) -> QueueStats:
        return await self._x.run(calls.stats(self._config, tenant))

    async def set_trace_context(self, entry_id: int, context: TraceContext) -> bool:
        """Remember the trace ``context`` ``entry_id`` was submitted in (the first one stays)."""
        return await self._x.run(calls.set_trace_context(self._config, entry_id, context))

    async def trace_context(self, entry_id: int) -> TraceContext | None:
        return await self._x.run(calls.trace_context(self._config, entry_id))

    async def await_closed(
        self, entry_id: int, timeout: timedelta, tenant: str | None = None
    ) -> QueueEntry | None:
        """Poll the entry until it is closed; None at the wall-clock timeout (D21, rule 23)."""
        return await await_entry_closed(
            self.entry, entry_id, timeout, tenant, AWAIT_CLOSED_POLL, self._changes
        )

    async def reclaim(self, older_than: timedelta, batch: int = 1000) -> int:
        return await self._x.run(calls.reclaim(self._config, older_than, batch))


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

    # --- claims ---------------------------------------------------------------------------

    async def claim(
        self, thread_id: str, holder: str, policy: ClaimPolicy = ClaimPolicy()
    ) -> Claim:
        return await self._x.run(calls.claim(self._config, thread_id, holder, policy))

    async def renew_claim(self, claim: Claim) -> Claim:
        return await self._x.run(calls.renew_claim(self._config, claim))

    async def release_claim(self, claim: Claim) -> None:
        await self._x.run(calls.release_claim(self._config, claim))

    # --- the worker fast path (SPEC §11): one SQL function call each -------------------------

    async def begin_attempt(
        self,
        holder: str,
        ttl: timedelta,
        *,
        run_id: str,
        claim_policy: ClaimPolicy = ClaimPolicy(),
        tenant: TenantFilter = ANY,
    ) -> AttemptBegun | None:
        return await self._x.run(
            calls.begin_attempt(self._config, holder, ttl, run_id, claim_policy, tenant)
        )

    async def renew_attempt(self, lease: Lease, claim: Claim) -> tuple[Lease, Claim]:
        return await self._x.run(calls.renew_attempt(self._config, lease, claim))

    async def finish_attempt(self, lease: Lease, outcome: EntryOutcome, claim: Claim) -> QueueEntry:
        return await self._x.run(calls.finish_attempt(self._config, lease, outcome, claim))

    # --- writes ---------------------------------------------------------------------------

    async def commit(self, claim: Claim, commit: Commit) -> Checkpoint:
        return await self._x.run(calls.commit(self._config, claim, commit))

    async def put_writes(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite]
    ) -> None:
        await self._x.run(calls.put_writes(self._config, claim, checkpoint_id, writes))

    async def append_events(
        self, claim: Claim, events: Sequence[EventIn], run_id: str | None = None
    ) -> list[Event]:
        return await self._x.run(calls.append_events(self._config, claim, events, run_id))

    async def record_effect(
        self, claim: Claim, key: str, value: object, run_id: str | None = None
    ) -> EffectRecord:
        return await self._x.run(calls.record_effect(self._config, claim, key, value, run_id))

    async def retract_turn(self, claim: Claim) -> Checkpoint | None:
        return await self._x.run(calls.retract_turn(self._config, claim))

    async def prune(self, thread_id: str, policy: RetentionPolicy) -> PruneResult:
        return await self._x.run(calls.prune(self._config, thread_id, policy))

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

    async def delete_thread(self, thread_id: str, fence: Claim | None = None) -> bool:
        return await self._x.run(calls.delete_thread(self._config, thread_id, fence))

    async def put_writes_fenced(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite], fence: Claim
    ) -> None:
        await self._x.run(
            calls.put_writes_fenced(self._config, claim, checkpoint_id, writes, fence)
        )

    async def search(
        self,
        thread_id: str,
        metadata: dict[str, object],
        before: str | None = None,
        limit: int = 100,
    ) -> list[Checkpoint]:
        return await self._x.run(calls.search(self._config, thread_id, metadata, before, limit))

    async def put_writes_and_commit(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite], commit: Commit
    ) -> Checkpoint:
        return await self._x.run(
            calls.put_writes_and_commit(self._config, claim, checkpoint_id, writes, commit)
        )

    async def delete_runs(self, run_ids: Sequence[str]) -> int:
        return await self._x.run(calls.delete_runs(self._config, run_ids))

    async def copy_thread(self, source_thread_id: str, target_thread_id: str) -> bool:
        return await self._x.run(
            calls.copy_thread(self._config, source_thread_id, target_thread_id)
        )

    # --- reads ----------------------------------------------------------------------------

    async def get(self, thread_id: str, checkpoint_id: str | None = None) -> Checkpoint | None:
        return await self._x.run(calls.get(self._config, thread_id, checkpoint_id))

    async def history(
        self, thread_id: str, before: str | None = None, limit: int = 100
    ) -> list[Checkpoint]:
        return await self._x.run(calls.history(self._config, thread_id, before, limit))

    async def latest_of_runs(self, thread_id: str, run_ids: Sequence[str]) -> Checkpoint | None:
        return await self._x.run(calls.latest_of_runs(self._config, thread_id, run_ids))

    async def thread(self, thread_id: str) -> ThreadInfo | None:
        return await self._x.run(calls.thread(self._config, thread_id))

    async def threads(self, after: str | None = None, limit: int = 100) -> list[ThreadInfo]:
        return await self._x.run(calls.threads(self._config, after, limit))

    async def children(
        self, thread_id: str, after: str | None = None, limit: int = 1000
    ) -> list[str]:
        return await self._x.run(calls.children(self._config, thread_id, after, limit))

    async def events_after(self, thread_id: str, after_seq: int, limit: int = 1000) -> list[Event]:
        return await self._x.run(calls.events_after(self._config, thread_id, after_seq, limit))

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

    async def get_effect(self, thread_id: str, key: str) -> EffectRecord | None:
        return await self._x.run(calls.get_effect(self._config, thread_id, key))

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
