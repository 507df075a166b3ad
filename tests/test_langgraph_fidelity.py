"""What LangGraph's own test suite asks of a saver (SPEC §14.1), on every backend, sync and
async: pending writes in ``writes_sort_key`` order with their task paths, string channel versions
that continue, `AsyncDurableSaver`'s sync methods, state types allow-listed from the compiled
graph, and ``prune`` as PostgresSaver 3.2 does it (a DeltaChannel thread is refused and keeps its
state, a kept checkpoint reports no parent, finished subgraph calls are dropped).

LangGraph's whole suite runs with ``make langgraph-suite`` (tests/langgraph_suite); its short
subset is tests/test_langgraph_suite.py.
"""

from __future__ import annotations

import asyncio
import operator
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.agents import AgentAction
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import _messages_delta_reducer, add_messages
from langgraph.types import Command, Send, interrupt
from pydantic import BaseModel

from durable_graph.aio import (
    AsyncInMemoryCheckpointer,
    AsyncPostgresCheckpointer,
    AsyncSqliteCheckpointer,
)
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ThreadBusy
from durable_graph.core.model import Submission
from durable_graph.langgraph import AsyncDurableSaver, DurableSaver
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.sqlite import SqliteCheckpointer

BACKENDS = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Checkpointer]:
    s: Checkpointer
    if request.param == "postgres":
        dsn: str = request.getfixturevalue("pg_dsn")
        schema: str = request.getfixturevalue("pg_schema")
        s = PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema))
    elif request.param == "sqlite":
        s = SqliteCheckpointer.open(str(tmp_path / "lg.db"))
    else:
        s = InMemoryCheckpointer()
    yield s
    s.close()


@pytest.fixture(params=BACKENDS)
def async_store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """An async context manager opening a fresh async store (inside the test's loop)."""

    @asynccontextmanager
    async def open_store() -> AsyncIterator[Any]:
        if request.param == "postgres":
            dsn: str = request.getfixturevalue("pg_dsn")
            schema: str = request.getfixturevalue("pg_schema")
            s: Any = await AsyncPostgresCheckpointer.open(dsn, PostgresConfig(schema=schema))
        elif request.param == "sqlite":
            s = await AsyncSqliteCheckpointer.open(str(tmp_path / f"{uuid.uuid4().hex}.db"))
        else:
            s = AsyncInMemoryCheckpointer()
        try:
            yield s
        finally:
            await s.close()

    return open_store


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


# --- graphs --------------------------------------------------------------------------------


class Fan(TypedDict):
    order: Annotated[list[str], operator.add]


def _fan_out(checkpointer: Any) -> Any:
    """Parallel sends whose task ids do not sort as their paths: order-sensitive state."""

    def spread(state: Fan) -> list[Send]:
        return [Send("item", {"order": [str(i)]}) for i in range(12)]

    def item(state: Fan) -> Fan:
        return {"order": [state["order"][-1]]}

    builder = StateGraph(Fan)
    builder.add_node("item", item)
    builder.add_conditional_edges(START, spread, ["item"])
    return builder.compile(checkpointer=checkpointer)


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class DeltaChat(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer)]


def _reply(state: Any) -> dict[str, Any]:
    n = len(state["messages"])
    return {"messages": [AIMessage(f"ok {n}", id=f"reply-{n}")]}


def _chat(checkpointer: Any, schema: Any = Chat) -> Any:
    builder = StateGraph(schema)
    builder.add_node("reply", _reply)
    builder.add_edge(START, "reply")
    return builder.compile(checkpointer=checkpointer)


def _say(i: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"hi {i}", id=f"hi-{i}")]}


# --- pending-write order --------------------------------------------------------------------


def test_a_state_rebuilt_from_the_store_keeps_the_live_order_of_parallel_writes(
    store: Checkpointer,
) -> None:
    saver = DurableSaver(store)
    live = _fan_out(saver).invoke({"order": []}, _config("t"), durability="exit")
    # A fresh saver reads what was stored: LangGraph replays the writes in stored order.
    again = _fan_out(DurableSaver(store)).get_state(_config("t")).values
    assert again["order"] == live["order"]
    reference = _fan_out(InMemorySaver()).invoke({"order": []}, _config("t"))
    assert live["order"] == reference["order"]


def test_task_paths_are_stored_and_writes_come_back_in_writes_sort_key_order(
    store: Checkpointer,
) -> None:
    saver = DurableSaver(store)
    config: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    checkpoint: Any = {"v": 4, "id": "c1", "ts": "", "channel_values": {}, "channel_versions": {}}
    checkpoint["versions_seen"] = {}
    stored = saver.put(config, checkpoint, {}, {})
    saver.put_writes(stored, [("x", 1)], "task-z", "~a")
    saver.put_writes(stored, [("x", 2)], "task-a", "~b")
    saver.put_writes(stored, [("x", 0)], "task-q")
    tup = saver.get_tuple(stored)
    assert tup is not None
    assert tup.pending_writes == [("task-q", "x", 0), ("task-z", "x", 1), ("task-a", "x", 2)]
    assert [w.task_path for w in store.get("t", "c1").writes] == ["", "~a", "~b"]  # type: ignore[union-attr]


# --- string channel versions ----------------------------------------------------------------


def test_a_thread_with_langgraphs_string_versions_continues(store: Checkpointer) -> None:
    theirs = InMemorySaver()
    graph = _chat(theirs)
    graph.invoke(_say(0), _config("t"))
    ours = DurableSaver(store)
    # Copy the thread as LangGraph wrote it (string versions), oldest first.
    for tup in reversed(list(theirs.list(_config("t")))):
        root: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        config = tup.parent_config or root
        stored = ours.put(config, tup.checkpoint, tup.metadata, tup.checkpoint["channel_versions"])
        for task_id, channel, value in tup.pending_writes or []:
            ours.put_writes(stored, [(channel, value)], task_id)
    version = ours.get_next_version("00000000000000000000000000000007.0.5", None)
    assert isinstance(version, str) and version > "00000000000000000000000000000007.0.5"
    assert ours.get_next_version(None, None) == 1 and ours.get_next_version(3, None) == 4
    resumed = _chat(ours).invoke(_say(1), _config("t"))
    assert [m.content for m in resumed["messages"]] == ["hi 0", "ok 1", "hi 1", "ok 3"]


# --- AsyncDurableSaver's sync methods -------------------------------------------------------


def test_async_saver_sync_methods_run_on_its_loop_from_another_thread(
    async_store_factory: Any,
) -> None:
    async def scenario() -> None:
        async with async_store_factory() as s:
            saver = AsyncDurableSaver(s)
            graph = _chat(saver)
            await graph.ainvoke(_say(0), _config("t"))
            # From the loop's own thread the sync API would wait on itself: refused.
            with pytest.raises(asyncio.InvalidStateError):
                saver.get_tuple(_config("t"))
            with pytest.raises(asyncio.InvalidStateError):
                graph.get_state(_config("t"))

            def from_a_thread() -> tuple[Any, Any, int]:
                state = graph.get_state(_config("t"))
                graph.update_state(_config("t"), _say(9))
                return state, saver.get_tuple(_config("t")), len(list(saver.list(None)))

            state, tup, listed = await asyncio.to_thread(from_a_thread)
            assert [m.content for m in state.values["messages"]] == ["hi 0", "ok 1"]
            assert tup is not None and len(tup.checkpoint["channel_values"]["messages"]) == 3
            assert listed == 4
            assert threading.current_thread() is threading.main_thread()

    asyncio.run(scenario())


# --- state types ----------------------------------------------------------------------------


class Item(BaseModel):
    name: str


class Typed(TypedDict):
    items: Annotated[list[Item], operator.add]
    action: AgentAction | None


def _typed(checkpointer: Any) -> Any:
    def node(state: Typed) -> dict[str, Any]:
        return {"items": [Item(name="x")], "action": AgentAction("tool", "in", "log")}

    builder = StateGraph(Typed)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    return builder.compile(checkpointer=checkpointer)


def test_state_types_round_trip_as_their_types_without_an_environment_variable(
    store: Checkpointer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LANGGRAPH_STRICT_MSGPACK", raising=False)
    _typed(DurableSaver(store)).invoke({"items": [], "action": None}, _config("t"))
    values = _typed(DurableSaver(store)).get_state(_config("t")).values  # a fresh saver
    assert values["items"] == [Item(name="x")] and isinstance(values["items"][0], Item)
    assert isinstance(values["action"], AgentAction)
    # A graph whose schema does not name those types does not load them as those types.
    other = StateGraph(Fan)
    other.add_node("n", lambda s: {})
    other.add_edge(START, "n")
    plain = other.compile(checkpointer=DurableSaver(store)).get_state(_config("t")).values
    assert not isinstance(plain.get("action"), AgentAction)


# --- prune ----------------------------------------------------------------------------------


def _ids(saver: Any, thread_id: str) -> list[str]:
    return [t.checkpoint["id"] for t in saver.list(_config(thread_id))]


def test_prune_refuses_a_batch_with_a_delta_channel_thread_and_keeps_its_state(
    store: Checkpointer,
) -> None:
    saver = DurableSaver(store)
    plain, delta = _chat(saver), _chat(saver, DeltaChat)
    for i in range(3):
        plain.invoke(_say(i), _config("plain"))
        delta.invoke(_say(i), _config("delta"))
    before = {t: _ids(saver, t) for t in ("plain", "delta")}
    state = delta.get_state(_config("delta"))
    assert len(state.values["messages"]) == 6
    with pytest.raises(NotImplementedError, match="delta"):
        saver.prune(["plain", "delta"])
    assert {t: _ids(saver, t) for t in before} == before
    assert delta.get_state(_config("delta")) == state
    saver.prune(["plain"])
    assert len(_ids(saver, "plain")) == 1


def test_prune_refuses_a_batch_with_a_thread_whose_run_is_open(store: Checkpointer) -> None:
    # The run writes on from the checkpoints keep_latest would drop (issue 47 review): the
    # saver refuses, so serve's threads.prune (409) and `thread prune` share the one check.
    saver = DurableSaver(store)
    graph = _chat(saver)
    for thread_id in ("idle", "running"):
        graph.invoke(_say(0), _config(thread_id))
        graph.invoke(_say(1), _config(thread_id))
    store.run_queue.submit(Submission(thread_id="running", input=None))
    before = {t: _ids(saver, t) for t in ("idle", "running")}
    with pytest.raises(ThreadBusy, match="running has a run going"):
        saver.prune(["idle", "running"])
    assert {t: _ids(saver, t) for t in before} == before
    saver.prune(["running"], strategy="delete")  # deleting ends the run: it is the user's call
    assert _ids(saver, "running") == []


def test_prune_keeps_the_latest_with_no_parent_and_the_thread_runs_on(
    store: Checkpointer,
) -> None:
    saver = DurableSaver(store)
    graph = _chat(saver)
    for i in range(3):
        for thread_id in ("pruned", "twin"):
            graph.invoke(_say(i), _config(thread_id))
    before = graph.get_state(_config("pruned"))
    assert before.parent_config is not None
    saver.prune(["pruned"])
    after = graph.get_state(_config("pruned"))
    assert _ids(saver, "pruned") == [before.config["configurable"]["checkpoint_id"]]
    assert after.parent_config is None and after.values == before.values
    for thread_id in ("pruned", "twin"):
        graph.invoke(_say(3), _config(thread_id))
    assert graph.get_state(_config("pruned")).values == graph.get_state(_config("twin")).values


class Calls(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    calls: Annotated[list[str], operator.add]


def _counting(name: str, checkpointer: bool | None) -> Any:
    def count(state: Calls) -> dict[str, Any]:
        n = len(state["messages"])
        reply = AIMessage(f"{name} call {len(state['calls']) + 1}", id=f"{name}-{n}")
        return {"calls": [name], "messages": [reply]}

    builder = StateGraph(Calls)
    builder.add_node("count", count)
    builder.add_edge(START, "count")
    return builder.compile(checkpointer=checkpointer)


def test_prune_drops_finished_subgraph_calls_and_keeps_a_persistent_subgraph(
    store: Checkpointer,
) -> None:
    saver = DurableSaver(store)
    parent = StateGraph(Calls)
    parent.add_node("memory", _counting("memory", checkpointer=True))
    parent.add_node("call", _counting("call", checkpointer=None))
    parent.add_edge(START, "memory")
    parent.add_edge("memory", "call")
    graph: Any = parent.compile(checkpointer=saver)
    for i in range(3):
        for thread_id in ("pruned", "twin"):
            graph.invoke(_say(i), _config(thread_id))
    saver.prune(["pruned"])
    namespaces = {t.config["configurable"]["checkpoint_ns"] for t in saver.list(_config("pruned"))}
    assert namespaces == {"", "memory"}
    for thread_id in ("pruned", "twin"):
        graph.invoke(_say(3), _config(thread_id))
    assert graph.get_state(_config("pruned")).values == graph.get_state(_config("twin")).values


def test_prune_keeps_an_interrupted_subgraph_resumable(store: Checkpointer) -> None:
    def ask(state: Chat) -> dict[str, Any]:
        return {"messages": [AIMessage(str(interrupt("approve?")), id="answer")]}

    sub = StateGraph(Chat)
    sub.add_node("ask", ask)
    sub.add_edge(START, "ask")
    parent = StateGraph(Chat)
    parent.add_node("sub", sub.compile())
    parent.add_edge(START, "sub")
    saver = DurableSaver(store)
    graph: Any = parent.compile(checkpointer=saver)
    graph.invoke(_say(0), _config("t"))
    saver.prune(["t"])
    done = graph.invoke(Command(resume="yes"), _config("t"))
    assert [m.content for m in done["messages"]] == ["hi 0", "yes"]


def test_async_prune_refuses_a_delta_channel_thread(async_store_factory: Any) -> None:
    async def scenario() -> None:
        async with async_store_factory() as s:
            saver = AsyncDurableSaver(s)
            delta = _chat(saver, DeltaChat)
            for i in range(3):
                await delta.ainvoke(_say(i), _config("delta"))
            state = await delta.aget_state(_config("delta"))
            with pytest.raises(NotImplementedError, match="delta"):
                await saver.aprune(["delta"])
            assert await delta.aget_state(_config("delta")) == state
            plain = _chat(saver)
            for i in range(2):
                await plain.ainvoke(_say(i), _config("plain"))
            await saver.aprune(["plain"])
            after = await plain.aget_state(_config("plain"))
            assert after.parent_config is None and len(after.values["messages"]) == 4

    asyncio.run(scenario())
