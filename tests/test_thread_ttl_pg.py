"""The thread TTL sweep's locking on PostgreSQL (SPEC §24.1, D261): concurrent sweeps take
disjoint rows and never wait for one another, and a sweep never waits for a thread a writer
holds (it leaves that thread for the next sweep) — so any number of processes may sweep.

Called over psycopg as any client would; time moves by sweeping threads whose TTL is a few
milliseconds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from durable_graph.testkit.postgres.schema import reset_store

TINY = 0.0001
"""A TTL of 6 ms, in minutes."""


@pytest.fixture
def schema(module_schema: str, pg_dsn: str) -> str:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        reset_store(conn, module_schema)
    return module_schema


def _connect(dsn: str, schema: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    # A sweep that waited on a lock would fail here instead of hanging the test.
    conn.execute("SET lock_timeout = '2s'")
    return conn


@pytest.fixture
def conns(pg_dsn: str, schema: str) -> Iterator[tuple[psycopg.Connection[Any], ...]]:
    made = tuple(_connect(pg_dsn, schema) for _ in range(3))
    try:
        yield made
    finally:
        for conn in made:
            conn.close()


def _expired_threads(conn: psycopg.Connection[Any], n: int) -> list[str]:
    ids = [f"t-{i:03d}" for i in range(n)]
    for thread_id in ids:
        token = conn.execute(
            "SELECT token FROM dg_claim_v1(%s, 'h', interval '1 hour')", (thread_id,)
        ).fetchone()
        assert token is not None
        conn.execute(
            "SELECT * FROM dg_commit_v1(%s, %s, 'c1', NULL, 'run-1', '{}', NULL, '{}', '{}',"
            " '{}', '{}', NULL, NULL, NULL, NULL)",
            (thread_id, token[0]),
        )
        conn.execute("SELECT dg_release_claim_v1(%s, %s)", (thread_id, token[0]))
        conn.execute("SELECT * FROM dg_set_thread_ttl_v1(%s, %s, 'delete')", (thread_id, TINY))
    time.sleep(0.05)
    return ids


def _sweep(conn: psycopg.Connection[Any], limit: int) -> tuple[int, int, int]:
    row = conn.execute("SELECT * FROM dg_sweep_threads_v1(%s)", (limit,)).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def _live(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM threads WHERE live").fetchone()
    assert row is not None
    return int(row[0])


def test_two_sweeps_at_once_take_disjoint_threads_without_waiting(
    conns: tuple[psycopg.Connection[Any], ...],
) -> None:
    setup, a, b = conns
    _expired_threads(setup, 10)
    with a.transaction():  # A's sweep holds its rows until it commits
        assert _sweep(a, 4) == (4, 0, 4)
        # B neither waits for A's rows nor takes them.
        assert _sweep(b, 100) == (6, 0, 6)
        assert _sweep(b, 100) == (0, 0, 0)
    assert _live(setup) == 0
    assert _sweep(a, 100) == (0, 0, 0)


def test_a_sweep_leaves_a_thread_a_writer_holds_for_the_next_sweep(
    conns: tuple[psycopg.Connection[Any], ...],
) -> None:
    setup, writer, sweeper = conns
    _expired_threads(setup, 2)
    with writer.transaction():
        writer.execute("SELECT 1 FROM threads WHERE thread_id = 't-000' FOR UPDATE")
        assert _sweep(sweeper, 100) == (1, 0, 2)  # t-001 deleted; t-000 left, unwaited
        still = setup.execute("SELECT live FROM threads WHERE thread_id = 't-000'").fetchone()
        assert still == (True,)
    assert _sweep(sweeper, 100) == (1, 0, 1)
    assert _live(setup) == 0


def test_a_thread_with_an_open_entry_is_put_off_not_swept(
    conns: tuple[psycopg.Connection[Any], ...],
) -> None:
    setup, _, sweeper = conns
    _expired_threads(setup, 1)
    setup.execute("SELECT * FROM dg_submit_v1('t-000', '{}', NULL, NULL, 'enqueue', 3)")
    assert _sweep(sweeper, 100) == (0, 0, 1)
    # Put off by its TTL from the sweep's now (the entry's close is activity).
    due = setup.execute(
        "SELECT due_at > set_at + minutes * interval '1 minute' FROM thread_ttls"
    ).fetchone()
    assert due == (True,)
    assert _live(setup) == 1
