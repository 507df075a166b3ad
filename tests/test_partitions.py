"""The store over PL/Proxy partitions (SPEC §16): the contract suites through a proxy of 8
partitions on 3 throwaway servers, the amended rules of §16.2 on their own, setup and failure.

The servers are started once per session (`partitioned` fixture: 3 fresh servers, besides the
session's own, 8 partition databases round-robin, the proxy database on the first), the store
set up by `durable_graph.postgres.partitions.layout.init`; every test empties the partitions first.
Needs Debian's ``postgresql-15-plproxy`` (`make pg-deps` installs it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from durable_graph.core.errors import (
    ProcessingError,
    SubmissionKeyReused,
    ThreadBusy,
    ValidationError,
)
from durable_graph.core.model import ANY, Commit, Completed, Mode, RetentionPolicy, Submission
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig, migrations
from durable_graph.postgres.async_store import AsyncPostgresCheckpointer
from durable_graph.postgres.partitions import layout, partition_of_thread
from durable_graph.testkit import Harness
from durable_graph.testkit.contract.amended import amended_names
from durable_graph.testkit.contract.checkpointer.suite import CheckpointerContract
from durable_graph.testkit.contract.run_queue.suite import RunQueueContract
from durable_graph.testkit.postgres import partitioned
from durable_graph.testkit.postgres import server as pg_server
from durable_graph.testkit.postgres.schema import reset_store

SCHEMA = "dg"


@pytest.fixture(scope="session")
def partitioned_store() -> Iterator[partitioned.PartitionedStore]:
    with partitioned.started(count=3, n=8, schema=SCHEMA) as store:
        yield store


@pytest.fixture(scope="session")
def partitioned_clock(partitioned_store: partitioned.PartitionedStore) -> partitioned.MultiClock:
    return partitioned_store.clock()


@pytest.fixture(scope="session")
def proxy_pool(partitioned_store: partitioned.PartitionedStore) -> Iterator[ConnectionPool[Any]]:
    """One pool on the proxy for every test: a proxy backend keeps its connections to the
    partitions, so a fresh pool per test would pay 8 partition connections per backend."""
    config = PostgresConfig(schema=SCHEMA)
    pool: ConnectionPool[Any] = ConnectionPool(
        partitioned_store.proxy,
        min_size=1,
        max_size=8,
        kwargs=config.connection_kwargs(),
        open=True,
    )
    try:
        yield pool
    finally:
        pool.close()


def _proxy_harness(
    ps: partitioned.PartitionedStore, clock: partitioned.MultiClock, pool: ConnectionPool[Any]
) -> Iterator[Harness]:
    ps.reset()
    store = PostgresCheckpointer.create(pool, PostgresConfig(schema=SCHEMA, auto_migrate=False))
    try:
        yield Harness(store, clock)
    finally:
        store.close()


class TestProxyCheckpointerContract(CheckpointerContract):
    # The rules §16.2 amends are left out here (None is not collected) and tested below.
    locals().update(dict.fromkeys(amended_names(CheckpointerContract)))

    @pytest.fixture
    def harness(
        self,
        partitioned_store: partitioned.PartitionedStore,
        partitioned_clock: partitioned.MultiClock,
        proxy_pool: ConnectionPool[Any],
    ) -> Iterator[Harness]:
        yield from _proxy_harness(partitioned_store, partitioned_clock, proxy_pool)


class TestProxyRunQueueContract(RunQueueContract):
    locals().update(dict.fromkeys(amended_names(RunQueueContract)))

    @pytest.fixture
    def harness(
        self,
        partitioned_store: partitioned.PartitionedStore,
        partitioned_clock: partitioned.MultiClock,
        proxy_pool: ConnectionPool[Any],
    ) -> Iterator[Harness]:
        yield from _proxy_harness(partitioned_store, partitioned_clock, proxy_pool)


# --- the amended rules of §16.2, on the proxy and on one store ----------------------------

SEP = "\x1f"


@pytest.fixture(params=["proxy", "one"])
def any_store(
    request: pytest.FixtureRequest,
    partitioned_store: partitioned.PartitionedStore,
    partitioned_clock: partitioned.MultiClock,
    proxy_pool: ConnectionPool[Any],
    pg_dsn: str,
    class_schema: tuple[str, Any],
) -> Iterator[Harness]:
    """The proxy, and one plain store (one partition): an amended rule holds on both."""
    if request.param == "proxy":
        yield from _proxy_harness(partitioned_store, partitioned_clock, proxy_pool)
        return
    schema, clock = class_schema
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        reset_store(conn, schema)
    store = PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=schema, auto_migrate=False))
    try:
        yield Harness(store, clock)
    finally:
        store.close()


def _commit(store: Any, claim: Any, cid: str, parent: str | None = None, **kw: Any) -> Any:
    return store.commit(
        claim, Commit(checkpoint_id=cid, parent_id=parent, run_id="r", state={}, **kw)
    )


def test_root_rule_children_fences_copies_and_deletes_stay_in_the_tree(any_store: Harness) -> None:
    """Children named root U+001F suffix live with their root: listed, fenced, copied, deleted."""
    store = any_store.store
    root = "tree"
    parent = store.claim(root, "w")
    _commit(store, parent, "p1")
    kids = [f"{root}{SEP}kid-{i}" for i in range(4)]
    for kid in kids:
        claim = store.claim(kid, "w")
        _commit(store, claim, "k1", parent_thread_id=root, fence=parent)
        store.release_claim(claim)
    assert store.children(root) == kids
    assert store.children(root, limit=2) == kids[:2]
    assert store.children(root, after=kids[1]) == kids[2:]
    # A copy within the tree (its root's partition) copies the descendants named after it.
    assert store.copy_thread(root, f"{root}{SEP}copy") is True
    copied = store.children(f"{root}{SEP}copy")
    assert copied == [f"{root}{SEP}copy{SEP}kid-{i}" for i in range(4)] or copied == []
    assert store.get(f"{root}{SEP}copy") is not None
    assert store.delete_thread(root, fence=parent) is True
    assert all(store.thread(k) is None or store.get(k) is None for k in kids)


def test_root_rule_refuses_a_parent_on_another_partition(
    partitioned_store: partitioned.PartitionedStore,
    partitioned_clock: partitioned.MultiClock,
    proxy_pool: ConnectionPool[Any],
) -> None:
    """On the proxy a first commit naming a parent on another partition is a ValidationError
    naming the argument, and nothing is written."""
    store = _proxy_store(partitioned_store, proxy_pool)
    n = len(partitioned_store.partitions)
    parent = "parent"
    other = next(
        f"c{i}"
        for i in range(100)
        if partition_of_thread(f"c{i}", n) != partition_of_thread(parent, n)
    )
    pclaim = store.claim(parent, "w")
    _commit(store, pclaim, "p1")
    claim = store.claim(other, "w")
    with pytest.raises(ValidationError, match="parent_thread_id"):
        _commit(store, claim, "k1", parent_thread_id=parent)
    with pytest.raises(ValidationError, match="fence_thread_id"):
        _commit(store, claim, "k1", fence=pclaim)
    with pytest.raises(ValidationError, match="target_thread_id"):
        store.copy_thread(parent, other)
    # The fused finish (SPEC §18.1, entry-keyed) refuses them as the commit does: nothing written.
    store.release_claim(claim)
    store.run_queue.submit(Submission(other, {}))
    begun = store.begin_attempt("w", timedelta(minutes=1), run_id="r")
    assert begun is not None and begun.claim is not None
    commits = {
        "parent_thread_id": Commit("k1", None, "r", {}, parent_thread_id=parent),
        "fence_thread_id": Commit("k1", None, "r", {}, fence=pclaim),
    }
    for name, commit in commits.items():
        with pytest.raises(ValidationError, match=name):
            store.finish_attempt(begun.lease, Completed(None), begun.claim, commit=commit)
    entry = store.run_queue.entry(begun.entry.entry_id)
    assert entry is not None and entry.outcome is None
    assert store.get(other) is None
    store.close()


def _proxy_store(ps: partitioned.PartitionedStore, pool: ConnectionPool[Any]) -> Any:
    """A store on the emptied proxy; the caller closes it."""
    ps.reset()
    return PostgresCheckpointer.create(pool, PostgresConfig(schema=SCHEMA, auto_migrate=False))


def test_tokens_unique_store_wide_and_increasing_per_thread(any_store: Harness) -> None:
    store = any_store.store
    tokens: list[int] = []
    for i in range(12):
        thread = f"tok-{i}"
        last = 0
        for _ in range(3):
            claim = store.claim(thread, "w")
            assert claim.token > last
            last = claim.token
            tokens.append(claim.token)
            store.release_claim(claim)
    queue = store.run_queue
    for i in range(6):
        queue.submit(Submission(f"lease-{i}", {"i": i}))
    while (lease := queue.lease("w", timedelta(minutes=1))) is not None:
        tokens.append(lease.token)
    assert len(set(tokens)) == len(tokens)


def test_entry_ids_unique_and_increasing_per_thread(any_store: Harness) -> None:
    queue = any_store.store.run_queue
    ids: dict[str, list[int]] = {}
    for round_ in range(3):
        for i in range(8):
            ticket = queue.submit(Submission(f"t-{i}", {"r": round_}))
            ids.setdefault(f"t-{i}", []).append(ticket.entry_id)
    every = [e for per in ids.values() for e in per]
    assert len(set(every)) == len(every)
    assert all(per == sorted(per) for per in ids.values())


def test_listings_page_every_entry_and_thread_exactly_once(any_store: Harness) -> None:
    """open_entries, entries and threads pages (one cursor, a position per partition on the
    proxy) list everything once: each thread's entries in queue order, entries newest first
    within a thread."""
    store = any_store.store
    queue = store.run_queue
    submitted: dict[int, str] = {}
    for round_ in range(2):
        for i in range(10):
            submitted[queue.submit(Submission(f"l-{i}", {"r": round_})).entry_id] = f"l-{i}"
    for page_size in (1, 3, 7):
        seen: list[Any] = []
        after = None
        while page := queue.open_entries(tenant=ANY, after=after, limit=page_size):
            seen.extend(page)
            after = page[-1].entry_id
        assert sorted(e.entry_id for e in seen) == sorted(submitted)
        for thread in set(submitted.values()):
            per = [e.entry_id for e in seen if e.thread_id == thread]
            assert per == sorted(per)
        newest: list[Any] = []
        cursor = None
        while page := queue.entries(tenant=ANY, after=cursor, limit=page_size):
            newest.extend(page)
            cursor = page[-1].entry_id
        assert sorted(e.entry_id for e in newest) == sorted(submitted)
    for i in range(10):
        claim = store.claim(f"l-{i}", "w")
        _commit(store, claim, "c1")
        store.release_claim(claim)
    names: list[str] = []
    after_thread = None
    while rows := store.threads(after=after_thread, limit=3):
        names.extend(r.thread_id for r in rows)
        after_thread = rows[-1].thread_id
    assert names == sorted({f"l-{i}" for i in range(10)}, key=lambda s: s.encode())


def test_open_entries_groups_threads_by_their_opening_entry_in_id_order(
    any_store: Harness,
) -> None:
    """D65's places through the proxy: a thread's open entries stay together, placed by the id
    of the entry that opened its stretch (ids of different partitions compare as numbers, the
    amended order), INTERRUPT first inside it; a thread whose entries all closed starts a new
    stretch at its next entry's id."""
    queue = any_store.store.run_queue

    def submit(thread: str, mode: Mode = Mode.ENQUEUE) -> int:
        return queue.submit(Submission(thread, "go", mode=mode)).entry_id

    a_first = submit("thread-a")
    b_first = submit("thread-b")
    a_interrupt = submit("thread-a", Mode.INTERRUPT)
    c_first = submit("thread-c")
    b_later = submit("thread-b")
    groups = sorted(
        [(a_first, [a_interrupt, a_first]), (b_first, [b_first, b_later]), (c_first, [c_first])]
    )
    listed = [e.entry_id for e in queue.open_entries()]
    assert listed == [i for _, ids in groups for i in ids]
    assert [e.entry_id for e in queue.open_entries(after=listed[1], limit=2)] == listed[2:4]
    queue.cancel(a_interrupt)
    queue.cancel(a_first)
    a_again = submit("thread-a")
    groups = sorted([(b_first, [b_first, b_later]), (c_first, [c_first]), (a_again, [a_again])])
    assert [e.entry_id for e in queue.open_entries()] == [i for _, ids in groups for i in ids]


def _threads_on_two_partitions(n: int) -> tuple[str, str]:
    """Two thread ids, the first on a lower partition than the second (written first)."""
    low = next(f"w{i}" for i in range(1000) if partition_of_thread(f"w{i}", n) == 1)
    high = next(f"w{i}" for i in range(1000) if partition_of_thread(f"w{i}", n) == 6)
    return low, high


def test_submit_many_across_partitions_refused_in_its_check_writes_nothing(
    partitioned_store: partitioned.PartitionedStore, proxy_pool: ConnectionPool[Any]
) -> None:
    """A refusal on a later partition found in the check phase: nothing written anywhere, and
    no group's INTERRUPT closed anything."""
    store = _proxy_store(partitioned_store, proxy_pool)
    queue = store.run_queue
    low, high = _threads_on_two_partitions(len(partitioned_store.partitions))
    queued = queue.submit(Submission(low, 1, mode=Mode.INTERRUPT)).entry_id
    busy = queue.submit(Submission(high, 1)).entry_id
    with pytest.raises(ThreadBusy):
        queue.submit_many(
            [
                Submission(low, 2, mode=Mode.INTERRUPT, key="k"),
                Submission(high, 2, mode=Mode.REJECT),
            ]
        )
    assert sorted(e.entry_id for e in queue.open_entries(tenant=ANY)) == sorted([queued, busy])
    assert queue.submit(Submission(low, 2, mode=Mode.INTERRUPT, key="k")).existing is False
    store.close()


def test_submit_many_across_partitions_refused_in_its_write_undoes_the_groups_written(
    partitioned_store: partitioned.PartitionedStore, proxy_pool: ConnectionPool[Any]
) -> None:
    """A later partition accepts the check and refuses the write (its state changed between the
    two; a trigger stands in for the race): the earlier partition's group is undone — its
    entries deleted (their key free again), the entry its INTERRUPT closed reopened."""
    ps = partitioned_store
    store = _proxy_store(ps, proxy_pool)
    queue = store.run_queue
    low, high = _threads_on_two_partitions(len(ps.partitions))
    queued = queue.submit(Submission(low, 1, mode=Mode.INTERRUPT)).entry_id
    with psycopg.connect(ps.partitions[6], autocommit=True) as conn:
        conn.execute(
            f"CREATE SEQUENCE {SCHEMA}.race_seq;"
            f" CREATE FUNCTION {SCHEMA}.race() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            f" IF nextval('{SCHEMA}.race_seq') = 2 THEN"  # the write, after the check
            "  RAISE EXCEPTION 'thread has an open entry' USING ERRCODE = 'DG001'; END IF;"
            " RETURN NEW; END $$;"
            f" CREATE TRIGGER race BEFORE INSERT ON {SCHEMA}.queue_entries"
            f" FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.race()"
        )
        try:
            with pytest.raises(ThreadBusy):
                queue.submit_many(
                    [
                        Submission(low, 2, mode=Mode.INTERRUPT, key="k"),
                        Submission(f"{low}{SEP}child", 3),
                        Submission(high, 2, key="k2"),  # a key: its group is checked first
                    ]
                )
        finally:
            conn.execute(
                f"DROP TRIGGER race ON {SCHEMA}.queue_entries; DROP FUNCTION {SCHEMA}.race();"
                f" DROP SEQUENCE {SCHEMA}.race_seq"
            )
    assert [e.entry_id for e in queue.open_entries(tenant=ANY)] == [queued]
    entry = queue.entry(queued)
    assert entry is not None and entry.outcome is None
    lease = queue.lease("w", timedelta(seconds=30))
    assert lease is not None and lease.entry.entry_id == queued
    assert queue.submit(Submission(low, 2, mode=Mode.INTERRUPT, key="k")).existing is False
    store.close()


def test_submit_many_undo_deletes_what_is_untouched_and_keeps_what_was_leased(
    pg_dsn: str, class_schema: tuple[str, Any]
) -> None:
    """dg_submit_many_undo_v1 on one store: entries still open and never leased are deleted and
    what their INTERRUPT closed reopens; a leased one stays and is returned."""
    schema, _ = class_schema
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        reset_store(conn, schema)
    store = PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=schema, auto_migrate=False))
    try:
        queue = store.run_queue
        queued = queue.submit(Submission("u-1", 1, mode=Mode.INTERRUPT)).entry_id
        tickets = queue.submit_many(
            [Submission("u-1", 2, mode=Mode.INTERRUPT), Submission("u-2", 1)]
        )
        lease = queue.lease("w", timedelta(seconds=30))
        assert lease is not None and lease.entry.entry_id == tickets[0].entry_id
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            kept = conn.execute(
                f"SELECT entry_id FROM {schema}.dg_submit_many_undo_v1(%s)",
                ([t.entry_id for t in tickets] + [10_000],),
            ).fetchall()
        assert sorted(k for (k,) in kept) == [tickets[0].entry_id, 10_000]
        assert queue.entry(tickets[1].entry_id) is None
        assert queue.entry(queued) is not None
        assert [e.entry_id for e in queue.open_entries(tenant=ANY)] == [tickets[0].entry_id]
    finally:
        store.close()


def test_a_concurrency_limit_holds_store_wide(any_store: Harness) -> None:
    """A tenant at limit 2 and a kind at limit 1, their entries on threads of every partition:
    at most 2 (and 1) live leases in all, however many partitions hold waiting heads; a closed
    or expired lease frees its place; other tenants and kinds are not held back."""
    store = any_store.store
    queue = store.run_queue
    ttl = timedelta(minutes=1)
    queue.set_limit("tenant", "acme", 2)
    queue.set_limit("kind", "gpu", 1)
    acme = {queue.submit(Submission(f"acme-{i}", i, tenant="acme")).entry_id for i in range(16)}
    gpu = {queue.submit(Submission(f"gpu-{i}", i, kind="gpu")).entry_id for i in range(16)}
    plain = {queue.submit(Submission(f"plain-{i}", i)).entry_id for i in range(4)}
    leases = []
    while (lease := queue.lease("w", ttl, tenant=ANY)) is not None:
        leases.append(lease)
    ids = [lease.entry.entry_id for lease in leases]
    assert len([i for i in ids if i in acme]) == 2
    assert len([i for i in ids if i in gpu]) == 1
    assert plain <= set(ids)
    first_acme = next(lease for lease in leases if lease.entry.entry_id in acme)
    queue.close(first_acme, Completed())
    again = queue.lease("w", ttl, tenant=ANY)
    assert again is not None and again.entry.entry_id in acme
    assert queue.lease("w", ttl, tenant=ANY) is None
    begun = store.begin_attempt("w", ttl, run_id="r-1", tenant=ANY)
    assert begun is None
    any_store.clock.advance(timedelta(minutes=2))  # every lease expired: every place free
    taken = []
    while (lease := queue.lease("w", ttl, tenant=ANY)) is not None:
        taken.append(lease.entry.entry_id)
    assert len([i for i in taken if i in acme]) == 2
    assert len([i for i in taken if i in gpu]) == 1
    assert queue.remove_limit("tenant", "acme") is True
    assert queue.lease("w", ttl, tenant=ANY) is not None


def test_a_concurrency_limit_holds_under_concurrent_leases_through_the_proxy(
    partitioned_store: partitioned.PartitionedStore, proxy_pool: ConnectionPool[Any]
) -> None:
    """Eight workers leasing at once through the proxy (each call its own proxy backend): a
    tenant at limit 3 with waiting entries on every partition gets exactly 3 leases."""
    store = _proxy_store(partitioned_store, proxy_pool)
    queue = store.run_queue
    queue.set_limit("tenant", "acme", 3)
    acme = {queue.submit(Submission(f"c-{i}", i, tenant="acme")).entry_id for i in range(40)}
    leased: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)  # all eight lease at once, none ahead of the others

    def work(n: int) -> None:
        try:
            start.wait()
            while (lease := queue.lease(f"w-{n}", timedelta(minutes=1), tenant=ANY)) is not None:
                leased.append(lease.entry.entry_id)
        except BaseException as exc:  # reported on the test's thread
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert not errors
    assert len(leased) == 3 and set(leased) <= acme
    store.close()


def test_submission_keys_unique_within_a_partition(any_store: Harness) -> None:
    """Same key, same thread: the same ticket; same key on another thread of the same tree
    (so the same partition): SubmissionKeyReused."""
    queue = any_store.store.run_queue
    first = queue.submit(Submission("k-root", {"a": 1}, key="key-1"))
    again = queue.submit(Submission("k-root", {"a": 1}, key="key-1"))
    assert again.entry_id == first.entry_id and again.existing
    with pytest.raises(SubmissionKeyReused):
        queue.submit(Submission(f"k-root{SEP}other", {"a": 1}, key="key-1"))


def test_lease_any_takes_at_most_one_entry_oldest_first(any_store: Harness) -> None:
    """Each lease(tenant=ANY) takes one entry; with submissions a second apart the leases come
    in submission order (the partition with the oldest head first)."""
    queue = any_store.store.run_queue
    order = []
    for i in range(10):
        order.append(queue.submit(Submission(f"fifo-{i}", {"i": i})).entry_id)
        any_store.clock.advance(timedelta(seconds=1))
    leased = []
    while (lease := queue.lease("w", timedelta(minutes=1))) is not None:
        leased.append(lease.entry.entry_id)
        assert len(queue.open_entries(tenant=ANY)) == 10  # leased entries stay open
    assert leased == order


def test_submit_many_ordinals_and_tickets(any_store: Harness) -> None:
    queue = any_store.store.run_queue
    subs = [Submission(f"m-{i % 7}", {"i": i}) for i in range(20)]
    tickets = queue.submit_many(subs)
    assert len(tickets) == 20
    for sub, ticket in zip(subs, tickets, strict=True):
        entry = queue.entry(ticket.entry_id)
        assert entry is not None and entry.thread_id == sub.thread_id and entry.input == sub.input


def test_sweeps_stay_within_their_batch(any_store: Harness) -> None:
    store = any_store.store
    queue = store.run_queue
    for i in range(16):
        queue.submit(Submission(f"s-{i}", {"i": i}))
    while (lease := queue.lease("w", timedelta(minutes=1))) is not None:
        queue.close(lease, Completed({"ok": True}))
    removed = []
    while got := queue.reclaim(timedelta(0), batch=5):
        assert got <= 5
        removed.append(got)
    assert sum(removed) == 16
    for i in range(9):
        claim = store.claim(f"s-{i}", "w")
        parent = None
        for c in range(4):
            _commit(store, claim, f"c{c}", parent)
            parent = f"c{c}"
        store.release_claim(claim)
    result = store.prune_all(RetentionPolicy(keep_last=1), batch=2)
    assert result.checkpoints_removed == 9 * 3
    assert all(len(store.history(f"s-{i}")) == 1 for i in range(9))


# --- the store on a proxy (§16.3) -----------------------------------------------------------


def test_store_on_a_proxy_never_installs_into_it(
    partitioned_store: partitioned.PartitionedStore,
) -> None:
    """auto_migrate=True on a proxy verifies it and its partitions and installs nothing; the
    store polls (no listener: the proxy is never notified)."""
    ps = partitioned_store
    store = PostgresCheckpointer.open(ps.proxy, PostgresConfig(schema=SCHEMA))
    try:
        assert store.changes is None
        with psycopg.connect(ps.proxy) as conn:
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (SCHEMA,)
            ).fetchall()
            assert tables == [("schema_meta",)]
            assert migrations.kind(conn, SCHEMA) == "proxy"
        store.thread("whatever")
    finally:
        store.close()
    assert layout.verify(ps.proxy, SCHEMA) == []


def test_a_changed_proxy_is_refused_until_regenerated(
    partitioned_store: partitioned.PartitionedStore,
) -> None:
    ps = partitioned_store
    with psycopg.connect(ps.proxy, autocommit=True) as conn:
        conn.execute(
            "CREATE OR REPLACE FUNCTION dg._dg_entry_part(p_entry_id bigint) RETURNS integer"
            " LANGUAGE sql IMMUTABLE AS $$ SELECT 0 $$"
        )
    try:
        for auto in (True, False):
            with pytest.raises(ProcessingError, match="routing functions were changed"):
                PostgresCheckpointer.open(
                    ps.proxy, PostgresConfig(schema=SCHEMA, auto_migrate=auto)
                )
        assert any("routing functions" in p for p in layout.verify(ps.proxy, SCHEMA))
    finally:
        layout.migrate(ps.proxy, SCHEMA)
    assert layout.verify(ps.proxy, SCHEMA) == []
    PostgresCheckpointer.open(ps.proxy, PostgresConfig(schema=SCHEMA, auto_migrate=False)).close()


def test_cli_partitions_verify_migrate_and_grant(
    partitioned_store: partitioned.PartitionedStore,
    partitioned_clock: partitioned.MultiClock,
    proxy_pool: ConnectionPool[Any],
) -> None:
    """`durable-graph partitions verify|migrate` and `grant` on the proxy's DSN (every
    partition and the proxy): a runtime role then works through the proxy, as itself on the
    partitions."""
    ps = partitioned_store
    ps.reset()
    base = [sys.executable, "-m", "durable_graph.cli", "--dsn", ps.proxy, "--schema", SCHEMA]
    for action in ("verify", "migrate", "verify"):
        done = subprocess.run([*base[:3], "partitions", action, *base[3:]], capture_output=True)
        assert done.returncode == 0, done.stderr
    role = "dg_part_runtime"
    for server in ps.servers:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute(f"DROP ROLE IF EXISTS {role}")
            conn.execute(f"CREATE ROLE {role} LOGIN")
    done = subprocess.run([*base[:3], "grant", *base[3:], "--role", role], capture_output=True)
    assert done.returncode == 0, done.stderr
    as_role = ps.proxy.replace("user=postgres", f"user={role}")
    store = PostgresCheckpointer.open(as_role, PostgresConfig(schema=SCHEMA, auto_migrate=False))
    try:
        claim = store.claim("granted", "w")
        _commit(store, claim, "c1")
        assert store.get("granted") is not None
        store.run_queue.submit(Submission("granted", {"x": 1}))
        assert store.run_queue.lease("w", timedelta(minutes=1)) is not None
        assert [t.thread_id for t in store.threads()] == ["granted"]
        # The proxy connected to the partitions as the role itself (least privilege).
        with psycopg.connect(ps.partitions[0], autocommit=True) as conn:
            seen = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE usename = %s"
                " AND datname LIKE 'dg_part%%'",
                (role,),
            ).fetchone()
        assert seen is not None and seen[0] >= 1
    finally:
        store.close()
    # A migrate regenerates the proxy's functions and keeps the role's grants.
    done = subprocess.run([*base[:3], "partitions", "migrate", *base[3:]], capture_output=True)
    assert done.returncode == 0, done.stderr
    store = PostgresCheckpointer.open(as_role, PostgresConfig(schema=SCHEMA, auto_migrate=False))
    try:
        assert [t.thread_id for t in store.threads()] == ["granted"]
    finally:
        store.close()


def test_a_partition_down_fails_its_own_threads_and_names_itself(
    partitioned_store: partitioned.PartitionedStore,
    partitioned_clock: partitioned.MultiClock,
    proxy_pool: ConnectionPool[Any],
) -> None:
    """With one server (partitions 2 and 5) stopped: calls on their threads raise
    ProcessingError naming the partition, other threads' calls go on, lease takes from the
    partitions that are up, listings raise ProcessingError naming the missing partitions; all
    is well again once the server is back."""
    ps = partitioned_store
    store = _proxy_store(ps, proxy_pool)
    queue = store.run_queue
    n = len(ps.partitions)
    down = {p for p in range(n) if p % len(ps.servers) == 2}
    threads = {
        p: next(f"d{i}" for i in range(1000) if partition_of_thread(f"d{i}", n) == p)
        for p in range(n)
    }
    for thread in threads.values():
        queue.submit(Submission(thread, {"t": thread}))
    server = ps.servers[2]
    server.pg_ctl("stop", "-m", "fast", "-w")
    try:
        for p, thread in threads.items():
            if p in down:
                with pytest.raises(ProcessingError, match=f"dg_part{p}"):
                    store.thread(thread)
            else:
                assert store.thread(thread) is None  # no checkpoint yet, but answered
        leased = []
        while (lease := queue.lease("w", timedelta(minutes=1))) is not None:
            leased.append(lease.entry.thread_id)
        assert sorted(leased) == sorted(t for p, t in threads.items() if p not in down)
        for listing in (store.threads, lambda: queue.open_entries(tenant=ANY)):
            with pytest.raises(ProcessingError, match=r"partition\(s\) 2, 5 are unavailable"):
                listing()
    finally:
        server.pg_ctl("start", "-w", "-t", "60", "-l", f"{server.datadir}/server.log")
    for thread in threads.values():
        for _ in range(3):  # the proxy's first call after the restart may find a dead connection
            try:
                store.thread(thread)
                break
            except ProcessingError:
                continue
    assert len(queue.open_entries(tenant=ANY)) == n
    store.close()


def test_the_documented_hash_is_the_proxys(partitioned_store: partitioned.PartitionedStore) -> None:
    """`partition_of_thread` (the documented hash) routes as the proxy does, roots included;
    entry ids route by their residue."""
    ids = [f"t-{i}" for i in range(200)] + ["ünï-cödé", "a\x1fb", "a\x1fc\x1fd", "x" * 512]
    n = len(partitioned_store.partitions)
    with psycopg.connect(partitioned_store.proxy) as conn:
        rows = conn.execute(
            "SELECT t, dg._dg_thread_part(t) FROM unnest(%s::text[]) t", (ids,)
        ).fetchall()
        assert {t: p for t, p in rows} == {t: partition_of_thread(t, n) for t in ids}
        assert partition_of_thread("a\x1fb", n) == partition_of_thread("a", n)
        row = conn.execute("SELECT dg._dg_entry_part(8 * 1000 + 5)").fetchone()
        assert row == (5,)


def test_the_async_store_on_a_proxy_polls_and_routes(
    partitioned_store: partitioned.PartitionedStore,
) -> None:
    async def main() -> None:
        store = await AsyncPostgresCheckpointer.open(
            partitioned_store.proxy, PostgresConfig(schema=SCHEMA, auto_migrate=False)
        )
        try:
            assert store.changes is None
            claim = await store.claim("async-thread", "w")
            await store.commit(
                claim, Commit(checkpoint_id="c1", parent_id=None, run_id="r", state={"a": 1})
            )
            got = await store.get("async-thread")
            assert got is not None and got.state == {"a": 1}
            assert "async-thread" in [t.thread_id for t in await store.threads()]
        finally:
            await store.close()

    partitioned_store.reset()
    asyncio.run(main())


# --- credentials, outages and remedies (issue 37 items 3-5) ---------------------------------


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durable_graph.cli", *argv], capture_output=True, text=True
    )


def test_partition_dsns_carry_no_credentials_and_each_role_runs_as_itself(
    partitioned_store: partitioned.PartitionedStore,
) -> None:
    """`partitions init --server "... user=DBA password=..."` keeps the DBA's login out of the
    cluster (whose options every role of the proxy database reads): a runtime role reads no
    password there, reaches the partitions as itself, and cannot run an admin function on
    them. A partition DSN given with credentials is refused before anything is written; a
    cluster that holds them (set up by hand, or before) is named by `verify` and cleaned by
    `migrate`."""
    servers = partitioned_store.servers[:2]
    schema, prefix, role = "cred", "dg_cred", "dg_cred_runtime"
    with psycopg.connect(servers[0].dsn(), autocommit=True) as admin:
        admin.execute("CREATE DATABASE dg_cred_proxy")
    proxy = servers[0].dsn("dg_cred_proxy")
    secret = "the-dbas-secret"
    logins = [f"host={s.host} port={s.port} user={s.user} password={secret}" for s in servers]
    # A --partition DSN with a login: a usage error naming it, nothing written.
    refused = _cli(
        "partitions", "init", "--dsn", proxy, "--schema", schema,
        "--partition", f"{logins[0]} dbname=postgres", "--partition", f"{logins[1]} dbname=postgres",
    )  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    assert "--partition must not carry credentials (user, password)" in refused.stderr
    with pytest.raises(ValidationError, match=r"partitions\[1\] must not carry credentials"):
        layout.init(proxy, ["dbname=x", f"dbname=x user={role}"], schema)
    with psycopg.connect(proxy) as conn:
        assert conn.execute("SELECT count(*) FROM pg_foreign_server").fetchone() == (0,)
    done = _cli(
        "partitions", "init", "--dsn", proxy, "--schema", schema, "--server", logins[0],
        "--server", logins[1], "--partitions", "2", "--database-prefix", prefix,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for server in servers:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute(f"DROP ROLE IF EXISTS {role}")
            conn.execute(f"CREATE ROLE {role} LOGIN")
    done = _cli("grant", "--dsn", proxy, "--schema", schema, "--role", role)
    assert done.returncode == 0, done.stderr
    as_role = servers[0].dsn("dg_cred_proxy").replace(f"user={servers[0].user}", f"user={role}")
    with psycopg.connect(as_role, autocommit=True) as conn:
        (options,) = conn.execute(
            "SELECT srvoptions FROM pg_foreign_server WHERE srvname = %s", (f"dg_{schema}",)
        ).fetchone() or (None,)
        assert options is not None and len(options) == 3  # connection_lifetime, p0, p1
        assert not any(secret in o or "user=" in o or "password" in o for o in options)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"SELECT * FROM {schema}.dg_admin_set_limit_v1('max_page_bytes', 1)")
    for part in range(2):
        with psycopg.connect(servers[part].dsn(f"{prefix}{part}")) as conn:
            row = conn.execute(f"SELECT max_page_bytes FROM {schema}.limits").fetchone()
            assert row is not None and row[0] > 1
    store = PostgresCheckpointer.open(as_role, PostgresConfig(schema=schema, auto_migrate=False))
    try:
        for part in range(2):
            thread = next(f"r{i}" for i in range(100) if partition_of_thread(f"r{i}", 2) == part)
            _commit(store, store.claim(thread, "w"), "c1")
            with psycopg.connect(servers[part].dsn(), autocommit=True) as conn:
                users = conn.execute(
                    "SELECT DISTINCT usename FROM pg_stat_activity WHERE datname = %s",
                    (f"{prefix}{part}",),
                ).fetchall()
            assert (role,) in users  # the proxy's connection for the role's calls
    finally:
        store.close()
    # A cluster holding a login (by hand, or set up before): verify names it, migrate drops it.
    with psycopg.connect(proxy, autocommit=True) as conn:
        given = f"host={servers[1].host} port={servers[1].port} dbname={prefix}1"
        login = f"{given} user={servers[1].user} password={secret}"
        conn.execute(
            psycopg.sql.SQL("ALTER SERVER {} OPTIONS (SET p1 {})").format(
                psycopg.sql.Identifier(f"dg_{schema}"), psycopg.sql.Literal(login)
            )
        )
    checked = _cli("partitions", "verify", "--dsn", proxy, "--schema", schema)
    assert checked.returncode == 1
    assert "partition 1: the cluster's DSN of partition 1 must not carry credentials" in (
        checked.stderr
    )
    done = _cli("partitions", "migrate", "--dsn", proxy, "--schema", schema)
    assert done.returncode == 0, done.stderr
    kept = layout.read_layout(proxy, schema).partitions[1]
    assert psycopg.conninfo.conninfo_to_dict(kept) == psycopg.conninfo.conninfo_to_dict(given)
    assert layout.verify(proxy, schema) == []


def test_verify_names_the_partitions_migrate_option_that_exists(
    partitioned_store: partitioned.PartitionedStore,
) -> None:
    """A proxy changed since generated: `partitions verify` names the remedy as a command that
    runs (`partitions migrate --dsn ...`), and running it so makes the proxy current."""
    ps = partitioned_store
    with psycopg.connect(ps.proxy, autocommit=True) as conn:
        conn.execute(
            "CREATE OR REPLACE FUNCTION dg._dg_entry_part(p_entry_id bigint) RETURNS integer"
            " LANGUAGE sql IMMUTABLE AS $$ SELECT 0 $$"
        )
    try:
        checked = _cli("partitions", "verify", "--dsn", ps.proxy, "--schema", SCHEMA)
        assert checked.returncode == 1
        remedy = f"run durable-graph partitions migrate --dsn PROXY_DSN --schema {SCHEMA}"
        assert remedy in checked.stderr and "--proxy" not in checked.stderr
        # The remedy as written, the proxy's DSN put in: it runs and fixes the proxy.
        command = remedy.removeprefix("run durable-graph ").replace("PROXY_DSN", "'{}'")
        done = _cli(*shlex.split(command.format(ps.proxy)))
        assert done.returncode == 0, done.stderr
    finally:
        layout.migrate(ps.proxy, SCHEMA)
    assert layout.verify(ps.proxy, SCHEMA) == []


def test_a_store_opened_while_a_partition_is_down_serves_the_others(
    partitioned_store: partitioned.PartitionedStore,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    """With the server of partitions 2 and 5 stopped, a store opens (with and without
    auto_migrate, sync and async) and logs the missing partitions by number; its calls on the
    live partitions' threads work, a call routed to a down one is a ProcessingError naming the
    partition's database as unavailable; a CLI command on a live partition's thread works and
    one on a down partition's thread fails saying so; a worker started during the outage runs
    a live partition's entry; nobody is told to migrate."""
    ps = partitioned_store
    ps.reset()
    n = len(ps.partitions)
    threads = {
        p: next(f"o{i}" for i in range(1000) if partition_of_thread(f"o{i}", n) == p)
        for p in range(n)
    }
    live, dead = threads[1], threads[2]
    setup = PostgresCheckpointer.open(ps.proxy, PostgresConfig(schema=SCHEMA, auto_migrate=False))
    try:
        _commit(setup, setup.claim(live, "w"), "c1")
    finally:
        setup.close()
    server = ps.servers[2]
    server.pg_ctl("stop", "-m", "fast", "-w")
    try:
        for auto in (True, False):
            with caplog.at_level(logging.WARNING, logger="durable_graph.postgres.partitions"):
                store = PostgresCheckpointer.open(
                    ps.proxy, PostgresConfig(schema=SCHEMA, auto_migrate=auto)
                )
            try:
                # Said once (a store opened again within a minute does not repeat it).
                warned = [r for r in caplog.records if "are unavailable" in r.getMessage()]
                assert len(warned) == 1
                assert "partition(s) 2, 5 of 8 of proxy schema dg are unavailable" in (
                    warned[0].getMessage()
                )
                got = store.get(live)
                assert got is not None and got.checkpoint_id == "c1"
                store.run_queue.submit(Submission(threads[3], {"x": 1}))
                with pytest.raises(ProcessingError) as failed:
                    store.thread(dead)
                assert "partition database dg_part2 is unavailable" in str(failed.value)
            finally:
                store.close()

        async def open_async() -> None:
            store = await AsyncPostgresCheckpointer.open(
                ps.proxy, PostgresConfig(schema=SCHEMA, auto_migrate=True)
            )
            try:
                assert await store.get(live) is not None
            finally:
                await store.close()

        asyncio.run(open_async())
        base = ("--dsn", ps.proxy, "--schema", SCHEMA)
        shown = _cli("thread", "show", live, *base)
        assert shown.returncode == 0, shown.stderr
        assert live in shown.stdout
        assert "partition(s) 2, 5 of 8 of proxy schema dg are unavailable" in shown.stderr
        submitted = _cli("submit", threads[4], "--input", "{}", *base)
        assert submitted.returncode == 0, submitted.stderr
        failed_cli = _cli("thread", "show", dead, *base)
        assert failed_cli.returncode == 1
        assert "partition database dg_part2 is unavailable" in failed_cli.stderr
        for out in (shown, submitted, failed_cli):
            assert "migrate" not in out.stderr
        log = _worker_runs_an_entry(ps, threads[6], tmp_path)
        assert "partition(s) 2, 5 of 8 of proxy schema dg are unavailable" in log
        assert "migrate" not in log
    finally:
        server.pg_ctl("start", "-w", "-t", "60", "-l", f"{server.datadir}/server.log")
    _wait_for_partitions(ps)


def _worker_runs_an_entry(ps: partitioned.PartitionedStore, thread: str, tmp_path: Path) -> str:
    """Start `durable-graph worker` on the proxy, submit an entry on ``thread``, wait until it
    completes, stop the worker; its log."""
    (tmp_path / "outage_app.py").write_text("def handler(ctx):\n    return {'ok': True}\n")
    worker = subprocess.Popen(
        [
            sys.executable, "-m", "durable_graph.cli", "worker", "--app", "outage_app:handler",
            "--dsn", ps.proxy, "--schema", SCHEMA, "--poll-interval", "200ms",
        ],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        store = PostgresCheckpointer.open(
            ps.proxy, PostgresConfig(schema=SCHEMA, auto_migrate=False)
        )
        try:
            entry_id = store.run_queue.submit(Submission(thread, {"x": 1})).entry_id
            closed = store.run_queue.await_closed(entry_id, timedelta(seconds=60))
            assert closed is not None and isinstance(closed.outcome, Completed)
        finally:
            store.close()
    finally:
        worker.terminate()
        out, _ = worker.communicate(timeout=60)
    return out


def _wait_for_partitions(ps: partitioned.PartitionedStore) -> None:
    """Until the proxy reaches every partition again (its first call after a restart may meet
    a connection the restart closed)."""
    for _ in range(5):
        if layout.verify(ps.proxy, SCHEMA) == []:
            return
    assert layout.verify(ps.proxy, SCHEMA) == []


def test_a_store_on_a_proxy_whose_partitions_are_all_down_does_not_open(
    partitioned_store: partitioned.PartitionedStore,
) -> None:
    """As a store whose server is down: a ProcessingError naming every partition, and no
    advice to migrate (a proxy of 2 partitions, both on one server, that server stopped)."""
    ps = partitioned_store
    home, away = ps.servers[0], ps.servers[1]
    with psycopg.connect(home.dsn(), autocommit=True) as admin:
        admin.execute("CREATE DATABASE dg_lonely_proxy")
    with psycopg.connect(away.dsn(), autocommit=True) as admin:
        for part in range(2):
            admin.execute(f"CREATE DATABASE dg_lonely{part}")
    proxy = home.dsn("dg_lonely_proxy")
    layout.init(
        proxy, [f"host={away.host} port={away.port} dbname=dg_lonely{p}" for p in range(2)], "dg"
    )
    away.pg_ctl("stop", "-m", "fast", "-w")
    try:
        for auto in (True, False):
            with pytest.raises(ProcessingError) as failed:
                PostgresCheckpointer.open(proxy, PostgresConfig(schema="dg", auto_migrate=auto))
            message = str(failed.value)
            assert "no partition can be reached: partition(s) 0, 1 of 2" in message
            assert "dg_lonely0 is unavailable" in message and "migrate" not in message
    finally:
        away.pg_ctl("start", "-w", "-t", "60", "-l", f"{away.datadir}/server.log")
    _wait_for_partitions(ps)


def test_the_documented_setup_runs_as_written(tmp_path: Path) -> None:
    """docs/scaling.md's "Setting it up" commands, on four fresh servers standing for its hosts
    (`proxy`, `db1`..`db3`): the proxy database, init, verify, the runtime role on every server,
    grant, migrate — each exits 0 in that order (the package install line aside)."""
    doc = (Path(__file__).resolve().parent.parent / "docs" / "scaling.md").read_text()
    block = doc.split("### Setting it up", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    install = "sudo apt-get install postgresql-15-plproxy\n"
    assert install in block
    servers = [pg_server.start() for _ in range(4)]
    try:
        script = block.replace(install, "")
        hosts = dict(zip(("proxy", "db1", "db2", "db3"), servers, strict=True))
        for name, server in hosts.items():
            script = script.replace(f'"host={name} ', f'"host={server.host} port={server.port} ')
            script = script.replace(f'"host={name}"', f'"host={server.host} port={server.port}"')
        loop = "for host in proxy db1 db2 db3; do"
        assert loop in script
        quoted = " ".join(f"'{s.host} port={s.port}'" for s in servers)
        script = script.replace(loop, f"for host in {quoted}; do")
        assert "host=proxy" not in script and "host=db" not in script
        env = {
            **os.environ,
            "PGUSER": servers[0].user,
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        }
        done = subprocess.run(
            ["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert "partitions: every partition and the proxy current" in done.stdout
        assert "granted: role worker on schema app" in done.stdout
    finally:
        for server in servers:
            server.stop()


def test_the_deprecated_functions_answer_through_the_proxy(
    partitioned_store: partitioned.PartitionedStore,
) -> None:
    """sql/96_deprecated.sql's wrappers (D233) on a proxy: the thread- and entry-keyed ones routed
    as generated stubs, dg_workers_v1 by its template (sql/proxy/96_deprecated.sql)."""
    ps = partitioned_store
    ps.reset()
    with psycopg.connect(ps.proxy, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {SCHEMA}")

        def one(query: str, *params: Any) -> Any:
            row = conn.execute(query.encode(), params).fetchone()
            assert row is not None
            return row[0]

        token = one("SELECT token FROM dg_claim_v1('w1', 'h', '1 minute')")
        one(
            "SELECT checkpoint_id FROM dg_commit_v1('w1', %s, 'c1', NULL, 'r1', '{}', '{}',"
            " ARRAY[]::text[], NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
            token,
        )
        conn.execute(
            "SELECT dg_put_writes_v1('w1', %s, 'c1', ARRAY['t'], ARRAY['ch'], ARRAY['1'])",
            (token,),
        )
        assert one("SELECT writes::text FROM dg_get_v1('w1', NULL)").count('"ch"') == 1
        entry = one("SELECT entry_id FROM dg_submit_v1('q1', '1', NULL, NULL, 'enqueue', 3)")
        assert one("SELECT thread_id FROM dg_entry_v2(%s, NULL)", entry) == "q1"
        assert one(
            "SELECT stored FROM dg_set_trace_context_v1(%s,"
            " '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', NULL)",
            entry,
        )
        assert one("SELECT count(*) FROM dg_trace_context_v1(%s)", entry) == 1
        lease = one("SELECT token FROM dg_lease_v1('w', '1 minute', true, NULL, 'run-q1')")
        assert (
            one(
                "SELECT outcome_kind FROM dg_finish_attempt_v1(%s, %s, 'completed', '1', NULL,"
                " NULL)",
                entry,
                lease,
            )
            == "completed"
        )
        one("SELECT holder FROM dg_worker_heartbeat_v1('wk', 'host', 1, NULL, 'idle')")
        assert one("SELECT pg_catalog.array_agg(holder) FROM dg_workers_v1('1 minute')") == ["wk"]


def test_verify_names_each_partitions_primary_across_a_promotion() -> None:
    """`partitions init` takes a multi-host partition DSN (a primary and its synchronous
    standby, ``target_session_attrs=read-write``) and `partitions verify` says per partition
    which server is the primary, which a standby, which does not answer, and how many
    synchronous standbys the primary has: before a promotion, and after it (SPEC §27); two
    primaries in one partition's DSN are a problem (split brain)."""
    plain = pg_server.start()
    try:
        with pg_server.running_replicated() as pair:
            with psycopg.connect(plain.dsn(), autocommit=True) as conn:
                conn.execute("CREATE DATABASE dg_proxy")
                conn.execute("CREATE DATABASE dg_part1")
            with psycopg.connect(pair.primary.dsn(), autocommit=True) as conn:
                conn.execute("CREATE DATABASE dg_part0")
            proxy = plain.dsn("dg_proxy")
            multi = pair.dsn("dg_part0").replace(f"user={pair.primary.user} ", "")
            single = f"host={plain.host} port={plain.port} dbname=dg_part1"
            base = ("--dsn", proxy, "--schema", SCHEMA)
            done = _cli("partitions", "init", *base, "--partition", multi, "--partition", single)
            assert done.returncode == 0, done.stderr
            a = f"{pair.primary.host}:{pair.primary.port}"
            b = f"{pair.standby.host}:{pair.standby.port}"
            c = f"{plain.host}:{plain.port}"
            done = _cli("partitions", "verify", *base)
            assert done.returncode == 0, done.stderr
            assert (
                f"partition 0: primary {a}; {a} primary (1 synchronous standby(s)), {b} standby"
                in done.stdout
            ), done.stdout
            assert f"partition 1: primary {c}; {c} primary (0 synchronous standby(s))" in (
                done.stdout
            )
            # Promoted while the old primary still runs: two primaries, named as split brain.
            pair.promote()
            done = _cli("partitions", "verify", *base)
            assert done.returncode == 1
            assert f"partition 0: 2 servers of its DSN are primaries ({a}, {b})" in done.stderr
            pair.primary.kill_hard()
            done = _cli("partitions", "verify", *base, "--json")
            assert done.returncode == 0, done.stderr
            found = json.loads(done.stdout)["partitions"]
            assert found[0]["primary"] == b
            assert [n["role"] for n in found[0]["nodes"]] == ["unreachable", "primary"]
            assert found[1]["primary"] == c
            # Through the proxy, never restarted, partition 0's new primary takes writes.
            store = PostgresCheckpointer.open(proxy, PostgresConfig(schema=SCHEMA))
            try:
                thread = next(f"v{i}" for i in range(1000) if partition_of_thread(f"v{i}", 2) == 0)
                for _ in range(3):  # the proxy's first call may meet its dead connection
                    try:
                        store.release_claim(store.claim(thread, "w"))
                        break
                    except ProcessingError:
                        continue
                else:
                    raise AssertionError("partition 0 never answered after the promotion")
            finally:
                store.close()
    finally:
        plain.stop()


def test_init_run_again_leaves_the_live_sequences_alone(
    partitioned_store: partitioned.PartitionedStore,
) -> None:
    """`partitions init` run again on a store in use (docs/failover.md: to point the proxy at a
    formation's new node) does not restart the entry id and fencing token sequences: a restart
    computed from their last value would race the store's own nextval and could issue an id or
    a token twice (the failover suite's procedure met it as "submission key names a different
    submission", the insert's conflict on a reissued entry id)."""
    ps = partitioned_store
    ps.reset()
    query = (
        "SELECT c.relname, c.relfilenode FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
        " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'S' ORDER BY 1"
    )

    def files() -> list[list[tuple[str, int]]]:
        found = []
        for dsn in ps.partitions:
            with psycopg.connect(dsn, autocommit=True) as conn:
                found.append([(str(a), int(b)) for a, b in conn.execute(query, (SCHEMA,))])
        return found

    store = PostgresCheckpointer.open(ps.proxy, PostgresConfig(schema=SCHEMA, auto_migrate=False))
    try:
        first = store.run_queue.submit(Submission("again", {"n": 1})).entry_id
        before = files()
        layout.init(ps.proxy, list(layout.read_layout(ps.proxy, SCHEMA).partitions), SCHEMA)
        assert files() == before
        assert store.run_queue.submit(Submission("again", {"n": 2})).entry_id > first
    finally:
        store.close()
