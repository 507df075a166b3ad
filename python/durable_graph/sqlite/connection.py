"""SQLite connections, transactions and the file: one connection per (store, OS thread), the two
transaction kinds, the closed state, and opening (create, check, read-only).

- **One transaction per call.** A write starts with ``BEGIN IMMEDIATE``: the write lock is taken
  up front, so the checks a call makes still hold when it writes. The wait is bounded by
  `SqliteConfig.busy_timeout` (D23). A read is one deferred transaction: one snapshot of the WAL
  that never waits for writers.
- **Journal.** WAL mode with ``synchronous=FULL`` by default: a call that returned survives a
  power loss; ``"NORMAL"`` only a process crash.
- **Files** are created mode ``0600``; SQLite gives the ``-wal`` and ``-shm`` files the mode of
  the database file.
- **Errors.** Every ``sqlite3`` error becomes a `ProcessingError` whose ``__cause__`` is the
  driver's exception.
- **Close.** `close()` refuses new calls, waits (bounded) for calls in flight, then closes every
  connection; afterwards every method raises `ProcessingError`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import urllib.parse
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import timedelta
from importlib import resources
from typing import Final, Literal

from durable_graph._version import __version__
from durable_graph.core.errors import ProcessingError, StoreBusy, ValidationError
from durable_graph.core.validation import (
    DEFAULT_MAX_VALUE_BYTES,
    INT32_MAX,
    check_duration,
    check_max_value_bytes,
    from_posix,
    to_micros,
)
from durable_graph.sqlite.storage import SqliteTx

_BUSY: Final = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
"""The error codes of a write lock that stayed taken past the busy timeout."""


def _busy(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` is SQLite's busy or locked answer (its primary code, `_BUSY`)."""
    return (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF in _BUSY


SCHEMA_VERSION: Final = 12
"""``PRAGMA user_version`` of a file this code creates. Version 1 files (table names of before
the embedded rule set), version 2 files (before delayed runs, retries and attempt errors),
version 3 files (before stored trace contexts), version 4 files (before pending writes' task
paths), version 5 files (before fixed listing places), version 6 files (before scheduling),
version 7 files (before the worker registry), version 8 files (before the item store) and
version 9 files (before thread deletion times) and version 10 files (before thread TTLs) are
migrated on open; `open` refuses a newer file."""


@dataclass(frozen=True, slots=True)
class SqliteConfig:
    """How a `SqliteCheckpointer` uses its file.

    ``busy_timeout`` bounds every wait for the write lock (D23), rounded up to whole
    milliseconds. ``max_value_bytes`` limits each JSON value (rule 5). ``synchronous`` is
    SQLite's ``PRAGMA synchronous`` in WAL mode: ``"FULL"`` (default) makes every returned write
    survive a power loss, ``"NORMAL"`` only a process crash. ``read_only=True`` opens an existing
    store at the current version read-only: nothing is created, converted or migrated, and every
    write method raises `ProcessingError`.
    """

    busy_timeout: timedelta = timedelta(seconds=5)
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES
    synchronous: Literal["NORMAL", "FULL"] = "FULL"
    read_only: bool = False

    def __post_init__(self) -> None:
        check_duration("busy_timeout", self.busy_timeout)
        if _ceil_ms(self.busy_timeout) > INT32_MAX:
            raise ValidationError(f"busy_timeout must be at most {INT32_MAX} ms")
        check_max_value_bytes(self.max_value_bytes)
        if self.synchronous not in ("NORMAL", "FULL"):
            raise ValidationError(
                f"synchronous must be 'NORMAL' or 'FULL', got {self.synchronous!r}"
            )
        if not isinstance(self.read_only, bool):
            raise ValidationError(f"read_only must be a bool, got {type(self.read_only).__name__}")

    @property
    def busy_timeout_ms(self) -> int:
        return _ceil_ms(self.busy_timeout)


def _ceil_ms(value: timedelta) -> int:
    return -(-(value // timedelta(microseconds=1)) // 1000)


class _Held:
    """An OS thread's connection. The thread's ``threading.local`` holds the only strong
    reference: when the thread ends, the holder is dropped and closes the connection (the
    driver's implicit close on garbage collection keeps the files open)."""

    __slots__ = ("__weakref__", "conn")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __del__(self) -> None:
        with suppress(Exception):
            self.conn.close()


class SqliteStorage:
    """The `Storage` of the SQLite store."""

    def __init__(self, path: str, config: SqliteConfig, clock: Callable[[], float]) -> None:
        self.path = path
        self.config = config
        self.clock = clock
        self._local = threading.local()
        self._cond = threading.Condition()
        self._connections: weakref.WeakSet[_Held] = weakref.WeakSet()
        self._in_flight = 0
        self._closed = False
        self._changed = threading.Event()

    @property
    def max_value_bytes(self) -> int:
        return self.config.max_value_bytes

    @property
    def rolls_back(self) -> bool:
        return True  # a composed call is one BEGIN IMMEDIATE transaction

    def connect(self) -> sqlite3.Connection:
        target, uri = self.path, False
        if self.config.read_only:
            target, uri = f"file:{urllib.parse.quote(os.path.abspath(self.path))}?mode=ro", True
        conn = sqlite3.connect(
            target,
            timeout=self.config.busy_timeout_ms / 1000,
            isolation_level=None,  # we issue BEGIN / COMMIT ourselves
            check_same_thread=False,  # close() may close it from another thread
            uri=uri,
        )
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {self.config.busy_timeout_ms}")
            conn.execute(f"PRAGMA synchronous = {self.config.synchronous}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _connection(self) -> sqlite3.Connection:
        held: _Held | None = getattr(self._local, "held", None)
        if held is None:
            held = _Held(self.connect())
            with self._cond:
                self._connections.add(held)
            self._local.held = held
        return held.conn

    def _discard(self, conn: sqlite3.Connection) -> None:
        """Forget this thread's connection (after a failed rollback) and close it."""
        held: _Held | None = getattr(self._local, "held", None)
        if held is not None and held.conn is conn:
            with self._cond:
                self._connections.discard(held)
            self._local.held = None
        with suppress(sqlite3.Error):
            conn.close()

    # --- lifecycle ------------------------------------------------------------------------

    def check_open(self) -> None:
        if self._closed:
            raise ProcessingError("the store is closed")

    def _enter(self) -> None:
        with self._cond:
            self.check_open()
            self._in_flight += 1

    def _exit(self) -> None:
        with self._cond:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._notify()
            # A call in flight ends within its busy timeout; give it that and a margin.
            deadline = time.monotonic() + self.config.busy_timeout_ms / 1000 + 5
            while self._in_flight > 0 and (remaining := deadline - time.monotonic()) > 0:
                self._cond.wait(remaining)
            held = list(self._connections)
            self._connections.clear()
        for h in held:
            with suppress(sqlite3.Error):
                h.conn.close()

    # --- waits ----------------------------------------------------------------------------

    def change_signal(self) -> threading.Event:
        """Set by the next write of this store object; other processes are seen by polling."""
        return self._changed

    def _notify(self) -> None:
        changed, self._changed = self._changed, threading.Event()
        changed.set()

    # --- transactions ---------------------------------------------------------------------

    @contextmanager
    def write(self) -> Iterator[SqliteTx]:
        """One write transaction: the lock taken up front (bounded), then store-now read once."""
        if self.config.read_only:
            self.check_open()
            raise ProcessingError(f"{self.path} is open read-only: this call writes")
        joined: SqliteTx | None = getattr(self._local, "tx", None)
        if joined is not None:  # a step of a composed call: its transaction (SPEC §11)
            yield joined
            return
        try:
            with self._transaction("BEGIN IMMEDIATE") as conn:
                # D4: store time is read once, the lock held.
                yield SqliteTx(conn, to_micros(from_posix(self.clock())))
        finally:
            self._notify()

    @contextmanager
    def composed(self, undo: bool = False) -> Iterator[None]:
        """One write transaction that this thread's `write` and `read` join until it ends; an
        error rolls every step back (``undo`` is what a transaction does anyway)."""
        with self.write() as tx:
            if getattr(self._local, "tx", None) is not None:
                yield
                return
            self._local.tx = tx
            try:
                yield
            finally:
                self._local.tx = None

    @contextmanager
    def read(self) -> Iterator[SqliteTx]:
        """One snapshot (a deferred transaction); never waits for writers in WAL mode."""
        joined: SqliteTx | None = getattr(self._local, "tx", None)
        if joined is not None:
            yield joined
            return
        with self._transaction("BEGIN") as conn:
            yield SqliteTx(conn, to_micros(from_posix(self.clock())))

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        self._enter()
        try:
            conn = self._connection()
            try:
                conn.execute(begin)
            except sqlite3.OperationalError as exc:
                if _busy(exc):  # nothing done
                    raise StoreBusy(f"could not begin a transaction: {exc}") from exc
                raise ProcessingError(f"could not begin a transaction: {exc}") from exc
            except sqlite3.Error as exc:
                raise ProcessingError(f"could not begin a transaction: {exc}") from exc
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                self._rollback(conn)
                if isinstance(exc, sqlite3.Error):
                    raise ProcessingError(f"the database failed: {exc}") from exc
                raise
        except sqlite3.Error as exc:
            raise ProcessingError(f"the database failed: {exc}") from exc
        finally:
            self._exit()

    def _rollback(self, conn: sqlite3.Connection) -> None:
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error:
            self._discard(conn)


_V1_TABLES: Final = (
    "counters", "threads", "claims", "tombstones", "checkpoints", "writes", "events", "effects",
    "entries", "attempts",
)  # fmt: skip
"""The tables of a version-1 file, renamed ``v1_<name>`` before ``migrate_v1.sql`` copies them."""


_FROM_SCHEMA_SQL: Final = (
    "migrate_v6.sql",
    "migrate_v7.sql",
    "migrate_v8.sql",
    "migrate_v9.sql",
    "migrate_v10.sql",
    "migrate_v11.sql",
)
"""The steps from schema.sql's version (6) to `SCHEMA_VERSION`."""


def _script(name: str) -> list[str]:
    """The statements of a packaged ``.sql`` file (separated by lines holding only ';')."""
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    return [s.strip() for s in text.split("\n;") if s.strip() and not _only_comments(s)]


def _only_comments(statement: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in statement.splitlines())


def _create_private(path: str) -> None:
    """Create the file ``0600`` when missing, so the store and its -wal/-shm are private."""
    with suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def open_storage(path: str, config: SqliteConfig, clock: Callable[[], float]) -> SqliteStorage:
    """Open the file: create it and its schema, migrate a version-1 file, or check it
    (read-only: check only)."""
    storage = SqliteStorage(path, config, clock)
    if config.read_only:
        _check_read_only(storage)
        return storage
    try:
        _create_private(path)
    except OSError as exc:
        raise ProcessingError(f"could not open {path}: {exc}") from exc
    # Processes opening a new file together meet in SQLite's deadlock avoidance: switching to
    # WAL or upgrading a read lock answers SQLITE_BUSY at once, without the busy handler. Each
    # try rolls back whole, so it is tried again until the busy timeout has passed.
    deadline = time.monotonic() + config.busy_timeout_ms / 1000
    while True:
        try:
            _prepare(storage)
            return storage
        except sqlite3.OperationalError as exc:
            if not _busy(exc):
                raise ProcessingError(f"could not open {path}: {exc}") from exc
            if time.monotonic() >= deadline:
                raise StoreBusy(f"could not open {path}: {exc}") from exc
            time.sleep(0.01)
        except sqlite3.Error as exc:
            raise ProcessingError(f"could not open {path}: {exc}") from exc


def _prepare(storage: SqliteStorage) -> None:
    """One try at switching the file to WAL and creating or migrating its schema: one
    transaction, rolled back whole on any error."""
    path = storage.path
    conn = storage.connect()
    try:
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise ProcessingError(f"could not switch {path} to WAL mode (it is in {mode!r})")
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            _check_not_newer(path, version)
            # schema.sql is version 6; migrate_v6.sql (SPEC §15 scheduling) takes it to 7,
            # migrate_v7.sql (the worker registry) to 8, migrate_v8.sql (the item store) to 9,
            # migrate_v9.sql (thread deletion times, D241) to 10, migrate_v10.sql (thread TTLs)
            # to 11, migrate_v11.sql (item vectors) to 12.
            if version == 0:
                for statement in [
                    s for name in ("schema.sql", *_FROM_SCHEMA_SQL) for s in _script(name)
                ]:
                    conn.execute(statement)
            elif version == 1:
                for table in _V1_TABLES:
                    conn.execute(f"ALTER TABLE {table} RENAME TO v1_{table}")
                steps = ["schema.sql", "migrate_v1.sql", *_FROM_SCHEMA_SQL, "fill_open_since.sql"]
                for statement in [s for name in steps for s in _script(name)]:
                    conn.execute(statement)
            elif version < SCHEMA_VERSION:
                # migrate_vN.sql takes a file from version N to N + 1; then every open entry
                # joins its thread's listing stretch (D65).
                later = [f"migrate_v{n}.sql" for n in range(version, SCHEMA_VERSION)]
                later.append("fill_open_since.sql")
                for statement in [s for name in later for s in _script(name)]:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()


def _check_not_newer(path: str, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise ProcessingError(
            f"{path} is at schema version {version}, newer than this durable_graph "
            f"understands ({SCHEMA_VERSION}, durable-graph {__version__}): older code never "
            "opens or migrates a newer file; upgrade durable_graph to open it"
        )


def _check_read_only(storage: SqliteStorage) -> None:
    path = storage.path
    if not os.path.isfile(path):
        raise ProcessingError(f"{path} is not a durable_graph store: no such file")
    try:
        conn = storage.connect()
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise ProcessingError(f"could not open {path} read-only: {exc}") from exc
    _check_not_newer(path, version)
    if version != SCHEMA_VERSION:
        raise ProcessingError(
            f"{path} is at schema version {version}, not {SCHEMA_VERSION}: open it once "
            "without read_only to create or migrate it"
        )


__all__ = ["SCHEMA_VERSION", "SqliteConfig", "SqliteStorage", "open_storage"]
