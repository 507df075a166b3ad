"""The PostgreSQL store: both contract suites (SPEC §7) plus PostgreSQL-only behaviour (§6, rules 27-29).

The contract suites run in one schema per test class: it is migrated once, its clock is a
`PgClock`, and before each test every table is emptied, every sequence restarted and the clock
offset reset, so each test sees a fresh store without paying for a migration.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg_pool import ConnectionPool

from durable_graph import (
    ClaimPolicy,
    Commit,
    EventIn,
    Mode,
    PendingWrite,
    ProcessingError,
    Submission,
    ThreadBusy,
    ValidationError,
)
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.postgres.migrations import migrate
from durable_graph.testkit import Harness
from durable_graph.testkit.contract.checkpointer.suite import CheckpointerContract
from durable_graph.testkit.contract.run_queue.suite import RunQueueContract
from durable_graph.testkit.postgres.clock import PgClock
from durable_graph.testkit.postgres.schema import reset_store


def _pg_harness(pg_dsn: str, class_schema: tuple[str, PgClock]) -> Iterator[Harness]:
    schema, clock = class_schema
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        reset_store(conn, schema)
    store = PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=schema, auto_migrate=False))
    try:
        yield Harness(store, clock)
    finally:
        store.close()


class TestPostgresCheckpointerContract(CheckpointerContract):
    @pytest.fixture
    def harness(self, pg_dsn: str, class_schema: tuple[str, PgClock]) -> Iterator[Harness]:
        yield from _pg_harness(pg_dsn, class_schema)


class TestPostgresRunQueueContract(RunQueueContract):
    @pytest.fixture
    def harness(self, pg_dsn: str, class_schema: tuple[str, PgClock]) -> Iterator[Harness]:
        yield from _pg_harness(pg_dsn, class_schema)


# --- PostgresConfig (SPEC §6, rule 27) ----------------------------------------------------


@pytest.mark.parametrize(
    "schema", ["llm4s", "_", "a", "a" * 63, "x_1", "pgx", "p_g"], ids=lambda s: s[:12]
)
def test_config_accepts_schema_names_of_rule_27(schema: str) -> None:
    assert PostgresConfig(schema=schema).schema == schema


@pytest.mark.parametrize(
    "schema",
    ["", "1abc", "Abc", "a-b", "a b", "a" * 64, "pg_", "pg_catalog", "é", "a;drop", 'a"b'],
    ids=repr,
)
def test_config_refuses_schema_names_outside_rule_27(schema: str) -> None:
    with pytest.raises(ValidationError, match="schema"):
        PostgresConfig(schema=schema)


def test_config_refuses_a_schema_that_is_not_a_str() -> None:
    with pytest.raises(ValidationError, match="schema"):
        PostgresConfig(schema=b"llm4s")  # type: ignore[arg-type]


def test_config_rounds_durations_up_to_whole_milliseconds() -> None:
    config = PostgresConfig(
        call_timeout=timedelta(microseconds=1),
        connection_timeout=timedelta(milliseconds=249, microseconds=1),
    )
    assert config.call_timeout == timedelta(milliseconds=1)
    assert config.connection_timeout == timedelta(milliseconds=250)
    assert config.call_timeout_ms == 1


@pytest.mark.parametrize("field", ["call_timeout", "connection_timeout"])
@pytest.mark.parametrize(
    "value",
    [
        timedelta(0),
        timedelta(microseconds=-1),
        timedelta(milliseconds=2**31),
        timedelta(milliseconds=2**31 - 1, microseconds=1),
    ],
    ids=["zero", "negative", "2^31ms", "just-over-2^31-1ms"],
)
def test_config_refuses_durations_outside_1ms_to_2_31_ms(field: str, value: timedelta) -> None:
    with pytest.raises(ValidationError, match=field):
        PostgresConfig(**{field: value})  # type: ignore[arg-type]


def test_config_accepts_the_largest_duration() -> None:
    most = timedelta(milliseconds=2**31 - 1)
    assert PostgresConfig(call_timeout=most, connection_timeout=most).call_timeout == most


def test_config_refuses_connection_timeout_under_250ms() -> None:
    with pytest.raises(ValidationError, match="connection_timeout"):
        PostgresConfig(connection_timeout=timedelta(milliseconds=249))
    assert PostgresConfig(connection_timeout=timedelta(milliseconds=250))


@pytest.mark.parametrize("field", ["call_timeout", "connection_timeout"])
def test_config_refuses_durations_that_are_not_timedelta(field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        PostgresConfig(**{field: 5})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_pool_size", 0),
        ("max_pool_size", True),
        ("max_pool_size", 2.0),
        ("auto_migrate", 1),
        ("max_value_bytes", 0),
    ],
)
def test_config_refuses_bad_pool_size_flags_and_limits(field: str, value: object) -> None:
    with pytest.raises(ValidationError, match=field):
        PostgresConfig(**{field: value})  # type: ignore[arg-type]


def test_config_defaults_are_those_of_spec_6() -> None:
    config = PostgresConfig()
    assert (config.schema, config.max_pool_size, config.auto_migrate) == ("llm4s", 10, True)
    assert config.call_timeout == config.connection_timeout == timedelta(seconds=5)
    assert config.max_value_bytes == 64 * 1024 * 1024


# --- opening a store ------------------------------------------------------------------------


def test_open_without_auto_migrate_names_the_command_to_run(pg_dsn: str, pg_schema: str) -> None:
    with pytest.raises(ProcessingError) as caught:
        PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=pg_schema, auto_migrate=False))
    message = str(caught.value)
    assert re.search(
        rf"schema {pg_schema} is at version 0, needs \d+: run durable-graph migrate "
        rf"--dsn .* --schema {pg_schema}",
        message,
    ), message


def test_open_without_auto_migrate_works_on_a_migrated_schema(pg_dsn: str, pg_schema: str) -> None:
    migrate(pg_dsn, pg_schema)
    with PostgresCheckpointer.open(
        pg_dsn, PostgresConfig(schema=pg_schema, auto_migrate=False)
    ) as store:
        assert store.thread("t") is None


def test_open_migrates_a_fresh_schema(pg_dsn: str, pg_schema: str) -> None:
    with PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=pg_schema)) as store:
        claim = store.claim("t", "me")
        assert store.commit(claim, Commit("c1", None, "r1", {"a": 1})).seq == 1


def _pool(dsn: str, config: PostgresConfig) -> ConnectionPool[Any]:
    return ConnectionPool(dsn, min_size=1, max_size=2, kwargs=config.connection_kwargs())


def test_create_on_a_callers_pool_never_closes_it(pg_dsn: str, pg_schema: str) -> None:
    config = PostgresConfig(schema=pg_schema)
    with _pool(pg_dsn, config) as pool:
        store = PostgresCheckpointer.create(pool, config)
        store.claim("t", "me")
        store.close()
        store.close()
        assert not pool.closed
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(ProcessingError):
            store.thread("t")
        again = PostgresCheckpointer.create(pool, config)
        with pytest.raises(ThreadBusy, match="live claim"):
            again.claim("t", "other")
        again.close()
        assert not pool.closed


def test_create_on_a_pool_without_autocommit_gives_connections_back_as_they_were(
    pg_dsn: str, pg_schema: str
) -> None:
    migrate(pg_dsn, pg_schema)
    config = PostgresConfig(schema=pg_schema, auto_migrate=False)
    with ConnectionPool(pg_dsn, min_size=1, max_size=1) as pool:
        store = PostgresCheckpointer.create(pool, config)
        claim = store.claim("t", "me")
        store.commit(claim, Commit("c1", None, "r1", [1]))
        with pool.connection() as conn:
            assert conn.autocommit is False
        assert store.get("t") is not None
        store.close()


def test_every_method_raises_processing_error_after_close(pg_dsn: str, pg_schema: str) -> None:
    store = PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=pg_schema))
    claim = store.claim("t", "me")
    store.commit(claim, Commit("c1", None, "r1", {}))
    events = store.subscribe("t")
    assert next(events).seq == 1
    queue = store.run_queue
    store.close()
    store.close()
    for call in (
        lambda: store.claim("u", "me"),
        lambda: store.get("t"),
        lambda: store.events_after("t", 0),
        lambda: store.await_events_after("t", 0, timedelta(0)),
        lambda: store.subscribe("t"),
        lambda: next(events),
        lambda: queue.submit(Submission("t", 1)),
        lambda: queue.entry(1),
        lambda: queue.await_closed(1, timedelta(0)),
    ):
        with pytest.raises(ProcessingError):
            call()


def test_two_schemas_never_see_each_other(pg_dsn: str) -> None:
    a_schema, b_schema = f"a_{uuid.uuid4().hex[:12]}", f"b_{uuid.uuid4().hex[:12]}"
    try:
        with (
            PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=a_schema)) as a,
            PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=b_schema)) as b,
        ):
            claim = a.claim("t", "me")
            a.commit(claim, Commit("c1", None, "r1", "a"))
            a.run_queue.submit(Submission("t", "go"))
            assert b.get("t") is None
            assert b.threads() == []
            assert b.run_queue.lease("w", timedelta(seconds=30)) is None
            assert b.run_queue.open_entries() == []
            b_claim = b.claim("t", "other")  # a's live claim is not b's
            assert b_claim.token == 1 and claim.token == 1
            assert a.get("t") is not None
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            for s in (a_schema, b_schema):
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(s)))


def test_json_values_come_back_exactly(pg_dsn: str, pg_schema: str) -> None:
    value = {
        "nul": "a\u0000b",
        "emoji": "🦜",
        "big": 2**70,
        "float": 0.1,
        "neg0": -0.0,
        "z": [None, True, {"b": 1, "a": 2}],
    }
    with PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=pg_schema)) as store:
        claim = store.claim("t", "me")
        store.commit(
            claim, Commit("c1", None, "r1", value, metadata=value, events=(EventIn("k", value),))
        )
        store.put_writes(claim, "c1", [PendingWrite("task", "ch", value)])
        got = store.get("t")
        assert got is not None
        assert got.state == value and got.metadata == value and got.writes[0].value == value
        assert list(got.state) == list(value)  # key order kept
        assert store.events_after("t", 0)[0].payload == value
        got.state["nul"] = "changed"
        again = store.get("t")
        assert again is not None and again.state == value
        ticket = store.run_queue.submit(Submission("t", value, mode=Mode.ENQUEUE))
        entry = store.run_queue.entry(ticket.entry_id)
        assert entry is not None and entry.input == value


def test_bad_arguments_raise_validation_error_before_any_sql(pg_dsn: str, pg_schema: str) -> None:
    with PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=pg_schema)) as store:
        claim = store.claim("t", "me")
        with pytest.raises(ValidationError, match=r'commit\.state\["a"\]\[1\]'):
            store.commit(claim, Commit("c1", None, "r1", {"a": [1, float("nan")]}))
        with pytest.raises(ValidationError, match="thread_id"):
            store.claim("", "me")
        with pytest.raises(ValidationError, match="policy"):
            store.claim("u", "me", policy=timedelta(seconds=1))  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="limit"):
            store.history("t", limit=0)
        assert store.thread("t") is None  # nothing was written
        assert store.claim("u", "me", ClaimPolicy()).token > claim.token
