"""A job in three durable transactions (SPEC §11, §18.1), counted by PostgreSQL itself.

A job is submit → a worker begins it → its handler commits one ~1 KB checkpoint → the worker
finishes it. Held by ``commit_last``, the checkpoint lands in the finish's transaction: three
(submit, begin, finish); committed at once with ``commit``, four. The commits that wrote anything are counted from the write-ahead log
(``pg_walinspect``: a read-only transaction writes no commit record, subtransactions fold into
their top-level commit); ``make bench`` also reports ``pg_stat_database.xact_commit`` per job.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from durable_graph import Submission
from durable_graph.aio import AsyncWorker
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.postgres.async_store import AsyncPostgresCheckpointer
from durable_graph.worker.sync import RunContext, Worker

STATE = {"messages": ["x" * 1000]}  # ~1 KB


@pytest.fixture
def admin(pg_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        yield conn


def _mark(admin: psycopg.Connection[Any]) -> str:
    row = admin.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def _commits_since(admin: psycopg.Connection[Any], start: str) -> int:
    """Commit records written since ``start`` (flushed first: the test server commits async)."""
    end = _mark(admin)
    admin.execute("CHECKPOINT")  # flushes the WAL past ``end``: walinspect reads flushed WAL only
    row = admin.execute(
        "SELECT count(*) FROM pg_get_wal_records_info(%s::pg_lsn, %s::pg_lsn)"
        " WHERE resource_manager = 'Transaction' AND record_type = 'COMMIT'",
        (start, end),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _handler(ctx: RunContext) -> None:
    ctx.commit(STATE)


def _last_handler(ctx: RunContext) -> None:
    ctx.commit_last(STATE)


def _sync_job(pg_dsn: str, pg_schema: str, admin: psycopg.Connection[Any], handler: Any) -> int:
    """Commit records of one job run by ``handler`` (after one warm-up job, so that no first-use
    work is counted), its head checked."""
    with PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=pg_schema)) as store:
        worker = Worker(store, handler)
        store.run_queue.submit(Submission("warm", {"q": 0}))
        assert worker.run_once() is not None
        start = _mark(admin)
        store.run_queue.submit(Submission("thread-1", {"q": 1}))
        report = worker.run_once()
        assert report is not None and report.note == "completed"
        head = store.get("thread-1")
        assert head is not None and head.state == STATE
        return _commits_since(admin, start)


async def _async_handler(ctx: Any) -> None:
    await ctx.commit(STATE)


async def _async_last_handler(ctx: Any) -> None:
    ctx.commit_last(STATE)


async def _async_job(
    pg_dsn: str, pg_schema: str, admin: psycopg.Connection[Any], handler: Any
) -> int:
    """`_sync_job` on an async store and worker."""
    store = await AsyncPostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=pg_schema))
    try:
        worker = AsyncWorker(store, handler)
        await store.run_queue.submit(Submission("warm", {"q": 0}))
        assert await worker.run_once() is not None
        start = _mark(admin)
        await store.run_queue.submit(Submission("thread-1", {"q": 1}))
        report = await worker.run_once()
        assert report is not None and report.note == "completed"
        head = await store.get("thread-1")
        assert head is not None and head.state == STATE
        return _commits_since(admin, start)
    finally:
        await store.close()


def test_a_job_with_commit_last_is_three_durable_transactions(
    pg_dsn: str, pg_schema: str, admin: psycopg.Connection[Any]
) -> None:
    assert _sync_job(pg_dsn, pg_schema, admin, _last_handler) == 3  # submit, begin, finish


def test_an_async_job_with_commit_last_is_three_durable_transactions(
    pg_dsn: str, pg_schema: str, admin: psycopg.Connection[Any]
) -> None:
    assert asyncio.run(_async_job(pg_dsn, pg_schema, admin, _async_last_handler)) == 3


def test_a_job_is_four_durable_transactions(
    pg_dsn: str, pg_schema: str, admin: psycopg.Connection[Any]
) -> None:
    # submit, begin, commit, finish
    assert _sync_job(pg_dsn, pg_schema, admin, _handler) == 4


def test_an_async_job_is_four_durable_transactions(
    pg_dsn: str, pg_schema: str, admin: psycopg.Connection[Any]
) -> None:
    assert asyncio.run(_async_job(pg_dsn, pg_schema, admin, _async_handler)) == 4
