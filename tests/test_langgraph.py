"""LangGraph on durable_graph beyond LangGraph's conformance suite (SPEC §12), on the in-memory,
SQLite and PostgreSQL stores: fencing of stale workers (root graph and subgraphs), interrupts
resumed through the queue, `update_state` from outside a run, and what is stored.
"""

from __future__ import annotations

import asyncio
import io
import operator
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from durable_graph.aio import AsyncWorker
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ClaimLost, EntryClosed, ThreadBusy, ValidationError
from durable_graph.core.model import ClaimPolicy, Completed, Submission
from durable_graph.langgraph import (
    AsyncDurableSaver,
    DurableSaver,
    async_graph_handler,
    demo,
    graph_handler,
)
from durable_graph.langgraph.codec import NS_SEP
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.testkit import ClockControl
from durable_graph.worker.sync import Worker
from store_support import open_async_store

TTL = timedelta(seconds=5)
POLICY = ClaimPolicy(ttl=TTL, renew_every=timedelta(seconds=1))


def _worker(store: Checkpointer, handler: Callable[..., Any]) -> Worker:
    return Worker(store, handler, lease_ttl=TTL, claim_policy=POLICY)


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


# --- graphs --------------------------------------------------------------------------------


class Steps(TypedDict):
    log: Annotated[list[str], operator.add]


def _step(name: str) -> Any:
    def node(state: Steps) -> dict[str, list[str]]:
        return {"log": [name]}

    return node


def _three_nodes() -> Any:
    builder = StateGraph(Steps)
    for name in ("a", "b", "c"):
        builder.add_node(name, _step(name))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    return builder


class Chat(TypedDict, total=False):
    answers: Annotated[list[str], operator.add]


def _asks(*questions: str) -> Any:
    """One node asking ``questions`` in turn with ``interrupt()``."""

    def ask(state: Chat) -> Chat:
        return {"answers": [str(interrupt(q)) for q in questions]}

    builder = StateGraph(Chat)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder


# --- fencing -------------------------------------------------------------------------------


def test_stale_worker_after_lease_expiry_is_refused_and_the_input_applied_once(
    clocked_store: tuple[Checkpointer, ClockControl],
) -> None:
    store, clock = clocked_store
    saver = DurableSaver(store)
    graph = _three_nodes().compile(checkpointer=saver)
    store.run_queue.submit(Submission("t1", {"log": ["input"]}))
    # Worker A: leases, claims and runs the graph up to "a"; then it stalls past its lease.
    lease = store.run_queue.lease("worker-a", TTL, run_id="run-a")
    assert lease is not None
    claim_a = store.claim("t1", "run-a", POLICY)
    stale = graph.copy(update={"checkpointer": saver.for_run(claim_a, "run-a")})
    stale.invoke({"log": ["input"]}, _config("t1"), interrupt_after=["a"])
    clock.advance(TTL * 2)
    # Worker B takes the entry over: it resumes the graph (never applying the input again).
    report = _worker(store, graph_handler(graph, saver)).run_once()
    assert report is not None and isinstance(report.outcome, Completed)
    live_state = graph.get_state(_config("t1"))
    assert live_state.values == {"log": ["input", "a", "b", "c"]}
    history_before = store.history("t1")
    # A wakes up: continuing finds nothing left to run; any write it tries is refused.
    stale.invoke(None, _config("t1"))
    with pytest.raises(EntryClosed):  # SPEC §19.1: its run's entry has closed
        stale.invoke({"log": ["input"]}, _config("t1"))
    with pytest.raises(EntryClosed):
        stale.update_state(_config("t1"), {"log": ["late"]})
    assert graph.get_state(_config("t1")).values == live_state.values
    assert store.history("t1") == history_before
    runs = {c.run_id for c in store.history("t1")}
    assert runs == {"run-a", report.run_id}


def test_stale_subgraph_writer_is_refused_by_the_parent_claim(
    clocked_store: tuple[Checkpointer, ClockControl],
) -> None:
    store, clock = clocked_store
    saver = DurableSaver(store)
    inner = _asks("inner?").compile()
    builder = StateGraph(Chat)
    builder.add_node("sub", inner)
    builder.add_edge(START, "sub")
    builder.add_edge("sub", END)
    claim_a = store.claim("t1", "run-a", POLICY)
    stale = builder.compile(checkpointer=saver.for_run(claim_a, "run-a"))
    stale.invoke({"answers": []}, _config("t1"))
    children = store.children("t1")
    assert len(children) == 1 and children[0].startswith("t1" + NS_SEP)
    child_history = store.history(children[0])
    clock.advance(TTL * 2)
    store.claim("t1", "run-b", POLICY)  # the live worker holds the thread now
    from langgraph.types import Command

    with pytest.raises(ClaimLost):
        stale.invoke(Command(resume="late"), _config("t1"))
    assert store.history(children[0]) == child_history
    # Direct writes into the namespace are refused too, before anything is written.
    ns = children[0].split(NS_SEP, 1)[1]
    sub_config: RunnableConfig = {
        "configurable": {
            "thread_id": "t1",
            "checkpoint_ns": ns,
            "checkpoint_id": child_history[0].checkpoint_id,
        }
    }
    stale_saver = stale.checkpointer
    assert isinstance(stale_saver, DurableSaver)
    old = stale_saver.get_tuple(sub_config)
    assert old is not None
    with pytest.raises(ClaimLost):
        stale_saver.put(sub_config, {**old.checkpoint, "id": "late-1"}, old.metadata, {})
    sync_config: RunnableConfig = {
        "configurable": {**sub_config["configurable"], "__pregel_durability": "sync"}
    }
    with pytest.raises(ClaimLost):
        stale_saver.put_writes(sync_config, [("answers", ["x"])], "task")
    assert store.history(children[0]) == child_history


# --- interrupts through the queue ----------------------------------------------------------


def test_interrupt_then_resume_through_a_new_submission(
    clocked_store: tuple[Checkpointer, ClockControl],
) -> None:
    store, _ = clocked_store
    saver = DurableSaver(store)
    worker = _worker(store, graph_handler(_asks("name?").compile(checkpointer=saver), saver))
    store.run_queue.submit(Submission("t1", {"answers": []}))
    first = worker.run_once()
    assert first is not None and isinstance(first.outcome, Completed)
    output = first.outcome.output
    assert isinstance(output, dict)
    assert [i["value"] for i in output["interrupts"]] == ["name?"]
    store.run_queue.submit(Submission("t1", {"resume": "Ada"}))
    second = worker.run_once()
    assert second is not None and isinstance(second.outcome, Completed)
    assert second.outcome.output == {"values": {"answers": ["Ada"]}, "interrupts": [], "next": []}


def test_two_interrupts_in_one_node_show_the_second_question(
    clocked_store: tuple[Checkpointer, ClockControl],
) -> None:
    store, _ = clocked_store
    saver = DurableSaver(store)
    graph = _asks("first?", "second?").compile(checkpointer=saver)
    worker = _worker(store, graph_handler(graph, saver))
    asked = []
    inputs: list[dict[str, Any]] = [{"answers": []}, {"resume": "1"}, {"resume": "2"}]
    for submitted in inputs:
        store.run_queue.submit(Submission("t1", submitted))
        report = worker.run_once()
        assert report is not None and isinstance(report.outcome, Completed)
        output = report.outcome.output
        assert isinstance(output, dict)
        asked.append([i["value"] for i in output["interrupts"]])
        assert [i.value for i in graph.get_state(_config("t1")).interrupts] == asked[-1]
    assert asked == [["first?"], ["second?"], []]
    assert graph.get_state(_config("t1")).values == {"answers": ["1", "2"]}


def test_resumed_attempt_continues_the_graph_without_applying_the_input_again(
    clocked_store: tuple[Checkpointer, ClockControl],
) -> None:
    store, clock = clocked_store
    saver = DurableSaver(store)
    graph = _three_nodes().compile(checkpointer=saver)
    store.run_queue.submit(Submission("t1", {"log": ["input"]}))
    lease = store.run_queue.lease("crashed", TTL, run_id="run-a")
    assert lease is not None
    claim = store.claim("t1", "run-a", POLICY)
    bound = graph.copy(update={"checkpointer": saver.for_run(claim, "run-a")})
    bound.invoke({"log": ["input"]}, _config("t1"), interrupt_after=["b"])
    clock.advance(TTL * 2)  # the worker died: lease and claim expire
    report = _worker(store, graph_handler(graph, saver)).run_once()
    assert report is not None and isinstance(report.outcome, Completed)
    assert graph.get_state(_config("t1")).values == {"log": ["input", "a", "b", "c"]}


# --- writes from outside a run -------------------------------------------------------------


def test_update_state_from_outside_works_while_no_run_holds_the_thread(
    clocked_store: tuple[Checkpointer, ClockControl],
) -> None:
    store, _ = clocked_store
    graph = _three_nodes().compile(checkpointer=DurableSaver(store))
    graph.invoke({"log": ["input"]}, _config("t1"))
    graph.update_state(_config("t1"), {"log": ["edited"]})
    assert graph.get_state(_config("t1")).values["log"][-1] == "edited"
    info = store.thread("t1")
    assert info is not None and info.claim_holder is None  # each call released its claim


def test_update_state_from_outside_is_refused_while_a_run_holds_the_thread(
    clocked_store: tuple[Checkpointer, ClockControl],
) -> None:
    store, _ = clocked_store
    graph = _three_nodes().compile(checkpointer=DurableSaver(store))
    graph.invoke({"log": ["input"]}, _config("t1"))
    before = store.history("t1")
    store.claim("t1", "some-run", POLICY)
    with pytest.raises(ThreadBusy):
        graph.update_state(_config("t1"), {"log": ["edited"]})
    assert store.history("t1") == before


def test_forks_from_an_old_checkpoint_are_ordinary_commits(
    clocked_store: tuple[Checkpointer, ClockControl],
) -> None:
    store, _ = clocked_store
    graph = _three_nodes().compile(checkpointer=DurableSaver(store))
    graph.invoke({"log": ["input"]}, _config("t1"))
    old = list(graph.get_state_history(_config("t1")))[-2]  # after the input, before "a"
    forked = graph.update_state(old.config, {"log": ["fork"]})
    state = graph.get_state(forked)
    assert state.values == {"log": ["input", "fork"]}
    assert state.parent_config is not None
    assert (
        state.parent_config["configurable"]["checkpoint_id"]
        == old.config["configurable"]["checkpoint_id"]
    )


# --- what is stored ------------------------------------------------------------------------


def test_values_are_stored_as_json_and_never_pickled(
    clocked_store: tuple[Checkpointer, ClockControl],
) -> None:
    store, _ = clocked_store
    saver = DurableSaver(store)
    config = saver.put(
        {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}},
        {
            "v": 1,
            "id": "1ef00000-0000-6000-8000-000000000001",
            "ts": "2026-01-01T00:00:00+00:00",
            "channel_values": {"plain": {"a": [1, 2]}, "set": {1, 2}, "raw": b"\x00\x01"},
            "channel_versions": {"plain": 1, "set": 1, "raw": 1},
            "versions_seen": {},
            "updated_channels": None,
        },
        {"source": "input", "step": -1, "parents": {}},
        {},
    )
    stored = store.get("t1")
    assert stored is not None and isinstance(stored.state, dict)
    values = stored.state["values"]
    assert values["plain"] == {"j": {"a": [1, 2]}}
    assert values["set"]["t"] == "msgpack" and values["raw"]["t"] == "bytes"
    loaded = saver.get_tuple(config)
    assert loaded is not None
    assert loaded.checkpoint["channel_values"] == {
        "plain": {"a": [1, 2]},
        "set": {1, 2},
        "raw": b"\x00\x01",
    }


def test_a_stored_pickle_is_refused_on_load(
    clocked_store: tuple[Checkpointer, ClockControl],
) -> None:
    store, _ = clocked_store
    claim = store.claim("t1", "h")
    from durable_graph.core.model import Commit

    store.commit(
        claim,
        Commit(
            "c1",
            None,
            "run",
            {"cp": {"j": {"v": 1, "id": "c1"}}, "values": {"x": {"t": "pickle", "b": ""}}},
            metadata={},
        ),
    )
    store.release_claim(claim)
    with pytest.raises(ValidationError, match="pickle"):
        DurableSaver(store).get_tuple(_config("t1"))


# --- async, and the demo -------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "postgres"])
def test_async_handler_runs_interrupt_and_resume_through_the_queue(
    kind: str, request: pytest.FixtureRequest
) -> None:
    async def scenario() -> list[Any]:
        store = await open_async_store(kind, request)
        saver = AsyncDurableSaver(store)
        graph = _asks("name?").compile(checkpointer=saver)
        worker = AsyncWorker(store, async_graph_handler(graph, saver), lease_ttl=TTL)
        outputs: list[Any] = []
        inputs: list[dict[str, Any]] = [{"answers": []}, {"resume": "Ada"}]
        for submitted in inputs:
            await store.run_queue.submit(Submission("t1", submitted))
            report = await worker.run_once()
            assert report is not None and isinstance(report.outcome, Completed)
            outputs.append(report.outcome.output)
        state = await graph.aget_state(_config("t1"))
        await store.close()
        return [*outputs, state.values]

    first, second, values = asyncio.run(scenario())
    assert [i["value"] for i in first["interrupts"]] == ["name?"]
    assert second["interrupts"] == [] and values == {"answers": ["Ada"]}


def test_demo_fences_the_stalled_worker_and_answers_the_interrupt() -> None:
    out = io.StringIO()
    with InMemoryCheckpointer() as store:
        assert demo.run(store, out)
    text = out.getvalue()
    assert "EntryClosed" in text and "all checks held" in text


def test_bound_saver_lands_each_steps_writes_with_the_next_checkpoint(
    clocked_store: tuple[Checkpointer, ClockControl],
) -> None:
    store, _ = clocked_store
    saver = DurableSaver(store)
    claim = store.claim("bound", "run-1", POLICY)
    bound = _three_nodes().compile(checkpointer=saver.for_run(claim, "run-1"))
    bound.invoke({"log": ["input"]}, _config("bound"))  # durability "async": write-behind
    plain = _three_nodes().compile(checkpointer=saver)
    plain.invoke({"log": ["input"]}, _config("plain"), durability="sync")

    def writes(thread_id: str) -> list[list[tuple[str, Any]]]:
        return [
            sorted((channel, value) for _, channel, value in t.pending_writes or [])
            for t in saver.list(_config(thread_id))
        ]

    assert writes("bound") == writes("plain")
    assert sum(len(w) for w in writes("bound")) > 0
    assert {c.run_id for c in store.history("bound")} == {"run-1"}


def test_cli_demo_langgraph_runs_the_demo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from durable_graph.cli import main

    assert main(["--sqlite", str(tmp_path / "demo.db"), "demo", "--langgraph"]) == 0
    assert "all checks held" in capsys.readouterr().out
