"""The SQLite store: the contract suites (SPEC §7), its own file-level behaviour, and a seeded
differential walk that runs the same calls on the in-memory reference and compares every answer."""

from __future__ import annotations

import gc
import random
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from durable_graph import (
    ANY,
    ClaimLost,
    ClaimPolicy,
    Commit,
    Completed,
    EntryOutcome,
    EventIn,
    Failed,
    Mode,
    PendingWrite,
    ProcessingError,
    RetentionPolicy,
    StoreError,
    Submission,
    ThreadBusy,
    ValidationError,
    WatchPolicy,
)
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.run_queue import RunQueue
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.sqlite import SCHEMA_VERSION, SqliteCheckpointer, SqliteConfig
from durable_graph.testkit import Harness, ManualClock
from durable_graph.testkit.contract.checkpointer.suite import CheckpointerContract
from durable_graph.testkit.contract.run_queue.suite import RunQueueContract


def _sqlite_harness(tmp_path: Path) -> Iterator[Harness]:
    clock = ManualClock()
    store = SqliteCheckpointer.open(tmp_path / "store.db", clock=clock)
    yield Harness(store, clock)
    store.close()


class TestSqliteCheckpointer(CheckpointerContract):
    @pytest.fixture
    def harness(self, tmp_path: Path) -> Iterator[Harness]:
        yield from _sqlite_harness(tmp_path)


class TestSqliteRunQueue(RunQueueContract):
    @pytest.fixture
    def harness(self, tmp_path: Path) -> Iterator[Harness]:
        yield from _sqlite_harness(tmp_path)


# --- fixtures ------------------------------------------------------------------------------


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def store(path: Path, clock: ManualClock) -> Iterator[SqliteCheckpointer]:
    s = SqliteCheckpointer.open(path, clock=clock)
    yield s
    s.close()


def _commit(store: SqliteCheckpointer, thread_id: str, checkpoint_id: str, run_id: str) -> None:
    claim = store.claim(thread_id, run_id)
    head = store.get(thread_id)
    store.commit(
        claim,
        Commit(
            checkpoint_id=checkpoint_id,
            parent_id=None if head is None else head.checkpoint_id,
            run_id=run_id,
            state={"n": checkpoint_id},
        ),
    )
    store.release_claim(claim)


# --- opening, configuration, schema --------------------------------------------------------


def test_store_implements_both_protocols(store: SqliteCheckpointer) -> None:
    assert isinstance(store, Checkpointer)
    assert isinstance(store.run_queue, RunQueue)


def test_config_is_validated() -> None:
    with pytest.raises(ValidationError, match="busy_timeout"):
        SqliteConfig(busy_timeout=timedelta(0))
    with pytest.raises(ValidationError, match="busy_timeout"):
        SqliteConfig(busy_timeout=5)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="max_value_bytes"):
        SqliteConfig(max_value_bytes=0)
    with pytest.raises(ValidationError, match="synchronous"):
        SqliteConfig(synchronous="OFF")  # type: ignore[arg-type]
    assert SqliteConfig(busy_timeout=timedelta(microseconds=1)).busy_timeout_ms == 1


def test_open_refuses_a_path_that_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="path"):
        SqliteCheckpointer.open(":memory:")
    with pytest.raises(ValidationError, match="path"):
        SqliteCheckpointer.open(42)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="clock"):
        SqliteCheckpointer.open(tmp_path / "x.db", clock=3.0)  # type: ignore[arg-type]


def test_open_creates_the_schema_in_wal_mode_at_the_current_version(
    store: SqliteCheckpointer, path: Path
) -> None:
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {
            name: {c[1] for c in raw.execute(f"PRAGMA table_xinfo({name})")}
            for (name,) in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
    # The same tables and columns as the PostgreSQL schema (SQLite keeps counters for sequences).
    # Not in a SQLite file: schema_meta (the user_version pragma), limits (the size limits the
    # SQL functions enforce, SPEC §10 rule 2; the Python backends' are the package's own), and
    # workers.role (the PostgreSQL role a worker logged in as; a file has no roles). Nor the
    # thread's queue row on its threads row, with the thread's lease (D222-D224; migrations
    # 0016-0018: one row, one lock, written once per step where two were): SQLite keeps the
    # queue_threads table of migration 0001 (the head and when the thread can next be leased),
    # and the lease, and the attempt count, on the entry.
    postgres = _postgres_tables()
    for table in ("schema_meta", "limits"):
        del postgres[table]
    postgres["workers"] -= {"role"}
    queue_head = {"head_entry_id", "head_tenant", "head_priority_key", "head_kind"}
    lease = {
        "lease_expires_at",
        "lease_entry_id",
        "lease_until",
        "lease_kind",
        "lease_tenant",
        "lease_token",
        "lease_holder",
        "lease_ttl",
    }
    postgres["threads"] -= queue_head | lease
    postgres["queue_threads"] = {"thread_id", "lease_expires_at"} | queue_head
    postgres["queue_entries"] |= {
        "lease_token",
        "lease_holder",
        "lease_expires_at",
        "lease_ttl",
        "attempt_count",
    }
    assert set(postgres) <= set(tables)
    assert {t: tables[t] for t in postgres} == postgres


def _postgres_tables() -> dict[str, set[str]]:
    """Table -> column names of the migrations' ``CREATE TABLE``s, plus their
    ``ALTER TABLE t ADD COLUMN c``s, less their ``ALTER TABLE t DROP COLUMN c``s, in order."""
    migrations = Path(__file__).parents[1] / "migrations"
    tables: dict[str, set[str]] = {}
    for migration in sorted(migrations.glob("0*.sql")):
        text = migration.read_text()
        for name, body in re.findall(
            r"CREATE TABLE (?:IF NOT EXISTS )?(\w+) \((.*?)\n\);", text, re.S
        ):
            tables[name] = set(re.findall(r"^\s{4}(\w+)\s+(?!KEY)\w", body, re.M)) - {"PRIMARY"}
        for name, adds in re.findall(
            r"ALTER TABLE (\w+)((?:\s+ADD COLUMN (?:IF NOT EXISTS )?\w+[^,;]*,?)+);", text
        ):
            tables[name] |= set(re.findall(r"ADD COLUMN (?:IF NOT EXISTS )?(\w+)", adds))
        for name, drops in re.findall(
            r"ALTER TABLE (\w+)((?:\s+DROP COLUMN (?:IF EXISTS )?\w+,?)+);", text
        ):
            tables[name] -= set(re.findall(r"DROP COLUMN (?:IF EXISTS )?(\w+)", drops))
    return tables


def test_open_refuses_a_newer_schema_version(path: Path) -> None:
    SqliteCheckpointer.open(path).close()
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(ProcessingError, match="newer"):
        SqliteCheckpointer.open(path)


def _version_1_file(path: Path) -> None:
    """A store written by schema version 1 (before the embedded rule set)."""
    raw = sqlite3.connect(path)
    raw.executescript((Path(__file__).parent / "data" / "sqlite_store_v1.sql").read_text())
    raw.execute("PRAGMA user_version = 1")
    raw.close()


def test_a_version_1_file_is_migrated_on_open_and_keeps_every_row(path: Path) -> None:
    _version_1_file(path)
    with SqliteCheckpointer.open(path, clock=lambda: 1_700_003_600.0) as store:
        head = store.get("t1")
        assert head is not None and (head.checkpoint_id, head.seq) == ("c2", 3)
        first = store.get("t1", "c1")
        assert first is not None and first.writes == (
            PendingWrite("task", "ch", 1),
            PendingWrite("task", "ch", 2),
        )
        assert [e.kind for e in store.events_after("t1", 0)][:2] == ["note", "store.checkpoint"]
        effect = store.get_effect("t1", "k")
        assert effect is not None and effect.value == {"v": 1}
        with pytest.raises(ThreadBusy):
            store.claim("t1", "x")  # the two-day claim moved over with its thread
        assert store.thread("gone") is None
        claim = store.claim("gone", "h")
        assert store.commit(claim, Commit("g2", None, "rg2", None)).seq == 2  # numbering goes on
        q = store.run_queue
        assert [e.entry_id for e in q.open_entries(tenant=ANY)] == [1, 2]
        assert q.submit(Submission("t1", {"n": 1}, key="k1")).entry_id == 1
        assert q.submit(Submission("t9", {})).entry_id == 5  # ids 3-4 were reclaimed, not reused
        lease = q.lease("w2", timedelta(minutes=5))
        assert lease is not None and lease.entry.entry_id == 1  # its old lease had expired
        assert [a.run_id for a in lease.entry.attempts] == ["r9"]
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        names = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert not {n for n in names if n.startswith("v1_")}


def test_store_files_are_created_private_to_their_owner(path: Path) -> None:
    with SqliteCheckpointer.open(path) as store:
        _commit(store, "t", "c1", "r1")
        modes = {p.name: p.stat().st_mode & 0o777 for p in path.parent.iterdir()}
    assert modes == {"store.db": 0o600, "store.db-wal": 0o600, "store.db-shm": 0o600}


def test_a_read_only_store_reads_and_refuses_every_write(path: Path, clock: ManualClock) -> None:
    with SqliteCheckpointer.open(path, clock=clock) as store:
        _commit(store, "t", "c1", "r1")
        store.run_queue.submit(Submission("t", {"n": 1}))
    with SqliteCheckpointer.open(path, SqliteConfig(read_only=True), clock=clock) as ro:
        head = ro.get("t")
        assert head is not None and head.checkpoint_id == "c1"
        assert [e.entry_id for e in ro.run_queue.open_entries()] == [1]
        with pytest.raises(ProcessingError, match="read-only"):
            ro.claim("t", "h")
        with pytest.raises(ProcessingError, match="read-only"):
            ro.run_queue.lease("w", timedelta(minutes=1))
        with pytest.raises(ProcessingError, match="read-only"):
            ro.prune_all(RetentionPolicy(keep_last=1))
        assert ro.run_queue.await_closed(1, timedelta(0)) is None


def test_read_only_never_creates_or_migrates_a_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(ProcessingError, match=r"missing\.db"):
        SqliteCheckpointer.open(missing, SqliteConfig(read_only=True))
    assert list(tmp_path.iterdir()) == []
    old = tmp_path / "old.db"
    _version_1_file(old)
    with pytest.raises(ProcessingError, match=r"old\.db.*version 1"):
        SqliteCheckpointer.open(old, SqliteConfig(read_only=True))
    with sqlite3.connect(old) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == 1
    with pytest.raises(ValidationError, match="read_only"):
        SqliteConfig(read_only="yes")  # type: ignore[arg-type]


def test_open_of_a_file_that_is_not_a_database_raises_processing_error(path: Path) -> None:
    path.write_bytes(b"this is not a database file, not at all" * 100)
    with pytest.raises(ProcessingError) as info:
        SqliteCheckpointer.open(path)
    assert isinstance(info.value.__cause__, sqlite3.Error)


def test_reopening_the_file_finds_the_data(path: Path, clock: ManualClock) -> None:
    with SqliteCheckpointer.open(path, clock=clock) as store:
        _commit(store, "t", "c1", "r1")
        ticket = store.run_queue.submit(Submission("t", {"x": 1}, key="k"))
        token = store.claim("other", "h").token
    with SqliteCheckpointer.open(path, clock=clock) as again:
        head = again.get("t")
        assert head is not None and head.checkpoint_id == "c1" and head.state == {"n": "c1"}
        entry = again.run_queue.entry(ticket.entry_id)
        assert entry is not None and entry.input == {"x": 1}
        assert again.run_queue.submit(Submission("t", {"x": 1}, key="k")).existing
        # Tokens keep increasing across restarts (SPEC §4).
        assert again.claim("third", "h").token > token


def test_two_stores_on_one_file_see_each_other(path: Path, clock: ManualClock) -> None:
    with (
        SqliteCheckpointer.open(path, clock=clock) as a,
        SqliteCheckpointer.open(path, clock=clock) as b,
    ):
        a.claim("t", "h")
        with pytest.raises(ThreadBusy):
            b.claim("t", "h2")


# --- the bound: lock waits end within busy_timeout (D23) -----------------------------------


def test_a_write_blocked_by_another_connection_fails_within_busy_timeout(
    path: Path, clock: ManualClock
) -> None:
    config = SqliteConfig(busy_timeout=timedelta(milliseconds=300))
    with SqliteCheckpointer.open(path, config=config, clock=clock) as store:
        _commit(store, "t", "c1", "r1")
        blocker = sqlite3.connect(path, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            started = time.monotonic()
            with pytest.raises(ProcessingError) as info:
                store.claim("t", "h")
            elapsed = time.monotonic() - started
            assert isinstance(info.value.__cause__, sqlite3.OperationalError)
            assert 0.25 <= elapsed < 0.3 + 1.0
            # Reads still answer from their snapshot while the write lock is held.
            head = store.get("t")
            assert head is not None and head.checkpoint_id == "c1"
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        # The failed call changed nothing, and the store works once the lock is free.
        info_t = store.thread("t")
        assert info_t is not None and info_t.claim_holder is None
        assert store.claim("t", "h").holder == "h"


def test_queue_writes_are_bounded_too(path: Path, clock: ManualClock) -> None:
    config = SqliteConfig(busy_timeout=timedelta(milliseconds=200))
    with SqliteCheckpointer.open(path, config=config, clock=clock) as store:
        blocker = sqlite3.connect(path, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            started = time.monotonic()
            with pytest.raises(ProcessingError):
                store.run_queue.submit(Submission("t", None))
            assert time.monotonic() - started < 0.2 + 1.0
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert store.run_queue.open_entries(tenant=ANY) == []


# --- connections, threads, close -----------------------------------------------------------


def test_closed_store_refuses_every_call_and_close_is_idempotent(store: SqliteCheckpointer) -> None:
    _commit(store, "t", "c1", "r1")
    queue = store.run_queue
    store.close()
    store.close()
    for call in (
        lambda: store.get("t"),
        lambda: store.claim("t", "h"),
        lambda: store.events_after("t", 0),
        lambda: queue.submit(Submission("t", None)),
        lambda: queue.lease("w", timedelta(seconds=1)),
        lambda: queue.entry(1),
    ):
        with pytest.raises(ProcessingError):
            call()


def test_subscribe_yields_new_events_and_fails_after_close(store: SqliteCheckpointer) -> None:
    _commit(store, "t", "c1", "r1")
    events = store.subscribe("t", watch=_fast_watch())
    assert next(events).kind == "store.checkpoint"
    _commit(store, "t", "c2", "r2")
    _commit(store, "t", "c3", "r3")
    assert next(events).seq == 2
    store.close()
    with pytest.raises(ProcessingError):
        next(events)


def test_await_events_after_returns_when_another_thread_commits(
    store: SqliteCheckpointer,
) -> None:
    _commit(store, "t", "c1", "r1")
    timer = threading.Timer(0.2, lambda: _commit(store, "t", "c2", "r2"))
    timer.start()
    try:
        started = time.monotonic()
        events = store.await_events_after("t", 1, timedelta(seconds=5), _fast_watch())
        assert [e.seq for e in events] == [2]
        assert time.monotonic() - started < 4
    finally:
        timer.join()
    assert store.await_events_after("t", 2, timedelta(milliseconds=50)) == []


def test_many_threads_claim_one_thread_exactly_one_wins(store: SqliteCheckpointer) -> None:
    winners: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker(i: int) -> None:
        barrier.wait()
        try:
            store.claim("contested", f"h{i}")
            winners.append(i)
        except ThreadBusy:
            pass
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(winners) == 1


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="counts /proc/self/fd")
def test_connections_of_finished_threads_are_closed(store: SqliteCheckpointer) -> None:
    _commit(store, "t", "c1", "r1")

    def open_fds() -> int:
        gc.collect()
        return len(list(Path("/proc/self/fd").iterdir()))

    before = open_fds()
    for _ in range(40):
        reader = threading.Thread(target=lambda: store.get("t"))
        reader.start()
        reader.join()
    assert open_fds() - before < 10  # one connection each would be 40+ files
    assert store.get("t") is not None


def test_values_are_stored_as_json_text(store: SqliteCheckpointer, path: Path) -> None:
    claim = store.claim("t", "r")
    store.commit(claim, Commit("c1", None, "r", {"s": "\u0000😀", "f": 1.5, "l": [1, None]}))
    with sqlite3.connect(path) as raw:
        (state,) = raw.execute("SELECT state FROM checkpoints").fetchone()
    assert state == '{"s":"\\u0000😀","f":1.5,"l":[1,null]}'
    head = store.get("t")
    assert head is not None and head.state == {"s": "\u0000😀", "f": 1.5, "l": [1, None]}


def test_timestamps_are_exact_microseconds(store: SqliteCheckpointer, clock: ManualClock) -> None:
    clock.advance(timedelta(microseconds=123457))
    claim = store.claim("t", "r", ClaimPolicy(ttl=timedelta(seconds=30, microseconds=1)))
    assert claim.expires_at.microsecond == (123457 + 1) % 1_000_000
    checkpoint = store.commit(claim, Commit("c1", None, "r", None))
    head = store.get("t")
    assert head is not None and head.committed_at == checkpoint.committed_at


def test_validation_runs_before_the_store_is_touched(store: SqliteCheckpointer) -> None:
    claim = store.claim("t", "r")
    with pytest.raises(ValidationError, match=r"commit.state\[\"a\"\]"):
        store.commit(claim, Commit("c1", None, "r", {"a": float("nan")}))
    with pytest.raises(ValidationError, match="thread_id"):
        store.thread("")
    assert store.thread("t") is None


def test_a_lease_is_fenced_by_tokens_shared_with_claims(store: SqliteCheckpointer) -> None:
    queue = store.run_queue
    queue.submit(Submission("t", None))
    claim = store.claim("x", "h")
    lease = queue.lease("w", timedelta(seconds=5))
    assert lease is not None and lease.token > claim.token
    assert store.claim("y", "h").token > lease.token
    store.release_claim(claim)
    with pytest.raises(ClaimLost):
        store.release_claim(claim)


# --- differential: the same calls on memory and SQLite give the same answers ---------------


def _fast_watch() -> Any:
    from durable_graph import WatchPolicy

    return WatchPolicy(poll_interval=timedelta(milliseconds=20))


class _Walk:
    """Random calls on a few threads and tenants, applied to one store; answers as plain data."""

    def __init__(self, store: Checkpointer, clock: ManualClock) -> None:
        self.store = store
        self.queue = store.run_queue
        self.clock = clock
        self.claims: dict[str, Any] = {}
        self.leases: list[Any] = []
        self.n = 0

    def step(self, rng: random.Random) -> Any:
        threads = ["a", "b", "c", "a/1"]
        t = rng.choice(threads)
        op = rng.choice(
            [
                "claim",
                "claim",
                "commit",
                "commit",
                "commit",
                "writes",
                "events",
                "effect",
                "retract",
                "prune",
                "delete",
                "submit",
                "submit",
                "lease",
                "lease",
                "attempt",
                "close",
                "renew",
                "release",
                "cancel",
                "reclaim",
                "advance",
                "release_claim",
            ]
        )
        self.n += 1
        n = self.n
        try:
            return (op, self._do(op, t, n, rng))
        except StoreError as exc:
            return (op, type(exc).__name__)

    def _do(self, op: str, t: str, n: int, rng: random.Random) -> Any:
        s, q = self.store, self.queue
        claim = self.claims.get(t)
        if op == "claim":
            self.claims[t] = s.claim(t, f"h{n}", ClaimPolicy(ttl=timedelta(seconds=20)))
            return self.claims[t]
        if op == "release_claim" and claim is not None:
            return s.release_claim(claim)
        if op == "commit" and claim is not None:
            head = s.get(t)
            parent = head.checkpoint_id if head and rng.random() < 0.9 else None
            run = f"r{rng.randrange(6)}"
            return s.commit(
                claim,
                Commit(
                    checkpoint_id=f"c{rng.randrange(30)}",
                    parent_id=parent,
                    run_id=run,
                    state={"n": n},
                    next=("x",) if rng.random() < 0.5 else (),
                    events=(EventIn("e", [n]),) if rng.random() < 0.5 else (),
                    parent_thread_id="a" if t == "a/1" else None,
                ),
            )
        if op == "writes" and claim is not None:
            head = s.get(t)
            return s.put_writes(
                claim,
                head.checkpoint_id if head else "nope",
                [PendingWrite(f"t{rng.randrange(2)}", "ch", n), PendingWrite("t0", "z", n)],
            )
        if op == "events" and claim is not None:
            return s.append_events(claim, [EventIn("k", n)], run_id=None)
        if op == "effect" and claim is not None:
            return s.record_effect(claim, f"k{rng.randrange(3)}", n)
        if op == "retract" and claim is not None:
            return s.retract_turn(claim)
        if op == "prune":
            return s.prune(t, RetentionPolicy(keep_last=rng.randrange(1, 3)))
        if op == "delete":
            return s.delete_thread(t)
        if op == "submit":
            mode = rng.choice(list(Mode))
            return q.submit(
                Submission(
                    t,
                    {"n": rng.randrange(3)},
                    tenant=rng.choice([None, "x"]),
                    key=rng.choice([None, "k1", "k2"]),
                    mode=mode,
                    max_attempts=2,
                )
            )
        if op == "lease":
            lease = q.lease(
                f"w{n}",
                timedelta(seconds=rng.choice([5, 30])),
                tenant=rng.choice([ANY, None, "x"]),
                run_id=f"r{rng.randrange(6)}" if rng.random() < 0.5 else None,
            )
            if lease is not None:
                self.leases.append(lease)
            return lease
        if op in ("attempt", "close", "renew", "release") and self.leases:
            lease = rng.choice(self.leases)
            if op == "attempt":
                return q.record_attempt(lease, f"r{rng.randrange(6)}")
            if op == "close":
                outcomes: list[EntryOutcome] = [Completed({"n": n}), Failed("boom")]
                outcome = rng.choice(outcomes)
                return q.close(lease, outcome)
            if op == "renew":
                return q.renew(lease)
            return q.release(lease)
        if op == "cancel":
            return q.cancel(rng.randrange(1, n + 1), tenant=rng.choice([None, "x"]))
        if op == "reclaim":
            return q.reclaim(timedelta(seconds=rng.choice([0, 10])), batch=2)
        if op == "advance":
            self.clock.advance(timedelta(seconds=rng.choice([1, 7, 25])))
            return None
        return "skipped"

    def snapshot(self) -> Any:
        s, q = self.store, self.queue
        return (
            s.threads(),
            [s.history(t) for t in ("a", "b", "c", "a/1")],
            [s.events_after(t, 0) for t in ("a", "b", "c", "a/1")],
            s.children("a"),
            q.open_entries(tenant=ANY),
            [q.entry(i, tenant) for i in range(1, 40) for tenant in (None, "x")],
        )


@pytest.mark.parametrize("seed", range(12))
def test_sqlite_answers_every_call_as_the_memory_reference_does(tmp_path: Path, seed: int) -> None:
    rng_m, rng_s = random.Random(seed), random.Random(seed)
    clock_m, clock_s = ManualClock(), ManualClock()
    memory = InMemoryCheckpointer(clock=clock_m)
    sqlite = SqliteCheckpointer.open(tmp_path / "diff.db", clock=clock_s)
    try:
        walk_m, walk_s = _Walk(memory, clock_m), _Walk(sqlite, clock_s)
        for i in range(250):
            expected, got = walk_m.step(rng_m), walk_s.step(rng_s)
            assert got == expected, f"seed {seed}, step {i}"
            if i % 50 == 49:
                assert walk_s.snapshot() == walk_m.snapshot(), f"seed {seed}, step {i}"
        assert walk_s.snapshot() == walk_m.snapshot()
    finally:
        memory.close()
        sqlite.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_closing_an_entry_that_holds_no_lease_keeps_the_threads_live_lease(
    kind: str, path: Path, clock: ManualClock
) -> None:
    # The kept per-thread lease (queue_threads) must only end with the entry that held it.
    store = InMemoryCheckpointer(clock) if kind == "memory" else SqliteCheckpointer.open(path)
    q = store.run_queue
    with store:
        q.submit(Submission("t", {"n": 1}))
        queued = q.submit(Submission("t", {"n": 2})).entry_id
        lease = q.lease("a", timedelta(minutes=5))
        assert lease is not None
        q.cancel(queued)
        q.submit(Submission("t", {"n": 3}, mode=Mode.INTERRUPT))
        q.submit(Submission("t", {"n": 4}, mode=Mode.INTERRUPT))  # closes the one before
        assert q.lease("b", timedelta(minutes=5)) is None


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_wait_wakes_at_once_on_a_write_through_the_same_store(kind: str, path: Path) -> None:
    # SPEC §11: in-process waits wake at once; only other processes are seen by polling.
    store = InMemoryCheckpointer() if kind == "memory" else SqliteCheckpointer.open(path)
    with store:
        claim = store.claim("t", "h")
        store.commit(claim, Commit("c1", None, "r1", None))
        slow_poll = WatchPolicy(poll_interval=timedelta(seconds=30))
        writer = threading.Timer(0.2, store.append_events, (claim, [EventIn("ping", None)]))
        writer.start()
        started = time.monotonic()
        events = store.await_events_after("t", 1, timedelta(seconds=20), slow_poll)
        writer.join()
        assert [e.kind for e in events] == ["ping"] and time.monotonic() - started < 5


def test_a_submissions_trace_context_is_kept_in_the_file_first_one_wins(tmp_path: Path) -> None:
    from durable_graph.observe.observer import TraceContext

    path = tmp_path / "t.db"
    first = TraceContext("00-" + "a" * 32 + "-" + "b" * 16 + "-01", "k=v")
    submitter = SqliteCheckpointer.open(path)
    worker = SqliteCheckpointer.open(path)
    try:
        entry_id = submitter.run_queue.submit(Submission("t1", {"x": 1})).entry_id
        assert submitter.run_queue.set_trace_context(entry_id, first) is True
        later = TraceContext("00-" + "c" * 32 + "-" + "d" * 16 + "-01")
        assert worker.run_queue.set_trace_context(entry_id, later) is False
        assert worker.run_queue.trace_context(entry_id) == first
        assert worker.run_queue.set_trace_context(entry_id + 1, first) is False
        assert worker.run_queue.trace_context(entry_id + 1) is None
    finally:
        submitter.close()
        worker.close()
