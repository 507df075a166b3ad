"""``durable-graph serve`` with LangGraph's own client (SPEC §14.6): ``langgraph-sdk``'s sync and
async clients and ``RemoteGraph``, against real ``serve`` and ``worker`` processes on SQLite and
PostgreSQL: every endpoint the clients use, double texting on a busy thread, cancel of a running
run, join after the end, a stream that disconnects and resumes, bad requests (4xx, nothing
changed), two API processes and two workers on one store (each input applied once), and a
streamed run that survives a worker SIGKILL with every event once."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph.pregel.remote import RemoteGraph
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError
from langgraph_sdk.schema import Command

from service_support import (
    REFERENCE,
    SERVED_KINDS,
    Backend,
    process,
    reference_serving,
    serving,
    store_backend,
    worker_argv,
)

REPLY = "I am a durable agent, streaming one token at a time"
HI = {"messages": [{"role": "user", "content": "hi"}]}


def _say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


@pytest.fixture(scope="module", params=SERVED_KINDS)
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Backend:
    """One store per backend for the module (a server start costs seconds)."""
    if request.param == "reference":
        return Backend("reference", (), {})
    return store_backend(request.param, request, tmp_path_factory)


@pytest.fixture(scope="module")
def url(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    logs = tmp_path_factory.mktemp("logs")
    if backend.name == "reference":
        assert REFERENCE is not None
        with reference_serving(REFERENCE, logs) as served:
            yield served
        return
    with serving(backend, logs, workers=2) as served:
        yield served


def _mark() -> str:
    """A metadata value of this test's own (the module's tests share one store)."""
    return uuid.uuid4().hex


def _wait_status(client: Any, thread_id: str, run_id: str, status: str) -> None:
    deadline = time.monotonic() + 30
    while client.runs.get(thread_id, run_id)["status"] != status:
        assert time.monotonic() < deadline, f"run never became {status}"
        time.sleep(0.05)


def _humans(values: dict[str, Any]) -> list[str]:
    return [m["content"] for m in values["messages"] if m["type"] == "human"]


# --- assistants and threads ------------------------------------------------------------------


def test_assistants_are_the_graphs_of_langgraph_json(url: str) -> None:
    client: Any = get_sync_client(url=url)
    found = client.assistants.search()
    assert [a["graph_id"] for a in found] == ["agent"]
    assistant_id = found[0]["assistant_id"]
    assistant = client.assistants.get(assistant_id)
    assert assistant["graph_id"] == "agent" and assistant["assistant_id"] == assistant_id
    graph = client.assistants.get_graph(assistant_id)
    assert {n["id"] for n in graph["nodes"]} >= {"chat", "ask", "slow"}
    assert client.assistants.get_graph("agent") == graph  # by the graph's name, here only
    schemas = client.assistants.get_schemas(assistant_id)
    assert schemas["graph_id"] == "agent"
    for which in ("input_schema", "output_schema", "state_schema"):  # as the reference
        assert "messages" in schemas[which]["properties"], which
    with pytest.raises(UnprocessableEntityError):  # by id only, as the reference
        client.assistants.get("agent")
    with pytest.raises(NotFoundError):
        client.assistants.get(str(uuid.uuid4()))


def test_assistants_are_created_versioned_searched_and_deleted(url: str) -> None:
    """Stored assistants (SPEC §20.3): create, get, update (a new version, metadata merged),
    versions, set_latest, search by metadata, count, delete; a run of one reports its id."""
    client: Any = get_sync_client(url=url)
    label = uuid.uuid4().hex
    made = client.assistants.create(
        "agent", config={"tags": ["a"]}, metadata={"label": label}, name="helper"
    )
    aid = made["assistant_id"]
    try:
        assert made["graph_id"] == "agent" and made["version"] == 1 and made["name"] == "helper"
        assert client.assistants.get(aid)["metadata"] == {"label": label}
        updated = client.assistants.update(aid, metadata={"more": 1})
        assert updated["version"] == 2 and updated["metadata"] == {"label": label, "more": 1}
        versions = client.assistants.get_versions(aid)
        assert [v["version"] for v in versions] == [2, 1]
        latest = client.assistants.set_latest(aid, 1)
        assert latest["version"] == 1 and client.assistants.get(aid)["version"] == 1
        assert [a["assistant_id"] for a in client.assistants.search(metadata={"label": label})] == [
            aid
        ]
        assert client.assistants.count(metadata={"label": label}) == 1
        thread_id = client.threads.create()["thread_id"]
        run = client.runs.create(thread_id, aid, input=HI)
        assert run["assistant_id"] == aid
        assert client.runs.join(thread_id, run["run_id"])["messages"][-1]["content"] == REPLY
    finally:
        client.assistants.delete(aid)
    with pytest.raises(NotFoundError):
        client.assistants.get(aid)
    assert client.assistants.count(metadata={"label": label}) == 0


def test_thread_create_get_search_copy_delete(url: str) -> None:
    client: Any = get_sync_client(url=url)
    mark = _mark()
    thread = client.threads.create(metadata={"user": "ada", "test": mark})
    assert thread["status"] == "idle" and thread["metadata"] == {"user": "ada", "test": mark}
    assert client.threads.get(thread["thread_id"])["metadata"]["user"] == "ada"
    with pytest.raises(ConflictError):
        client.threads.create(thread_id=thread["thread_id"])
    same = client.threads.create(thread_id=thread["thread_id"], if_exists="do_nothing")
    assert same["thread_id"] == thread["thread_id"]
    other = client.threads.create(metadata={"user": "bob", "test": mark})
    found = client.threads.search(metadata={"user": "ada", "test": mark})
    assert [t["thread_id"] for t in found] == [thread["thread_id"]]
    assert len(client.threads.search(metadata={"test": mark}, limit=10)) == 2
    assert len(client.threads.search(metadata={"test": mark}, limit=1)) == 1
    client.runs.wait(thread["thread_id"], "agent", input=HI)
    copy = client.threads.copy(thread["thread_id"])
    assert copy["thread_id"] != thread["thread_id"]
    assert _humans(client.threads.get_state(copy["thread_id"])["values"]) == ["hi"]
    client.threads.delete(other["thread_id"])
    with pytest.raises(NotFoundError):
        client.threads.get(other["thread_id"])
    with pytest.raises(NotFoundError):
        client.threads.delete(other["thread_id"])


def test_thread_update_merges_metadata(url: str) -> None:
    """``threads.update`` (SPEC §20.3): the metadata merged over the thread's, as the reference;
    a time-to-live, which this service does not keep, is refused by name (the reference keeps it)."""
    client: Any = get_sync_client(url=url)
    mark = _mark()
    thread = client.threads.create(metadata={"user": "ada", "test": mark})
    updated = client.threads.update(thread["thread_id"], metadata={"user": "bob", "tier": 1})
    assert updated["metadata"] == {"user": "bob", "tier": 1, "test": mark}
    again = client.threads.update(thread["thread_id"], metadata={"tier": 2})
    assert again["metadata"] == {"user": "bob", "tier": 2, "test": mark}
    assert client.threads.get(thread["thread_id"])["metadata"] == again["metadata"]
    found = client.threads.search(metadata={"tier": 2, "test": mark})
    assert [t["thread_id"] for t in found] == [thread["thread_id"]]
    with pytest.raises(NotFoundError):
        client.threads.update(str(uuid.uuid4()), metadata={"x": 1})


def test_thread_join_stream_follows_the_threads_runs(url: str) -> None:
    """``threads.join_stream`` (SPEC §20.3): from the moment it joins, every run of the thread
    as it goes: a ``metadata`` frame as a run starts, the run's events in the run's own modes,
    ``run_done`` as it ends; it stays open for the next run."""

    async def joined() -> list[tuple[str, Any]]:
        client: Any = get_client(url=url)
        thread_id = (await client.threads.create())["thread_id"]
        seen: list[tuple[str, Any]] = []

        async def listen() -> None:
            async for part in await client.threads.join_stream(thread_id):
                seen.append((part.event, part.data))

        listener = asyncio.create_task(listen())
        await asyncio.sleep(1.0)  # joined before the runs
        first = await client.runs.create(thread_id, "agent", input=HI, stream_mode="updates")
        await client.runs.join(thread_id, first["run_id"])
        second = await client.runs.create(thread_id, "agent", input=HI, stream_mode="values")
        await client.runs.join(thread_id, second["run_id"])
        deadline = time.monotonic() + 10
        while sum(1 for e, d in seen if e == "metadata" and d.get("status") == "run_done") < 2:
            assert time.monotonic() < deadline, seen
            await asyncio.sleep(0.1)
        listener.cancel()
        with pytest.raises(asyncio.CancelledError):
            await listener
        return [(e, d if e == "metadata" else None) for e, d in seen] + [
            ("runs", [first["run_id"], second["run_id"]])
        ]

    seen = asyncio.run(joined())
    first, second = seen.pop()[1]
    events = [e for e, _ in seen]
    assert seen[0] == ("metadata", {"run_id": first, "attempt": 1})
    done_first = seen.index(("metadata", {"status": "run_done", "run_id": first}))
    assert set(events[1:done_first]) == {"updates"}  # the first run's own mode
    assert seen[done_first + 1] == ("metadata", {"run_id": second, "attempt": 1})
    assert set(events[done_first + 2 : -1]) == {"values"}
    assert seen[-1] == ("metadata", {"status": "run_done", "run_id": second})


def test_thread_join_stream_state_update_shows_a_clients_update_state(url: str) -> None:
    """``state_update`` (SPEC §25.3, refused before): the thread's state after each client's
    ``update_state``, as the reference streams it; a run's own checkpoints are not updates."""

    async def joined() -> tuple[list[tuple[str, Any]], str]:
        client: Any = get_client(url=url)
        thread_id = (await client.threads.create())["thread_id"]
        await client.runs.wait(thread_id, "agent", input=HI)
        seen: list[tuple[str, Any]] = []

        async def listen() -> None:
            # The SDK sends ``stream_mode``; the reference reads ``stream_modes``: both here.
            both = {"stream_mode": "state_update", "params": {"stream_modes": "state_update"}}
            async for part in await client.threads.join_stream(thread_id, **both):
                seen.append((part.event, part.data))

        listener = asyncio.create_task(listen())
        await asyncio.sleep(1.0)
        await client.runs.wait(thread_id, "agent", input=HI)  # a run: no state_update
        update = {"messages": [{"role": "user", "content": "edited"}]}
        await client.threads.update_state(thread_id, update, as_node="chat")
        deadline = time.monotonic() + 10
        while not any(e == "state_update" for e, _ in seen):
            assert time.monotonic() < deadline, seen
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)
        listener.cancel()
        with pytest.raises(asyncio.CancelledError):
            await listener
        return seen, thread_id

    seen, thread_id = asyncio.run(joined())
    updates = [d for e, d in seen if e == "state_update"]
    assert len(updates) == 1, seen
    assert updates[0]["thread_id"] == thread_id
    messages = updates[0]["state"]["values"]["messages"]
    assert messages[-1]["content"] == "edited", messages


def test_state_history_and_update_state(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    assert client.threads.get_state(thread_id)["values"] == {}
    assert client.threads.get_history(thread_id) == []
    client.runs.wait(thread_id, "agent", input=HI)
    state = client.threads.get_state(thread_id)
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai"]
    assert state["values"]["messages"][1]["content"] == REPLY  # messages readable, not repr
    assert state["next"] == []
    history = client.threads.get_history(thread_id)
    steps = [h["metadata"]["step"] for h in history]
    assert steps == sorted(steps, reverse=True) and steps[-1] == -1  # newest first
    first = history[-1]["checkpoint"]["checkpoint_id"]
    at_first = client.threads.get_state(thread_id, checkpoint_id=first)
    assert at_first["values"] == {"messages": []} or at_first["values"] == {}
    updated = client.threads.update_state(
        thread_id, {"messages": [{"role": "user", "content": "edited"}]}, as_node="chat"
    )
    assert updated["checkpoint"]["checkpoint_id"] != state["checkpoint"]["checkpoint_id"]
    assert _humans(client.threads.get_state(thread_id)["values"]) == ["hi", "edited"]


# --- runs --------------------------------------------------------------------------------------


def test_stream_sends_metadata_then_each_mode_then_end(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    parts = list(
        client.runs.stream(
            thread_id,
            "agent",
            input=HI,
            stream_mode=["values", "updates", "messages-tuple", "debug"],
        )
    )
    events = [p.event for p in parts]
    assert events[0] == "metadata" and set(parts[0].data) == {"run_id", "attempt"}
    assert "end" not in events  # the response ends, as the reference's
    assert {"values", "updates", "messages", "debug"} <= set(events)
    tokens = [p.data for p in parts if p.event == "messages"]
    assert "".join(chunk["content"] for chunk, _ in tokens) == REPLY
    assert all(meta["langgraph_node"] == "chat" for _, meta in tokens)
    last_values = [p.data for p in parts if p.event == "values"][-1]
    assert last_values["messages"][-1]["content"] == REPLY


def test_messages_mode_sends_partial_messages(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    parts = list(client.runs.stream(thread_id, "agent", input=HI, stream_mode="messages"))
    names = [p.event for p in parts]
    assert "messages/metadata" in names and "messages/partial" in names
    partials = [p.data for p in parts if p.event == "messages/partial"]
    # One partial a token, each the message so far, as the reference streams them.
    assert len(partials) == len(REPLY.split(" ")) * 2 - 1
    assert partials[0][0]["content"] == "I" and partials[-1][0]["content"] == REPLY
    assert {p[0]["type"] for p in partials} == {"ai"}


def test_messages_mode_sends_a_returned_message_complete(url: str) -> None:
    """A message a node returns without streaming it arrives whole, as the reference sends it."""
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    parts = list(
        client.runs.stream(thread_id, "agent", input=_say("lookup x"), stream_mode="messages")
    )
    complete = [p.data for p in parts if p.event == "messages/complete"]
    assert [m[0]["content"] for m in complete][-1] == "looked up x"


def test_an_async_def_node_runs(url: str) -> None:
    """Graphs run with ``astream`` (SPEC §20.1), as LangGraph Server runs them: an ``async def``
    node runs (the sync ``stream`` refuses one: 'No synchronous function provided')."""
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    values = client.runs.wait(thread_id, "agent", input=_say("lookup weather"))
    assert values["messages"][-1]["content"] == "looked up weather"


def test_interrupt_wait_state_and_resume(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    values = client.runs.wait(thread_id, "agent", input=_say("ask me"))
    assert isinstance(values, dict)
    assert values["__interrupt__"][0]["value"] == "what is your name?"
    assert client.threads.get(thread_id)["status"] == "interrupted"
    state = client.threads.get_state(thread_id)
    assert state["next"] == ["ask"]
    assert state["tasks"][0]["interrupts"][0]["value"] == "what is your name?"
    parts = list(
        client.runs.stream(thread_id, "agent", command=Command(resume="Ada"), stream_mode="updates")
    )
    updates = [p.data for p in parts if p.event == "updates"]
    assert updates[-1]["ask"]["messages"][0]["content"] == "hello Ada"
    assert client.threads.get(thread_id)["status"] == "idle"


def test_interrupt_arrives_as_an_update_in_the_stream(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    parts = list(client.runs.stream(thread_id, "agent", input=_say("ask"), stream_mode="updates"))
    interrupts = [p.data["__interrupt__"] for p in parts if "__interrupt__" in (p.data or {})]
    assert interrupts and interrupts[0][0]["value"] == "what is your name?"


def test_create_get_list_join_after_the_end(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "agent", input=HI)
    assert run["status"] in ("pending", "running") and run["thread_id"] == thread_id
    # Made with the graph's name, the run names its assistant by id, as the reference.
    assert run["assistant_id"] == client.assistants.search(graph_id="agent")[0]["assistant_id"]
    values = client.runs.join(thread_id, run["run_id"])
    assert values["messages"][-1]["content"] == REPLY
    assert client.runs.get(thread_id, run["run_id"])["status"] == "success"
    again = client.runs.join(thread_id, run["run_id"])  # after the end: the same answer
    assert again == values
    assert list(client.runs.join_stream(thread_id, run["run_id"])) == []  # ended: as the reference
    assert [r["run_id"] for r in client.runs.list(thread_id)] == [run["run_id"]]
    with pytest.raises(NotFoundError):
        client.runs.get(thread_id, "00000000-0000-4000-8000-0000000fffff")


def test_runs_may_create_their_thread_and_stateless_runs_work(url: str) -> None:
    client: Any = get_sync_client(url=url)
    values = client.runs.wait(str(uuid.uuid4()), "agent", input=HI, if_not_exists="create")
    assert values["messages"][-1]["content"] == REPLY
    with pytest.raises(httpx.HTTPStatusError, match="404"):  # wait raises httpx's error
        client.runs.wait(str(uuid.uuid4()), "agent", input=HI)
    stateless = client.runs.wait(None, "agent", input=HI)
    assert stateless["messages"][-1]["content"] == REPLY


def test_create_batch_queues_stateless_runs_or_none(url: str) -> None:
    """``runs.create_batch``: each run on a thread of its own; a batch with one bad run queues
    none of them (checked before the first is queued)."""
    client: Any = get_sync_client(url=url)
    runs = client.runs.create_batch(
        [{"assistant_id": "agent", "input": HI}, {"assistant_id": "agent", "input": _say("b")}]
    )
    assert len(runs) == 2 and runs[0]["thread_id"] != runs[1]["thread_id"]
    assert {run["status"] for run in runs} <= {"pending", "running"}
    before = len(client.threads.search(limit=1000))
    with pytest.raises(UnprocessableEntityError, match=r"\[1\]"):
        client.runs.create_batch(
            [{"assistant_id": "agent", "input": HI}, {"assistant_id": "agent", "stream_mode": 7}]
        )
    assert len(client.threads.search(limit=1000)) == before


def test_a_failed_run_shows_its_error_as_the_reference_does(url: str) -> None:
    """SPEC §19.4: the client sees the exception's type and message, no traceback or path; the
    thread's status is ``error`` (not ``interrupted``) and a search by status finds it."""
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    parts = list(client.runs.stream(thread_id, "agent", input=_say("weather Atlantis")))
    errors = [p.data for p in parts if p.event == "error"]
    assert errors == [
        {"error": "ValueError", "message": "weather backend has no station for 'Atlantis'"}
    ]
    assert client.threads.get(thread_id)["status"] == "error"
    found = client.threads.search(status="error", limit=1000)
    assert thread_id in [t["thread_id"] for t in found]
    assert thread_id not in [t["thread_id"] for t in client.threads.search(status="interrupted")]


def test_a_recursion_limit_shows_langgraphs_whole_message(url: str) -> None:
    """A failure whose message has several lines (LangGraph's recursion limit) reaches the client
    whole, with none of the notes LangGraph hangs on errors, as the reference sends it."""
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    parts = list(
        client.runs.stream(
            thread_id, "agent", input=HI, config={"recursion_limit": 1}, stream_mode="updates"
        )
    )
    errors = [p.data for p in parts if p.event == "error"]
    assert len(errors) == 1 and errors[0]["error"] == "GraphRecursionError", errors
    message = errors[0]["message"]
    assert message.startswith("Recursion limit of 1 reached without hitting a stop condition.")
    assert "\nFor troubleshooting, visit: " in message and "During task" not in message


def test_a_run_whose_tool_failed_once_ends_with_one_human_message(
    url: str, request: pytest.FixtureRequest
) -> None:
    """SPEC §19.3-§19.4: here the failed step is retried by the worker (resuming, the input not
    applied again); on the reference the run fails and the client resumes it with
    ``input=None``. The thread ends the same: one human message, the tool's answer."""
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    key = f"flaky {uuid.uuid4().hex[:6]}"
    values = client.runs.wait(thread_id, "agent", input=_say(key), raise_error=False)
    if request.node.callspec.params["backend"] == "reference":
        assert "__error__" in values  # LangGraph's server does not retry a graph's error
        values = client.runs.wait(thread_id, "agent", input=None)
    assert [m["content"] for m in values["messages"]] == [key, "recovered"]
    assert client.threads.get(thread_id)["status"] == "idle"


def test_run_options_the_service_does_not_honour_are_refused_by_name(
    url: str, request: pytest.FixtureRequest
) -> None:
    """Fail closed (issue 36): an option that would be dropped is a 422 naming it, and nothing is
    queued; the reference honours them."""
    if request.node.callspec.params["backend"] == "reference":
        pytest.skip("ours only")
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    for option in ({"webhook": "ftp://example.com/hook"}, {"after_seconds": -1}):
        with pytest.raises(UnprocessableEntityError, match=next(iter(option))):
            client.runs.create(thread_id, "agent", input=HI, **option)
    assert client.runs.list(thread_id) == []
    client.runs.wait(thread_id, "agent", input=HI, durability="sync")  # honoured: every step is


def test_after_seconds_delays_the_runs_start(url: str) -> None:
    """SPEC §25.3: ``after_seconds`` (refused before) starts the run no earlier; meanwhile it is
    ``pending``, as the reference shows it."""
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    asked = time.monotonic()
    run = client.runs.create(thread_id, "agent", input=HI, after_seconds=2)
    time.sleep(1)
    assert client.runs.get(thread_id, run["run_id"])["status"] == "pending"
    values = client.runs.join(thread_id, run["run_id"])
    assert time.monotonic() - asked >= 2
    assert [m["content"] for m in values["messages"]] == ["hi", REPLY]


def test_cancel_many_cancels_named_runs_or_every_pending_one(url: str) -> None:
    """``POST /runs/cancel`` (SPEC §25.3), as the reference: by thread and run ids, or by
    status; ended runs are left as they are; 404 when nothing matched; 422 for a mix."""
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    running = client.runs.create(thread_id, "agent", input=_say("slow 3"))
    queued = client.runs.create(thread_id, "agent", input=HI)
    _wait_status(client, thread_id, running["run_id"], "running")
    client.runs.cancel_many(thread_id=thread_id, run_ids=[running["run_id"], queued["run_id"]])
    for run in (running, queued):
        _wait_status(client, thread_id, run["run_id"], "interrupted")
    later = client.threads.create()["thread_id"]
    delayed = client.runs.create(later, "agent", input=HI, after_seconds=60)
    client.runs.cancel_many(status="pending")
    _wait_status(client, later, delayed["run_id"], "interrupted")
    with pytest.raises(NotFoundError):
        client.runs.cancel_many(thread_id=str(uuid.uuid4()), run_ids=[str(uuid.uuid4())])
    with pytest.raises(UnprocessableEntityError):
        client.runs.cancel_many(thread_id=thread_id, run_ids=[running["run_id"]], status="all")
    with pytest.raises(UnprocessableEntityError):
        client.runs.cancel_many(status="finished")


def test_metrics_report_the_queue_depth(url: str, request: pytest.FixtureRequest) -> None:
    """``GET /metrics`` (SPEC §25.3): the reference's JSON queue figures, and Prometheus text."""
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    delayed = client.runs.create(thread_id, "agent", input=HI, after_seconds=60)
    queue = httpx.get(f"{url}/metrics", params={"format": "json"}).json()["queue"]
    assert queue["n_pending"] >= 1 and queue["n_running"] >= 0, queue
    assert isinstance(queue["pending_runs_wait_time_max_secs"], int | float), queue
    text = httpx.get(f"{url}/metrics")
    assert text.status_code == 200 and text.headers["content-type"].startswith("text/plain")
    if request.node.callspec.params["backend"] != "reference":  # its names depend on its exporter
        pending = re.search(r"^lg_api_num_pending_runs (\d+)$", text.text, re.MULTILINE)
        assert pending is not None and int(pending.group(1)) >= 1, text.text
        assert 'durable_graph_runs{state="open"}' in text.text
    client.runs.cancel(thread_id, delayed["run_id"])


def test_prune_deletes_the_threads_it_names(url: str) -> None:
    """``threads.prune`` (SPEC §24.3), as the reference: ``pruned_count`` counts the threads it
    deleted; a missing id is skipped."""
    client: Any = get_sync_client(url=url)
    named = [client.threads.create()["thread_id"] for _ in range(2)]
    for thread_id in named:
        client.runs.wait(thread_id, "agent", input=HI)
    answer = client.threads.prune([*named, str(uuid.uuid4())])
    assert answer == {"pruned_count": 2}
    for thread_id in named:
        with pytest.raises(NotFoundError):
            client.threads.get(thread_id)
    assert client.threads.prune([]) == {"pruned_count": 0}
    with pytest.raises(UnprocessableEntityError):
        client.threads.prune(named, strategy="everything")


def test_prune_keep_latest_keeps_the_state_and_a_thread_that_resumes(
    url: str, request: pytest.FixtureRequest
) -> None:
    if request.node.callspec.params["backend"] == "reference":
        pytest.skip("langgraph dev refuses keep_latest (its in-memory runtime)")
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    for text in ("hi", "ask"):
        client.runs.wait(thread_id, "agent", input=_say(text))
    before = client.threads.get_state(thread_id)
    assert len(client.threads.get_history(thread_id, limit=100)) > 2
    assert client.threads.prune([thread_id], strategy="keep_latest") == {"pruned_count": 1}
    history = client.threads.get_history(thread_id, limit=100)
    assert [h["checkpoint"]["checkpoint_id"] for h in history] == [
        before["checkpoint"]["checkpoint_id"]
    ]
    after = client.threads.get_state(thread_id)
    assert after["values"] == before["values"] and after["next"] == before["next"]
    values = client.runs.wait(thread_id, "agent", command={"resume": "Ada"})  # what it asked
    assert values["messages"][-1]["content"] == "hello Ada"
    slow = client.runs.create(thread_id, "agent", input=_say("slow 2"))
    _wait_status(client, thread_id, slow["run_id"], "running")
    with pytest.raises(ConflictError):  # a run going: nothing pruned
        client.threads.prune([thread_id], strategy="keep_latest")
    client.runs.join(thread_id, slow["run_id"])


def test_openapi_json_describes_the_routes_served(url: str) -> None:
    """``GET /openapi.json`` (SPEC §25.3): an OpenAPI 3 document naming the routes the SDK
    calls, as the reference serves one."""
    document = httpx.get(f"{url}/openapi.json").json()
    assert document["openapi"].startswith("3.")
    paths = document["paths"]
    for path, method in (
        ("/threads", "post"),
        ("/threads/{thread_id}/runs", "post"),
        ("/threads/{thread_id}/runs/{run_id}/join", "get"),
        ("/runs/cancel", "post"),
        ("/assistants/search", "post"),
        ("/store/items", "put"),
    ):
        assert method in paths.get(path, {}), (path, method, sorted(paths))
    ids = [op["operationId"] for ops in paths.values() for op in ops.values()]
    assert len(ids) == len(set(ids))


def test_stream_modes_checkpoints_and_tasks_as_the_reference(url: str) -> None:
    """SPEC §25.3: ``checkpoints`` and ``tasks`` (refused before) stream LangGraph's chunks of
    those modes: each step's checkpoint, each task's start and its result."""
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    parts = list(
        client.runs.stream(thread_id, "agent", input=HI, stream_mode=["checkpoints", "tasks"])
    )
    kinds = [p.event for p in parts if p.event != "metadata"]
    assert set(kinds) == {"checkpoints", "tasks"}, kinds
    checkpoints = [p.data for p in parts if p.event == "checkpoints"]
    assert {"config", "metadata", "values", "next", "tasks"} <= set(checkpoints[-1])
    assert [m["content"] for m in checkpoints[-1]["values"]["messages"]] == ["hi", REPLY]
    tasks = [p.data for p in parts if p.event == "tasks"]
    started = [t for t in tasks if "input" in t]
    ended = [t for t in tasks if "result" in t]
    assert [t["name"] for t in started] == [t["name"] for t in ended] == ["chat"], tasks
    assert started[0]["id"] == ended[0]["id"] and ended[0]["error"] is None


def test_join_of_a_run_that_had_ended_answers_the_threads_state_now(url: str) -> None:
    """As the reference (issue 48, LangGraph's JS SDK check): a join of a run that ended before
    the join answers the thread's current values (a later run's), not that run's own."""
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.create(thread_id, "agent", input=_say("lookup a"))
    client.runs.join(thread_id, first["run_id"])  # joined while it ran: its own values
    client.runs.wait(thread_id, "agent", input=_say("lookup b"))
    values = client.runs.join(thread_id, first["run_id"])
    assert [m["content"] for m in values["messages"]][-1] == "looked up b", values
    asked = client.runs.create(thread_id, "agent", input=_say("ask"))
    client.runs.join(thread_id, asked["run_id"])
    again = client.runs.join(thread_id, first["run_id"])
    assert [i["value"] for i in again["__interrupt__"]] == ["what is your name?"], again


def test_a_thread_ttl_is_set_updated_and_read_as_the_reference(
    url: str, request: pytest.FixtureRequest
) -> None:
    """``threads.create(ttl=...)`` / ``threads.update(ttl=...)`` (minutes, or ``{ttl,
    strategy}`` as the SDK sends them) and ``threads.get(include=["ttl"])`` (SPEC §24.1): the
    TTL as LangGraph's hosted server answers it. ``langgraph dev`` takes the same calls but
    keeps no TTL (its in-memory runtime ignores one), so it answers without ``ttl``."""
    reference = request.node.callspec.params["backend"] == "reference"
    client: Any = get_sync_client(url=url)
    made = client.threads.create(ttl=60, metadata={"ttl": "yes"})
    thread_id = made["thread_id"]
    assert "ttl" not in made and "ttl" not in client.threads.get(thread_id)
    got = client.threads.get(thread_id, include=["ttl"])
    if reference:
        assert "ttl" not in got
    else:
        ttl = got["ttl"]
        assert (ttl["strategy"], ttl["ttl_minutes"]) == ("delete", 60.0)
        expires = datetime.fromisoformat(ttl["expires_at"])
        assert timedelta(minutes=59) < expires - datetime.now(UTC) <= timedelta(minutes=60)
    updated = client.threads.update(
        thread_id, metadata={"more": 1}, ttl={"ttl": 5, "strategy": "keep_latest"}
    )
    assert updated["metadata"] == {"ttl": "yes", "more": 1}
    if not reference:
        ttl = client.threads.get(thread_id, include=["ttl"])["ttl"]
        assert (ttl["strategy"], ttl["ttl_minutes"]) == ("keep_latest", 5.0)
    plain = client.threads.create()["thread_id"]  # no ttl, no default: none included
    assert "ttl" not in client.threads.get(plain, include=["ttl"])


def test_a_bad_thread_ttl_is_422_naming_it_and_writes_nothing(
    url: str, request: pytest.FixtureRequest
) -> None:
    client: Any = get_sync_client(url=url)
    mark = _mark()
    thread_id = client.threads.create(metadata={"test": mark})["thread_id"]
    bad_ttls: tuple[object, ...] = (
        -1,
        {"ttl": 5, "strategy": "purge"},
        {"strategy": "delete"},
        10**9,
    )
    if request.node.callspec.params["backend"] == "reference":
        # langgraph dev refuses an unknown strategy (its request schema), and keeps no TTL
        # (its in-memory runtime ignores the field), so it takes the rest unchecked.
        with pytest.raises(UnprocessableEntityError):
            client.threads.create(metadata={"other": mark}, ttl={"ttl": 5, "strategy": "purge"})
        for unchecked in (-1, {"strategy": "delete"}, 10**9):
            assert "ttl" not in client.threads.create(metadata={"other": mark}, ttl=unchecked)
        return
    for bad in bad_ttls:
        with pytest.raises(UnprocessableEntityError) as refused:
            client.threads.create(metadata={"test": mark}, ttl=bad)
        assert "ttl" in refused.value.response.json()["detail"]
        with pytest.raises(UnprocessableEntityError):
            client.threads.update(thread_id, metadata={"changed": True}, ttl=bad)
    assert [t["thread_id"] for t in client.threads.search(metadata={"test": mark})] == [thread_id]
    assert client.threads.get(thread_id)["metadata"] == {"test": mark}


# --- double texting and cancel ----------------------------------------------------------------


def test_reject_on_a_busy_thread_is_409_and_records_no_run(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    busy = client.runs.create(thread_id, "agent", input=_say("slow 1.5"))
    with pytest.raises(ConflictError):
        client.runs.create(thread_id, "agent", input=HI, multitask_strategy="reject")
    assert [r["run_id"] for r in client.runs.list(thread_id)] == [busy["run_id"]]
    client.runs.join(thread_id, busy["run_id"])


def test_enqueue_runs_both_in_order(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.create(thread_id, "agent", input=_say("slow 1"))
    second = client.runs.create(thread_id, "agent", input=HI, multitask_strategy="enqueue")
    assert second["status"] == "pending"
    client.runs.join(thread_id, second["run_id"])
    assert client.runs.get(thread_id, first["run_id"])["status"] == "success"
    assert _humans(client.threads.get_state(thread_id)["values"]) == ["slow 1", "hi"]


def test_interrupt_strategy_ends_the_first_run_keeping_its_input(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.create(thread_id, "agent", input=_say("slow 2"))
    _wait_status(client, thread_id, first["run_id"], "running")
    time.sleep(0.5)  # its input checkpoint is in
    second = client.runs.create(thread_id, "agent", input=HI, multitask_strategy="interrupt")
    client.runs.join(thread_id, second["run_id"])
    assert client.runs.get(thread_id, first["run_id"])["status"] == "interrupted"
    time.sleep(2.5)  # past the first run's slow node: an interrupted run writes nothing more
    values = client.threads.get_state(thread_id)["values"]
    contents = [m["content"] for m in values.get("messages", [])]
    assert contents == ["slow 2", "hi", REPLY]  # as the reference: no "slept 2", no "done"


def test_rollback_strategy_deletes_the_first_run_and_its_input(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.create(thread_id, "agent", input=_say("slow 2"))
    _wait_status(client, thread_id, first["run_id"], "running")
    time.sleep(0.5)
    second = client.runs.create(thread_id, "agent", input=HI, multitask_strategy="rollback")
    client.runs.join(thread_id, second["run_id"])
    with pytest.raises(NotFoundError):
        client.runs.get(thread_id, first["run_id"])
    assert _humans(client.threads.get_state(thread_id)["values"]) == ["hi"]


def test_cancel_of_a_running_run_leaves_it_interrupted_and_the_thread_usable(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "agent", input=_say("slow 2"))
    _wait_status(client, thread_id, run["run_id"], "running")
    time.sleep(0.5)  # its input checkpoint is in
    client.runs.cancel(thread_id, run["run_id"])
    assert client.runs.get(thread_id, run["run_id"])["status"] == "interrupted"
    time.sleep(2.5)  # past its slow node: a cancelled run writes nothing more (SPEC §19.1)
    state = client.threads.get_state(thread_id)
    assert [m["content"] for m in state["values"]["messages"]] == ["slow 2"]  # as the reference
    assert state["next"] == ["slow"]
    values = client.runs.wait(thread_id, "agent", input=HI)
    assert [m["content"] for m in values["messages"]] == ["slow 2", "hi", REPLY]
    with pytest.raises(NotFoundError):  # it has ended: nothing to cancel (as the reference)
        client.runs.cancel(thread_id, run["run_id"])


# --- on_disconnect: "cancel" (SPEC §25.3) ------------------------------------------------------


def _cancelled_by_leaving(client: Any, thread_id: str, run_id: str) -> None:
    """The run its client left is cancelled (``interrupted``, as the reference), and writes no
    more: its slow node's answer never lands."""
    _wait_status(client, thread_id, run_id, "interrupted")
    time.sleep(3.5)
    values = client.threads.get_state(thread_id)["values"]
    contents = [m["content"] for m in values.get("messages", [])]
    assert not any(c.startswith("slept") for c in contents), contents


def test_a_stream_whose_client_leaves_with_on_disconnect_cancel_cancels_its_run(url: str) -> None:
    """LangGraph's React ``useStream`` sends ``on_disconnect: "cancel"`` by default."""
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    parts = client.runs.stream(thread_id, "agent", input=_say("slow 3"), on_disconnect="cancel")
    first = next(parts)
    assert first.event == "metadata"
    parts.close()  # the client goes away mid-run
    _cancelled_by_leaving(client, thread_id, first.data["run_id"])


def test_a_wait_whose_client_leaves_with_on_disconnect_cancel_cancels_its_run(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    body = {"assistant_id": "agent", "input": _say("slow 3"), "on_disconnect": "cancel"}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{url}/threads/{thread_id}/runs/wait", json=body, timeout=1.0)
    (run,) = client.runs.list(thread_id)
    _cancelled_by_leaving(client, thread_id, run["run_id"])


def test_a_join_stream_with_cancel_on_disconnect_cancels_the_run_its_client_leaves(
    url: str,
) -> None:
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "agent", input=_say("slow 3"))
    _wait_status(client, thread_id, run["run_id"], "running")
    parts = client.runs.join_stream(thread_id, run["run_id"], cancel_on_disconnect=True)
    next(parts)
    parts.close()
    _cancelled_by_leaving(client, thread_id, run["run_id"])


def test_a_stream_whose_client_leaves_by_default_runs_on(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    parts = client.runs.stream(thread_id, "agent", input=_say("slow 1"))
    first = next(parts)
    parts.close()
    _wait_status(client, thread_id, first.data["run_id"], "success")


# --- streams that break -----------------------------------------------------------------------


def _sse(text: str) -> list[tuple[str, Any, str | None]]:
    out = []
    for block in text.replace("\r\n", "\n").strip().split("\n\n"):
        if not block:
            continue
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        out.append((fields["event"], json.loads(fields["data"]), fields.get("id")))
    return out


def test_a_client_that_disconnects_mid_stream_resumes_from_its_last_event(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    body = {
        "assistant_id": "agent",
        "input": _say("slow 1"),
        "stream_mode": ["updates", "values"],
        "stream_resumable": True,  # the reference keeps a stream's events for resuming only so
    }
    got: list[tuple[str, Any, str | None]] = []
    with (
        httpx.Client(base_url=url, timeout=30) as http,
        http.stream("POST", f"/threads/{thread_id}/runs/stream", json=body) as response,
    ):
        location = response.headers["location"]
        buffer = ""
        for text in response.iter_text():
            buffer += text.replace("\r\n", "\n")
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                got.extend(_sse(block))
            if any(event == "values" for event, _, _ in got):
                break  # the client goes away after its first values event
    last_id = [i for _, _, i in got if i is not None][-1]
    with httpx.Client(base_url=url, timeout=60) as http:
        rest = _sse(http.get(location, headers={"Last-Event-ID": last_id}).text)
        whole = _sse(http.get(location, headers={"Last-Event-ID": got[0][2] or "0"}).text)
    resumed = [e for e in got + rest if e[0] != "metadata"]
    assert resumed == [e for e in whole if e[0] != "metadata"]  # nothing lost, nothing twice
    assert [e[0] for e in resumed] == ["values", "updates", "values", "updates", "values"]


# --- bad requests -------------------------------------------------------------------------------


def test_bad_requests_get_4xx_with_a_message_and_change_nothing(url: str, backend: Backend) -> None:
    client: Any = get_sync_client(url=url)
    mark = _mark()
    thread_id = client.threads.create(metadata={"test": mark})["thread_id"]
    with httpx.Client(base_url=url, timeout=30) as http:
        cases = [
            ("POST", f"/threads/{thread_id}/runs", {}, 422),  # no assistant_id
            ("POST", f"/threads/{thread_id}/runs", {"assistant_id": "nobody"}, 422),
            ("POST", f"/threads/{thread_id}/runs", {"assistant_id": str(uuid.uuid4())}, 404),
            ("POST", f"/threads/{uuid.uuid4()}/runs", {"assistant_id": "agent"}, 404),
            (
                "POST",
                f"/threads/{thread_id}/runs",
                {"assistant_id": "agent", "stream_mode": "x"},
                422,
            ),
            (
                "POST",
                f"/threads/{thread_id}/runs",
                {"assistant_id": "agent", "multitask_strategy": "sometimes"},
                422,
            ),
            ("POST", "/threads", {"metadata": "not an object"}, 422),
            ("POST", "/threads/search", {"limit": -1}, 422),
            ("GET", f"/threads/{uuid.uuid4()}", None, 404),
            ("GET", f"/threads/{uuid.uuid4()}/state", None, 404),
            ("GET", f"/threads/{thread_id}/runs/not-a-run", None, 422),
            ("GET", f"/threads/{thread_id}/runs/{uuid.uuid4()}", None, 404),
            ("POST", f"/threads/{thread_id}/history", {"limit": "many"}, 422),
        ]
        for method, path, body, status in cases:
            response = http.request(method, path, json=body)
            assert response.status_code == status, (method, path, body, response.text)
            assert response.json()["detail"]
        if backend.name != "reference":  # stricter than the reference (it accepts -1)
            bad_limit = {"assistant_id": "agent", "config": {"recursion_limit": -1}}
            response = http.post(f"/threads/{thread_id}/runs", json=bad_limit)
            assert response.status_code == 422 and "recursion_limit" in response.json()["detail"]
            # A bad ttl or an unknown stream mode is refused by name, writing nothing.
            for method, path, body in [
                ("POST", "/threads", {"ttl": -5}),
                ("PATCH", f"/threads/{thread_id}", {"metadata": {"x": 1}, "ttl": 0}),
                ("GET", f"/threads/{thread_id}/stream?stream_modes=tokens", None),
            ]:
                response = http.request(method, path, json=body)
                assert response.status_code == 422, (method, path, response.text)
                detail = response.json()["detail"]
                assert detail.startswith(("ttl:", "stream_mode:")), detail
            assert client.threads.get(thread_id)["metadata"] == {"test": mark}
        raw = http.post(f"/threads/{thread_id}/runs", content=b"{not json")
        assert raw.status_code == 422 and raw.json()["detail"]
    assert client.runs.list(thread_id) == []
    assert [t["thread_id"] for t in client.threads.search(metadata={"test": mark})] == [thread_id]
    with pytest.raises(UnprocessableEntityError):
        client.runs.create(thread_id, "agent", input=HI, stream_mode="tokens")


def test_a_token_is_required_when_set(tmp_path: Path) -> None:
    backend = Backend("sqlite", ("--sqlite", str(tmp_path / "token.db")), {})
    token = "a-token-of-sixteen-chars"
    with serving(backend, tmp_path, workers=0, token=token) as served:
        assert httpx.post(served + "/threads", json={}).status_code == 401
        wrong = {"x-api-key": "not-the-token-at-all"}
        assert httpx.post(served + "/threads", json={}, headers=wrong).status_code == 401
        assert get_sync_client(url=served, api_key=token).threads.create()["status"] == "idle"
        rebound = {"x-api-key": token, "Host": "attacker.example"}  # DNS rebinding
        assert httpx.post(served + "/threads", json={}, headers=rebound).status_code == 400


# --- the async client and RemoteGraph ----------------------------------------------------------


def test_the_async_client_streams_waits_and_cancels(url: str) -> None:
    async def scenario() -> None:
        client: Any = get_client(url=url)
        mark = _mark()
        thread = await client.threads.create(metadata={"via": mark})
        thread_id = thread["thread_id"]
        events = [p.event async for p in client.runs.stream(thread_id, "agent", input=HI)]
        assert events[0] == "metadata" and "values" in events and "end" not in events
        values = await client.runs.wait(thread_id, "agent", input=_say("ask"))
        assert values["__interrupt__"][0]["value"] == "what is your name?"
        resumed = await client.runs.wait(thread_id, "agent", command=Command(resume="Ada"))
        assert resumed["messages"][-1]["content"] == "hello Ada"
        run = await client.runs.create(thread_id, "agent", input=_say("slow 2"))
        while (await client.runs.get(thread_id, run["run_id"]))["status"] != "running":
            await asyncio.sleep(0.05)
        await client.runs.cancel(thread_id, run["run_id"])
        assert (await client.runs.get(thread_id, run["run_id"]))["status"] == "interrupted"
        history = await client.threads.get_history(thread_id, limit=3)
        assert len(history) == 3
        assert [t["thread_id"] for t in await client.threads.search(metadata={"via": mark})] == [
            thread_id
        ]

    asyncio.run(scenario())


def test_remote_graph_invokes_streams_and_reads_state(url: str) -> None:
    remote = RemoteGraph("agent", url=url)
    config: Any = {"configurable": {"thread_id": str(uuid.uuid4())}}
    out = remote.invoke(HI, config)
    assert out["messages"][-1]["content"] == REPLY
    chunks = list(remote.stream(_say("again"), config, stream_mode="updates"))
    assert chunks[-1]["chat"]["messages"][0]["content"] == REPLY
    state = remote.get_state(config)
    assert _humans(state.values) == ["hi", "again"]
    assert len(list(remote.get_state_history(config))) >= 4
    asked = remote.invoke(_say("ask"), config)
    assert asked["__interrupt__"][0]["value"] == "what is your name?"


def test_remote_graph_raises_on_a_failed_run(url: str) -> None:
    remote = RemoteGraph("agent", url=url)
    config: Any = {"configurable": {"thread_id": str(uuid.uuid4())}, "recursion_limit": 1}
    with pytest.raises(Exception, match="Recursion limit"):
        remote.invoke(_say("slow 0"), config)


# --- several processes, and a crash -------------------------------------------------------------


def test_two_api_processes_and_two_workers_share_one_store(
    tmp_path: Path, pg_dsn: str, pg_schema: str
) -> None:
    backend = Backend("postgres", ("--schema", pg_schema), {"DURABLE_GRAPH_DSN": pg_dsn})
    with (
        serving(backend, tmp_path, workers=0) as a,
        serving(backend, tmp_path, workers=0) as b,
        process(worker_argv(backend), backend, tmp_path / "w1.log"),
        process(worker_argv(backend), backend, tmp_path / "w2.log"),
    ):
        ca: Any = get_sync_client(url=a)
        cb: Any = get_sync_client(url=b)
        threads = [ca.threads.create()["thread_id"] for _ in range(3)]
        runs = []
        for i in range(4):
            for n, thread_id in enumerate(threads):
                client = ca if (i + n) % 2 else cb
                runs.append(
                    (thread_id, client.runs.create(thread_id, "agent", input=_say(f"m{i}")))
                )
        for thread_id, run in runs:
            cb.runs.join(thread_id, run["run_id"])
        for thread_id in threads:
            state = ca.threads.get_state(thread_id)
            assert _humans(state["values"]) == ["m0", "m1", "m2", "m3"]  # each input once, in order
            assert [r["status"] for r in cb.runs.list(thread_id)] == ["success"] * 4


def test_a_streamed_run_survives_a_worker_sigkill_with_every_event_once(
    tmp_path: Path, pg_dsn: str, pg_schema: str
) -> None:
    backend = Backend("postgres", ("--schema", pg_schema), {"DURABLE_GRAPH_DSN": pg_dsn})
    fast = ("--lease-ttl", "2s", "--claim-ttl", "2s")
    with serving(backend, tmp_path, workers=0) as url:
        client: Any = get_sync_client(url=url)
        thread_id = client.threads.create()["thread_id"]
        with process(worker_argv(backend, *fast), backend, tmp_path / "doomed.log") as doomed:
            run = client.runs.create(
                thread_id, "agent", input=_say("slow 3"), stream_mode=["updates", "values"]
            )
            _wait_status(client, thread_id, run["run_id"], "running")
            time.sleep(1.0)  # inside the slow node, after the input's checkpoint
            doomed.send_signal(signal.SIGKILL)
            doomed.wait()
        with process(worker_argv(backend, *fast), backend, tmp_path / "rescuer.log"):
            parts = list(client.runs.join_stream(thread_id, run["run_id"]))
            values = client.runs.join(thread_id, run["run_id"])
        events = [(p.event, json.dumps(p.data, sort_keys=True)) for p in parts]
        names = [e for e, _ in events]
        assert names == ["metadata", "values", "updates", "values", "updates", "values"], [
            (e, d[:80]) for e, d in events
        ]
        assert len(set(events)) == len(events)  # every event once
        assert _humans(values) == ["slow 3"]  # the input applied once
        assert client.runs.get(thread_id, run["run_id"])["status"] == "success"
