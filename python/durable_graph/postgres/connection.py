"""Running one `SqlCall` on a pooled connection, bounded in time (SPEC §6).

`Executor.run(call)` borrows a connection (waiting at most ``connection_timeout``; with a caller's
pool, the pool's own timeout), executes the call's single statement in autocommit (one statement,
one implicit transaction, one round trip), decodes the rows and gives the connection back.

Time bound. The server enforces ``call_timeout`` through the session's ``statement_timeout``,
``lock_timeout`` and ``idle_in_transaction_session_timeout`` (set at connect). The client enforces
it too: a watchdog timer that, on expiry, sends the server a cancel request and waits up to
`CANCEL_GRACE` for the call to end (SPEC §10.8: a reachable server cancels the statement, so a
timed-out call cannot land later), then shuts the socket down so a recv blocked on a stalled
network returns (its outcome stays unknown). A call that reaches the bound raises
`ProcessingError`.

Errors. A ``DGxxx`` SQLSTATE raised by an SQL function becomes its store error class with the
server's message; every other failure becomes `ProcessingError` with the driver's exception as
``__cause__``, and the connection is discarded (closed, never reused). After a successful call or
a ``DGxxx`` error the connection is idle (autocommit rolled the statement back) and goes back to
the pool.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import re
import select
import socket
import threading
import time
import weakref
from typing import Any, Final, Generic, TypeVar

import psycopg
from psycopg import pq
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from durable_graph.core.errors import ProcessingError, StoreError, error_for_sqlstate
from durable_graph.postgres.calls import Rows, SqlCall
from durable_graph.postgres.config import PostgresConfig

T = TypeVar("T")
PoolT = TypeVar("PoolT")

CANCEL_TIMEOUT = 0.5
"""Seconds the watchdog's cancel request may take (it runs on a thread of its own)."""

CANCEL_GRACE = 0.25
"""Seconds a timed-out call may take to answer its cancel request before its socket is shut."""


class _Watchdog:
    """Ends ``conn``'s call if it outlives its deadline, in two stages.

    First a cancel request (so the server ends the statement: it does not land later, also on a
    caller's pool without server-side timeouts) goes out on its own short-lived thread over a
    cancel connection, which does not share the call's connection; it gives up after
    `CANCEL_TIMEOUT`. A reachable server answers the call with an error at once. If the call is
    still not over `CANCEL_GRACE` later (a stalled network), the socket is shut down so the
    caller's blocked recv returns, whatever the network does. Armed and fired by `_WATCHDOGS`:
    one thread for the whole process.
    """

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self.done = False
        self.fired = False

    def fire(self) -> None:
        with self._lock:
            if self.done:
                return
            if self.fired:  # second stage: the cancel was not answered in time
                with contextlib.suppress(Exception):
                    sock = socket.socket(fileno=socket.dup(self._conn.fileno()))
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    finally:
                        sock.close()
                return
            self.fired = True
            send_cancel(self._conn.pgconn)  # under the lock: the call is still running
        _WATCHDOGS.rearm(self, CANCEL_GRACE)

    def stop(self) -> None:
        """Disarm; waits for a firing watchdog to finish (the socket is ours again after)."""
        with self._lock:
            self.done = True


class _Watchdogs:
    """One daemon thread firing every armed `_Watchdog` at its deadline (cheaper than a timer
    thread per call). Disarmed watchdogs are dropped when they reach the front of the heap.

    The thread is woken only when a new deadline is earlier than the one it sleeps until (or it
    sleeps with nothing armed): calls of one timeout arm ever-later deadlines, so a steady stream
    of calls costs no thread switch per call, only one wake-up per ``call_timeout`` or so.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Watchdog]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self._wakes_at: float | None = None  # the deadline the thread sleeps until; None: idle

    def arm(self, conn: psycopg.Connection[Any], seconds: float) -> _Watchdog:
        watchdog = _Watchdog(conn)
        self.rearm(watchdog, seconds)
        return watchdog

    def rearm(self, watchdog: _Watchdog, seconds: float) -> None:
        """Fire ``watchdog`` (again) in ``seconds``."""
        deadline = time.monotonic() + seconds
        with self._cond:
            while self._heap and self._heap[0][2].done:  # finished calls, usually the oldest
                heapq.heappop(self._heap)
            heapq.heappush(self._heap, (deadline, next(self._order), watchdog))
            if self._thread is None or not self._thread.is_alive():
                self._wakes_at = deadline  # the new thread's first look finds this deadline
                self._thread = threading.Thread(target=self._run, name="dg-watchdog", daemon=True)
                self._thread.start()
            elif self._wakes_at is None or deadline < self._wakes_at:
                self._wakes_at = deadline
                self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    while self._heap and self._heap[0][2].done:
                        heapq.heappop(self._heap)
                    if not self._heap:
                        self._wakes_at = None
                        self._cond.wait()
                        continue
                    due_at = self._heap[0][0]
                    delay = due_at - time.monotonic()
                    if delay <= 0:
                        _, _, due = heapq.heappop(self._heap)
                        break
                    self._wakes_at = due_at
                    self._cond.wait(delay)
            due.fire()


_WATCHDOGS = _Watchdogs()


def send_cancel(pgconn: pq.abc.PGconn) -> None:
    """Ask the server to cancel ``pgconn``'s statement, without waiting: the request is started
    here (non-blocking) and driven to its end on a short-lived thread, for at most
    `CANCEL_TIMEOUT`. Used while another thread or task waits for the statement's answer."""
    try:
        cancel_conn = pgconn.cancel_conn()
        cancel_conn.start()
    except Exception:
        return
    threading.Thread(
        target=_send_cancel, args=(cancel_conn,), name="dg-cancel", daemon=True
    ).start()


def _send_cancel(cancel_conn: pq.abc.PGcancelConn) -> None:
    """Drive a started cancel request to its end, for at most `CANCEL_TIMEOUT` seconds."""
    deadline = time.monotonic() + CANCEL_TIMEOUT
    try:
        while True:
            status = cancel_conn.poll()
            if status not in (pq.PollingStatus.READING, pq.PollingStatus.WRITING):
                return  # OK, or FAILED: nothing more to do either way
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            fd = cancel_conn.socket
            if status == pq.PollingStatus.READING:
                select.select([fd], [], [], remaining)
            else:
                select.select([], [fd], [], remaining)
    except Exception:
        return
    finally:
        cancel_conn.finish()


_REMOTE_ERROR = re.compile(r"^[A-Za-z0-9_.]+\(\d+\): \[[^\]]*\] REMOTE ERROR: ")


def store_message(message: str) -> str:
    """A store error's message as the SQL function raised it: without the prefix PL/Proxy puts
    before an error a partition raised (``dg.dg_claim_v1(1): [db] REMOTE ERROR: ``; SPEC §16)."""
    return _REMOTE_ERROR.sub("", message, count=1)


_PROXY_UNREACHED = re.compile(
    r"^PL/Proxy function [A-Za-z0-9_.]+\(\d+\): \[([^\]]*)\] (?!REMOTE ERROR)"
)


def failure_message(exc: psycopg.Error) -> str:
    """A failed call's error as its `ProcessingError` says it: a partition proxy's failure to
    reach a partition (PL/Proxy: ``dg.dg_get_v1(2): [db] PQconnectPoll: ...``, the number
    being the function's argument count) as ``partition database db is unavailable: ...``."""
    return _PROXY_UNREACHED.sub(
        lambda m: f"partition database {m.group(1)} is unavailable: ", str(exc), count=1
    )


class PoolState(Generic[PoolT]):
    """What both executors keep (`Executor` here, `AsyncExecutor` in `durable_graph.postgres.async_store`):
    the pool, the config, whether the store owns the pool, the closed flag."""

    def __init__(self, pool: PoolT, config: PostgresConfig, *, owns_pool: bool) -> None:
        self.pool = pool
        self.config = config
        self._owns_pool = owns_pool
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def check_open(self) -> None:
        if self._closed:
            raise ProcessingError("the store is closed")

    def _pool_wait(self) -> float | None:
        """How long to wait for a pooled connection: ``connection_timeout`` on the store's own
        pool; on a caller's pool, None (the pool's own timeout)."""
        return self.config.connection_timeout.total_seconds() if self._owns_pool else None

    def _no_connection(self, exc: Exception) -> ProcessingError:
        """The error for a failed ``getconn``, saying why."""
        if isinstance(exc, PoolTimeout):
            return ProcessingError(f"no database connection available: {exc}")
        if self._closed and not isinstance(exc, psycopg.Error):  # the pool closed under the call
            return ProcessingError("the store is closed")
        return ProcessingError(f"could not get a database connection: {exc}")


class Executor(PoolState[ConnectionPool[Any]]):
    """Executes SqlCalls for one store: its pool, its config, its closed flag."""

    def __init__(self, pool: ConnectionPool[Any], config: PostgresConfig, *, owns_pool: bool):
        super().__init__(pool, config, owns_pool=owns_pool)
        self._close_lock = threading.Lock()

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self._owns_pool:
            self.pool.close()

    def run(self, call: SqlCall[T]) -> T:
        """Execute ``call`` (one statement) and decode its rows; see the module docstring."""
        self.check_open()
        conn = self._getconn()
        autocommit = conn.autocommit
        keep = False
        try:
            rows, keep = self._execute(conn, call)
        except StoreError as exc:
            keep = not isinstance(exc, ProcessingError)
            raise
        finally:
            self._putconn(conn, keep, autocommit)
        return call.decode(rows)

    def _getconn(self) -> psycopg.Connection[Any]:
        try:
            conn: psycopg.Connection[Any] = self.pool.getconn(self._pool_wait())
        except Exception as exc:
            raise self._no_connection(exc) from exc
        return conn

    def _putconn(self, conn: psycopg.Connection[Any], keep: bool, autocommit: bool) -> None:
        if keep and conn.info.transaction_status == pq.TransactionStatus.IDLE:
            if conn.autocommit != autocommit:  # a caller's pool: give it back as it was
                try:
                    conn.autocommit = autocommit
                except Exception:
                    keep = False
        else:
            keep = False
        if not keep:
            QUIET_DISCARDS.closing(conn)
            with contextlib.suppress(Exception):
                conn.close()
        with contextlib.suppress(Exception):
            self.pool.putconn(conn)

    def _execute(self, conn: psycopg.Connection[Any], call: SqlCall[T]) -> tuple[Rows, bool]:
        """Rows of the call and whether the connection may be reused."""
        if not conn.autocommit:  # a caller's pool: run in autocommit, then put it back
            try:
                conn.autocommit = True
            except psycopg.Error as exc:
                raise ProcessingError(f"{call.name}: connection not idle: {exc}") from exc
        started = time.monotonic()
        watchdog = _WATCHDOGS.arm(conn, self.config.call_timeout.total_seconds())
        try:
            with conn.cursor(row_factory=dict_row) as cursor:
                cursor.execute(call.query, call.params)
                result = cursor.pgresult  # not `description`: it builds a Column per field
                tuples = result is not None and result.status == pq.ExecStatus.TUPLES_OK
                rows = cursor.fetchall() if tuples else []
        except psycopg.Error as exc:
            watchdog.stop()
            store_error = error_for_sqlstate(exc.sqlstate)
            if store_error is not None and not watchdog.fired:
                message = store_message(exc.diag.message_primary or str(exc))
                raise store_error(message) from None
            elapsed = time.monotonic() - started
            if watchdog.fired:
                raise ProcessingError(
                    f"{call.name}: no answer within call_timeout "
                    f"({self.config.call_timeout_ms} ms); connection discarded"
                ) from exc
            raise ProcessingError(
                f"{call.name} failed after {elapsed:.3f}s: {failure_message(exc)}"
            ) from exc
        except BaseException:
            watchdog.stop()
            raise
        watchdog.stop()
        if watchdog.fired:
            # Answered only after the watchdog fired, e.g. a commit whose wait for a synchronous
            # standby the cancel ended ("committed locally"): past call_timeout nothing is
            # acknowledged, so the call fails as every call that reaches its bound does (SPEC §6).
            raise ProcessingError(
                f"{call.name}: no answer within call_timeout "
                f"({self.config.call_timeout_ms} ms); connection discarded"
            )
        return rows, True


class _QuietDiscards(logging.Filter):
    """Drops psycopg_pool's "discarding closed connection" warning for a connection this
    package closed on purpose before handing it back (a failed call's: the pool must get it
    back to free its slot, and has no quieter way to take a closed one). Issue 26 item 5: one
    warning per failed call flooded a full disk's log; any other connection is still logged."""

    def __init__(self) -> None:
        super().__init__()
        self._closed: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()

    def closing(self, conn: Any) -> None:
        with self._lock:
            self._closed.add(conn)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != "discarding closed connection: %s" or not record.args:
            return True
        conn = record.args[0] if isinstance(record.args, tuple) else None
        with self._lock:
            if conn is None or conn not in self._closed:
                return True
            self._closed.discard(conn)
        return False


QUIET_DISCARDS: Final = _QuietDiscards()
logging.getLogger("psycopg.pool").addFilter(QUIET_DISCARDS)


__all__ = [
    "CANCEL_GRACE",
    "QUIET_DISCARDS",
    "Executor",
    "PoolState",
    "failure_message",
    "send_cancel",
    "store_message",
]
