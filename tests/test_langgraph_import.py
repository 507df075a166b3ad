"""Moving in (SPEC §14.2): threads written by LangGraph's own ``SqliteSaver`` and
``PostgresSaver`` — whole histories with pending writes and subgraph namespaces — imported into a
store (memory, SQLite, PostgreSQL) through `import_threads` and ``durable-graph langgraph
import``; the imported thread shows the same `get_state_history` and resumes from its interrupt
exactly as it does under LangGraph's saver.
"""

from __future__ import annotations

import operator
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, Send, interrupt

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.langgraph import DurableSaver
from durable_graph.langgraph.codec import NS_SEP
from durable_graph.langgraph.importer import (
    import_threads,
    task_paths_from_postgres,
    task_paths_from_sqlite,
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
