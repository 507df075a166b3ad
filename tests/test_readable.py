"""LangGraph threads are readable in the dashboard and the CLI (SPEC §14.3): channel values with
messages as text (never base64 msgpack), subgraph threads under their root, a run stopped at
``interrupt()`` shown waiting for input with its question, and a pre-empted entry named
"superseded" (its stored outcome unchanged)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt
from starlette.testclient import TestClient

from durable_graph.core.model import Interrupted, Mode, Submission
from durable_graph.dashboard import create_app
from durable_graph.langgraph import DurableSaver, graph_handler, graph_submission
from durable_graph.langgraph.codec import NS_SEP
from durable_graph.observe import readable
from durable_graph.sqlite import SqliteCheckpointer
from durable_graph.worker.sync import Worker

BIN = Path(sys.executable).with_name("durable-graph")
SECRET = "a reply with ünïcode"


def _graph(saver: DurableSaver) -> Any:
    def inner(state: MessagesState) -> dict[str, list[AIMessage]]:
        return {"messages": [AIMessage(SECRET)]}

    sub = StateGraph(MessagesState)
    sub.add_node("inner", inner)
    sub.add_edge(START, "inner")
    sub.add_edge("inner", END)

    def ask(state: MessagesState) -> dict[str, list[AIMessage]]:
        return {"messages": [AIMessage(f"hi {interrupt('your name?')}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("summarize", sub.compile())
    builder.add_node("ask", ask)
    builder.add_edge(START, "summarize")
    builder.add_edge("summarize", "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=saver)


def _store(tmp_path: Path) -> SqliteCheckpointer:
    store = SqliteCheckpointer.open(tmp_path / "r.db")
    saver = DurableSaver(store)
    graph = _graph(saver)
    store.run_queue.submit(
        graph_submission("chat", {"messages": [{"role": "user", "content": "x"}]})
    )
    Worker(store, graph_handler(graph, saver)).run_once()
    return store


def _cli(tmp_path: Path, *args: str) -> str:
    result = subprocess.run(
        [str(BIN), "--sqlite", str(tmp_path / "r.db"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_langgraph_checkpoint_reads_as_its_channel_values(tmp_path: Path) -> None:
    store = _store(tmp_path)
    head = store.get("chat")
    assert head is not None
    values: Any = readable.readable_state(head.state)
    assert [m["type"] for m in values["messages"]] == ["human", "ai"]
    assert values["messages"][1]["content"] == SECRET
    shown = json.loads(_cli(tmp_path, "thread", "show", "chat", "--json"))
    assert shown["values"]["messages"][1]["content"] == SECRET
    text = _cli(tmp_path, "thread", "show", "chat")
    assert SECRET in text and '"b":' not in text  # no base64 blob
    history = _cli(tmp_path, "thread", "history", "chat")
    assert "langgraph step" in history
    store.close()


def test_subgraph_threads_are_listed_under_their_root(tmp_path: Path) -> None:
    store = _store(tmp_path)
    ids = [t.thread_id for t in store.threads()]
    assert any(NS_SEP in i for i in ids)  # the store keeps the namespace thread...
    listed = [t["thread_id"] for t in json.loads(_cli(tmp_path, "thread", "ls", "--json"))]
    assert listed == ["chat"]  # ...the CLI lists the root only
    page = TestClient(create_app(store)).get("/threads").text
    assert "summarize" not in page and "chat" in page
    store.close()


def test_a_run_stopped_at_interrupt_is_waiting_for_input(tmp_path: Path) -> None:
    store = _store(tmp_path)
    entry = store.run_queue.entries(limit=1)[0]
    assert readable.waiting_for(entry) == ["your name?"]
    listed = _cli(tmp_path, "queue", "ls", "--state", "completed")
    assert "waiting for input" in listed and "your name?" in listed
    page = TestClient(create_app(store)).get(f"/entry/{entry.entry_id}").text
    assert "waiting for input" in page and "your name?" in page
    thread = TestClient(create_app(store)).get("/thread?id=chat").text
    assert SECRET in thread and "channel_versions" not in thread
    store.close()


def test_a_pre_empted_entry_is_named_superseded(tmp_path: Path) -> None:
    store = SqliteCheckpointer.open(tmp_path / "r.db")
    first = store.run_queue.submit(Submission("t", 1, mode=Mode.INTERRUPT))
    store.run_queue.submit(Submission("t", 2, mode=Mode.INTERRUPT))
    entry = store.run_queue.entry(first.entry_id)
    assert entry is not None and isinstance(entry.outcome, Interrupted)  # stored as before
    listed = _cli(tmp_path, "queue", "ls", "--state", "interrupted")
    assert "superseded by entry" in listed
    page = TestClient(create_app(store)).get(f"/entry/{first.entry_id}").text
    assert "superseded" in page
    store.close()
