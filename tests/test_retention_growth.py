"""Growth under a ``keep_latest`` TTL, counted (SPEC §24.2 and §24.4, issue 47 item 5): what a
LangGraph thread keeps after its sweep, and that repeated runs and sweeps leave the same rows —
flat in the number of runs — on memory, SQLite and PostgreSQL. Counts, not sizes or times:
they hold on any machine (the sizes are `tests.bench.retention`'s).
"""

from __future__ import annotations

import operator
from datetime import timedelta
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.langgraph import DurableSaver
from durable_graph.testkit import ClockControl

TTL_MINUTES = 10
IDLE = timedelta(minutes=TTL_MINUTES + 1)


class Chat(TypedDict, total=False):
    answers: Annotated[list[str], operator.add]


def _note_then_ask(saver: DurableSaver) -> Any:
    """``note`` appends to the state, then ``ask`` waits for an answer (``interrupt()``)."""

    def note(state: Chat) -> Chat:
        return {"answers": ["noted"]}

    def ask(state: Chat) -> Chat:
        return {"answers": [str(interrupt("ok?"))]}

    builder = StateGraph(Chat)
    builder.add_node("note", note)
    builder.add_node("ask", ask)
    builder.add_edge(START, "note")
    builder.add_edge("note", "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=saver)


def _three_steps(saver: DurableSaver) -> Any:
    builder = StateGraph(Chat)
    for name in ("plan", "act", "answer"):
        builder.add_node(name, lambda state, name=name: {"answers": [name]})
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "act")
    builder.add_edge("act", "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=saver)


def _config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def _footprint(store: Checkpointer, thread_id: str) -> tuple[int, int, int]:
    """The thread's checkpoints, its head's pending writes and its events."""
    head = store.get(thread_id)
    return (
        len(store.history(thread_id)),
        len(head.writes) if head is not None else 0,
        len(store.events_after(thread_id, 0)),
    )


def test_keep_latest_leaves_an_interrupted_thread_its_head_and_its_resume(
    clocked_store: tuple[Checkpointer, ClockControl],
) -> None:
    store, clock = clocked_store
    graph = _note_then_ask(DurableSaver(store))
    config = _config("chat")
    graph.invoke({"answers": ["hello"]}, config)
    graph.invoke(Command(resume="first"), config)
    graph.invoke({"answers": ["again"]}, config)  # waits at ``ask`` again
    before = _footprint(store, "chat")
    assert before[0] > 1 and before[1] >= 1 and before[2] > 0
    store.set_thread_ttl("chat", TTL_MINUTES, "keep_latest")
    clock.advance(IDLE)
    swept = store.sweep_threads(10)
    assert (swept.deleted, swept.kept_latest) == (0, 1)
    # The head (waiting at ``ask``) with the writes resuming needs (the interrupt, ``note``'s
    # finished write when the saver stored it there), nothing else: no older checkpoint, no log.
    head = store.get("chat")
    assert head is not None
    assert _footprint(store, "chat") == (1, before[1], 0)
    state = graph.get_state(config)
    assert state.next == ("ask",) and [i.value for t in state.tasks for i in t.interrupts] == [
        "ok?"
    ]
    out = graph.invoke(Command(resume="second"), config)
    assert out["answers"] == ["hello", "noted", "first", "again", "noted", "second"]


def test_runs_and_keep_latest_sweeps_leave_the_same_rows_round_after_round(
    clocked_store: tuple[Checkpointer, ClockControl],
) -> None:
    store, clock = clocked_store
    graph = _three_steps(DurableSaver(store))
    threads = ["a", "b", "c"]
    footprints = []
    for round_ in range(4):
        clock.advance(timedelta(seconds=1))  # activity after the last sweep, as time passes
        for thread_id in threads:
            graph.invoke({"answers": [f"input {round_}"]}, _config(thread_id))
            if round_ == 0:
                store.set_thread_ttl(thread_id, TTL_MINUTES, "keep_latest")
        grown = [_footprint(store, t) for t in threads]
        assert all(checkpoints > 1 for checkpoints, _, _ in grown)
        clock.advance(IDLE)
        swept = store.sweep_threads(10)
        assert (swept.deleted, swept.kept_latest) == (0, len(threads))
        footprints.append([_footprint(store, t) for t in threads])
    # A finished run's head has no pending writes: one checkpoint a thread, whatever the runs.
    assert footprints == [[(1, 0, 0)] * len(threads)] * 4
    state = graph.get_state(_config("a"))
    assert len(state.values["answers"]) == 4 * 4  # every round's input and three steps
