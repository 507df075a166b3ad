"""Graph runs through the queue (SPEC §14.3-14.5) on the in-memory, SQLite and PostgreSQL
stores: JSON values both ways (LangChain messages in LangChain's JSON form), per-run config,
and the run's stream in the event log, followed from a second store handle."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.load import dumpd, load
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

from durable_graph.aio import AsyncWorker
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ValidationError
from durable_graph.core.model import BackoffPolicy, Completed, Failed, Submission
from durable_graph.langgraph import (
    AsyncDurableSaver,
    DurableSaver,
    async_graph_handler,
    graph_handler,
    graph_submission,
)
from durable_graph.langgraph.follow import follow
from durable_graph.langgraph.run_request import RunRequest
from durable_graph.langgraph.streaming import Outbox
from durable_graph.langgraph.values import from_json, to_json
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.sqlite import SqliteCheckpointer
from durable_graph.worker.sync import Worker
from store_support import open_async_store

REPLY = "hello there, my friend; how are you today?"
BIN = Path(sys.executable).with_name("durable-graph")


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Checkpointer, Any]]:
    """(a store, a function opening a second handle on it: another machine's view)."""
    store: Checkpointer
    if request.param == "postgres":
        dsn: str = request.getfixturevalue("pg_dsn")
        schema: str = request.getfixturevalue("pg_schema")
        config = PostgresConfig(schema=schema)
        store = PostgresCheckpointer.open(dsn, config)

        def other() -> Checkpointer:
            return PostgresCheckpointer.open(dsn, config)
    elif request.param == "sqlite":
        store = SqliteCheckpointer.open(tmp_path / "runs.db")

        def other() -> Checkpointer:
            return SqliteCheckpointer.open(tmp_path / "runs.db")
    else:
        store = InMemoryCheckpointer()

        def other() -> Checkpointer:
            return store

    yield store, other
    store.close()


def _chat_graph(saver: DurableSaver | AsyncDurableSaver, *, ask: bool = False) -> Any:
    model = GenericFakeChatModel(messages=iter([AIMessage(REPLY)] * 50))

    def chat(state: MessagesState) -> dict[str, list[BaseMessage]]:
        get_stream_writer()({"progress": "thinking"})
        if ask:
            interrupt("really?")
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("chat", chat)
    builder.add_edge(START, "chat")
    builder.add_edge("chat", END)
    return builder.compile(checkpointer=saver)


def _run(store: Checkpointer, graph: Any, saver: DurableSaver, submission: Submission) -> Any:
    store.run_queue.submit(submission)
    report = Worker(store, graph_handler(graph, saver)).run_once()
    assert report is not None
    return report.outcome


def _o(outcome: Any) -> Any:
    """An outcome's output, for reading."""
    return outcome.output


# --- JSON values ---------------------------------------------------------------------------


def test_messages_cross_the_queue_in_langchains_json_form_both_ways(
    stores: tuple[Checkpointer, Any],
) -> None:
    store, _ = stores
    saver = DurableSaver(store)
    graph = _chat_graph(saver)
    sent = dumpd(HumanMessage("hi", id="h1"))
    outcome = _run(
        store,
        graph,
        saver,
        graph_submission("t", {"messages": [sent, {"role": "user", "content": "and you?"}]}),
    )
    assert isinstance(outcome, Completed)
    messages = _o(outcome)["values"]["messages"]
    assert messages[0] == sent  # what went in comes out, LangChain's form, never repr text
    loaded = [load(m, allowed_objects="messages") for m in messages]
    assert [type(m).__name__ for m in loaded] == ["HumanMessage", "HumanMessage", "AIMessage"]
    assert loaded[2].content == REPLY


def test_values_without_a_json_form_are_refused_not_stringified() -> None:
    with pytest.raises(ValidationError, match=r"value\[0\]"):
        to_json([object()])
    assert to_json([object()], lenient=True) == [{"__unserializable__": "object"}]


def test_input_loading_is_allow_listed() -> None:
    hostile = {"lc": 1, "type": "constructor", "id": ["os", "system"], "kwargs": {}}
    with pytest.raises(ValidationError, match="cannot be loaded"):
        from_json({"messages": [hostile]})


# --- run config ------------------------------------------------------------------------------


def test_run_config_reaches_the_graph(stores: tuple[Checkpointer, Any]) -> None:
    store, _ = stores
    saver = DurableSaver(store)
    seen: list[Any] = []

    def node(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        seen.append((config["configurable"].get("user"), config.get("tags"), config["metadata"]))
        return {"messages": [AIMessage("ok")]}

    builder = StateGraph(MessagesState)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    graph = builder.compile(checkpointer=saver)
    submission = graph_submission(
        "t",
        {"messages": [{"role": "user", "content": "hi"}]},
        config={"configurable": {"user": "ada"}, "tags": ["t1"], "metadata": {"team": "x"}},
    )
    assert isinstance(_run(store, graph, saver, submission), Completed)
    user, tags, metadata = seen[0]
    assert (user, tags, metadata["team"]) == ("ada", ["t1"], "x")
    head = store.get("t")
    assert head is not None and isinstance(head.metadata, dict)
    assert head.metadata["team"] == "x"  # the run's metadata is on its checkpoints


def test_recursion_limit_is_applied(stores: tuple[Checkpointer, Any]) -> None:
    store, _ = stores
    saver = DurableSaver(store)
    builder = StateGraph(MessagesState)
    builder.add_node("loop", lambda s: {"messages": [AIMessage("again")]})
    builder.add_edge(START, "loop")
    builder.add_conditional_edges("loop", lambda s: "loop")
    graph = builder.compile(checkpointer=saver)
    submission = graph_submission("t", {"messages": []}, config={"recursion_limit": 3})
    outcome = _run(store, graph, saver, submission)
    assert isinstance(outcome, Failed) and "Recursion limit of 3" in outcome.error
    entry = store.run_queue.entries(limit=1)[0]
    assert len(entry.attempts) == 1  # a graph error is final: no retry


def test_interrupt_before_stops_and_checkpoint_id_replays(
    stores: tuple[Checkpointer, Any],
) -> None:
    store, _ = stores
    saver = DurableSaver(store)
    graph = _chat_graph(saver)
    hi = {"messages": [{"role": "user", "content": "hi"}]}
    stopped = _run(store, graph, saver, graph_submission("t", hi, interrupt_before=["chat"]))
    assert isinstance(stopped, Completed) and _o(stopped)["next"] == ["chat"]
    assert len(_o(stopped)["values"]["messages"]) == 1
    done = _run(store, graph, saver, graph_submission("t", None))  # continue: None input
    assert isinstance(done, Completed) and len(_o(done)["values"]["messages"]) == 2
    first_end = store.get("t")
    assert first_end is not None
    # Time travel: run again from the checkpoint before "chat"; LangGraph forks there.
    before_chat = next(
        cp
        for cp in store.history("t")
        if isinstance(cp.metadata, dict) and cp.metadata["step"] == 0
    )
    replay = _run(
        store, graph, saver, graph_submission("t", None, checkpoint_id=before_chat.checkpoint_id)
    )
    assert isinstance(replay, Completed) and len(_o(replay)["values"]["messages"]) == 2
    ids = [cp.checkpoint_id for cp in store.history("t")]
    assert first_end.checkpoint_id in ids[1:]  # a fork: the first ending stays in the history
    assert ids[0] != first_end.checkpoint_id


def test_a_malformed_run_request_names_the_field() -> None:
    with pytest.raises(ValidationError, match="stream_mode"):
        RunRequest.of({"langgraph": {"stream_mode": ["tokens"]}})
    with pytest.raises(ValidationError, match="recursion_limit"):
        RunRequest.of({"langgraph": {"config": {"recursion_limit": 0}}})
    with pytest.raises(ValidationError, match="unknown field"):
        RunRequest.of({"langgraph": {"inputs": {}}})


# --- streaming -------------------------------------------------------------------------------


ALL_MODES = ["values", "updates", "messages", "custom", "debug"]


def test_every_stream_mode_lands_in_the_event_log(stores: tuple[Checkpointer, Any]) -> None:
    store, _ = stores
    saver = DurableSaver(store)
    graph = _chat_graph(saver)
    hi = {"messages": [{"role": "user", "content": "hi"}]}
    outcome = _run(store, graph, saver, graph_submission("t", hi, stream_mode=ALL_MODES))
    assert isinstance(outcome, Completed)
    events = store.events_after("t", 0)
    kinds = [e.kind for e in events if e.kind.startswith("lg.")]
    assert set(kinds) == {f"lg.{m}" for m in ALL_MODES}
    updates: list[Any] = [e.payload for e in events if e.kind == "lg.updates"]
    assert updates[0]["data"]["chat"]["messages"][0]["kwargs"]["content"] == REPLY
    assert [e.payload for e in events if e.kind == "lg.custom"] == [
        {"data": {"progress": "thinking"}}
    ]
    # Each token an event of its own (one transaction per interval holds many): its own text;
    # the message's metadata on its first token only.
    payloads: list[Any] = [e.payload for e in events if e.kind == "lg.messages"]
    tokens = [p["data"] for p in payloads]
    assert len(tokens) > 1
    assert "".join(chunk["kwargs"]["content"] for chunk, _ in tokens) == REPLY
    assert tokens[0][1]["langgraph_node"] == "chat"
    assert all(metadata is None for _, metadata in tokens[1:])
    # Step events ride with the checkpoint they precede: each such event is before a checkpoint.
    last_checkpoint = max(e.seq for e in events if e.kind == "store.checkpoint")
    assert all(e.seq < last_checkpoint for e in events if e.kind == "lg.updates")


def test_the_events_mode_fails_a_run_of_the_sync_handler_by_name() -> None:
    """``events`` is ``astream_events``: LangGraph has no sync spelling, so the sync handler
    fails the run at once, naming the mode, before the graph runs."""
    store = InMemoryCheckpointer()
    saver = DurableSaver(store)
    hi = {"messages": [{"role": "user", "content": "hi"}]}
    outcome = _run(
        store, _chat_graph(saver), saver, graph_submission("t", hi, stream_mode="events")
    )
    assert isinstance(outcome, Failed) and "'events'" in outcome.error, outcome
    assert store.get("t") is None


def test_tokens_are_coalesced_to_one_transaction_per_interval() -> None:
    now = [0.0]
    outbox = Outbox(("messages",), interval=0.1, clock=lambda: now[0])
    from langchain_core.messages import AIMessageChunk

    flushes = 0
    for i in range(100):
        outbox.from_stream(((), "messages", (AIMessageChunk(content=f"t{i} ", id="m"), {"n": 1})))
        now[0] += 0.01  # a token every 10 ms
        if outbox.live_due():
            flushes += len(outbox.take_live()) and 1
    rest = outbox.take_rest()
    assert flushes <= 11  # 1 s of tokens, one transaction per 100 ms at most
    assert 1 <= len(rest) <= 10  # every token is an event of its own, none lost


def test_a_reader_elsewhere_follows_resumes_and_sees_the_end(
    stores: tuple[Checkpointer, Any],
) -> None:
    store, other = stores
    saver = DurableSaver(store)
    graph = _chat_graph(saver)
    hi = {"messages": [{"role": "user", "content": "hi"}]}
    ticket = store.run_queue.submit(graph_submission("t", hi, stream_mode=["updates", "values"]))
    reader = other()
    try:
        worker = Worker(store, graph_handler(graph, saver))
        runner = threading.Thread(target=worker.run_once)
        runner.start()
        first: list[Any] = []
        for event in follow(reader, ticket.entry_id):
            first.append(event)
            break  # the reader disconnects after one event...
        runner.join()
        rest = list(follow(reader, ticket.entry_id, after_seq=first[-1].seq))  # ...and resumes
        whole = list(follow(reader, ticket.entry_id))
        assert [e.seq for e in first + rest] == [e.seq for e in whole]
        assert [e.kind for e in whole] == ["lg.values", "lg.updates", "lg.values"]
        entry = reader.run_queue.entry(ticket.entry_id)
        assert entry is not None and entry.closed and entry.closed_at_seq is not None
        assert whole[-1].seq <= entry.closed_at_seq
    finally:
        if reader is not store:
            reader.close()


def test_follow_waits_for_a_run_that_has_not_started(stores: tuple[Checkpointer, Any]) -> None:
    store, other = stores
    saver = DurableSaver(store)
    graph = _chat_graph(saver)
    ticket = store.run_queue.submit(graph_submission("t", {"messages": []}, stream_mode=["values"]))
    reader = other()
    got: list[Any] = []
    try:
        follower = threading.Thread(target=lambda: got.extend(follow(reader, ticket.entry_id)))
        follower.start()
        time.sleep(0.3)
        Worker(store, graph_handler(graph, saver)).run_once()
        follower.join(timeout=30)
        assert not follower.is_alive()
        assert [e.kind for e in got] == ["lg.values", "lg.values"]
    finally:
        if reader is not store:
            reader.close()


# --- the async handler, and the worker CLI ---------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "postgres"])
def test_the_async_handler_applies_the_run_config_and_streams(
    kind: str, request: pytest.FixtureRequest
) -> None:
    async def scenario() -> tuple[Any, list[Any]]:
        store = await open_async_store(kind, request)
        saver = AsyncDurableSaver(store)
        graph = _chat_graph(saver)
        worker = AsyncWorker(store, async_graph_handler(graph, saver))
        await store.run_queue.submit(
            graph_submission(
                "t",
                {"messages": [dumpd(HumanMessage("hi", id="h1"))]},
                config={"tags": ["async"]},
                stream_mode=["updates", "messages", "custom"],
            )
        )
        report = await worker.run_once()
        assert report is not None
        events = await store.events_after("t", 0)
        await store.close()
        return report.outcome, [e for e in events if e.kind.startswith("lg.")]

    outcome, events = asyncio.run(scenario())
    assert isinstance(outcome, Completed)
    assert _o(outcome)["values"]["messages"][1]["kwargs"]["content"] == REPLY
    assert {e.kind for e in events} == {"lg.updates", "lg.messages", "lg.custom"}


def test_worker_app_may_name_a_compiled_graph(tmp_path: Path) -> None:
    (tmp_path / "graph_app.py").write_text(
        "from langgraph.graph import END, START, MessagesState, StateGraph\n"
        "from langchain_core.messages import AIMessage\n"
        "builder = StateGraph(MessagesState)\n"
        "builder.add_node('n', lambda s: {'messages': [AIMessage('from the app')]})\n"
        "builder.add_edge(START, 'n')\n"
        "builder.add_edge('n', END)\n"
        "graph = builder.compile()  # no checkpointer, no store: the worker brings both\n"
    )
    db = tmp_path / "app.db"
    with SqliteCheckpointer.open(db) as store:
        ticket = store.run_queue.submit(graph_submission("t", {"messages": []}))
        worker = subprocess.Popen(
            [str(BIN), "--sqlite", str(db), "worker", "--app", "graph_app:graph"],
            cwd=tmp_path,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            entry = store.run_queue.await_closed(ticket.entry_id, timedelta(seconds=60))
        finally:
            worker.send_signal(signal.SIGTERM)
            _, stderr = worker.communicate(timeout=30)
        assert entry is not None and isinstance(entry.outcome, Completed), stderr
        assert _o(entry.outcome)["values"]["messages"][0]["kwargs"]["content"] == "from the app"


def test_subgraph_chunks_are_streamed_with_their_namespace_when_asked() -> None:
    store = InMemoryCheckpointer()
    saver = DurableSaver(store)
    inner = StateGraph(MessagesState)
    inner.add_node("inner", lambda s: {"messages": [AIMessage("from inside")]})
    inner.add_edge(START, "inner")
    inner.add_edge("inner", END)
    builder = StateGraph(MessagesState)
    builder.add_node("summarize", inner.compile())
    builder.add_edge(START, "summarize")
    builder.add_edge("summarize", END)
    graph = builder.compile(checkpointer=saver)
    for thread_id, subgraphs in (("flat", False), ("nested", True)):
        submission = graph_submission(
            thread_id, {"messages": []}, stream_mode="updates", stream_subgraphs=subgraphs
        )
        assert isinstance(_run(store, graph, saver, submission), Completed)
    flat: list[Any] = [e.payload for e in store.events_after("flat", 0) if e.kind == "lg.updates"]
    nested: list[Any] = [
        e.payload for e in store.events_after("nested", 0) if e.kind == "lg.updates"
    ]
    assert [list(p["data"]) for p in flat] == [["summarize"]]
    inside = [p for p in nested if "ns" in p]
    assert inside and inside[0]["ns"][0].startswith("summarize:")
    assert list(inside[0]["data"]) == ["inner"]


def test_step_events_add_no_transaction_of_their_own(tmp_path: Path) -> None:
    """Each ``values``/``updates`` event was committed by a checkpoint's transaction (one
    ``committed_at`` per transaction on SQLite): streaming them costs no extra write."""
    with SqliteCheckpointer.open(tmp_path / "tx.db") as store:
        saver = DurableSaver(store)
        graph = _chat_graph(saver)
        hi = {"messages": [{"role": "user", "content": "hi"}]}
        submission = graph_submission("t", hi, stream_mode=["values", "updates"])
        assert isinstance(_run(store, graph, saver, submission), Completed)
        events = store.events_after("t", 0)
        checkpoint_txs = {e.committed_at for e in events if e.kind == "store.checkpoint"}
        step_events = [e for e in events if e.kind in ("lg.values", "lg.updates")]
        assert step_events and all(e.committed_at in checkpoint_txs for e in step_events)


# --- SPEC §19.3: a retried graph run re-runs the failed step ---------------------------------


def _agent_then_tool(tool: Any) -> Any:
    """A ReAct-like graph: ``agent`` asks for a tool call, ``tool`` answers (or raises)."""

    def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [AIMessage("calling the tool")]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tool", tool)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "tool")
    builder.add_edge("tool", END)
    return builder.compile()


def test_a_queue_retry_of_a_failed_graph_run_reruns_the_failed_step_once(
    stores: tuple[Checkpointer, Any],
) -> None:
    """The issue's ReAct agent: its tool raised and the run failed; `queue retry` (and the
    dashboard's Retry) must not submit the human message again (a second human message after a
    tool call breaks the thread for good: INVALID_CHAT_HISTORY). The retry resumes from the last
    checkpoint and re-runs the tool step."""
    store, _ = stores
    saver = DurableSaver(store)
    broken = [True]

    def tool(state: MessagesState) -> dict[str, list[BaseMessage]]:
        if broken[0]:
            raise ValueError("weather backend has no station for 'Atlantis'")
        return {"messages": [AIMessage("sunny")]}

    graph = _agent_then_tool(tool)
    hi = {"messages": [{"role": "user", "content": "weather in Atlantis?"}]}
    ticket = store.run_queue.submit(graph_submission("t", hi, max_attempts=1))
    Worker(store, graph_handler(graph, saver)).run_once()
    failed = store.run_queue.entry(ticket.entry_id)
    assert failed is not None and isinstance(failed.outcome, Failed)
    broken[0] = False
    retry = store.run_queue.retry(ticket.entry_id)
    report = Worker(store, graph_handler(graph, saver)).run_once()
    assert report is not None and isinstance(report.outcome, Completed)
    values = _o(report.outcome)["values"]
    contents = [m["kwargs"]["content"] for m in values["messages"]]
    assert contents == ["weather in Atlantis?", "calling the tool", "sunny"]
    assert store.run_queue.entry(retry.entry_id) is not None


# --- SPEC §19.4: a graph's errors are retried, resuming; those no retry changes are final ------


def test_a_graph_error_is_retried_with_backoff_and_resumes_the_failed_step(
    stores: tuple[Checkpointer, Any],
) -> None:
    store, _ = stores
    saver = DurableSaver(store)
    calls: list[int] = []

    def tool(state: MessagesState) -> dict[str, list[BaseMessage]]:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("the tool's backend did not answer")
        return {"messages": [AIMessage("the tool's answer")]}

    graph = _agent_then_tool(tool)
    hi = {"messages": [{"role": "user", "content": "hi"}]}
    ticket = store.run_queue.submit(graph_submission("t", hi, max_attempts=3))
    worker = Worker(
        store, graph_handler(graph, saver), backoff=BackoffPolicy(base=timedelta(milliseconds=1))
    )
    first = worker.run_once()
    assert first is not None and first.note == "retry"
    time.sleep(0.05)  # past the backoff
    second = worker.run_once()
    assert second is not None and isinstance(second.outcome, Completed)
    contents = [m["kwargs"]["content"] for m in _o(second.outcome)["values"]["messages"]]
    assert contents == ["hi", "calling the tool", "the tool's answer"]  # one human message
    entry = store.run_queue.entry(ticket.entry_id)
    assert entry is not None and len(entry.attempts) == 2


def test_a_recursion_limit_fails_the_run_at_once(stores: tuple[Checkpointer, Any]) -> None:
    """An error another attempt would only repeat is final on the first attempt, and says so."""
    store, _ = stores
    saver = DurableSaver(store)
    builder = StateGraph(MessagesState)
    builder.add_node("again", lambda s: {"messages": [AIMessage("again")]})
    builder.add_edge(START, "again")
    builder.add_conditional_edges("again", lambda s: "again")
    graph = builder.compile()
    hi = {"messages": [{"role": "user", "content": "hi"}]}
    sub = graph_submission("t", hi, config={"recursion_limit": 3}, max_attempts=3)
    ticket = store.run_queue.submit(sub)
    report = Worker(store, graph_handler(graph, saver)).run_once()
    assert report is not None and isinstance(report.outcome, Failed)
    entry = store.run_queue.entry(ticket.entry_id)
    assert entry is not None and len(entry.attempts) == 1
    assert "GraphRecursionError" in report.outcome.error
