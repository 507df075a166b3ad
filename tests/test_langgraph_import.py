"""Moving in (SPEC §14.2): threads written by LangGraph's own ``SqliteSaver`` and
``PostgresSaver`` — whole histories with pending writes and subgraph namespaces — imported into a
store (memory, SQLite, PostgreSQL) through `import_threads` and ``durable-graph langgraph
import``; the imported thread shows the same `get_state_history` and resumes from its interrupt
exactly as it does under LangGraph's saver.
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
import pickle
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import ormsgpack
import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, Send, interrupt

from durable_graph.aio import AsyncInMemoryCheckpointer
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.langgraph import AsyncDurableSaver, DurableSaver
from durable_graph.langgraph.codec import NS_SEP
from durable_graph.langgraph.importer import (
    ImportResult,
    aimport_threads,
    import_threads,
    task_paths_from_postgres,
    task_paths_from_sqlite,
    threads_in_sqlite,
)
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.sqlite import SqliteCheckpointer


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def _graph(checkpointer: Any) -> Any:
    """Parallel sends, then a subgraph that asks with interrupt(): pending writes, a namespace."""

    def spread(state: State) -> list[Send]:
        return [Send("item", {"log": [f"item {i}"]}) for i in range(5)]

    def item(state: State) -> State:
        return {"log": [state["log"][-1]]}

    def ask(state: State) -> State:
        return {"log": [f"answer {interrupt('approve?')}"]}

    sub = StateGraph(State)
    sub.add_node("ask", ask)
    sub.add_edge(START, "ask")
    builder = StateGraph(State)
    builder.add_node("item", item)
    builder.add_node("sub", sub.compile())
    builder.add_conditional_edges(START, spread, ["item"])
    builder.add_edge("item", "sub")
    return builder.compile(checkpointer=checkpointer)


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def _write_threads(saver: Any) -> None:
    graph = _graph(saver)
    for thread_id in ("a", "b"):
        graph.invoke({"log": ["start"]}, _config(thread_id))
        graph.invoke(Command(resume="yes"), _config(thread_id))
        graph.invoke({"log": ["again"]}, _config(thread_id))  # stops at the interrupt


@contextmanager
def _postgres_source() -> Iterator[str]:
    base = psycopg.conninfo.conninfo_to_dict(os.environ["DURABLE_GRAPH_TEST_DSN"])
    name = f"lg_src_{uuid.uuid4().hex[:12]}"
    admin = psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in base.items()})
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    base["dbname"] = name
    try:
        yield psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in base.items()})
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Checkpointer]:
    store: Checkpointer
    if request.param == "postgres":
        dsn: str = request.getfixturevalue("pg_dsn")
        store = PostgresCheckpointer.open(
            dsn, PostgresConfig(schema=request.getfixturevalue("pg_schema"))
        )
    elif request.param == "sqlite":
        store = SqliteCheckpointer.open(str(tmp_path / "target.db"))
    else:
        store = InMemoryCheckpointer()
    yield store
    store.close()


def _history(graph: Any, thread_id: str) -> list[Any]:
    return list(graph.get_state_history(_config(thread_id)))


def _same_after_import(theirs: Any, ours: DurableSaver) -> None:
    g_theirs, g_ours = _graph(theirs), _graph(ours)
    for thread_id in ("a", "b"):
        assert _history(g_ours, thread_id) == _history(g_theirs, thread_id)
        assert g_ours.get_state(_config(thread_id), subgraphs=True) == g_theirs.get_state(
            _config(thread_id), subgraphs=True
        )
    # Resume from the interrupt under both: the same run, the same state.
    done_theirs = g_theirs.invoke(Command(resume="later"), _config("a"))
    done_ours = g_ours.invoke(Command(resume="later"), _config("a"))
    assert done_ours == done_theirs
    assert done_ours["log"][-1] == "answer later"
    assert g_ours.get_state(_config("a")).values == g_theirs.get_state(_config("a")).values


def test_import_from_sqlite_saver_keeps_histories_and_resumes(
    target: Checkpointer, tmp_path: Path
) -> None:
    conn = sqlite3.connect(str(tmp_path / "lg.sqlite"), check_same_thread=False)
    theirs = SqliteSaver(conn)
    _write_threads(theirs)
    ours = DurableSaver(target)
    result = import_threads(theirs, ours, task_paths=task_paths_from_sqlite(conn))
    assert sorted(result.imported) == ["a", "b"] and result.skipped == []
    assert result.checkpoints > 10 and result.writes > 0
    # Subgraph namespaces are child threads of their root thread.
    roots = [t for t in target.threads() if NS_SEP not in t.thread_id]
    assert [t.thread_id for t in roots] == ["a", "b"]
    children = target.children("a")
    assert children and all(c.startswith(f"a{NS_SEP}sub:") for c in children)
    for child in children:
        info = target.thread(child)
        assert info is not None and info.parent_thread_id == "a"
    _same_after_import(theirs, ours)
    # Again: every thread is there already, nothing is written.
    again = import_threads(theirs, ours)
    assert again.imported == [] and sorted(again.skipped) == ["a", "b"]
    conn.close()


def test_import_from_postgres_saver_keeps_histories_and_resumes(target: Checkpointer) -> None:
    with _postgres_source() as dsn, PostgresSaver.from_conn_string(dsn) as theirs:
        theirs.setup()
        _write_threads(theirs)
        ours = DurableSaver(target)
        result = import_threads(theirs, ours, ["a", "b"], task_paths=task_paths_from_postgres(dsn))
        assert sorted(result.imported) == ["a", "b"]
        _same_after_import(theirs, ours)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durable_graph.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_cli_langgraph_import(tmp_path: Path) -> None:
    source = tmp_path / "lg.sqlite"
    conn = sqlite3.connect(str(source), check_same_thread=False)
    _write_threads(SqliteSaver(conn))
    conn.close()
    store_path = tmp_path / "store.db"
    args = ["langgraph", "import", "--from-sqlite", str(source), "--sqlite", str(store_path)]
    done = _cli(*args, "--thread", "a")
    assert done.returncode == 0, done.stderr
    assert "imported 1 threads" in done.stdout
    done = _cli(*args)
    assert done.returncode == 0, done.stderr
    assert "skipped 1 already in the store: a" in done.stdout
    with SqliteCheckpointer.open(str(store_path)) as store:
        ours = DurableSaver(store)
        state = _graph(ours).get_state(_config("b"))
        assert state.interrupts and state.interrupts[0].value == "approve?"
        finished = _graph(ours).invoke(Command(resume="ok"), _config("b"))
        assert finished["log"][-1] == "answer ok"
    refused = _cli("langgraph", "import", "--sqlite", str(store_path))
    assert refused.returncode == 2 and "--from-postgres" in refused.stderr


# --- a hostile or broken source (issue 37 items 1-2) ------------------------------------------


def _marker_ext(marker: Path) -> ormsgpack.Ext:
    """A msgpack value that LangGraph's default serializer loads as ``os.system("touch M")``."""
    return ormsgpack.Ext(0, ormsgpack.packb(["os", "system", f"touch {marker}"]))


class _Touch:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def _hostile_value(kind: str, marker: Path) -> tuple[str, bytes]:
    """(type, bytes) of a stored value whose load would run ``touch marker`` or build a type the
    source names."""
    if kind == "msgpack-ext":
        return "msgpack", ormsgpack.packb(["before", _marker_ext(marker)])
    if kind == "pickle":
        return "pickle", pickle.dumps(_Touch(marker))
    ident = ["os", "system"]
    lc = {"lc": 1 if kind == "lc1" else 2, "type": "constructor", "id": ident}
    return "json", json.dumps({**lc, "args": [f"touch {marker}"], "kwargs": {}}).encode()


def test_the_hostile_payload_runs_under_langgraphs_default_serializer(tmp_path: Path) -> None:
    """The payload the tests below plant is real: LangGraph's default serializer runs it."""
    marker = tmp_path / "ran"
    JsonPlusSerializer().loads_typed(_hostile_value("msgpack-ext", marker))
    assert marker.exists()


def _sqlite_source(path: Path) -> None:
    conn = sqlite3.connect(str(path), check_same_thread=False)
    _write_threads(SqliteSaver(conn))
    conn.close()


def _plant_in_sqlite(path: Path, thread_id: str, kind: str, marker: Path) -> None:
    """Replace a pending write's value of ``thread_id`` (its root namespace) with a hostile one."""
    type_, blob = _hostile_value(kind, marker)
    with sqlite3.connect(str(path)) as conn:
        done = conn.execute(
            "UPDATE writes SET type = ?, value = ? WHERE rowid = (SELECT min(rowid) FROM writes"
            " WHERE thread_id = ? AND checkpoint_ns = '')",
            (type_, blob, thread_id),
        )
        assert done.rowcount == 1


def _root_threads(store: Checkpointer) -> list[str]:
    return [t.thread_id for t in store.threads() if NS_SEP not in t.thread_id]


@pytest.mark.parametrize("kind", ["msgpack-ext", "pickle", "lc1", "lc2"])
def test_import_refuses_a_value_that_would_run_code_and_writes_nothing_of_its_thread(
    tmp_path: Path, kind: str
) -> None:
    source, marker = tmp_path / "lg.sqlite", tmp_path / "ran"
    _sqlite_source(source)
    _plant_in_sqlite(source, "b", kind, marker)
    conn = sqlite3.connect(str(source), check_same_thread=False)
    store = InMemoryCheckpointer()
    # Even a source saver built with the permissive serializer is read strictly.
    permissive = SqliteSaver(conn, serde=JsonPlusSerializer(allowed_msgpack_modules=True))
    result = import_threads(permissive, DurableSaver(store), threads_in_sqlite(conn))
    conn.close()
    assert not marker.exists()
    assert result.imported == ["a"] and list(result.failed) == ["b"]
    assert "reading its checkpoints" in result.failed["b"]
    assert _root_threads(store) == ["a"] and store.children("b") == []


def test_cli_import_of_a_hostile_sqlite_file_runs_nothing(tmp_path: Path) -> None:
    source, marker, store_path = tmp_path / "lg.sqlite", tmp_path / "ran", tmp_path / "store.db"
    _sqlite_source(source)
    _plant_in_sqlite(source, "b", "msgpack-ext", marker)
    done = _cli("langgraph", "import", "--from-sqlite", str(source), "--sqlite", str(store_path))
    assert done.returncode == 1, done.stderr
    assert not marker.exists()
    assert "error: thread 'b' not imported" in done.stderr and "os.system" in done.stderr
    assert "imported 1 threads" in done.stdout
    with SqliteCheckpointer.open(str(store_path)) as store:
        assert _root_threads(store) == ["a"] and store.children("b") == []


def test_cli_import_of_a_hostile_postgres_database_runs_nothing(tmp_path: Path) -> None:
    marker, store_path = tmp_path / "ran", tmp_path / "store.db"
    type_, blob = _hostile_value("msgpack-ext", marker)
    with _postgres_source() as dsn:
        with PostgresSaver.from_conn_string(dsn) as theirs:
            theirs.setup()
            _write_threads(theirs)
        with psycopg.connect(dsn, autocommit=True) as conn:
            planted = conn.execute(
                "UPDATE checkpoint_blobs SET type = %s, blob = %s"
                " WHERE thread_id = 'b' AND checkpoint_ns = '' AND channel = 'log'",
                (type_, blob),
            )
            assert planted.rowcount >= 1
        done = _cli("langgraph", "import", "--from-postgres", dsn, "--sqlite", str(store_path))
    assert done.returncode == 1, done.stderr
    assert not marker.exists()
    assert "error: thread 'b' not imported" in done.stderr and "os.system" in done.stderr
    with SqliteCheckpointer.open(str(store_path)) as store:
        assert _root_threads(store) == ["a"] and store.children("b") == []


def _steps_graph(checkpointer: Any) -> Any:
    def one(state: State) -> State:
        return {"log": ["one"]}

    def two(state: State) -> State:
        return {"log": ["two"]}

    builder = StateGraph(State)
    builder.add_node("one", one)
    builder.add_node("two", two)
    builder.add_edge(START, "one")
    builder.add_edge("one", "two")
    return builder.compile(checkpointer=checkpointer)


def test_a_failed_import_leaves_a_thread_a_rerun_completes(tmp_path: Path) -> None:
    """Design (D154): the store writes a checkpoint at a time, so a thread whose import stopped
    part way keeps what was written; the rerun writes the rest once the source is fixed."""
    source = tmp_path / "lg.sqlite"
    conn = sqlite3.connect(str(source), check_same_thread=False)
    theirs = SqliteSaver(conn)
    _steps_graph(theirs).invoke({"log": ["start"]}, _config("t"))
    ids = [
        str(r[0])
        for r in conn.execute(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = 't' ORDER BY checkpoint_id"
        )
    ]
    assert len(ids) >= 3
    third = ids[2]
    (good,) = conn.execute("SELECT metadata FROM checkpoints WHERE checkpoint_id = ?", (third,))
    deep: Any = 1
    for _ in range(600):
        deep = {"d": deep}
    with conn:
        conn.execute(
            "UPDATE checkpoints SET metadata = ? WHERE checkpoint_id = ?",
            (json.dumps({"deep": deep}), third),
        )
    store = SqliteCheckpointer.open(str(tmp_path / "store.db"))
    ours = DurableSaver(store)
    failed = import_threads(theirs, ours, ["t"])
    assert failed.imported == [] and list(failed.failed) == ["t"]
    assert f"checkpoint {third}" in failed.failed["t"]
    assert len(list(ours.list(_config("t")))) == 2  # the two before it
    with conn:  # the source fixed
        conn.execute(
            "UPDATE checkpoints SET metadata = ? WHERE checkpoint_id = ?", (good[0], third)
        )
    rerun = import_threads(theirs, ours, ["t"])
    assert rerun.imported == ["t"] and rerun.failed == {}
    assert rerun.checkpoints == len(ids) - 2
    assert _history(_steps_graph(ours), "t") == _history(_steps_graph(theirs), "t")
    again = import_threads(theirs, ours, ["t"])
    assert again.skipped == ["t"] and (again.checkpoints, again.writes) == (0, 0)
    store.close()
    conn.close()


def test_async_import_reads_strictly_and_skips_on_a_rerun(tmp_path: Path) -> None:
    """`aimport_threads` (the source read with its async API) into an async store: the same
    guarantees, here from LangGraph's `InMemorySaver` with a hostile metadata value planted."""
    marker = tmp_path / "ran"
    theirs = InMemorySaver()
    _write_threads(theirs)
    saved = theirs.storage["b"][""]
    newest = max(saved)
    checkpoint, _, parent = saved[newest]
    saved[newest] = (checkpoint, _hostile_value("msgpack-ext", marker), parent)

    async def scenario() -> tuple[ImportResult, ImportResult, list[str]]:
        store = AsyncInMemoryCheckpointer()
        ours = AsyncDurableSaver(store)
        first = await aimport_threads(theirs, ours, ["a", "b"])
        again = await aimport_threads(theirs, ours, ["a"])
        roots = [t.thread_id for t in await store.threads() if NS_SEP not in t.thread_id]
        return first, again, roots

    first, again, roots = asyncio.run(scenario())
    assert not marker.exists()
    assert (
        first.imported == ["a"] and list(first.failed) == ["b"] and "os.system" in str(first.failed)
    )
    assert again.skipped == ["a"] and again.imported == []
    assert roots == ["a"]


# --- a source thread id the store cannot hold (issue 46 item 9) -------------------------------

_TABLES_SQLITE = ("checkpoints", "writes")
_TABLES_POSTGRES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
BAD_UTF8 = b"b\xff\xfe"
"""A thread id's bytes that are not UTF-8."""


def _copy_thread_sqlite(conn: sqlite3.Connection, to_sql: str) -> None:
    """Thread 'b' copied, every row, to the id the SQL expression ``to_sql`` makes."""
    with conn:
        for table in _TABLES_SQLITE:
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            chosen = ", ".join(to_sql if c == "thread_id" else c for c in columns)
            conn.execute(
                f"INSERT INTO {table} ({', '.join(columns)})"
                f" SELECT {chosen} FROM {table} WHERE thread_id = 'b'"
            )


def test_a_sqlite_source_thread_id_that_is_not_utf8_fails_alone(tmp_path: Path) -> None:
    """A ``SqliteSaver`` file whose thread ids include bytes that are not UTF-8, one with NUL
    and one with U+001F: those threads fail by name (their bytes written ``\\xNN``), the others
    are imported, through ``langgraph import`` and `import_threads`."""
    source = tmp_path / "lg.sqlite"
    conn = sqlite3.connect(str(source), check_same_thread=False)
    _write_threads(SqliteSaver(conn))
    _copy_thread_sqlite(conn, f"CAST(X'{BAD_UTF8.hex()}' AS TEXT)")
    _copy_thread_sqlite(conn, "CAST(X'6300' AS TEXT)")  # "c\x00"
    _copy_thread_sqlite(conn, "'d' || char(31) || 'e'")
    conn.close()
    raw = sqlite3.connect(str(source))
    with pytest.raises(sqlite3.OperationalError):  # what the listing met before
        raw.execute("SELECT DISTINCT thread_id FROM checkpoints").fetchall()
    raw.close()
    store_path = tmp_path / "store.db"
    args = ["langgraph", "import", "--from-sqlite", str(source), "--sqlite", str(store_path)]
    done = _cli(*args, "--json")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "OperationalError" not in done.stderr
    answer = json.loads(done.stdout)
    assert sorted(answer["imported"]) == ["a", "b"]
    failed = answer["failed"]
    assert sorted(failed) == ["b\\xff\\xfe", "c\x00", "d\x1fe"], failed
    assert "not valid UTF-8" in failed["b\\xff\\xfe"] and "b'b\\xff\\xfe'" in failed["b\\xff\\xfe"]
    assert "error: thread 'b\\\\xff\\\\xfe' not imported: its id is not valid UTF-8" in done.stderr
    assert "NUL" in failed["c\x00"] and "U+001F" in failed["d\x1fe"]
    with SqliteCheckpointer.open(str(store_path)) as store:
        assert _root_threads(store) == ["a", "b"]
        finished = _graph(DurableSaver(store)).invoke(Command(resume="ok"), _config("b"))
        assert finished["log"][-1] == "answer ok"
    # The library call, given the listing: the same answer, into a fresh store.
    conn = sqlite3.connect(f"file:{source}?mode=ro", uri=True, check_same_thread=False)
    listed = threads_in_sqlite(conn)
    assert listed == ["a", "b", BAD_UTF8.decode("utf-8", "surrogateescape"), "c\x00", "d\x1fe"]
    with SqliteCheckpointer.open(str(tmp_path / "again.db")) as store:
        result = import_threads(SqliteSaver(conn), DurableSaver(store), listed)
    conn.close()
    assert sorted(result.imported) == ["a", "b"] and sorted(result.failed) == sorted(failed)
    # A --thread argument of such bytes (Python reads argv with surrogateescape): named too.
    one = subprocess.run(
        [sys.executable, "-m", "durable_graph.cli", *args, "--thread", BAD_UTF8],
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert one.returncode == 1 and b"not valid UTF-8" in one.stderr, one.stderr
    assert b"Traceback" not in one.stderr


def test_a_postgres_source_thread_id_that_is_not_utf8_fails_alone(tmp_path: Path) -> None:
    """A ``PostgresSaver`` database in ``SQL_ASCII`` (the one PostgreSQL encoding that holds
    bytes that are not UTF-8) with such a thread id: that thread fails by name, the others are
    imported whole and resume."""
    base = psycopg.conninfo.conninfo_to_dict(os.environ["DURABLE_GRAPH_TEST_DSN"])
    name = f"lg_ascii_{uuid.uuid4().hex[:12]}"
    admin = psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in base.items()})
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            f"CREATE DATABASE {name} ENCODING 'SQL_ASCII' TEMPLATE template0"
            " LC_COLLATE 'C' LC_CTYPE 'C'"
        )
    base["dbname"] = name
    dsn = psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in base.items()})
    store_path = tmp_path / "store.db"
    try:
        utf8 = psycopg.conninfo.make_conninfo(dsn, client_encoding="utf8")
        with PostgresSaver.from_conn_string(utf8) as theirs:
            theirs.setup()
            _write_threads(theirs)
        with psycopg.connect(utf8, autocommit=True) as conn:
            for table in _TABLES_POSTGRES:
                columns = [
                    str(r[0])
                    for r in conn.execute(
                        "SELECT column_name FROM information_schema.columns"
                        " WHERE table_name = %s ORDER BY ordinal_position",
                        (table,),
                    )
                ]
                chosen = ", ".join(
                    f"convert_from('\\x{BAD_UTF8.hex()}'::bytea, 'SQL_ASCII')"
                    if c == "thread_id"
                    else c
                    for c in columns
                )
                conn.execute(
                    f"INSERT INTO {table} ({', '.join(columns)})"
                    f" SELECT {chosen} FROM {table} WHERE thread_id = 'b'"
                )
        done = _cli(
            "langgraph", "import", "--from-postgres", dsn, "--sqlite", str(store_path), "--json"
        )
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    answer = json.loads(done.stdout)
    assert sorted(answer["imported"]) == ["a", "b"]
    assert list(answer["failed"]) == ["b\\xff\\xfe"]
    assert "not valid UTF-8" in answer["failed"]["b\\xff\\xfe"]
    with SqliteCheckpointer.open(str(store_path)) as store:
        assert _root_threads(store) == ["a", "b"]
        ours = _graph(DurableSaver(store))
        assert ours.get_state(_config("a")).interrupts[0].value == "approve?"
        assert store.children("a") and all(isinstance(c, str) for c in store.children("a"))
