"""Races on real PostgreSQL (issue 12): delete_thread's tree lock, a child's first commit, and the
time a lease reads.

Each test holds a row lock on a second connection, the way a concurrent call holds it in the
middle of its transaction, and runs the store call in a thread against it, so the interleaving
is the one that went wrong, every time, with no sleep deciding the outcome: the sleeps only give
the blocked call time to reach its wait.
"""

from __future__ import annotations

import collections
import functools
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from durable_graph import (
    Claim,
    ClaimLost,
    Commit,
    DuplicateCheckpoint,
    Lease,
    RetentionPolicy,
    Schedule,
    StaleParent,
    Submission,
    ThreadBusy,
    ValidationError,
)
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig

WAIT = 0.4  # long enough for a call in a thread to reach its lock wait


@pytest.fixture
def store(pg_dsn: str, pg_schema: str) -> Iterator[PostgresCheckpointer]:
    s = PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=pg_schema))
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def raw(pg_dsn: str, pg_schema: str) -> Iterator[psycopg.Connection[Any]]:
    """A second session in the store's schema, in a transaction the test ends."""
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(pg_schema)))
        conn.commit()
        yield conn
        conn.rollback()


class Background:
    """A store call run in a thread: its result or its exception."""

    def __init__(self, fn: Callable[[], object]) -> None:
        self.result: object = None
        self.error: BaseException | None = None
        self.finished_at: float | None = None
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], object]) -> None:
        try:
            self.result = fn()
        except BaseException as exc:  # reported by join()
            self.error = exc
        self.finished_at = time.monotonic()

    def done(self) -> bool:
        return not self._thread.is_alive()

    def join(self) -> object:
        self._thread.join(30)
        assert not self._thread.is_alive(), "the background call never finished"
        if self.error is not None:
            raise self.error
        return self.result


def first_commit(store: PostgresCheckpointer, thread_id: str, parent: str | None = None) -> None:
    claim = store.claim(thread_id, "w")
    store.commit(claim, Commit("c1", None, "r1", {}, parent_thread_id=parent))
    store.release_claim(claim)


def lock_rows(conn: psycopg.Connection[Any], *thread_ids: str) -> None:
    for tid in thread_ids:
        conn.execute("SELECT 1 FROM threads WHERE thread_id = %s FOR UPDATE", (tid,))


def test_delete_thread_waits_in_id_order_behind_a_fenced_child_commit(
    store: PostgresCheckpointer, raw: psycopg.Connection[Any]
) -> None:
    # Child "a" sorts before parent "p". A fenced commit on "a" locks a, then p (id order).
    first_commit(store, "p")
    first_commit(store, "a", parent="p")
    lock_rows(raw, "a")
    deleting = Background(lambda: store.delete_thread("p"))
    time.sleep(WAIT)
    # The delete must be waiting on "a" without holding "p": the commit takes "p" now.
    lock_rows(raw, "p")
    raw.commit()
    assert deleting.join() is True
    assert store.thread("p") is None and store.thread("a") is None


def test_delete_thread_does_not_deadlock_with_a_child_that_appears_while_it_waits(
    store: PostgresCheckpointer, raw: psycopg.Connection[Any], pg_dsn: str, pg_schema: str
) -> None:
    # A plain commit on "p" is in flight; the delete reads the tree ({p}) and waits for it.
    # Meanwhile child "a" (sorting before "p") makes its first commit, and a fenced commit on
    # "a" (fence "p") locks a, then p. The delete must not end up holding p while waiting on a.
    first_commit(store, "p")
    lock_rows(raw, "p")
    deleting = Background(lambda: store.delete_thread("p"))
    time.sleep(WAIT)
    child = Background(lambda: first_commit(store, "a", parent="p"))
    time.sleep(WAIT)

    def fenced_commit_locks() -> None:
        with psycopg.connect(pg_dsn) as conn:
            conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(pg_schema)))
            lock_rows(conn, "a", "p")
            conn.commit()

    fenced = Background(fenced_commit_locks)
    time.sleep(WAIT)
    raw.commit()
    # A deadlock would raise psycopg.errors.DeadlockDetected in one of them.
    assert deleting.join() is True
    child.join()
    fenced.join()
    assert store.thread("p") is None


def _first_commit_in_flight(
    store: PostgresCheckpointer, raw: psycopg.Connection[Any], child: str, parent: str
) -> None:
    """``parent`` committed; ``child``'s first commit (under ``parent``) made in ``raw``'s open
    transaction, not yet landed."""
    first_commit(store, parent)
    claim = store.claim(child, "w")
    raw.execute(
        "SELECT * FROM dg_commit_v1(%s, %s, 'c1', NULL, 'r1', '{}', NULL, NULL,"
        " NULL, NULL, NULL, NULL, %s, NULL, NULL)",
        (child, claim.token, parent),
    )


def test_delete_thread_deletes_a_child_whose_first_commit_was_in_flight(
    store: PostgresCheckpointer, raw: psycopg.Connection[Any]
) -> None:
    _first_commit_in_flight(store, raw, "m", parent="p")
    deleting = Background(lambda: store.delete_thread("p"))
    time.sleep(WAIT)
    assert not deleting.done(), "delete_thread went ahead of a child's first commit"
    raw.commit()
    assert deleting.join() is True
    assert store.thread("m") is None, "an orphan child survived its parent's delete"


def test_children_are_listed_in_the_order_their_first_commits_landed(
    store: PostgresCheckpointer, raw: psycopg.Connection[Any]
) -> None:
    _first_commit_in_flight(
        store, raw, "z", parent="p"
    )  # "z" has its first_commit number but has not landed
    second = Background(lambda: first_commit(store, "b", parent="p"))
    time.sleep(WAIT)
    raw.commit()
    z_landed = time.monotonic()
    second.join()
    assert second.finished_at is not None
    landed = ["b", "z"] if second.finished_at < z_landed else ["z", "b"]
    assert store.children("p") == landed


def test_a_lease_that_waited_on_a_lock_starts_after_the_wait(
    store: PostgresCheckpointer, raw: psycopg.Connection[Any]
) -> None:
    q = store.run_queue
    ticket = q.submit(Submission("t", {}, max_attempts=1))
    first_commit(store, "t")
    # A commit on "t" in flight holds the thread row; a lease recording an attempt waits on it.
    lock_rows(raw, "t")
    ttl = timedelta(seconds=1)
    leasing = Background(lambda: q.lease("w1", ttl, run_id="run-1"))
    time.sleep(1.5)
    raw.commit()
    released = datetime.now(UTC)
    lease = leasing.join()
    assert isinstance(lease, Lease) and lease.entry.entry_id == ticket.entry_id
    assert lease.attempt is not None
    # Store time is clock_timestamp() on this host: the wait ended at `released`.
    slack = timedelta(milliseconds=200)
    assert lease.expires_at >= released + ttl - slack
    assert lease.entry.attempts[-1].started_at >= released - slack
    assert q.lease("w2", ttl) is None, "a second worker took a lease that had just started"


# --- the parent/child workload (make soak runs it for 60 s) ------------------------------------

WORKLOAD_SECONDS = float(os.environ.get("DURABLE_GRAPH_RACE_SECONDS", "8"))
EXPECTED = (ThreadBusy, ClaimLost, StaleParent, DuplicateCheckpoint)


class Tally:
    """Operations done and refusals met, by kind, shared by the workload's threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done: collections.Counter[str] = collections.Counter()
        self.refused: collections.Counter[str] = collections.Counter()
        self.failures: list[str] = []

    def run(self, kind: str, fn: Callable[[], object]) -> None:
        try:
            fn()
        except EXPECTED as exc:
            with self.lock:
                self.refused[f"{kind}:{type(exc).__name__}"] += 1
        except Exception as exc:  # a deadlock, or anything else, fails the test
            with self.lock:
                self.failures.append(f"{kind}: {type(exc).__name__}: {exc}")
        else:
            with self.lock:
                self.done[kind] += 1


class Parents:
    """Each parent thread's current claim, held by its runner and used by children as fence."""

    def __init__(self, count: int) -> None:
        self.ids = [f"p{i}" for i in range(count)]
        self.claims: dict[str, Claim] = {}


def parent_commit(store: PostgresCheckpointer, parents: Parents, parent: str) -> None:
    claim = parents.claims.get(parent)
    if claim is None:
        claim = parents.claims[parent] = store.claim(parent, "runner")
    try:
        head = store.get(parent)
        cid = uuid.uuid4().hex
        store.commit(claim, Commit(cid, head.checkpoint_id if head else None, cid, {}))
    except ClaimLost:
        del parents.claims[parent]  # deleted: claim the thread again next time
        raise


def fenced_child_commits(
    store: PostgresCheckpointer, rng: random.Random, fence: Claim, child: str
) -> None:
    claim = store.claim(child, "child")
    try:
        head = store.get(child)
        for _ in range(rng.randrange(1, 4)):
            cid = uuid.uuid4().hex
            parent_id = head.checkpoint_id if head else None
            # A child's first commit is fenced or not (a fence on another thread locks
            # nothing of the parent): either way it must not slip past a delete.
            fenced = parent_id is not None or rng.random() < 0.5
            commit = Commit(
                cid,
                parent_id,
                cid,
                {},
                parent_thread_id=fence.thread_id,
                fence=fence if fenced else None,
            )
            store.commit(claim, commit)
            head = store.get(child)
    finally:
        store.release_claim(claim)


def parent_worker(
    store: PostgresCheckpointer, tally: Tally, rng: random.Random, stop: float, parents: Parents
) -> None:
    while time.monotonic() < stop:
        for parent in parents.ids:
            tally.run("parent_commit", functools.partial(parent_commit, store, parents, parent))
        time.sleep(0.01)


def child_worker(
    store: PostgresCheckpointer, tally: Tally, rng: random.Random, stop: float, parents: Parents
) -> None:
    while time.monotonic() < stop:
        fence = parents.claims.get(rng.choice(parents.ids))
        if fence is None:
            time.sleep(0.001)
            continue
        # Children sort before ("a...") and after ("z...") their parent; many ids, so that
        # first commits keep happening as deletes remove them.
        child = f"{rng.choice('az')}{fence.thread_id}-{rng.randrange(40)}"
        run = functools.partial(fenced_child_commits, store, rng, fence, child)
        tally.run("fenced_child_commit", run)


def deleter(
    store: PostgresCheckpointer, tally: Tally, rng: random.Random, stop: float, parents: Parents
) -> None:
    while time.monotonic() < stop:
        tally.run("delete_thread", lambda: store.delete_thread(rng.choice(parents.ids)))
        time.sleep(rng.uniform(0.0, 0.2))


def pruner(
    store: PostgresCheckpointer, tally: Tally, rng: random.Random, stop: float, parents: Parents
) -> None:
    while time.monotonic() < stop:
        tally.run("prune_all", lambda: store.prune_all(RetentionPolicy(keep_last=2), batch=3))
        time.sleep(rng.uniform(0.0, 0.1))


def test_parent_child_workload_with_deletes_fenced_commits_and_prune_all_never_deadlocks(
    store: PostgresCheckpointer,
) -> None:
    tally = Tally()
    stop = time.monotonic() + WORKLOAD_SECONDS
    parents = Parents(3)
    roles = [parent_worker, child_worker, child_worker, child_worker, child_worker, deleter]
    roles.append(pruner)
    workers = [
        threading.Thread(target=role, args=(store, tally, random.Random(i), stop, parents))
        for i, role in enumerate(roles)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print(
        f"\nworkload {WORKLOAD_SECONDS:.0f} s: done {dict(sorted(tally.done.items()))}; "
        f"refused {dict(sorted(tally.refused.items()))}; failures {len(tally.failures)}"
    )
    assert tally.failures == []
    assert tally.done["delete_thread"] > 0 and tally.done["fenced_child_commit"] > 0
    assert tally.done["prune_all"] > 0 and tally.done["parent_commit"] > 0


# --- prune_all bounded by rows (issue 12) -------------------------------------------------------


def populate_old_checkpoints(conn: psycopg.Connection[Any], threads: int, per_thread: int) -> None:
    """``threads`` live threads ``p-i`` of ``per_thread`` two-day-old checkpoints, each with its
    store.checkpoint event, written straight into the tables."""
    conn.execute(
        """INSERT INTO threads (thread_id, live, last_seq, head_id, created_at, updated_at,
                                first_commit_order)
           SELECT 'p-' || t, true, %(n)s, 'c' || %(n)s, now(), now(), t
             FROM generate_series(1, %(t)s) t""",
        {"t": threads, "n": per_thread},
    )
    for table, columns, values in (
        (
            "checkpoints",
            "thread_id, checkpoint_id, seq, parent_id, run_id, state, metadata, next, "
            "created_at, committed_at",
            "'p-' || t, 'c' || g, g, NULL, 'r' || g, '{}', 'null', '{}', "
            "now() - interval '2 days', now() - interval '2 days'",
        ),
        (
            "events",
            "thread_id, seq, kind, payload, run_id, created_at, committed_at",
            "'p-' || t, g, 'store.checkpoint', '{}', 'r' || g, now() - interval '2 days', "
            "now() - interval '2 days'",
        ),
    ):
        conn.execute(
            f"INSERT INTO {table} ({columns}) SELECT {values}"
            " FROM generate_series(1, %(t)s) t, generate_series(1, %(n)s) g",
            {"t": threads, "n": per_thread},
        )
    conn.commit()


def test_prune_all_steps_are_bounded_by_rows_and_always_progress(
    store: PostgresCheckpointer, raw: psycopg.Connection[Any]
) -> None:
    # 3 threads x 7,000 checkpoints: 20,997 checkpoints and 20,997 events to remove, more than
    # one step's 10,000 rows even inside a single thread.
    populate_old_checkpoints(raw, 3, 7_000)
    steps = []
    after: str | None = None
    while True:
        row = raw.execute(
            "SELECT * FROM dg_prune_batch_v1(%s, 1000, 1, interval '1 day')", (after,)
        ).fetchone()
        raw.commit()
        assert row is not None
        steps.append((int(row[0]), int(row[1])))
        assert row[0] + row[1] <= 10_001, "a step removed more than its row budget"
        assert row[0] + row[1] > 0 or row[2] < 1000, "a step made no progress"
        if row[2] < 1000:
            break
        after = row[3] if row[3] is not None else after
    assert sum(c for c, _ in steps) == 3 * 6_999
    assert sum(e for _, e in steps) == 3 * 7_000  # every event is older than a day
    assert len(steps) >= 5
    for tid in ("p-1", "p-2", "p-3"):
        head = store.get(tid)
        assert head is not None and head.checkpoint_id == "c7000"
        assert [c.checkpoint_id for c in store.history(tid)] == ["c7000"]


def test_prune_all_and_prune_through_the_api_remove_everything_past_the_row_budget(
    store: PostgresCheckpointer, raw: psycopg.Connection[Any]
) -> None:
    populate_old_checkpoints(raw, 2, 6_000)
    everything = store.prune_all(RetentionPolicy(keep_last=1), batch=1)
    assert (everything.checkpoints_removed, everything.events_removed) == (2 * 5_999, 0)
    one = store.prune("p-1", RetentionPolicy(max_age=timedelta(days=1)))
    assert one.events_removed == 6_000  # one call, several budgets inside it


def test_a_concurrent_put_of_another_tenants_schedule_name_never_replaces_it(
    store: PostgresCheckpointer, raw: psycopg.Connection[Any]
) -> None:
    """Issue 46 item 9: tenant b's put of "nightly" is in flight (inserted, not committed); a's
    put of the same name waits on it, and once b's commits, a's must be refused (DG000 naming
    the other tenant), not an update of b's row: the tenant rule holds under the row's lock,
    not only in a check read before it."""
    raw.execute(
        "SELECT * FROM dg_put_schedule_v1('nightly', '0 3 * * *', 'UTC', 'tb', '\"b\"',"
        " 'default', 'b', 0, 3, false)"
    )
    putting = Background(
        lambda: store.run_queue.put_schedule(
            Schedule("nightly", "0 4 * * *", "ta", "a", tenant="a")
        )
    )
    time.sleep(WAIT)
    assert not putting.done(), "a's put did not wait for b's"
    raw.commit()
    with pytest.raises(ValidationError, match="another tenant"):
        putting.join()
    (kept,) = store.run_queue.schedules()
    assert (kept.schedule.tenant, kept.schedule.thread_id, kept.schedule.input) == ("b", "tb", "b")
