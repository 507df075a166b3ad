"""The SQLite backend: the embedded default, one machine, no server (SPEC §4-§5).

One database file holds both halves: the checkpointer's threads, claims, tombstones, checkpoints,
pending writes, events and effects, and the run queue's entries and attempts. Many threads and
many processes may open the same file.

How it keeps the contract:

- **One transaction per call.** Every write starts with ``BEGIN IMMEDIATE``: the database's write
  lock is taken up front, so the checks a call makes still hold when it writes. The lock wait is
  bounded by `SqliteConfig.busy_timeout` (D23): a call that cannot get the lock in time raises
  `ProcessingError` and has changed nothing. Reads run in one deferred transaction: a single
  snapshot of the WAL that never waits for writers.
- **Journal.** WAL mode (readers and the writer do not block each other) with
  ``synchronous=FULL`` by default: a call that returned (``record_attempt`` above all, SPEC §5)
  survives a power loss, not only a process crash. ``SqliteConfig(synchronous="NORMAL")`` trades
  that for speed (a crash of the process still loses nothing; a power loss may lose the last
  transactions).
- **Store time** (D4) is the injectable ``clock``, read once per write after ``BEGIN IMMEDIATE``
  holds the lock; timestamps are integer microseconds since the epoch (`validation.to_micros`),
  so ordering and equality are exact.
- **Values** are stored as compact JSON text from `validation.encode_json` and decoded on every
  read, so reads return fresh objects. Nothing is pickled.
- **Tokens** come from one counter row shared by claims and leases (D3); entry ids are
  ``AUTOINCREMENT`` (never reused, even after `reclaim`); a deleted thread leaves a
  ``tombstones`` row with its last seq, so a new thread of that id continues the numbering.
- **Errors.** Every ``sqlite3`` error becomes a `ProcessingError` whose ``__cause__`` is the
  driver's exception.
- **Connections.** One connection per (store, OS thread), opened on first use. `close()` refuses
  new calls, waits (bounded) for calls in flight, then closes every connection; afterwards every
  method raises `ProcessingError`.

The algorithm is `durable_graph.memory`'s, told again in SQL: the same methods in the same order,
the same check order, and the same helper names — memory's `_State` helpers are `_Tx` methods
here (`current_claim`, `existing_thread`, `leasable_head`, `record_attempt`, ...), and the tables
are named after memory's rows.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Final, Literal, Self

from .errors import (
    ClaimLost,
    DuplicateCheckpoint,
    EntryClosed,
    LeaseLost,
    NotFound,
    ProcessingError,
    RunIdTaken,
    RunOfDeletedThread,
    StaleParent,
    SubmissionKeyReused,
    ThreadBusy,
    ValidationError,
)
from .fast_path import EmbeddedFastPath
from .model import (
    ANY,
    Attempt,
    AttemptStart,
    Cancelled,
    Checkpoint,
    Claim,
    ClaimPolicy,
    Commit,
    EffectRecord,
    EntryOutcome,
    Event,
    EventIn,
    Exhausted,
    Interrupted,
    Lease,
    Mode,
    PendingWrite,
    PruneResult,
    QueueEntry,
    RetentionPolicy,
    Started,
    Submission,
    TenantFilter,
    ThreadDeleted,
    ThreadInfo,
    Ticket,
    WatchPolicy,
)
from .polling import follow, poll
from .validation import (
    DEFAULT_MAX_VALUE_BYTES,
    INT32_MAX,
    INT64_MAX,
    EncodedEvent,
    check_claim,
    check_claim_policy,
    check_clock,
    check_commit,
    check_duration,
    check_events,
    check_identifier,
    check_int,
    check_lease,
    check_max_value_bytes,
    check_optional_identifier,
    check_retention,
    check_run_ids,
    check_submission,
    check_tenant_filter,
    check_watch,
    check_writes,
    decode_json,
    decode_outcome,
    encode_json,
    encode_outcome,
    from_micros,
    from_posix,
    to_micros,
)

SCHEMA_VERSION: Final = 1
"""``PRAGMA user_version`` of a file this code creates; `open` refuses a newer file."""

_STORE_PAYLOAD_LIMIT: Final = INT64_MAX
"""The store's own payloads (ids only) are not subject to ``max_value_bytes``."""

THREAD_BUSY_CLAIM: Final = "thread has a live claim"
THREAD_BUSY_ENTRY: Final = "thread has an open entry"

_AWAIT_CLOSED_POLL: Final = WatchPolicy().poll_interval.total_seconds()
"""How often `await_closed` reads the entry (it takes no `WatchPolicy`; D21: it polls)."""

_SCHEMA: Final[tuple[str, ...]] = (
    # One counter for claims and leases (D3), and the order of first commits (`children`).
    """
    CREATE TABLE counters (
        name  TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    ) WITHOUT ROWID
    """,
    "INSERT INTO counters (name, value) VALUES ('token', 0), ('first_commit', 0)",
    # A thread exists from its first commit until it is deleted (D6).
    """
    CREATE TABLE threads (
        thread_id          TEXT PRIMARY KEY,
        parent_thread_id   TEXT,
        created_at         INTEGER NOT NULL,
        updated_at         INTEGER NOT NULL,
        last_seq           INTEGER NOT NULL,
        first_commit_order INTEGER NOT NULL,
        head_id            TEXT
    ) WITHOUT ROWID
    """,
    "CREATE INDEX threads_by_parent ON threads (parent_thread_id, first_commit_order)",
    # The thread's current claim, live or expired; no row when none (released, deleted).
    """
    CREATE TABLE claims (
        thread_id  TEXT PRIMARY KEY,
        token      INTEGER NOT NULL,
        holder     TEXT NOT NULL,
        expires_at INTEGER NOT NULL,
        ttl        INTEGER NOT NULL
    ) WITHOUT ROWID
    """,
    # The last seq of a deleted thread: a new thread of the id continues from it.
    """
    CREATE TABLE tombstones (
        thread_id TEXT PRIMARY KEY,
        last_seq  INTEGER NOT NULL
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE checkpoints (
        thread_id     TEXT NOT NULL,
        seq           INTEGER NOT NULL,
        checkpoint_id TEXT NOT NULL,
        parent_id     TEXT,
        run_id        TEXT NOT NULL,
        state         TEXT NOT NULL,
        metadata      TEXT NOT NULL,
        next          TEXT NOT NULL,
        created_at    INTEGER NOT NULL,
        committed_at  INTEGER NOT NULL,
        PRIMARY KEY (thread_id, seq)
    ) WITHOUT ROWID
    """,
    "CREATE UNIQUE INDEX checkpoints_by_id ON checkpoints (thread_id, checkpoint_id)",
    "CREATE INDEX checkpoints_by_run ON checkpoints (thread_id, run_id, seq)",
    # Pending writes; rowid keeps insertion order for ties of (task_id, idx) (rule 12).
    """
    CREATE TABLE writes (
        thread_id     TEXT NOT NULL,
        checkpoint_id TEXT NOT NULL,
        task_id       TEXT NOT NULL,
        channel       TEXT NOT NULL,
        idx           INTEGER NOT NULL,
        value         TEXT NOT NULL,
        UNIQUE (thread_id, checkpoint_id, task_id, channel, idx)
    )
    """,
    """
    CREATE TABLE events (
        thread_id    TEXT NOT NULL,
        seq          INTEGER NOT NULL,
        kind         TEXT NOT NULL,
        payload      TEXT NOT NULL,
        run_id       TEXT,
        created_at   INTEGER NOT NULL,
        committed_at INTEGER NOT NULL,
        PRIMARY KEY (thread_id, seq)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE effects (
        thread_id   TEXT NOT NULL,
        key         TEXT NOT NULL,
        value       TEXT NOT NULL,
        run_id      TEXT,
        recorded_at INTEGER NOT NULL,
        PRIMARY KEY (thread_id, key)
    ) WITHOUT ROWID
    """,
    # Kept queue entries (open or closed, not reclaimed). lease_* is the current lease, live or
    # expired; NULL when none (released, closed, ended by a lease of another entry).
    """
    CREATE TABLE entries (
        entry_id         INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant           TEXT,
        thread_id        TEXT NOT NULL,
        key              TEXT,
        input            TEXT NOT NULL,
        mode             TEXT NOT NULL,
        max_attempts     INTEGER NOT NULL,
        attempt_count    INTEGER NOT NULL DEFAULT 0,
        admitted         INTEGER NOT NULL DEFAULT 0,
        thread_deleted   INTEGER NOT NULL DEFAULT 0,
        submitted_at     INTEGER NOT NULL,
        lease_token      INTEGER,
        lease_holder     TEXT,
        lease_expires_at INTEGER,
        lease_ttl        INTEGER,
        outcome_kind     TEXT,
        outcome_detail   TEXT,
        closed_at        INTEGER,
        closed_at_seq    INTEGER
    )
    """,
    "CREATE INDEX entries_open ON entries (thread_id, entry_id) WHERE outcome_kind IS NULL",
    "CREATE INDEX entries_by_thread ON entries (thread_id)",
    "CREATE INDEX entries_by_key ON entries (key, tenant) WHERE key IS NOT NULL",
    "CREATE INDEX entries_closed ON entries (closed_at, entry_id) WHERE outcome_kind IS NOT NULL",
    """
    CREATE TABLE attempts (
        entry_id   INTEGER NOT NULL,
        number     INTEGER NOT NULL,
        thread_id  TEXT NOT NULL,
        run_id     TEXT NOT NULL,
        started_at INTEGER NOT NULL,
        PRIMARY KEY (entry_id, number)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX attempts_by_run ON attempts (thread_id, run_id)",
)

_QUEUE_ORDER: Final = """
    SELECT q.*,
           FIRST_VALUE(q.entry_id) OVER (
               PARTITION BY q.thread_id ORDER BY q.queue_rank, q.entry_id
           ) AS head_entry_id
    FROM (
        SELECT entries.*,
               CASE WHEN attempt_count > 0 THEN 0 WHEN mode = 'interrupt' THEN 1 ELSE 2 END
                   AS queue_rank
        FROM entries
        WHERE outcome_kind IS NULL
    ) AS q
"""
"""Open entries with their queue rank and their thread's head: memory's `queue_order_key` and
`open_entries_of` / `leasable_head` (SPEC §5 Order: entries that recorded an attempt, then INTERRUPT, then the rest, each
by entry id; the head is computed over every tenant, rule 18)."""


# --- configuration -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SqliteConfig:
    """How a `SqliteCheckpointer` uses its file.

    ``busy_timeout`` bounds every wait for the write lock (D23), rounded up to whole
    milliseconds. ``max_value_bytes`` limits each JSON value (rule 5). ``synchronous`` is
    SQLite's ``PRAGMA synchronous`` in WAL mode: ``"FULL"`` (default) makes every returned write
    survive a power loss, ``"NORMAL"`` only a process crash.
    """

    busy_timeout: timedelta = timedelta(seconds=5)
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES
    synchronous: Literal["NORMAL", "FULL"] = "FULL"

    def __post_init__(self) -> None:
        check_duration("busy_timeout", self.busy_timeout)
        if _ceil_ms(self.busy_timeout) > INT32_MAX:
            raise ValidationError(f"busy_timeout must be at most {INT32_MAX} ms")
        check_max_value_bytes(self.max_value_bytes)
        if self.synchronous not in ("NORMAL", "FULL"):
            raise ValidationError(
                f"synchronous must be 'NORMAL' or 'FULL', got {self.synchronous!r}"
            )

    @property
    def busy_timeout_ms(self) -> int:
        return _ceil_ms(self.busy_timeout)


def _ceil_ms(value: timedelta) -> int:
    return -(-_micros(value) // 1000)


def _micros(value: timedelta) -> int:
    return value // timedelta(microseconds=1)


def _ts(value: int) -> datetime:
    return from_micros(value)


def _ts_or_none(value: int | None) -> datetime | None:
    return None if value is None else from_micros(value)


# --- the database: connections, transactions, closed state ---------------------------------


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


class _Database:
    """One connection per OS thread, the two transaction kinds, and the closed state."""

    def __init__(self, path: str, config: SqliteConfig, clock: Callable[[], float]) -> None:
        self.path = path
        self.config = config
        self.clock = clock
        self._local = threading.local()
        self._cond = threading.Condition()
        self._connections: weakref.WeakSet[_Held] = weakref.WeakSet()
        self._in_flight = 0
        self._closed = False

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=self.config.busy_timeout_ms / 1000,
            isolation_level=None,  # we issue BEGIN / COMMIT ourselves
            check_same_thread=False,  # close() may close it from another thread
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

    # lifecycle

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
            # A call in flight ends within its busy timeout; give it that and a margin.
            deadline = time.monotonic() + self.config.busy_timeout_ms / 1000 + 5
            while self._in_flight > 0 and (remaining := deadline - time.monotonic()) > 0:
                self._cond.wait(remaining)
            held = list(self._connections)
            self._connections.clear()
        for h in held:
            with suppress(sqlite3.Error):
                h.conn.close()

    # transactions

    @contextmanager
    def write(self) -> Iterator[_Tx]:
        """One write transaction: the lock taken up front (bounded), then store-now read once.

        Inside a composed call (the fast path, SPEC §11) the steps join the open transaction.
        """
        joined: _Tx | None = getattr(self._local, "tx", None)
        if joined is not None:
            yield joined
            return
        with self._transaction("BEGIN IMMEDIATE") as conn:
            yield _Tx(conn, to_micros(from_posix(self.clock())))  # D4: read once, after the lock

    @contextmanager
    def composed(self) -> Iterator[None]:
        """One write transaction that the writes and reads of this thread join until it ends."""
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
    def read(self) -> Iterator[_Tx]:
        """One snapshot (a deferred transaction); never waits for writers in WAL mode."""
        joined: _Tx | None = getattr(self._local, "tx", None)
        if joined is not None:
            yield joined
            return
        with self._transaction("BEGIN") as conn:
            yield _Tx(conn, 0)

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        self._enter()
        try:
            conn = self._connection()
            try:
                conn.execute(begin)
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


def _open_database(path: str, config: SqliteConfig, clock: Callable[[], float]) -> _Database:
    """Open the file, switch it to WAL, create the schema or check its version."""
    db = _Database(path, config, clock)
    try:
        conn = db.connect()
    except sqlite3.Error as exc:
        raise ProcessingError(f"could not open {path}: {exc}") from exc
    try:
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise ProcessingError(f"could not switch {path} to WAL mode (it is in {mode!r})")
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise ProcessingError(
                    f"{path} is at schema version {version}, newer than this durable_graph "
                    f"understands ({SCHEMA_VERSION}): upgrade durable_graph to open it"
                )
            if version == 0:
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        raise ProcessingError(f"could not open {path}: {exc}") from exc
    finally:
        conn.close()
    return db


# --- one transaction and the helpers both facades share ------------------------------------


class _Tx:
    """A transaction in progress and store-now: memory's `_State` helpers, in SQL."""

    __slots__ = ("conn", "now")

    def __init__(self, conn: sqlite3.Connection, now: int) -> None:
        self.conn = conn
        self.now = now
        """Store time in microseconds, read once after the lock is held (D4); 0 in reads."""

    def one(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.conn.execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        return self.conn.execute(sql, params).fetchall()

    def run(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> int:
        return self.conn.execute(sql, params).rowcount

    def next_value(self, counter: str) -> int:
        row = self.one(
            "UPDATE counters SET value = value + 1 WHERE name = ? RETURNING value", (counter,)
        )
        assert row is not None
        return int(row[0])

    def issue_token(self) -> int:
        """A fencing token above all issued before (D3: one counter for claims and leases)."""
        return self.next_value("token")

    # --- claims -----------------------------------------------------------------------

    def current_claim(self, claim: Claim) -> sqlite3.Row:
        """The claim's row if ``claim`` is current (D2: the latest token), else `ClaimLost`."""
        row = self.one("SELECT * FROM claims WHERE thread_id = ?", (claim.thread_id,))
        if row is None or row["token"] != claim.token:
            raise ClaimLost(f"claim {claim.token} is not the current claim of the thread")
        return row

    # --- threads ----------------------------------------------------------------------

    def thread(self, thread_id: str) -> sqlite3.Row | None:
        return self.one("SELECT * FROM threads WHERE thread_id = ?", (thread_id,))

    def existing_thread(self, thread_id: str) -> sqlite3.Row:
        """The thread, or `NotFound` when it has no commit (rule 6; D10: claim first)."""
        thread = self.thread(thread_id)
        if thread is None:
            raise NotFound(f"thread {thread_id!r} has no commit")
        return thread

    def last_seq_of(self, thread_id: str) -> int:
        """The thread's last event number; a tombstone's after a delete; 0 if none (rule 26)."""
        row = self.one(
            "SELECT last_seq FROM threads WHERE thread_id = :t"
            " UNION ALL SELECT last_seq FROM tombstones WHERE thread_id = :t",
            {"t": thread_id},
        )
        return 0 if row is None else int(row[0])

    def append_event(
        self,
        thread_id: str,
        kind: str,
        payload: str,
        run_id: str | None,
        created_at: datetime | None,
    ) -> Event:
        """Number the event from the thread row, append it (D7: None created_at = commit time)."""
        row = self.one(
            "UPDATE threads SET last_seq = last_seq + 1, updated_at = ? WHERE thread_id = ?"
            " RETURNING last_seq",
            (self.now, thread_id),
        )
        assert row is not None
        seq = int(row[0])
        created = self.now if created_at is None else to_micros(created_at)
        self.run(
            "INSERT INTO events (thread_id, seq, kind, payload, run_id, created_at, committed_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (thread_id, seq, kind, payload, run_id, created, self.now),
        )
        return Event(
            thread_id=thread_id,
            seq=seq,
            kind=kind,
            payload=decode_json(payload),
            run_id=run_id,
            created_at=_ts(created),
            committed_at=_ts(self.now),
        )

    def append_events(
        self, thread_id: str, events: Sequence[EncodedEvent], run_id: str | None
    ) -> list[Event]:
        return [
            self.append_event(thread_id, e.kind, e.payload, run_id, e.created_at) for e in events
        ]

    def descendants(self, thread_id: str) -> list[str]:
        """``thread_id`` and every thread whose first commit named one of them as parent (D14)."""
        rows = self.all(
            "WITH RECURSIVE tree (thread_id) AS ("
            "  SELECT :t"
            "  UNION"
            "  SELECT t.thread_id FROM threads t JOIN tree ON t.parent_thread_id = tree.thread_id"
            ") SELECT thread_id FROM tree",
            {"t": thread_id},
        )
        return [r[0] for r in rows]

    def checkpoint_row(self, thread_id: str, checkpoint_id: str) -> sqlite3.Row | None:
        return self.one(
            "SELECT * FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ?",
            (thread_id, checkpoint_id),
        )

    def remove_checkpoint(self, thread_id: str, checkpoint_id: str) -> None:
        """A checkpoint goes with its pending writes."""
        for table in ("writes", "checkpoints"):
            self.run(
                f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id = ?",
                (thread_id, checkpoint_id),
            )

    # --- queue order ------------------------------------------------------------------

    def open_entries_of(self, thread_id: str) -> list[sqlite3.Row]:
        """The thread's open entries in queue order (SPEC §5 Order)."""
        return self.all(
            f"SELECT * FROM ({_QUEUE_ORDER}) WHERE thread_id = ? ORDER BY queue_rank, entry_id",
            (thread_id,),
        )

    def leasable_head(self, tenant: TenantFilter) -> sqlite3.Row | None:
        """The oldest thread head (by entry id) of ``tenant`` whose thread has no live lease."""
        return self.one(
            f"SELECT h.* FROM ({_QUEUE_ORDER}) AS h"
            " WHERE h.entry_id = h.head_entry_id"
            "   AND NOT EXISTS (SELECT 1 FROM entries o"  # lease_is_live (D1: now < expires_at)
            "       WHERE o.thread_id = h.thread_id AND o.outcome_kind IS NULL"
            "       AND o.lease_token IS NOT NULL AND :now < o.lease_expires_at)"
            "   AND (:any OR h.tenant IS :tenant)"  # tenant_matches
            " ORDER BY h.entry_id LIMIT 1",
            {"now": self.now, "any": tenant is ANY, "tenant": None if tenant is ANY else tenant},
        )

    def run_id_taken(self, thread_id: str, run_id: str) -> bool:
        """A checkpoint now in the thread's history, or an attempt of a kept entry (rule 20)."""
        row = self.one(
            "SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = :t AND run_id = :r)"
            " OR EXISTS (SELECT 1 FROM attempts WHERE thread_id = :t AND run_id = :r)",
            {"t": thread_id, "r": run_id},
        )
        return row is not None and bool(row[0])

    def run_of_deleted_thread(self, thread_id: str, run_id: str) -> bool:
        """``run_id`` is an attempt of a delete-marked kept entry of this thread (rule 10)."""
        return (
            self.one(
                "SELECT 1 FROM attempts a JOIN entries e ON e.entry_id = a.entry_id"
                " WHERE a.thread_id = ? AND a.run_id = ? AND e.thread_deleted = 1 LIMIT 1",
                (thread_id, run_id),
            )
            is not None
        )

    def close_entry(self, entry: sqlite3.Row, outcome: tuple[str, str]) -> None:
        """Close once: stamp `closed_at` and `closed_at_seq`, end the lease (D19, D20)."""
        self.run(
            "UPDATE entries SET outcome_kind = ?, outcome_detail = ?, closed_at = ?,"
            " closed_at_seq = ? WHERE entry_id = ?",
            (*outcome, self.now, self.last_seq_of(entry["thread_id"]), entry["entry_id"]),
        )
        self.end_lease(entry["entry_id"])

    def end_lease(self, entry_id: int) -> None:
        self.run(
            "UPDATE entries SET lease_token = NULL, lease_holder = NULL,"
            " lease_expires_at = NULL, lease_ttl = NULL WHERE entry_id = ?",
            (entry_id,),
        )

    def entry_row(self, entry_id: int) -> sqlite3.Row:
        row = self.one("SELECT * FROM entries WHERE entry_id = ?", (entry_id,))
        assert row is not None
        return row

    def current_lease(self, lease: Lease) -> sqlite3.Row:
        """The entry of a current lease: `EntryClosed` first, then `LeaseLost` (rule 21)."""
        entry = self.one("SELECT * FROM entries WHERE entry_id = ?", (lease.entry.entry_id,))
        if entry is None or entry["outcome_kind"] is not None:
            # A reclaimed entry was closed before it was reclaimed.
            raise EntryClosed(f"entry {lease.entry.entry_id} is closed")
        if entry["lease_token"] is None or entry["lease_token"] != lease.token:
            raise LeaseLost(f"lease {lease.token} is not the current lease of the entry")
        return entry

    def record_attempt(self, entry: sqlite3.Row, run_id: str) -> AttemptStart:
        """Rule 20 after the lease checks: deleted, exhausted, run id taken, then record."""
        if entry["thread_deleted"]:
            self.close_entry(entry, store_outcome(Cancelled("thread_deleted")))
            return ThreadDeleted()
        if entry["attempt_count"] >= entry["max_attempts"]:
            return Exhausted()
        if self.run_id_taken(entry["thread_id"], run_id):
            raise RunIdTaken(f"run id {run_id!r} already names a run of the thread")
        number = entry["attempt_count"] + 1
        self.run(
            "INSERT INTO attempts (entry_id, number, thread_id, run_id, started_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (entry["entry_id"], number, entry["thread_id"], run_id, self.now),
        )
        self.run(
            "UPDATE entries SET attempt_count = ? WHERE entry_id = ?", (number, entry["entry_id"])
        )
        return Started(number)

    def visible_entry(self, entry_id: int, tenant: str | None) -> sqlite3.Row | None:
        """The kept entry when its tenant is ``tenant`` (D16), else None."""
        return self.one(
            "SELECT * FROM entries WHERE entry_id = ? AND tenant IS ?", (entry_id, tenant)
        )

    # --- snapshots (fresh objects every read) -----------------------------------------

    def checkpoint_of(self, row: sqlite3.Row) -> Checkpoint:
        writes = self.all(
            "SELECT task_id, channel, value FROM writes WHERE thread_id = ? AND checkpoint_id = ?"
            " ORDER BY task_id, idx, rowid",
            (row["thread_id"], row["checkpoint_id"]),
        )
        return Checkpoint(
            thread_id=row["thread_id"],
            checkpoint_id=row["checkpoint_id"],
            parent_id=row["parent_id"],
            run_id=row["run_id"],
            state=decode_json(row["state"]),
            metadata=decode_json(row["metadata"]),
            next=tuple(decode_json(row["next"])),
            created_at=_ts(row["created_at"]),
            committed_at=_ts(row["committed_at"]),
            seq=row["seq"],
            writes=tuple(
                PendingWrite(task_id=w["task_id"], channel=w["channel"], value=decode_json(w[2]))
                for w in writes
            ),
        )

    def thread_info_of(self, thread: sqlite3.Row) -> ThreadInfo:
        claim = self.one("SELECT * FROM claims WHERE thread_id = ?", (thread["thread_id"],))
        return ThreadInfo(
            thread_id=thread["thread_id"],
            parent_thread_id=thread["parent_thread_id"],
            head_id=thread["head_id"],
            last_seq=thread["last_seq"],
            created_at=_ts(thread["created_at"]),
            updated_at=_ts(thread["updated_at"]),
            claim_holder=None if claim is None else claim["holder"],
            claim_expires_at=None if claim is None else _ts(claim["expires_at"]),
        )

    def entry_of(self, entry: sqlite3.Row) -> QueueEntry:
        attempts = self.all(
            "SELECT number, run_id, started_at FROM attempts WHERE entry_id = ? ORDER BY number",
            (entry["entry_id"],),
        )
        return QueueEntry(
            entry_id=entry["entry_id"],
            tenant=entry["tenant"],
            thread_id=entry["thread_id"],
            key=entry["key"],
            input=decode_json(entry["input"]),
            mode=Mode(entry["mode"]),
            max_attempts=entry["max_attempts"],
            attempts=tuple(
                Attempt(number=a[0], run_id=a[1], started_at=_ts(a[2])) for a in attempts
            ),
            admitted=bool(entry["admitted"]),
            thread_deleted=bool(entry["thread_deleted"]),
            submitted_at=_ts(entry["submitted_at"]),
            lease_holder=entry["lease_holder"],
            lease_expires_at=_ts_or_none(entry["lease_expires_at"]),
            outcome=decode_outcome(entry["outcome_kind"], entry["outcome_detail"]),
            closed_at=_ts_or_none(entry["closed_at"]),
            closed_at_seq=entry["closed_at_seq"],
        )


def event_of(row: sqlite3.Row) -> Event:
    return Event(
        thread_id=row["thread_id"],
        seq=row["seq"],
        kind=row["kind"],
        payload=decode_json(row["payload"]),
        run_id=row["run_id"],
        created_at=_ts(row["created_at"]),
        committed_at=_ts(row["committed_at"]),
    )


def effect_of(row: sqlite3.Row, existing: bool) -> EffectRecord:
    return EffectRecord(
        thread_id=row["thread_id"],
        key=row["key"],
        value=decode_json(row["value"]),
        run_id=row["run_id"],
        recorded_at=_ts(row["recorded_at"]),
        existing=existing,
    )


def store_payload(value: object) -> str:
    return encode_json("payload", value, _STORE_PAYLOAD_LIMIT)


def store_outcome(outcome: EntryOutcome) -> tuple[str, str]:
    """An outcome the store decides itself (cancellations, interruptions), encoded."""
    return encode_outcome(outcome, _STORE_PAYLOAD_LIMIT)


# --- the checkpointer ----------------------------------------------------------------------


class SqliteCheckpointer(EmbeddedFastPath):
    """The Checkpointer (SPEC §4) in one SQLite file, safe from many threads and processes."""

    def __init__(self, db: _Database) -> None:
        """Use `SqliteCheckpointer.open`."""
        self._db = db
        self._max = db.config.max_value_bytes
        self._run_queue = SqliteRunQueue(db, self)

    # --- the fast path (SPEC §11): the steps in one transaction (durable_graph.fast_path) ----

    @contextmanager
    def _atomic(self, undo: bool = False) -> Iterator[None]:
        with self._db.composed():  # an error rolls every step back
            yield

    def _max_bytes(self) -> int:
        return self._max

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        config: SqliteConfig = SqliteConfig(),
        clock: Callable[[], float] = time.time,
    ) -> SqliteCheckpointer:
        """Open the store in the file at ``path``, creating the file and schema when missing."""
        if not isinstance(path, (str, os.PathLike)):
            raise ValidationError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        text = os.fspath(path)
        if not isinstance(text, str) or text in ("", ":memory:") or text.startswith("file:"):
            raise ValidationError(
                f"path must name a file, got {text!r} (durable_graph.memory keeps a store in memory)"
            )
        if not isinstance(config, SqliteConfig):
            raise ValidationError(f"config must be a SqliteConfig, got {type(config).__name__}")
        check_clock(clock)
        return cls(_open_database(text, config, clock))

    @property
    def run_queue(self) -> SqliteRunQueue:
        return self._run_queue

    # --- claims -----------------------------------------------------------------------

    def claim(self, thread_id: str, holder: str, policy: ClaimPolicy = ClaimPolicy()) -> Claim:
        check_identifier("thread_id", thread_id)
        check_identifier("holder", holder)
        check_claim_policy(policy)
        with self._db.write() as tx:
            # 1. rule 9: not re-entrant; any live claim refuses (D1).
            row = tx.one("SELECT expires_at FROM claims WHERE thread_id = ?", (thread_id,))
            if row is not None and tx.now < row["expires_at"]:
                raise ThreadBusy(THREAD_BUSY_CLAIM)
            # 2. a new token; the claim creates nothing visible (D6).
            token = tx.issue_token()
            expires_at = tx.now + _micros(policy.ttl)
            tx.run(
                "INSERT OR REPLACE INTO claims (thread_id, token, holder, expires_at, ttl)"
                " VALUES (?, ?, ?, ?, ?)",
                (thread_id, token, holder, expires_at, _micros(policy.ttl)),
            )
            return Claim(thread_id, holder, token, _ts(expires_at), policy.ttl)

    def renew_claim(self, claim: Claim) -> Claim:
        check_claim("claim", claim)
        with self._db.write() as tx:
            row = tx.current_claim(claim)
            expires_at = tx.now + row["ttl"]
            tx.run(
                "UPDATE claims SET expires_at = ? WHERE thread_id = ?",
                (expires_at, claim.thread_id),
            )
            ttl = timedelta(microseconds=row["ttl"])
            return Claim(claim.thread_id, row["holder"], row["token"], _ts(expires_at), ttl)

    def release_claim(self, claim: Claim) -> None:
        check_claim("claim", claim)
        with self._db.write() as tx:
            tx.current_claim(claim)
            tx.run("DELETE FROM claims WHERE thread_id = ?", (claim.thread_id,))

    # --- writes -----------------------------------------------------------------------

    def commit(self, claim: Claim, commit: Commit) -> Checkpoint:
        check_claim("claim", claim)
        c = check_commit(commit, self._max)
        thread_id = claim.thread_id
        with self._db.write() as tx:
            # D9 check order: claim, fence, parent, deleted run, duplicate id.
            tx.current_claim(claim)
            if c.fence is not None:
                tx.current_claim(c.fence)
            thread = tx.thread(thread_id)
            head_id = None if thread is None else thread["head_id"]
            if c.parent_id != head_id:
                raise StaleParent(f"parent_id {c.parent_id!r} is not the head of the thread")
            if tx.run_of_deleted_thread(thread_id, c.run_id):
                raise RunOfDeletedThread(
                    f"run {c.run_id!r} is an attempt of an entry of a deleted thread"
                )
            if thread is not None and tx.checkpoint_row(thread_id, c.checkpoint_id) is not None:
                raise DuplicateCheckpoint(
                    f"checkpoint {c.checkpoint_id!r} already exists on the thread"
                )
            # Writes. A new thread continues its tombstone's numbering; parent_thread_id is
            # taken from the first commit only (D9).
            if thread is None:
                tx.run(
                    "INSERT INTO threads (thread_id, parent_thread_id, created_at, updated_at,"
                    " last_seq, first_commit_order) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        thread_id,
                        c.parent_thread_id,
                        tx.now,
                        tx.now,
                        tx.last_seq_of(thread_id),
                        tx.next_value("first_commit"),
                    ),
                )
                tx.run("DELETE FROM tombstones WHERE thread_id = ?", (thread_id,))
            # D8: the caller's events first, then store.checkpoint (rule 11: all carry run_id).
            tx.append_events(thread_id, c.events, c.run_id)
            seq = tx.append_event(
                thread_id,
                "store.checkpoint",
                store_payload({"checkpoint_id": c.checkpoint_id, "run_id": c.run_id}),
                c.run_id,
                None,
            ).seq
            tx.run(
                "INSERT INTO checkpoints (thread_id, seq, checkpoint_id, parent_id, run_id,"
                " state, metadata, next, created_at, committed_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    thread_id,
                    seq,
                    c.checkpoint_id,
                    c.parent_id,
                    c.run_id,
                    c.state,
                    c.metadata,
                    store_payload(list(c.next)),
                    tx.now if c.created_at is None else to_micros(c.created_at),
                    tx.now,
                ),
            )
            tx.run(
                "UPDATE threads SET head_id = ? WHERE thread_id = ?", (c.checkpoint_id, thread_id)
            )
            # Rule 10: admissions touch only this thread's open entries.
            tx.run(
                "UPDATE entries SET admitted = 1 WHERE thread_id = :t AND outcome_kind IS NULL"
                " AND entry_id IN (SELECT entry_id FROM attempts WHERE thread_id = :t"
                " AND run_id = :r)",
                {"t": thread_id, "r": c.run_id},
            )
            row = tx.checkpoint_row(thread_id, c.checkpoint_id)
            assert row is not None
            return tx.checkpoint_of(row)

    def put_writes(self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite]) -> None:
        check_claim("claim", claim)
        check_identifier("checkpoint_id", checkpoint_id)
        encoded = check_writes("writes", writes, self._max)
        with self._db.write() as tx:
            # D10: claim, thread has a commit, then the checkpoint is the thread's.
            tx.current_claim(claim)
            tx.existing_thread(claim.thread_id)
            if tx.checkpoint_row(claim.thread_id, checkpoint_id) is None:
                raise NotFound(f"checkpoint {checkpoint_id!r} is not a checkpoint of the thread")
            # Rule 12: the first value under (task_id, channel, index) wins.
            for w in encoded:
                tx.run(
                    "INSERT INTO writes (thread_id, checkpoint_id, task_id, channel, idx, value)"
                    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (claim.thread_id, checkpoint_id, w.task_id, w.channel, w.index, w.value),
                )

    def append_events(
        self, claim: Claim, events: Sequence[EventIn], run_id: str | None = None
    ) -> list[Event]:
        check_claim("claim", claim)
        encoded = check_events("events", events, self._max)
        check_optional_identifier("run_id", run_id)
        with self._db.write() as tx:
            tx.current_claim(claim)
            tx.existing_thread(claim.thread_id)
            return tx.append_events(claim.thread_id, encoded, run_id)

    def record_effect(
        self, claim: Claim, key: str, value: object, run_id: str | None = None
    ) -> EffectRecord:
        check_claim("claim", claim)
        check_identifier("key", key)
        encoded = encode_json("value", value, self._max)
        check_optional_identifier("run_id", run_id)
        with self._db.write() as tx:
            tx.current_claim(claim)
            tx.existing_thread(claim.thread_id)
            # First write wins.
            row = tx.one(
                "SELECT * FROM effects WHERE thread_id = ? AND key = ?", (claim.thread_id, key)
            )
            if row is not None:
                return effect_of(row, existing=True)
            row = tx.one(
                "INSERT INTO effects (thread_id, key, value, run_id, recorded_at)"
                " VALUES (?, ?, ?, ?, ?) RETURNING *",
                (claim.thread_id, key, encoded, run_id, tx.now),
            )
            assert row is not None
            return effect_of(row, existing=False)

    def retract_turn(self, claim: Claim) -> Checkpoint | None:
        check_claim("claim", claim)
        with self._db.write() as tx:
            tx.current_claim(claim)
            thread = tx.existing_thread(claim.thread_id)
            thread_id = claim.thread_id
            if thread["head_id"] is None:
                return None  # D11: no head, nothing to retract
            # The turn: from the head back, the checkpoints sharing the head's run id.
            newest_first = tx.all(
                "SELECT * FROM checkpoints WHERE thread_id = ? ORDER BY seq DESC", (thread_id,)
            )
            run_id = newest_first[0]["run_id"]
            turn = []
            for row in newest_first:
                if row["run_id"] != run_id:
                    break
                turn.append(row)
            for row in turn:
                tx.remove_checkpoint(thread_id, row["checkpoint_id"])
            # D24: the new head is the newest remaining checkpoint (the parent of the oldest
            # removed, unless prune removed that one).
            remaining = newest_first[len(turn) :]
            head = remaining[0] if remaining else None
            tx.run(
                "UPDATE threads SET head_id = ? WHERE thread_id = ?",
                (None if head is None else head["checkpoint_id"], thread_id),
            )
            tx.append_event(
                thread_id,
                "store.retracted",
                store_payload(
                    {"run_id": run_id, "checkpoint_ids": [r["checkpoint_id"] for r in turn]}
                ),
                None,
                None,
            )
            return None if head is None else tx.checkpoint_of(head)

    def prune(self, thread_id: str, policy: RetentionPolicy) -> PruneResult:
        check_identifier("thread_id", thread_id)
        check_retention(policy)
        with self._db.write() as tx:
            return _prune_thread(tx, thread_id, policy)

    def prune_all(self, policy: RetentionPolicy, batch: int = 1000) -> PruneResult:
        check_retention(policy)
        check_int("batch", batch, minimum=1)
        checkpoints = events = 0
        after: str | None = None
        while True:
            # One transaction per batch of threads, in thread-id order.
            with self._db.write() as tx:
                ids = [
                    r[0]
                    for r in tx.all(
                        "SELECT thread_id FROM threads WHERE ? IS NULL OR thread_id > ?"
                        " ORDER BY thread_id LIMIT ?",
                        (after, after, batch),
                    )
                ]
                for thread_id in ids:
                    result = _prune_thread(tx, thread_id, policy)
                    checkpoints += result.checkpoints_removed
                    events += result.events_removed
            if len(ids) < batch:
                return PruneResult(checkpoints, events)
            after = ids[-1]

    def delete_thread(self, thread_id: str, fence: Claim | None = None) -> bool:
        check_identifier("thread_id", thread_id)
        if fence is not None:
            check_claim("fence", fence)
        with self._db.write() as tx:
            # D14: the fence first.
            if fence is not None:
                tx.current_claim(fence)
            existed = tx.thread(thread_id) is not None
            for victim in tx.descendants(thread_id):
                tx.run(
                    "INSERT OR REPLACE INTO tombstones (thread_id, last_seq)"
                    " SELECT thread_id, last_seq FROM threads WHERE thread_id = ?",
                    (victim,),
                )
                for table in ("writes", "checkpoints", "events", "effects", "threads", "claims"):
                    tx.run(f"DELETE FROM {table} WHERE thread_id = ?", (victim,))
                # Mark every entry open now; entries submitted later are not marked.
                tx.run(
                    "UPDATE entries SET thread_deleted = 1"
                    " WHERE thread_id = ? AND outcome_kind IS NULL",
                    (victim,),
                )
            return existed

    # --- reads ------------------------------------------------------------------------

    def get(self, thread_id: str, checkpoint_id: str | None = None) -> Checkpoint | None:
        check_identifier("thread_id", thread_id)
        check_optional_identifier("checkpoint_id", checkpoint_id)
        with self._db.read() as tx:
            thread = tx.thread(thread_id)
            if thread is None:
                return None
            wanted = thread["head_id"] if checkpoint_id is None else checkpoint_id
            row = None if wanted is None else tx.checkpoint_row(thread_id, wanted)
            return None if row is None else tx.checkpoint_of(row)

    def history(
        self, thread_id: str, before: str | None = None, limit: int = 100
    ) -> list[Checkpoint]:
        check_identifier("thread_id", thread_id)
        check_optional_identifier("before", before)
        check_int("limit", limit, minimum=1)
        with self._db.read() as tx:
            below = INT64_MAX
            if before is not None:
                # Rule 14: exclusive; an unknown `before` gives [].
                start = tx.checkpoint_row(thread_id, before)
                if start is None:
                    return []
                below = start["seq"]
            rows = tx.all(
                "SELECT * FROM checkpoints WHERE thread_id = ? AND seq < ?"
                " ORDER BY seq DESC LIMIT ?",
                (thread_id, below, limit),
            )
            return [tx.checkpoint_of(r) for r in rows]

    def latest_of_runs(self, thread_id: str, run_ids: Sequence[str]) -> Checkpoint | None:
        check_identifier("thread_id", thread_id)
        runs = store_payload(sorted(set(check_run_ids(run_ids))))
        with self._db.read() as tx:
            row = tx.one(
                "SELECT * FROM checkpoints WHERE thread_id = ?"
                " AND run_id IN (SELECT value FROM json_each(?)) ORDER BY seq DESC LIMIT 1",
                (thread_id, runs),
            )
            return None if row is None else tx.checkpoint_of(row)

    def thread(self, thread_id: str) -> ThreadInfo | None:
        check_identifier("thread_id", thread_id)
        with self._db.read() as tx:
            thread = tx.thread(thread_id)
            return None if thread is None else tx.thread_info_of(thread)

    def threads(self, after: str | None = None, limit: int = 100) -> list[ThreadInfo]:
        check_optional_identifier("after", after)
        check_int("limit", limit, minimum=1)
        with self._db.read() as tx:
            # Rule 15: UTF-8 byte order (SQLite's BINARY collation), after the id `after`.
            rows = tx.all(
                "SELECT * FROM threads WHERE ? IS NULL OR thread_id > ? ORDER BY thread_id LIMIT ?",
                (after, after, limit),
            )
            return [tx.thread_info_of(r) for r in rows]

    def children(self, thread_id: str) -> list[str]:
        check_identifier("thread_id", thread_id)
        with self._db.read() as tx:
            if tx.thread(thread_id) is None:
                return []  # D15: an unknown thread reads as empty
            rows = tx.all(
                "SELECT thread_id FROM threads WHERE parent_thread_id = ?"
                " ORDER BY first_commit_order",
                (thread_id,),
            )
            return [r[0] for r in rows]

    def events_after(self, thread_id: str, after_seq: int, limit: int = 1000) -> list[Event]:
        check_identifier("thread_id", thread_id)
        check_int("after_seq", after_seq, minimum=0)
        check_int("limit", limit, minimum=1)
        return self._events_after(thread_id, after_seq, limit)

    def _events_after(self, thread_id: str, after_seq: int, limit: int) -> list[Event]:
        with self._db.read() as tx:
            rows = tx.all(
                "SELECT * FROM events WHERE thread_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (thread_id, after_seq, limit),
            )
            return [event_of(r) for r in rows]

    def await_events_after(
        self,
        thread_id: str,
        after_seq: int,
        timeout: timedelta,
        watch: WatchPolicy = WatchPolicy(),
    ) -> list[Event]:
        check_identifier("thread_id", thread_id)
        check_int("after_seq", after_seq, minimum=0)
        check_duration("timeout", timeout, allow_zero=True)
        check_watch(watch)
        return poll(
            lambda: self._events_after(thread_id, after_seq, 1000),
            bool,
            timeout,
            watch.poll_interval.total_seconds(),
        )

    def subscribe(
        self, thread_id: str, after_seq: int = 0, watch: WatchPolicy = WatchPolicy()
    ) -> Iterator[Event]:
        check_identifier("thread_id", thread_id)
        check_int("after_seq", after_seq, minimum=0)
        check_watch(watch)
        self._db.check_open()
        return follow(
            lambda seq: self._events_after(thread_id, seq, 1000),
            after_seq,
            watch.poll_interval.total_seconds(),
            self._db.check_open,
        )

    def get_effect(self, thread_id: str, key: str) -> EffectRecord | None:
        check_identifier("thread_id", thread_id)
        check_identifier("key", key)
        with self._db.read() as tx:
            row = tx.one("SELECT * FROM effects WHERE thread_id = ? AND key = ?", (thread_id, key))
            return None if row is None else effect_of(row, existing=True)  # D12

    # --- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Self:
        self._db.check_open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _prune_thread(tx: _Tx, thread_id: str, policy: RetentionPolicy) -> PruneResult:
    """D13 (prune keeps head, evidence, keep_last, the young) on one thread, in the caller's tx."""
    thread = tx.thread(thread_id)
    if thread is None:
        return PruneResult(0, 0)
    cutoff = None if policy.max_age is None else tx.now - _micros(policy.max_age)
    newest_first = tx.all(
        "SELECT checkpoint_id, run_id, committed_at FROM checkpoints WHERE thread_id = ?"
        " ORDER BY seq DESC",
        (thread_id,),
    )
    keep = {thread["head_id"]}
    if policy.keep_last is not None:
        keep.update(r["checkpoint_id"] for r in newest_first[: policy.keep_last])
    keep.update(_evidence(tx, thread_id, newest_first))
    removed = [
        r
        for r in newest_first
        if r["checkpoint_id"] not in keep and (cutoff is None or r["committed_at"] < cutoff)
    ]
    for row in removed:
        tx.remove_checkpoint(thread_id, row["checkpoint_id"])
    events_removed = 0
    if cutoff is not None:
        events_removed = tx.run(
            "DELETE FROM events WHERE thread_id = ? AND committed_at < ?", (thread_id, cutoff)
        )
    return PruneResult(len(removed), events_removed)


def _evidence(tx: _Tx, thread_id: str, newest_first: list[sqlite3.Row]) -> set[str]:
    """For each run id an open entry of the thread recorded, that run's newest checkpoint."""
    runs = {
        r[0]
        for r in tx.all(
            "SELECT a.run_id FROM attempts a JOIN entries e ON e.entry_id = a.entry_id"
            " WHERE a.thread_id = ? AND e.outcome_kind IS NULL",
            (thread_id,),
        )
    }
    evidence: dict[str, str] = {}
    for row in newest_first:
        if row["run_id"] in runs and row["run_id"] not in evidence:
            evidence[row["run_id"]] = row["checkpoint_id"]
    return set(evidence.values())


# --- the run queue -------------------------------------------------------------------------


class SqliteRunQueue:
    """The store's run queue (SPEC §5), in the checkpointer's file."""

    def __init__(self, db: _Database, store: SqliteCheckpointer) -> None:
        self._db = db
        self._max = db.config.max_value_bytes
        self._store = store

    def submit_many(self, submissions: Sequence[Submission]) -> list[Ticket]:
        """SPEC §11: in order, all or nothing (`durable_graph.fast_path`)."""
        return EmbeddedFastPath.submit_many(self._store, submissions)

    def submit(self, submission: Submission) -> Ticket:
        sub = check_submission(submission, self._max)
        with self._db.write() as tx:
            # Rule 19 order: key, REJECT, INTERRUPT closing, insert.
            if sub.key is not None:
                kept = tx.one(
                    "SELECT * FROM entries WHERE key = ? AND tenant IS ?", (sub.key, sub.tenant)
                )
                if kept is not None:
                    if (kept["thread_id"], kept["mode"], kept["max_attempts"], kept["input"]) != (
                        sub.thread_id,
                        sub.mode.value,
                        sub.max_attempts,
                        sub.input,
                    ):
                        raise SubmissionKeyReused(
                            f"submission key {sub.key!r} names a different submission"
                        )
                    return Ticket(kept["entry_id"], existing=True)
            open_entries = tx.open_entries_of(sub.thread_id)
            if sub.mode is Mode.REJECT and open_entries:
                raise ThreadBusy(THREAD_BUSY_ENTRY)
            row = tx.one(
                "INSERT INTO entries (tenant, thread_id, key, input, mode, max_attempts,"
                " submitted_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING entry_id",
                (
                    sub.tenant,
                    sub.thread_id,
                    sub.key,
                    sub.input,
                    sub.mode.value,
                    sub.max_attempts,
                    tx.now,
                ),
            )
            assert row is not None
            entry_id = int(row[0])
            if sub.mode is Mode.INTERRUPT:
                interrupted = store_outcome(Interrupted(entry_id))
                for other in open_entries:
                    if other["mode"] == Mode.INTERRUPT.value and not other["attempt_count"]:
                        tx.close_entry(other, interrupted)
            return Ticket(entry_id, existing=False)

    def lease(
        self,
        holder: str,
        ttl: timedelta,
        tenant: TenantFilter = ANY,
        run_id: str | None = None,
    ) -> Lease | None:
        check_identifier("holder", holder)
        check_duration("ttl", ttl)
        wanted = check_tenant_filter("tenant", tenant, allow_any=True)
        check_optional_identifier("run_id", run_id)
        with self._db.write() as tx:
            # The oldest leasable thread head (by entry id) of the wanted tenant.
            entry = tx.leasable_head(wanted)
            if entry is None:
                return None
            # End the expired lease of every other entry of the thread.
            for other in tx.open_entries_of(entry["thread_id"]):
                if other["entry_id"] != entry["entry_id"]:
                    tx.end_lease(other["entry_id"])
            token = tx.issue_token()
            expires_at = tx.now + _micros(ttl)
            tx.run(
                "UPDATE entries SET lease_token = ?, lease_holder = ?, lease_expires_at = ?,"
                " lease_ttl = ? WHERE entry_id = ?",
                (token, holder, expires_at, _micros(ttl), entry["entry_id"]),
            )
            attempt: AttemptStart | None = None
            if run_id is not None:
                try:
                    attempt = tx.record_attempt(tx.entry_row(entry["entry_id"]), run_id)
                except RunIdTaken:
                    attempt = None  # the lease is still taken
            leased = tx.entry_of(tx.entry_row(entry["entry_id"]))
            return Lease(leased, token, holder, _ts(expires_at), ttl, attempt)

    def renew(self, lease: Lease, ttl: timedelta | None = None) -> Lease:
        check_lease("lease", lease)
        if ttl is not None:
            check_duration("ttl", ttl)
        with self._db.write() as tx:
            entry = tx.current_lease(lease)
            # D18: push expiry to now + (ttl or the ttl the lease was taken with).
            expires_at = tx.now + (entry["lease_ttl"] if ttl is None else _micros(ttl))
            tx.run(
                "UPDATE entries SET lease_expires_at = ? WHERE entry_id = ?",
                (expires_at, entry["entry_id"]),
            )
            return Lease(
                tx.entry_of(tx.entry_row(entry["entry_id"])),
                lease.token,
                entry["lease_holder"],
                _ts(expires_at),
                timedelta(microseconds=entry["lease_ttl"]),
            )

    def release(self, lease: Lease) -> None:
        check_lease("lease", lease)
        with self._db.write() as tx:
            entry = tx.current_lease(lease)
            tx.end_lease(entry["entry_id"])  # D19: release clears the lease

    def record_attempt(self, lease: Lease, run_id: str) -> AttemptStart:
        check_lease("lease", lease)
        check_identifier("run_id", run_id)
        with self._db.write() as tx:
            entry = tx.current_lease(lease)
            return tx.record_attempt(entry, run_id)

    def close(self, lease: Lease, outcome: EntryOutcome) -> QueueEntry:
        check_lease("lease", lease)
        encoded = encode_outcome(outcome, self._max)
        with self._db.write() as tx:
            entry = tx.current_lease(lease)
            tx.close_entry(entry, encoded)
            return tx.entry_of(tx.entry_row(entry["entry_id"]))

    def cancel(self, entry_id: int, tenant: str | None = None) -> QueueEntry:
        check_int("entry_id", entry_id, minimum=0)
        check_optional_identifier("tenant", tenant)
        with self._db.write() as tx:
            # D16: visibility first, then closed (rule 22).
            entry = tx.visible_entry(entry_id, tenant)
            if entry is None:
                raise NotFound(f"entry {entry_id} not found")
            if entry["outcome_kind"] is not None:
                raise EntryClosed(f"entry {entry_id} is closed")
            tx.close_entry(entry, store_outcome(Cancelled("requested")))
            return tx.entry_of(tx.entry_row(entry_id))

    def entry(self, entry_id: int, tenant: str | None = None) -> QueueEntry | None:
        check_int("entry_id", entry_id, minimum=0)
        check_optional_identifier("tenant", tenant)
        return self._entry(entry_id, tenant)

    def _entry(self, entry_id: int, tenant: str | None) -> QueueEntry | None:
        with self._db.read() as tx:
            entry = tx.visible_entry(entry_id, tenant)
            return None if entry is None else tx.entry_of(entry)

    def open_entries(
        self, tenant: TenantFilter = None, thread_id: str | None = None
    ) -> list[QueueEntry]:
        wanted = check_tenant_filter("tenant", tenant, allow_any=True)
        check_optional_identifier("thread_id", thread_id)
        with self._db.read() as tx:
            # Rule 24: threads by their head's entry id (over every tenant), each in queue order.
            rows = tx.all(
                f"SELECT * FROM ({_QUEUE_ORDER})"
                " WHERE (:thread IS NULL OR thread_id = :thread)"
                "   AND (:any OR tenant IS :tenant)"
                " ORDER BY head_entry_id, queue_rank, entry_id",
                {
                    "thread": thread_id,
                    "any": wanted is ANY,
                    "tenant": None if wanted is ANY else wanted,
                },
            )
            return [tx.entry_of(r) for r in rows]

    def await_closed(
        self, entry_id: int, timeout: timedelta, tenant: str | None = None
    ) -> QueueEntry | None:
        check_int("entry_id", entry_id, minimum=0)
        check_duration("timeout", timeout, allow_zero=True)
        check_optional_identifier("tenant", tenant)
        entry = poll(
            lambda: self._entry(entry_id, tenant),
            lambda e: e is None or e.closed,
            timeout,
            _AWAIT_CLOSED_POLL,
        )
        return entry if entry is not None and entry.closed else None

    def reclaim(self, older_than: timedelta, batch: int = 1000) -> int:
        check_duration("older_than", older_than, allow_zero=True)
        check_int("batch", batch, minimum=1)
        with self._db.write() as tx:
            cutoff = tx.now - _micros(older_than)
            # Rule 25: oldest closed first, ties by entry id; never an open entry.
            victims = [
                r[0]
                for r in tx.all(
                    "SELECT entry_id FROM entries WHERE outcome_kind IS NOT NULL"
                    " AND closed_at < ? ORDER BY closed_at, entry_id LIMIT ?",
                    (cutoff, batch),
                )
            ]
            for entry_id in victims:
                tx.run("DELETE FROM attempts WHERE entry_id = ?", (entry_id,))
                tx.run("DELETE FROM entries WHERE entry_id = ?", (entry_id,))
            return len(victims)


__all__ = ["SCHEMA_VERSION", "SqliteCheckpointer", "SqliteConfig", "SqliteRunQueue"]
