"""Session hardening and bounded schema preparation on PostgreSQL (SPEC §10.8, issue #12 item 7).

- Store sessions pin ``synchronous_commit = on``, ``TimeZone = 'UTC'`` and a
  ``client_connection_check_interval``, whatever the role's or database's defaults.
- A call that times out (sync) or whose task is cancelled (async) while the server is reachable
  is cancelled on the server: it never lands after the caller got its error, even on a caller's
  pool without the store's server-side timeouts.
- Opening a store behind another migrator, or against a server that accepts and never answers,
  fails with `ProcessingError` within ``connection_timeout + call_timeout`` (plus a margin);
  so does ``durable-graph migrate``.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from durable_graph import Commit, ProcessingError
from durable_graph.cli import main
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.postgres.async_store import AsyncPostgresCheckpointer
from durable_graph.postgres.migrations import lock_key, migrate
from store_support import thread_row_locked

MARGIN = 0.75
"""Seconds allowed beyond connection_timeout + call_timeout (a rollback, a busy CI)."""


def _as_role(dsn: str, role: str) -> str:
    params = {k: str(v) for k, v in psycopg.conninfo.conninfo_to_dict(dsn).items()}
    params["user"] = role
    return psycopg.conninfo.make_conninfo(**params)


@pytest.fixture
def schema(pg_dsn: str, pg_schema: str) -> str:
    migrate(pg_dsn, pg_schema)
    return pg_schema


@pytest.fixture
def lax_role(pg_dsn: str, schema: str) -> Iterator[str]:
    """A role whose own defaults are everything the store must not inherit."""
    role = f"dg_lax_{uuid.uuid4().hex[:10]}"
    ident = sql.Identifier(role)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(ident))
        for setting in (
            "synchronous_commit = off",
            "TimeZone = 'America/New_York'",
            "client_connection_check_interval = 0",
        ):
            conn.execute(sql.SQL("ALTER ROLE {} SET " + setting).format(ident))
        conn.execute(
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(schema), ident)
        )
        conn.execute(
            sql.SQL("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {} TO {}").format(
                sql.Identifier(schema), ident
            )
        )
    yield role
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(ident))
        conn.execute(sql.SQL("DROP ROLE {}").format(ident))


def test_store_sessions_pin_durable_commits_utc_and_a_client_check_over_role_defaults(
    pg_dsn: str, schema: str, lax_role: str
) -> None:
    dsn = _as_role(pg_dsn, lax_role)
    with psycopg.connect(dsn) as plain:
        assert plain.execute("SHOW TimeZone").fetchone() == ("America/New_York",)
    store = PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema, auto_migrate=False))
    try:
        with store._x.pool.connection() as conn:
            settings = [
                conn.execute(f"SHOW {name}").fetchone()
                for name in ("synchronous_commit", "TimeZone", "client_connection_check_interval")
            ]
        assert settings == [("on",), ("UTC",), ("1s",)]
        assert store.claim("t", "me").holder == "me"
    finally:
        store.close()


def _checkpoints(dsn: str, schema: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            sql.SQL("SELECT checkpoint_id FROM {}.checkpoints ORDER BY seq").format(
                sql.Identifier(schema)
            )
        ).fetchall()
    return [str(r[0]) for r in rows]


def test_a_timed_out_call_is_cancelled_on_the_server_and_never_lands_later(
    pg_dsn: str, schema: str
) -> None:
    config = PostgresConfig(schema=schema, call_timeout=timedelta(milliseconds=500))
    # A caller's pool without the store's session options: no server-side timeout to help.
    with ConnectionPool(pg_dsn, min_size=1, max_size=2) as pool:
        store = PostgresCheckpointer.create(pool, config)
        claim = store.claim("t", "me")
        store.commit(claim, Commit("c1", None, "r1", {}))
        with thread_row_locked(pg_dsn, schema, "t"):
            started = time.monotonic()
            with pytest.raises(ProcessingError, match="call_timeout"):
                store.commit(claim, Commit("c2", "c1", "r1", {}))
            elapsed = time.monotonic() - started
            # The lock is released the moment the caller has its error.
        time.sleep(0.3)
        assert _checkpoints(pg_dsn, schema) == ["c1"], "the timed-out commit landed later"
        assert 0.45 < elapsed < 0.5 + MARGIN
        assert store.commit(claim, Commit("c2", "c1", "r1", {})).checkpoint_id == "c2"
        store.close()


def test_a_cancelled_async_call_is_cancelled_on_the_server_and_never_lands_later(
    pg_dsn: str, schema: str
) -> None:
    config = PostgresConfig(schema=schema)

    async def main_() -> None:
        # A caller's pool without the store's session options: no server-side timeout to help.
        async with AsyncConnectionPool(pg_dsn, min_size=1, max_size=2, open=False) as pool:
            store = await AsyncPostgresCheckpointer.create(pool, config)
            claim = await store.claim("t", "me")
            await store.commit(claim, Commit("c1", None, "r1", {}))
            with thread_row_locked(pg_dsn, schema, "t"):
                task = asyncio.ensure_future(store.commit(claim, Commit("c2", "c1", "r1", {})))
                await asyncio.sleep(0.3)  # waiting for the row lock on the server
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                await asyncio.sleep(0.2)  # the cancel request reaches the server
            await asyncio.sleep(0.3)
            assert _checkpoints(pg_dsn, schema) == ["c1"], "the cancelled commit landed later"
            assert (await store.commit(claim, Commit("c2", "c1", "r1", {}))).checkpoint_id == "c2"
            await store.close()

    asyncio.run(main_())


# --- bounded schema preparation (issue #12 item 7) ----------------------------------------


def test_open_behind_another_migrator_fails_within_its_bound(pg_dsn: str, pg_schema: str) -> None:
    config = PostgresConfig(
        schema=pg_schema,
        call_timeout=timedelta(milliseconds=500),
        connection_timeout=timedelta(milliseconds=500),
    )
    with psycopg.connect(pg_dsn, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (lock_key(pg_schema),))
        started = time.monotonic()
        with pytest.raises(
            ProcessingError, match=f"another process is migrating schema {pg_schema}"
        ):
            PostgresCheckpointer.open(pg_dsn, config)
        elapsed = time.monotonic() - started
        other.execute("SELECT pg_advisory_unlock(%s)", (lock_key(pg_schema),))
    assert 0.9 < elapsed < 1.0 + MARGIN
    PostgresCheckpointer.open(pg_dsn, config).close()  # the lock is free: it migrates


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts TCP connections (the kernel does) and never answers a byte."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=16)
    try:
        yield int(listener.getsockname()[1])
    finally:
        listener.close()


def _silent_dsn(port: int) -> str:
    return f"host=127.0.0.1 port={port} user=nobody dbname=nothing"


def test_open_against_a_server_that_never_answers_fails_within_its_bound(
    silent_server: int,
) -> None:
    config = PostgresConfig(
        call_timeout=timedelta(seconds=1), connection_timeout=timedelta(seconds=1)
    )
    started = time.monotonic()
    with pytest.raises(ProcessingError, match="could not connect"):
        PostgresCheckpointer.open(_silent_dsn(silent_server), config)
    assert time.monotonic() - started < 2.0 + MARGIN


def test_cli_migrate_against_a_server_that_never_answers_fails_within_its_bound(
    silent_server: int, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    code = main(["migrate", "--dsn", _silent_dsn(silent_server)])
    elapsed = time.monotonic() - started
    default = PostgresConfig()
    assert code != 0
    assert "could not connect" in capsys.readouterr().err
    assert elapsed < (default.connection_timeout + default.call_timeout).total_seconds() + MARGIN


def test_a_refused_login_opening_a_store_is_reported_as_such(pg_dsn: str, pg_schema: str) -> None:
    """A login the server refuses is a connection problem, not a schema problem (issue 16)."""
    refused = psycopg.conninfo.make_conninfo(pg_dsn, user="dg_no_such_role")
    config = PostgresConfig(schema=pg_schema, auto_migrate=False)
    with pytest.raises(ProcessingError) as raised:
        PostgresCheckpointer.open(refused, config)
    assert str(raised.value).startswith("could not connect to PostgreSQL")
