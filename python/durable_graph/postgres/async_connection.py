"""`AsyncExecutor`: runs the PostgreSQL `SqlCall`s of the async store on an `AsyncConnectionPool`.

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
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from durable_graph.core.errors import ProcessingError, StoreError, error_for_sqlstate
from durable_graph.postgres.calls import Rows, SqlCall
from durable_graph.postgres.config import PostgresConfig
from durable_graph.postgres.connection import (
    QUIET_DISCARDS,
    PoolState,
    failure_message,
    send_cancel,
    store_message,
)

T = TypeVar("T")
AsyncConn = psycopg.AsyncConnection[Any]

DISCARD_WAIT = 1.0
"""Seconds a discard waits for the statement's task to end after its socket is shut down."""

CANCEL_GRACE = 0.25
"""Seconds a discarded call's statement may take to end on its cancel request (SPEC §10.8)."""


def _shutdown_socket(conn: AsyncConn) -> None:
    """Shut the connection's socket down: a pending read or write returns at once."""
    with contextlib.suppress(Exception):
        sock = socket.socket(fileno=socket.dup(conn.pgconn.socket))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()


async def _fetch(conn: AsyncConn, call: SqlCall[Any]) -> Rows:
    cursor = conn.cursor(row_factory=dict_row)
    await cursor.execute(call.query, call.params)
    return await cursor.fetchall() if cursor.description is not None else []


class AsyncExecutor(PoolState[AsyncConnectionPool[Any]]):
    """Executes SqlCalls for one async store: its pool, its config, its closed flag."""

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

    async def run(self, call: SqlCall[T]) -> T:
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

    async def _statement(self, conn: AsyncConn, call: SqlCall[Any]) -> Rows:
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
                raise store_error(store_message(exc.diag.message_primary or str(exc))) from None
            elapsed = time.monotonic() - started
            raise ProcessingError(
                f"{call.name} failed after {elapsed:.3f}s: {failure_message(exc)}"
            ) from exc

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
        QUIET_DISCARDS.closing(conn)
        with contextlib.suppress(Exception):
            await conn.close()
        with contextlib.suppress(Exception):
            await self.pool.putconn(conn)


__all__ = ["CANCEL_GRACE", "DISCARD_WAIT", "AsyncExecutor"]
