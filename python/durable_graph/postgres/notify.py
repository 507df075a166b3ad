"""LISTEN/NOTIFY for a PostgreSQL store's waiters (SPEC §11): one listener connection per store.

Who waits: idle workers (kind ``queue``), `await_events_after` / `subscribe` (``events`` of a
thread), `await_closed` (``closed`` of an entry). A waiter registers its interest (`watching`),
reads the store, and if it must wait, waits for the kind's *generation* to move (`wait`), at
most its poll interval: polling stays the fallback, so a notification lost, or a listener down,
only delays.

The server notifies only changes someone watches (``migrations/0007.notify.sql``): the listener
keeps the ``watchers`` rows of its waiters' interests (``dg_watch_v1``, one call per change of
the set, and a heartbeat), and lingers a few seconds after the last waiter of an interest left
so that a waiter looping (a worker between jobs, a `subscribe`) does not register again each
time. A registration must be in place before the waiter reads (else a change between the read
and the registration would not be sent): `watching` waits until the listener has written it.

The channel is the schema's name; the payload is the kind alone. Notifications are not routed
to a thread or an entry (they carry neither): every waiter of the kind wakes and reads again.
`Listener` is the blocking one (a thread); `durable_graph.postgres.notify_async` the asyncio one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import select
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import sql

from durable_graph.postgres.calls import statement
from durable_graph.postgres.config import PostgresConfig

log = logging.getLogger("durable_graph.postgres.notify")

KINDS = ("events", "closed", "queue")
LINGER = 5.0
"""Seconds an interest stays registered after its last waiter left."""
TTL = 60.0
"""Seconds a registration counts without a heartbeat (a dead listener stops counting)."""
HEARTBEAT = TTL / 3
RETRY = 1.0
"""Seconds between reconnection attempts of a listener that lost its connection."""
REGISTER_WAIT = 2.0
"""At most this long a waiter waits for its registration; then it just polls."""

APPLICATION_NAME = "durable_graph listener"
"""The listener connection's ``application_name`` (one per store, in ``pg_stat_activity``)."""

Interest = tuple[str, str]  # (kind, key)


class Interests:
    """The waiters' interests, counted, with their linger (no I/O; the caller holds a lock)."""

    def __init__(self) -> None:
        self._count: dict[Interest, int] = {}
        self._left: dict[Interest, float] = {}
        self.version = 0
        """Increases whenever the set to register grows or shrinks."""

    def add(self, interest: Interest) -> None:
        n = self._count.get(interest, 0)
        self._count[interest] = n + 1
        if n == 0 and self._left.pop(interest, None) is None:
            self.version += 1  # new (not lingering): it must be registered

    def remove(self, interest: Interest, now: float) -> None:
        n = self._count.get(interest, 0) - 1
        if n > 0:
            self._count[interest] = n
            return
        self._count.pop(interest, None)
        self._left[interest] = now

    def wanted(self, now: float) -> list[Interest]:
        """The set to register: interests with waiters, or left less than `LINGER` ago."""
        expired = [i for i, t in self._left.items() if now - t >= LINGER]
        for interest in expired:
            del self._left[interest]
        if expired:
            self.version += 1
        return sorted({*self._count, *self._left})

    def next_expiry(self, now: float) -> float | None:
        """Seconds until a lingering interest expires; None when none lingers."""
        if not self._left:
            return None
        return max(0.0, min(self._left.values()) + LINGER - now)

    def __bool__(self) -> bool:
        return bool(self._count or self._left)


def watch_call(schema: str, listener: str, wanted: list[Interest]) -> tuple[bytes, tuple[Any, ...]]:
    """The ``dg_watch_v1`` statement registering ``wanted`` for ``listener``."""
    query = statement(schema, "dg_watch_v1", ("text", "text[]", "text[]", "interval"))
    params = (listener, [k for k, _ in wanted], [key for _, key in wanted], f"{TTL} seconds")
    return query, params


def listen_query(schema: str) -> bytes:
    return sql.SQL("LISTEN {}").format(sql.Identifier(schema)).as_bytes(None)


def received(
    conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any], pending: set[str]
) -> set[str]:
    """The kinds notified since the last look: ``pending`` (filled by the connection's notify
    handler while a statement ran), then what the socket holds, read without blocking."""
    pgconn = conn.pgconn
    pgconn.consume_input()
    while (n := pgconn.notifies()) is not None:
        pending.add(n.extra.decode("utf-8", "replace"))
    kinds = pending & set(KINDS)
    pending.clear()
    return kinds


class Listener:
    """A store's LISTEN connection and its waiters (blocking API; a daemon thread listens).

    Started by the first waiter; ends with `close`. Connection failures are logged and retried
    every `RETRY` seconds while someone waits; meanwhile waiters poll.
    """

    def __init__(self, conninfo: str, config: PostgresConfig) -> None:
        self._conninfo = conninfo
        self._config = config
        self._id = secrets.token_hex(16)  # not uuid4: an app may patch it (LangGraph's tests do)
        self._lock = threading.Lock()
        self._interests = Interests()
        self._registered = -1  # the interests' version last written
        self._registered_cond = threading.Condition(self._lock)
        self._gens = dict.fromkeys(KINDS, 0)
        self._waiters: dict[str, set[threading.Event]] = {k: set() for k in KINDS}
        self._thread: threading.Thread | None = None
        self._pending: set[str] = set()  # kinds psycopg received while a statement ran
        self._closed = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    # --- what waiters call --------------------------------------------------------------------

    def generation(self, kind: str) -> int:
        with self._lock:
            return self._gens[kind]

    @contextlib.contextmanager
    def watching(self, kind: str, key: str = "") -> Iterator[None]:
        """Keep (kind, key) registered while inside; registered (or given up on) at entry."""
        interest = (kind, key)
        with self._lock:
            closed = self._closed
            if not closed:
                self._interests.add(interest)
                version = self._interests.version
                self._start_locked()
        if closed:  # the store's calls raise ProcessingError (rule 8)
            yield
            return
        self._poke()
        try:
            with self._lock:
                self._registered_cond.wait_for(
                    lambda: self._registered >= version or self._closed, REGISTER_WAIT
                )
            yield
        finally:
            with self._lock:
                self._interests.remove(interest, time.monotonic())
            self._poke()

    def wait(
        self, kind: str, generation: int, timeout: float, wake: threading.Event | None = None
    ) -> None:
        """Return once ``kind``'s generation moved past ``generation``, ``wake`` is set, or after
        ``timeout`` seconds."""
        event = wake if wake is not None else threading.Event()
        with self._lock:
            if self._gens[kind] != generation or self._closed:
                return
            self._waiters[kind].add(event)
        try:
            event.wait(max(0.0, timeout))
        finally:
            with self._lock:
                self._waiters[kind].discard(event)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            self._registered_cond.notify_all()
            for events in self._waiters.values():
                for event in events:
                    event.set()
        self._poke()
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)
        with self._lock:
            if thread is not None and thread.is_alive():
                return  # still reading the pipe: leave it open (a daemon thread, it ends soon)
            fds, self._wake_r, self._wake_w = (self._wake_r, self._wake_w), -1, -1
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    # --- the listening thread -----------------------------------------------------------------

    def _start_locked(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="dg-listen", daemon=True)
            self._thread.start()

    def _poke(self) -> None:
        with self._lock:  # never after close: the descriptor number may name another file
            if self._wake_w < 0:
                return
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"x")

    def _bump(self, kinds: set[str]) -> None:
        with self._lock:
            for kind in kinds:
                self._gens[kind] += 1
                for event in self._waiters[kind]:
                    event.set()

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed or not self._interests:
                    self._thread = None
                    return
            try:
                self._listen()
            except Exception as exc:  # the connection failed: waiters poll meanwhile
                log.warning("notification listener of %s: %s", self._config.schema, exc)
                self._bump(set(KINDS))  # everyone reads again now
                time.sleep(RETRY)

    def _listen(self) -> None:
        kwargs = self._config.connection_kwargs()
        with psycopg.connect(self._conninfo, application_name=APPLICATION_NAME, **kwargs) as conn:
            self._pending.clear()
            conn.add_notify_handler(lambda n: self._pending.add(n.payload))
            conn.execute(listen_query(self._config.schema))
            self._bump(set(KINDS))  # anything sent before LISTEN was missed: read again
            written: list[Interest] | None = None
            beat = 0.0
            while True:
                now = time.monotonic()
                with self._lock:
                    if self._closed:
                        with contextlib.suppress(Exception):
                            conn.execute(*watch_call(self._config.schema, self._id, []))
                        return
                    wanted = self._interests.wanted(now)
                    version = self._interests.version
                    linger = self._interests.next_expiry(now)
                if wanted != written or now - beat >= HEARTBEAT:
                    conn.execute(*watch_call(self._config.schema, self._id, wanted))
                    written, beat = wanted, now
                    self._bump(self._received(conn))
                    with self._lock:
                        self._registered = version
                        self._registered_cond.notify_all()
                    if not wanted:
                        return  # nobody waits: the thread ends; the next waiter starts one
                timeout = HEARTBEAT - (time.monotonic() - beat)
                if linger is not None:
                    timeout = min(timeout, linger + 0.01)
                readable, _, _ = select.select([conn.fileno(), self._wake_r], [], [], timeout)
                if self._wake_r in readable:
                    with contextlib.suppress(OSError):
                        os.read(self._wake_r, 4096)
                if conn.fileno() in readable:
                    self._bump(self._received(conn))

    def _received(self, conn: psycopg.Connection[Any]) -> set[str]:
        """The kinds notified since the last look (see `received`)."""
        return received(conn, self._pending)


__all__ = ["APPLICATION_NAME", "KINDS", "Interests", "Listener", "listen_query", "watch_call"]
