"""Durations are elapsed time (SPEC §10.4, issue 12): a day is 86,400 s on every backend, whatever
the server's TimeZone and its daylight-saving changes.

The store clock stands still at 2025-03-29 12:00 Europe/Berlin (11:00 UTC), the day before
Germany moves its clocks forward: a calendar day from then is only 23 hours. Every duration of one
day — claim and lease ttl, renew, retention's max_age, reclaim's older_than — must still be
86,400 s, on memory, SQLite and PostgreSQL (whose sessions here run under Europe/Berlin).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from durable_graph import (
    Checkpointer,
    ClaimPolicy,
    Commit,
    Completed,
    RetentionPolicy,
    Submission,
    ThreadBusy,
)
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.sqlite import SqliteCheckpointer

DAY = timedelta(days=1)
START = datetime(2025, 3, 29, 11, 0, tzinfo=UTC)  # 12:00 in Berlin, before the DST change
BERLIN = "-c TimeZone=Europe/Berlin"


class Clock:
    """The store's time, moved by the test: `now` for the embedded stores' clock callable."""

    def __init__(self) -> None:
        self.at = START

    def __call__(self) -> float:
        return self.at.timestamp()

    def advance(self, delta: timedelta) -> None:
        self.at += delta


class PgFixedClock(Clock):
    """The same, for PostgreSQL: the schema's store_now() reads a one-row table."""

    def __init__(self, dsn: str, schema: str) -> None:
        super().__init__()
        self._dsn = dsn
        self._ident = sql.Identifier(schema)
        with psycopg.connect(dsn, autocommit=True) as conn:
            s = self._ident
            conn.execute(sql.SQL("CREATE TABLE {}.t_fixed_clock (at timestamptz)").format(s))
            conn.execute(sql.SQL("INSERT INTO {}.t_fixed_clock VALUES (%s)").format(s), (self.at,))
            conn.execute(
                sql.SQL(
                    "CREATE OR REPLACE FUNCTION {s}.store_now() RETURNS timestamptz"
                    " LANGUAGE sql VOLATILE AS $$ SELECT at FROM {s}.t_fixed_clock $$"
                ).format(s=s)
            )

    def advance(self, delta: timedelta) -> None:
        super().advance(delta)
        with psycopg.connect(self._dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("UPDATE {}.t_fixed_clock SET at = %s").format(self._ident), (self.at,)
            )


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Checkpointer, Clock]]:
    if request.param == "memory":
        clock = Clock()
        store: Any = InMemoryCheckpointer(clock=clock)
    elif request.param == "sqlite":
        clock = Clock()
        store = SqliteCheckpointer.open(tmp_path / "s.db", clock=clock)
    else:
        dsn: str = request.getfixturevalue("pg_dsn")
        schema: str = request.getfixturevalue("pg_schema")
        # libpq sets each new session's TimeZone from PGTZ (the store sets its own options).
        monkeypatch.setenv("PGTZ", "Europe/Berlin")
        store = PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema))
        clock = PgFixedClock(dsn, schema)
    try:
        yield store, clock
    finally:
        store.close()


def test_a_one_day_claim_lives_86400_seconds_across_a_dst_change(
    backend: tuple[Checkpointer, Clock],
) -> None:
    store, clock = backend
    claim = store.claim("t", "w", ClaimPolicy(ttl=DAY, renew_every=timedelta(hours=1)))
    assert claim.expires_at == START + DAY
    clock.advance(timedelta(hours=23, minutes=30))  # past a calendar day, not past 86,400 s
    with pytest.raises(ThreadBusy):
        store.claim("t", "other")
    renewed = store.renew_claim(claim)
    assert renewed.expires_at == clock.at + DAY
    assert renewed.ttl == DAY


def test_a_one_day_lease_lives_86400_seconds_across_a_dst_change(
    backend: tuple[Checkpointer, Clock],
) -> None:
    store, clock = backend
    q = store.run_queue
    q.submit(Submission("t", {}))
    lease = q.lease("w", DAY)
    assert lease is not None and lease.expires_at == START + DAY
    clock.advance(timedelta(hours=23, minutes=30))
    assert q.lease("other", DAY) is None
    assert q.renew(lease, DAY).expires_at == clock.at + DAY
    assert q.renew(lease).expires_at == clock.at + DAY


def test_retention_max_age_of_one_day_is_86400_seconds_across_a_dst_change(
    backend: tuple[Checkpointer, Clock],
) -> None:
    store, clock = backend
    claim = store.claim("t", "w")
    store.commit(claim, Commit("c1", None, "r1", {}))
    clock.advance(timedelta(minutes=1))
    store.commit(claim, Commit("c2", "c1", "r2", {}))
    clock.advance(timedelta(hours=23, minutes=30))
    policy = RetentionPolicy(max_age=DAY)
    assert store.prune("t", policy).checkpoints_removed == 0
    assert store.prune_all(policy).checkpoints_removed == 0
    clock.advance(timedelta(minutes=31))  # now past 86,400 s
    assert store.prune("t", policy).checkpoints_removed == 1


def test_reclaim_older_than_one_day_is_86400_seconds_across_a_dst_change(
    backend: tuple[Checkpointer, Clock],
) -> None:
    store, clock = backend
    q = store.run_queue
    q.submit(Submission("t", {}))
    lease = q.lease("w", timedelta(minutes=5))
    assert lease is not None
    q.close(lease, Completed())
    clock.advance(timedelta(hours=23, minutes=30))
    assert q.reclaim(DAY, batch=7) == 0
    clock.advance(timedelta(minutes=31))
    assert q.reclaim(DAY, batch=7) == 1


def test_sql_durations_are_elapsed_in_a_berlin_session(pg_dsn: str, pg_schema: str) -> None:
    # The SQL API itself, called from a session of another language in Europe/Berlin.
    PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=pg_schema)).close()
    PgFixedClock(pg_dsn, pg_schema)
    with psycopg.connect(make_conninfo(pg_dsn, options=BERLIN), autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(pg_schema)))
        row = conn.execute(
            "SELECT expires_at - store_now(), ttl FROM dg_claim_v1('t', 'w', interval '1 day')"
        ).fetchone()
        assert row == (DAY, DAY)
        conn.execute("SELECT dg_submit_v1('t', '{}', NULL, NULL, 'enqueue', 3)")
        row = conn.execute(
            "SELECT expires_at - store_now() FROM dg_lease_v1('w', '1 day', true, NULL, NULL)"
        ).fetchone()
        assert row == (DAY,)


def test_durations_outside_the_documented_range_are_refused_by_sql_naming_the_parameter(
    pg_dsn: str, pg_schema: str
) -> None:
    PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=pg_schema)).close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(pg_schema)))
        for call, name in (
            ("SELECT dg_claim_v1('t', 'w', interval '0')", "ttl"),
            ("SELECT dg_claim_v1('t', 'w', interval '36501 days')", "ttl"),
            ("SELECT dg_lease_v1('w', interval '-1 second', true, NULL, NULL)", "ttl"),
            ("SELECT dg_prune_v1('t', NULL, interval '100 years 1 day')", "max_age"),
            ("SELECT dg_reclaim_v1(interval '-1 microsecond', 10)", "older_than"),
        ):
            with pytest.raises(psycopg.Error) as caught:
                conn.execute(call)
            assert caught.value.sqlstate == "DG000", call
            assert name in str(caught.value), call
        # Zero is an allowed older_than.
        assert conn.execute("SELECT dg_reclaim_v1(interval '0', 10)").fetchone() == (0,)
