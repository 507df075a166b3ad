"""One API surface: every spelling of the 32 store methods matches the sync Protocols.

The sync `Checkpointer` and `RunQueue` Protocols are the source (`durable_graph.core.surface`). Each
implementation — memory, SQLite, PostgreSQL, their three async stores — the async Protocols, and
the testkit adapter must have each member (``members``: the methods, ``run_queue`` and the context
manager) with the same parameters, kinds, defaults and annotations (``async`` where the Protocol
is async), whether written by hand or generated from the Protocols (``tools/generate_stores.py``).
A generated PostgreSQL method is one call of the builder of its name, which takes the Protocol's
parameters in order. The fixed ThreadBusy messages and the
SQLSTATE map are checked against the SQL functions that raise them.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import textwrap
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
from durable_graph.core.run_queue import RunQueue, TraceContexts
from durable_graph.core.surface import members, mismatches
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.postgres import (
    PostgresCheckpointer,
    calls,
    fast_path,
    items,
    operating,
    scheduling,
    workers,
)
from durable_graph.postgres.async_generated import AsyncCheckpointerSql, AsyncRunQueueSql
from durable_graph.postgres.async_store import AsyncPostgresCheckpointer, AsyncPostgresRunQueue
from durable_graph.postgres.generated import CheckpointerSql, RunQueueSql
from durable_graph.postgres.store import PostgresRunQueue
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
    (PostgresCheckpointer, CheckpointerSql, Checkpointer),
    (PostgresRunQueue, RunQueueSql, RunQueue),
    (AsyncPostgresCheckpointer, AsyncCheckpointerSql, Checkpointer),
    (AsyncPostgresRunQueue, AsyncRunQueueSql, RunQueue),
]


def _generated(mixin: type) -> dict[str, typing.Any]:
    return {n: m for n, m in vars(mixin).items() if not n.startswith("_") and callable(m)}


def _builder(name: str) -> typing.Any:
    return (
        getattr(calls, name, None)
        or getattr(fast_path, name, None)
        or getattr(operating, name, None)
        or getattr(scheduling, name, None)
        or getattr(items, name, None)
        or getattr(workers, name)
    )


@pytest.mark.parametrize(
    ("store", "mixin", "protocol"), SQL_STORES, ids=[s[0].__name__ for s in SQL_STORES]
)
def test_a_postgres_method_not_written_by_hand_is_one_sql_call(
    store: type, mixin: type, protocol: type
) -> None:
    methods = _generated(mixin)
    hand_written = {"prune_all", "submit_many", "await_events_after", "subscribe", "await_closed"}
    expected = (
        set(members(protocol)) - hand_written - {"close", "run_queue", "__enter__", "__exit__"}
    )
    if protocol is Checkpointer:
        assert set(methods) == expected
    else:
        assert set(methods) == expected | {"close", "set_trace_context", "trace_context"}
    for name, method in methods.items():
        assert inspect.getattr_static(store, name) is method, name  # inherited as generated
        params = list(inspect.signature(method).parameters)[1:]
        module = (
            "calls"
            if hasattr(calls, name)
            else "fast_path"  # the worker's composed steps (postgres/fast_path.py)
            if hasattr(fast_path, name)
            else "operating"
            if hasattr(operating, name)
            else "scheduling"  # SPEC §15's builders (postgres/scheduling.py)
            if hasattr(scheduling, name)
            else "items"  # SPEC §20.3's builders (postgres/items.py)
            if hasattr(items, name)
            else "workers"  # the worker registry's (postgres/workers.py, D130)
        )
        call = f"self._x.run({module}.{name}({', '.join(['self._config', *params])}))"
        body = ast.parse(textwrap.dedent(inspect.getsource(method))).body[0]
        assert isinstance(body, ast.FunctionDef | ast.AsyncFunctionDef)
        statement = body.body[0]
        assert isinstance(statement, ast.Return) and statement.value is not None, name
        assert ast.unparse(statement.value) in (call, f"await {call}"), name


@pytest.mark.parametrize("mixin", [CheckpointerSql, RunQueueSql], ids=["checkpointer", "run_queue"])
def test_every_sql_builder_takes_the_protocols_parameters_in_order(mixin: type) -> None:
    for name, method in _generated(mixin).items():
        builder = inspect.signature(_builder(name)).parameters.values()
        params = list(inspect.signature(method).parameters)[1:]
        assert [p.name for p in builder] == ["config", *params], name
        assert all(p.kind is p.POSITIONAL_OR_KEYWORD for p in builder), name
        assert all(p.default is p.empty for p in builder), name


def test_sql_call_arguments_are_completed_with_the_protocols_defaults() -> None:
    def bound(method: typing.Any, *args: object, **kwargs: object) -> list[object]:
        found = inspect.signature(method).bind(None, *args, **kwargs)
        found.apply_defaults()
        return list(found.arguments.values())[1:]

    history = PostgresCheckpointer.history
    assert bound(history, "t", None, 100) == ["t", None, 100]
    assert bound(history, "t") == ["t", None, 100]
    assert bound(history, "t", limit=5) == ["t", None, 5]
    assert bound(history, thread_id="t", before="c") == ["t", "c", 100]
    begin = PostgresCheckpointer.begin_attempt
    assert bound(begin, "h", 1, run_id="r") == [
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
        ((), {}, "missing a required argument: 'thread_id'"),
        (("t", None, 100, 1), {}, "too many positional arguments"),
        (("t",), {"thread_id": "u"}, "multiple values for argument 'thread_id'"),
        (("t",), {"size": 5}, "got an unexpected keyword argument 'size'"),
    ],
)
def test_sql_call_arguments_refuse_a_call_python_would_refuse(
    args: tuple[object, ...], kwargs: dict[str, object], error: str
) -> None:
    with pytest.raises(TypeError, match=re.escape(error)):
        inspect.signature(PostgresCheckpointer.history).bind(None, *args, **kwargs)


def test_sql_call_keyword_only_arguments_stay_keyword_only() -> None:
    with pytest.raises(TypeError, match="too many positional arguments"):
        inspect.signature(PostgresCheckpointer.begin_attempt).bind(None, "h", 1, "r")


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


def test_the_adapter_passes_the_arguments_given_and_the_protocols_defaults() -> None:
    async def factory() -> _ShortHistory:
        return _ShortHistory()

    adapter = SyncAdapter.open(factory)
    try:
        claim = adapter.claim("t", "h")  # the store's default ClaimPolicy applies
        parent = None
        for i in range(4):
            parent = adapter.commit(claim, Commit(f"c{i}", parent, "r", i)).checkpoint_id
        # Written out, the adapter passes the Protocol's default (every store's: checked above).
        assert len(adapter.history("t")) == 4
        assert len(adapter.history("t", limit=3)) == 3
        assert (
            len(
                asyncio.run_coroutine_threadsafe(adapter.target.history("t"), adapter.loop).result()
            )
            == 2
        )
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
