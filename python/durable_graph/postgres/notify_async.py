"""The asyncio twin of `durable_graph.postgres.notify.Listener`: one LISTEN connection per async
store, read by a task on the store's event loop (no thread), for `await_events_after`,
`subscribe`, `await_closed` and idle `AsyncWorker`s (SPEC §11). Same registrations, linger and
fallback as the blocking listener (see that module).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator

import psycopg

from durable_graph.postgres.config import PostgresConfig
from durable_graph.postgres.notify import (
    APPLICATION_NAME,
    HEARTBEAT,
    KINDS,
    REGISTER_WAIT,
    RETRY,
    Interests,
    listen_query,
    received,
    watch_call,
)

log = logging.getLogger("durable_graph.postgres.notify")


class AsyncListener:
    """A store's LISTEN connection and its waiters on one event loop."""

    def __init__(self, conninfo: str, config: PostgresConfig) -> None:
        self._conninfo = conninfo
        self._config = config
        self._id = secrets.token_hex(16)  # not uuid4: an app may patch it (LangGraph's tests do)
        self._interests = Interests()
        self._registered = -1
        self._gens = dict.fromkeys(KINDS, 0)
        self._waiters: dict[str, set[asyncio.Event]] = {k: set() for k in KINDS}
        self._registrations: set[asyncio.Event] = set()
        self._poke = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def generation(self, kind: str) -> int:
        return self._gens[kind]

    @contextlib.asynccontextmanager
    async def watching(self, kind: str, key: str = "") -> AsyncIterator[None]:
        """Keep (kind, key) registered while inside; registered (or given up on) at entry."""
        if self._closed:
            yield
            return
        interest = (kind, key)
        self._interests.add(interest)
        version = self._interests.version
        self._start()
        try:
            if self._registered < version:
                done = asyncio.Event()
                self._registrations.add(done)
                try:
                    deadline = time.monotonic() + REGISTER_WAIT
                    while self._registered < version and not self._closed:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            break
                        done.clear()
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(done.wait(), remaining)
                finally:
                    self._registrations.discard(done)
            yield
        finally:
            self._interests.remove(interest, time.monotonic())
            self._poke.set()

    async def wait(
        self, kind: str, generation: int, timeout: float, wake: asyncio.Event | None = None
    ) -> None:
        """Return once ``kind``'s generation moved past ``generation``, ``wake`` is set, or
        after ``timeout`` seconds."""
        if self._gens[kind] != generation or self._closed:
            return
        event = wake if wake is not None else asyncio.Event()
        self._waiters[kind].add(event)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), max(0.0, timeout))
        finally:
            self._waiters[kind].discard(event)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._wake_everyone()
        self._poke.set()
        task = self._task
        if task is not None and not task.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(task), 5)
            if not task.done():
                task.cancel()

    # --- the listening task -------------------------------------------------------------------

    def _start(self) -> None:
        self._poke.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="dg-listen-async")

    def _wake_everyone(self) -> None:
        for events in (*self._waiters.values(), self._registrations):
            for event in events:
                event.set()

    def _bump(self, kinds: set[str]) -> None:
        for kind in kinds:
            self._gens[kind] += 1
            for event in self._waiters[kind]:
                event.set()

    async def _run(self) -> None:
        while not self._closed and self._interests:
            try:
                await self._listen()
            except Exception as exc:  # the connection failed: waiters poll meanwhile
                log.warning("notification listener of %s: %s", self._config.schema, exc)
                self._bump(set(KINDS))
                await asyncio.sleep(RETRY)

    async def _listen(self) -> None:
        kwargs = self._config.connection_kwargs()
        conn = await psycopg.AsyncConnection.connect(
            self._conninfo, application_name=APPLICATION_NAME, **kwargs
        )
        loop = asyncio.get_running_loop()
        readable = asyncio.Event()
        fd = conn.pgconn.socket
        pending: set[str] = set()
        conn.add_notify_handler(lambda n: pending.add(n.payload))
        try:
            await conn.execute(listen_query(self._config.schema))
            self._bump(set(KINDS))  # anything sent before LISTEN was missed: read again
            written: list[tuple[str, str]] | None = None
            beat = 0.0
            while True:
                now = time.monotonic()
                if self._closed:
                    with contextlib.suppress(Exception):
                        await conn.execute(*watch_call(self._config.schema, self._id, []))
                    return
                wanted = self._interests.wanted(now)
                version = self._interests.version
                linger = self._interests.next_expiry(now)
                self._poke.clear()
                if wanted != written or now - beat >= HEARTBEAT:
                    await conn.execute(*watch_call(self._config.schema, self._id, wanted))
                    written, beat = wanted, now
                    self._registered = version
                    for done in self._registrations:
                        done.set()
                    self._bump(received(conn, pending))
                    if not wanted:
                        return  # nobody waits: the task ends; the next waiter starts one
                timeout = HEARTBEAT - (time.monotonic() - beat)
                if linger is not None:
                    timeout = min(timeout, linger + 0.01)
                # psycopg's own waits take the socket's reader over and drop it: arm ours now.
                loop.add_reader(fd, readable.set)
                poked = asyncio.ensure_future(self._poke.wait())
                ready = asyncio.ensure_future(readable.wait())
                try:
                    await asyncio.wait(
                        {poked, ready},
                        timeout=max(0.0, timeout),
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                finally:
                    poked.cancel()
                    ready.cancel()
                loop.remove_reader(fd)
                if readable.is_set():
                    readable.clear()
                    self._bump(received(conn, pending))
        finally:
            with contextlib.suppress(Exception):
                loop.remove_reader(fd)
            with contextlib.suppress(Exception):
                await conn.close()


__all__ = ["AsyncListener"]
