"""The differential test's world (`test_differential.py`): the three stores, their clocks, the
normaliser that makes their answers comparable, and the strategies the machine draws from."""

from __future__ import annotations

import itertools
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from hypothesis import strategies as st
from psycopg import sql

import durable_graph.core.errors
from durable_graph import EventIn, RetentionPolicy
from durable_graph.core.model import JSON
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.postgres.migrations import migrate
from durable_graph.sqlite import SqliteCheckpointer, SqliteConfig
from durable_graph.testkit.harness import ManualClock
from durable_graph.testkit.postgres.schema import reset_store

EXAMPLES = int(os.environ.get("DURABLE_GRAPH_DIFF_EXAMPLES", "200"))
STEPS = int(os.environ.get("DURABLE_GRAPH_DIFF_STEPS", "30"))

UNIT = 60.0
"""Seconds: every timestamp-producing duration is a multiple of it (see the module docstring)."""
CLOCK_START = datetime(2025, 3, 29, 20, 0, tzinfo=UTC).timestamp()  # Berlin DST: 01:00 UTC
PRODUCER_TIME = datetime(2001, 2, 3, 4, 5, 6, 789012, tzinfo=UTC)

THREADS = ["a", "b", "c"]
HOLDERS = ["h1", "h2"]
RUNS = ["r1", "r2", "r3", "r4"]
CHECKPOINTS = ["c1", "c2", "c3", "c4", "c5"]
TENANTS: list[str | None] = [None, "ta", "tb"]
KEYS: list[str | None] = [None, "k1", "k2"]
TASKS = ["t1", "t2"]
CHANNELS = ["x", "y"]
EFFECT_KEYS = ["e1", "e2"]
UNKNOWN_ENTRY_ID = 987_654
OUTCOMES: Counter[tuple[str, str]] = Counter()
"""How often each operation succeeded or failed with each error class (printed with ``-s``)."""

JSON_VALUES: st.SearchStrategy[JSON] = st.sampled_from(
    [None, 0, -7, 2.5, "", "x", "nul\u0000 é 😀", [], {}, [1, "two", None], {"k": {"n": [True]}}]
)
EVENTS_IN: st.SearchStrategy[EventIn] = st.builds(
    EventIn,
    kind=st.sampled_from(["k1", "k2"]),
    payload=JSON_VALUES,
    created_at=st.sampled_from([None, PRODUCER_TIME]),
)
"""An event as a producer hands it in: with a store-time or a producer's ``created_at``."""
DAY = 86_400
TTLS = st.sampled_from(
    [timedelta(seconds=s) for s in (60, 120, 300)] + [timedelta(days=1), timedelta(days=2)]
)
AGES = st.sampled_from(
    [timedelta(seconds=s) for s in (30, 90, 150, 630, 3630, DAY + 30, 2 * DAY - 3570)]
)
ADVANCES = st.sampled_from(
    [timedelta(seconds=s) for s in (60, 120, 240, 600, 3600)]
    + [timedelta(hours=5), timedelta(hours=23), timedelta(days=1)]
)
MAX_AGES = [None, *[timedelta(seconds=s) for s in (30, 90, 630, DAY + 30)]]
SQLSTATE_ERRORS: dict[str, str] = {
    str(getattr(cls, "sqlstate")): cls.__name__  # noqa: B009 (not every class has one)
    for cls in vars(durable_graph.core.errors).values()
    if isinstance(cls, type) and isinstance(getattr(cls, "sqlstate", None), str)
}


def retention(keep_last: int | None, max_age: timedelta | None) -> RetentionPolicy:
    return RetentionPolicy(keep_last=keep_last if keep_last or max_age else 1, max_age=max_age)


# --- the stores --------------------------------------------------------------------------------


class PgBackend:
    """One migrated schema for the whole test, emptied before each example. Its store_now()
    reads the one-row test-clock table (time stands still until `advance`). The table is named
    and shaped like the testkit's ``dg_test_clock`` (plus the frozen time ``at``), which is how
    `verify` knows this schema runs a test clock in place of the real ``store_now()``."""

    def __init__(self, dsn: str, schema: str) -> None:
        self.dsn = dsn
        self.schema = schema
        migrate(dsn, schema)
        s = sql.Identifier(schema)
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute(
            sql.SQL(
                "CREATE TABLE {}.dg_test_clock (only_row boolean PRIMARY KEY DEFAULT true"
                " CHECK (only_row), clock_offset interval NOT NULL DEFAULT interval '0',"
                " at timestamptz)"
            ).format(s)
        )
        self.conn.execute(
            sql.SQL(
                "CREATE OR REPLACE FUNCTION {s}.store_now() RETURNS timestamptz"
                " LANGUAGE sql VOLATILE AS $$ SELECT at FROM {s}.dg_test_clock $$"
            ).format(s=s)
        )
        # The commit a concurrent step holds open (see DifferentialMachine.lease_meets_commit).
        self.raw = psycopg.connect(dsn)
        self.raw.execute(sql.SQL("SET search_path = {}").format(s))
        self.raw.commit()
        self.store = PostgresCheckpointer.open(
            dsn, PostgresConfig(schema=schema, auto_migrate=False, max_pool_size=2)
        )

    def reset(self) -> datetime:
        """Empty the store, restart its counters and clock; return its time now (the base)."""
        reset_store(self.conn, self.schema)
        s = sql.Identifier(self.schema)
        self.conn.execute(sql.SQL("DELETE FROM {}.dg_test_clock").format(s))
        base = datetime.fromtimestamp(CLOCK_START, tz=UTC)
        self.conn.execute(
            sql.SQL("INSERT INTO {}.dg_test_clock (at) VALUES (%s)").format(s), (base,)
        )
        return base

    def advance(self, delta: timedelta) -> None:
        # In seconds: the clock itself must not follow a session TimeZone's calendar.
        self.conn.execute(
            sql.SQL("UPDATE {}.dg_test_clock SET at = at + make_interval(secs => %s)").format(
                sql.Identifier(self.schema)
            ),
            (delta.total_seconds(),),
        )

    def leases_waiting(self) -> int:
        """How many of this schema's lease calls wait on a lock now."""
        row = self.conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE %s",
            (f"%{self.schema}%dg_lease_v1%",),
        ).fetchone()
        return 0 if row is None else int(row[0])

    def close(self) -> None:
        self.store.close()
        self.raw.close()
        self.conn.close()


class Normaliser:
    """Maps one store's results to comparable values (see the module docstring)."""

    def __init__(self, base: datetime) -> None:
        self.base = base
        self.tokens: dict[int, int] = {}
        self.entry_ids: dict[int, int] = {}
        self.problems: list[str] = []

    def token(self, value: int) -> int:
        if value not in self.tokens:
            if self.tokens and value <= max(self.tokens):
                self.problems.append(f"new token {value} is not above every earlier token")
            self.tokens[value] = len(self.tokens)
        return self.tokens[value]

    def entry_id(self, value: int) -> int:
        if value not in self.entry_ids:
            self.entry_ids[value] = len(self.entry_ids)
        return self.entry_ids[value]

    def __call__(self, value: object, field_name: str = "") -> object:
        if isinstance(value, datetime):
            if value.year < 2010:
                return ("producer", value.isoformat())
            return ("t", round((value - self.base).total_seconds() / UNIT))
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int):
            if field_name == "token":
                return ("token", self.token(value))
            if field_name in ("entry_id", "by", "retry_of"):
                return ("entry", self.entry_id(value))
            return value
        if is_dataclass(value) and not isinstance(value, type):
            return (
                type(value).__name__,
                tuple((f.name, self(getattr(value, f.name), f.name)) for f in fields(value)),
            )
        if isinstance(value, (list, tuple)):
            return (type(value).__name__, tuple(self(v) for v in value))
        if isinstance(value, dict):
            return ("dict", tuple((k, self(v)) for k, v in value.items()))
        return value


class Handle:
    """One thing (a claim, a lease, an entry id) as each store returned it, by store name."""

    def __init__(self, per_store: dict[str, Any]) -> None:
        self.per_store = per_store

    def __repr__(self) -> str:
        return f"Handle({next(iter(self.per_store.values()))!r})"


Outcome = tuple[str, object]


class World:
    """The three stores of one test, rebuilt (emptied) for every example."""

    def __init__(self, tmp: Path, pg: PgBackend) -> None:
        self.tmp = tmp
        self.pg = pg
        self.counter = itertools.count()
        self.mem: InMemoryCheckpointer | None = None
        self.sqlite: SqliteCheckpointer | None = None

    def fresh(
        self,
    ) -> tuple[dict[str, Any], dict[str, Normaliser], list[Callable[[timedelta], None]]]:
        if self.mem is not None:
            self.mem.close()
        if self.sqlite is not None:
            self.sqlite.close()
        for old in self.tmp.glob("diff-*"):
            old.unlink()
        mem_clock = ManualClock(CLOCK_START)
        sqlite_clock = ManualClock(CLOCK_START)
        self.mem = InMemoryCheckpointer(clock=mem_clock)
        self.sqlite = SqliteCheckpointer.open(
            self.tmp / f"diff-{next(self.counter)}.db",
            SqliteConfig(synchronous="NORMAL"),
            clock=sqlite_clock,
        )
        pg_base = self.pg.reset()
        manual_base = datetime.fromtimestamp(CLOCK_START, tz=UTC)
        stores = {"memory": self.mem, "sqlite": self.sqlite, "postgres": self.pg.store}
        norms = {
            "memory": Normaliser(manual_base),
            "sqlite": Normaliser(manual_base),
            "postgres": Normaliser(pg_base),
        }
        return stores, norms, [mem_clock.advance, sqlite_clock.advance, self.pg.advance]

    def close(self) -> None:
        if self.mem is not None:
            self.mem.close()
        if self.sqlite is not None:
            self.sqlite.close()
