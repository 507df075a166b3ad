"""One API surface: every spelling of the 32 store methods matches the sync Protocols.

The sync `Checkpointer` and `RunQueue` Protocols are the source (`durable_graph.core.surface`). Each
implementation — memory, SQLite, PostgreSQL, their three async stores — the async Protocols, and
the testkit adapter must have each member (``members``: the methods, ``run_queue`` and the context
manager) with the same parameters, kinds, defaults and annotations (``async`` where the Protocol
is async), whether written out or derived from the Protocol. The PostgreSQL builders behind the
derived methods take the Protocol's parameters in order. The fixed ThreadBusy messages and the
SQLSTATE map are checked against the SQL functions that raise them.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import typing
from pathlib import Path

import pytest

import durable_graph
from durable_graph import ClaimPolicy, Commit
from durable_graph.aio import AsyncInMemoryCheckpointer, AsyncSqliteCheckpointer
from durable_graph.core import errors
from durable_graph.core.async_protocols import AsyncCheckpointer, AsyncRunQueue
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.model import Checkpoint
from durable_graph.core.run_queue import RunQueue
from durable_graph.core.surface import (
    AsyncCheckpointerCalls,
    AsyncRunQueueCalls,
    CheckpointerCalls,
    RunQueueCalls,
    TraceContexts,
    arguments_of,
    mismatches,
)
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.postgres import PostgresCheckpointer
from durable_graph.postgres.async_store import AsyncPostgresCheckpointer, AsyncPostgresRunQueue
from durable_graph.postgres.store import (
    CHECKPOINTER_CALLS,
    RUN_QUEUE_CALLS,
    PostgresRunQueue,
    SqlCalls,
)
from durable_graph.sqlite import SqliteCheckpointer
from durable_graph.testkit.async_adapter import SyncAdapter

SQL_DIR = Path(durable_graph.__file__).parent / "_sql"

SYNC_STORES: list[type] = [
    InMemoryCheckpointer,
    SqliteCheckpointer,
    PostgresCheckpointer,
    SyncAdapter,
]
ASYNC_STORES: list[type] = [
    AsyncCheckpointer,
    AsyncInMemoryCheckpointer,
    AsyncSqliteCheckpointer,
    AsyncPostgresCheckpointer,
]


def _queue_class(store: type) -> type:
    """The class of ``store.run_queue``, from its property's return annotation."""
    prop = inspect.getattr_static(store, "run_queue")
    queue: type = typing.get_type_hints(prop.fget)["return"]
    return queue


@pytest.mark.parametrize("store", SYNC_STORES, ids=lambda c: c.__name__)
def test_sync_store_signatures_match_the_protocols(store: type) -> None:
    assert mismatches(Checkpointer, store) == []
    assert mismatches(RunQueue, _queue_class(store)) == []


@pytest.mark.parametrize("store", ASYNC_STORES, ids=lambda c: c.__name__)
def test_async_store_signatures_match_the_sync_protocols(store: type) -> None:
    assert mismatches(Checkpointer, store, asynchronous=True) == []
    queue = AsyncRunQueue if store is AsyncCheckpointer else _queue_class(store)
    assert mismatches(RunQueue, queue, asynchronous=True) == []


@pytest.mark.parametrize("store", [*SYNC_STORES[:-1], *ASYNC_STORES[1:]], ids=lambda c: c.__name__)
def test_every_store_queue_keeps_trace_contexts_with_one_signature(store: type) -> None:
    asynchronous = store in ASYNC_STORES
    assert mismatches(TraceContexts, _queue_class(store), asynchronous=asynchronous) == []


SQL_STORES = [
    (PostgresCheckpointer, CheckpointerCalls, CHECKPOINTER_CALLS),
    (PostgresRunQueue, RunQueueCalls, RUN_QUEUE_CALLS),
    (AsyncPostgresCheckpointer, AsyncCheckpointerCalls, CHECKPOINTER_CALLS),
    (AsyncPostgresRunQueue, AsyncRunQueueCalls, RUN_QUEUE_CALLS),
]


@pytest.mark.parametrize(
    ("store", "method_set", "table"), SQL_STORES, ids=[s[0].__name__ for s in SQL_STORES]
)
def test_a_postgres_method_not_written_out_is_one_sql_call(
    store: type, method_set: type, table: SqlCalls
) -> None:
    forwarded = {n: m for n, m in vars(method_set).items() if hasattr(m, "__wrapped__")}
    inherited = {n for n, m in forwarded.items() if inspect.getattr_static(store, n) is m}
    assert inherited == set(table.builders)


@pytest.mark.parametrize(
    "table", [CHECKPOINTER_CALLS, RUN_QUEUE_CALLS], ids=["checkpointer", "run_queue"]
)
def test_every_sql_builder_takes_the_protocols_parameters_in_order(table: SqlCalls) -> None:
    for name, build in table.builders.items():
        builder = inspect.signature(build).parameters.values()
        params = list(inspect.signature(table.methods[name]).parameters)[1:]
        assert [p.name for p in builder] == ["config", *params], name
        assert all(p.kind is p.POSITIONAL_OR_KEYWORD for p in builder), name
        assert all(p.default is p.empty for p in builder), name


def test_sql_call_arguments_are_completed_with_the_protocols_defaults() -> None:
    history = arguments_of(Checkpointer.history)
    assert history(("t", None, 100), {}) == ("t", None, 100)
    assert list(history(("t",), {})) == ["t", None, 100]
    assert list(history(("t",), {"limit": 5})) == ["t", None, 5]
    assert list(history((), {"thread_id": "t", "before": "c"})) == ["t", "c", 100]
    begin = arguments_of(Checkpointer.begin_attempt)
    assert list(begin(("h", 1), {"run_id": "r"})) == [
        "h",
        1,
        "r",
        ClaimPolicy(),
        durable_graph.ANY,
        None,  # kinds (SPEC §15)
    ]


@pytest.mark.parametrize(
    ("args", "kwargs", "error"),
    [
        ((), {}, "history() missing required argument: 'thread_id'"),
        (("t", None, 100, 1), {}, "history() takes 3 positional arguments, got 4"),
        (("t",), {"thread_id": "u"}, "history() got multiple values for argument 'thread_id'"),
        (("t",), {"size": 5}, "history() got an unexpected keyword argument 'size'"),
    ],
)
def test_sql_call_arguments_refuse_a_call_python_would_refuse(
    args: tuple[object, ...], kwargs: dict[str, object], error: str
) -> None:
    with pytest.raises(TypeError, match=re.escape(error)):
        arguments_of(Checkpointer.history)(args, kwargs)


def test_sql_call_keyword_only_arguments_stay_keyword_only() -> None:
    with pytest.raises(TypeError, match="takes 2 positional arguments, got 3"):
        arguments_of(Checkpointer.begin_attempt)(("h", 1, "r"), {})


def test_a_changed_default_is_reported() -> None:
    class Drifted(InMemoryCheckpointer):
        def history(
            self, thread_id: str, before: str | None = None, limit: int = 50
        ) -> list[Checkpoint]:
            return super().history(thread_id, before, limit)

    assert mismatches(Checkpointer, Drifted) == ["Drifted.history: default of limit: 50 != 100"]


class _ShortHistory(AsyncInMemoryCheckpointer):
    """The async in-memory store with a default of its own for `history`'s ``limit``."""

    async def history(
        self, thread_id: str, before: str | None = None, limit: int = 2
    ) -> list[Checkpoint]:
        return await super().history(thread_id, before, limit)


def test_the_adapter_passes_only_the_arguments_given() -> None:
    async def factory() -> _ShortHistory:
        return _ShortHistory()

    adapter = SyncAdapter.open(factory)
    try:
        claim = adapter.claim("t", "h")  # the store's default ClaimPolicy applies
        parent = None
        for i in range(4):
            parent = adapter.commit(claim, Commit(f"c{i}", parent, "r", i)).checkpoint_id
        assert len(adapter.history("t")) == 2  # the async store's default, not the Protocol's
        assert len(adapter.history("t", limit=3)) == 3
        assert claim.ttl == ClaimPolicy().ttl
    finally:
        adapter.shutdown()


def test_the_threaded_wrapper_lets_the_sync_store_supply_defaults() -> None:
    async def main() -> None:
        async with AsyncInMemoryCheckpointer() as store:
            claim = await store.claim("t", "h")
            parent = None
            for i in range(3):
                parent = (await store.commit(claim, Commit(f"c{i}", parent, "r", i))).checkpoint_id
            assert [c.checkpoint_id for c in await store.history("t", limit=2)] == ["c2", "c1"]
            assert len(await store.history("t")) == 3

    asyncio.run(main())


def test_thread_busy_messages_are_the_ones_the_sql_functions_raise() -> None:
    raised = set()
    for path in SQL_DIR.glob("*.sql"):
        raised |= set(
            re.findall(r"RAISE EXCEPTION '([^']*)' USING ERRCODE = 'DG001'", path.read_text())
        )
    assert raised == {errors.THREAD_BUSY_CLAIM, errors.THREAD_BUSY_ENTRY}


def test_every_sqlstate_the_sql_functions_raise_maps_to_one_error_class() -> None:
    raised = set()
    for path in SQL_DIR.glob("*.sql"):
        text = path.read_text()
        # A code its own function catches (a retry signal, e.g. delete_thread's) never escapes.
        caught = set(re.findall(r"WHEN SQLSTATE '(DG\d{3})'", text))
        raised |= set(re.findall(r"ERRCODE = '(DG\d{3})'", text)) - caught
    mapped = errors.sqlstates()
    assert raised <= set(mapped)
    for sqlstate, cls in mapped.items():
        assert cls.sqlstate == sqlstate and errors.error_for_sqlstate(sqlstate) is cls
    assert errors.error_for_sqlstate("23505") is None  # any other SQLSTATE: a database failure


def test_run_queue_annotations_name_the_classes_the_stores_return(tmp_path: Path) -> None:
    with SqliteCheckpointer.open(tmp_path / "s.db") as sqlite_store:
        assert type(sqlite_store.run_queue) is _queue_class(SqliteCheckpointer)
    with InMemoryCheckpointer() as memory_store:
        assert type(memory_store.run_queue) is _queue_class(InMemoryCheckpointer)
