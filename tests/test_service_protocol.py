"""LangGraph's streaming protocol on ``durable-graph serve`` (SPEC §20.2): ``POST
/threads/{id}/commands`` and ``POST /threads/{id}/stream/events``, driven by langgraph-sdk's own
``threads.stream`` (the SDK's "v3" streaming) and, for what the SDK does not show, by raw
requests; on real serve processes over SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Origin

from service_support import Backend, serving

REPLY = "I am a durable agent, streaming one token at a time"


def _say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if request.param == "postgres":
        dsn: str = request.getfixturevalue("pg_dsn")
        schema = f"proto_{uuid.uuid4().hex[:12]}"
        backend = Backend("postgres", ("--schema", schema), {"DURABLE_GRAPH_DSN": dsn})
    else:
        db = tmp_path_factory.mktemp("protocol") / "service.db"
        backend = Backend("sqlite", ("--sqlite", str(db)), {})
    with serving(backend, tmp_path_factory.mktemp("logs"), workers=2) as served:
        yield served


def _text(message: dict[str, Any]) -> str:
    """A message's text (LangGraph's protocol runs keep a streamed message as content blocks)."""
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(b["text"] for b in content if b.get("type") == "text")


def _same(event: dict[str, Any]) -> tuple[Any, ...]:
    """What two connections send alike (not the time they send it)."""
    return event["event_id"], event["seq"], event["method"], event["params"]["data"]


def _command(url: str, thread_id: str, method: str, params: Any, cid: int = 1) -> httpx.Response:
    body = {"id": cid, "method": method, "params": params}
    return httpx.post(f"{url}/threads/{thread_id}/commands", json=body, timeout=30)


def _events(url: str, thread_id: str, body: dict[str, Any], until: str) -> list[dict[str, Any]]:
    """The stream's events up to the first root lifecycle ``until`` (the stream does not end)."""
    out: list[dict[str, Any]] = []
    with httpx.stream(
        "POST", f"{url}/threads/{thread_id}/stream/events", json=body, timeout=30
    ) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            event = json.loads(line.removeprefix("data:"))
            out.append(event)
            data = event["params"]["data"]
            if event["method"] == "lifecycle" and data["event"] == until:
                return out
    raise AssertionError(f"the stream ended before lifecycle {until}: {out}")


# --- the SDK's threads.stream ------------------------------------------------------------------


def test_a_run_streams_its_message_token_by_token_and_its_output(url: str) -> None:
    async def scenario() -> None:
        client: Any = get_client(url=url)
        async with client.threads.stream(assistant_id="agent") as thread:
            started = await thread.run.start(input=_say("hi"))
            assert started["run_id"]
            streams = [s async for s in thread.messages]
            texts = ["".join([t async for t in s.text]) for s in streams]
            assert texts == [REPLY]
            final = await thread.output
            assert _text(final["messages"][-1]) == REPLY
        state = await client.threads.get_state(thread.thread_id)
        assert _text(state["values"]["messages"][-1]) == REPLY

    asyncio.run(scenario())


def test_an_interrupt_is_seen_and_answered_with_respond(url: str) -> None:
    client: Any = get_sync_client(url=url)
    with client.threads.stream(assistant_id="agent") as thread:
        thread.run.start(input=_say("ask"))
        snapshots = list(thread.values)
        assert snapshots and thread.interrupted
        assert [i["namespace"] for i in thread.interrupts] == [[]]
        thread.run.respond("Ada")
        final = thread.output
        assert final["messages"][-1]["content"] == "hello Ada"
        assert not thread.interrupted


def test_an_open_stream_hears_each_event_as_it_is_written(url: str) -> None:
    """The SDK reads a thread on two connections, a subscription and the lifecycle watcher, and
    ends the subscription when the watcher hears the interrupt: so an event must reach a stream
    already open as soon as it is written. On SQLite the async store's waits slept their 250 ms
    poll interval after a write of the same process, and the watcher heard the interrupt, written
    0.1 s after the step's values, before the subscription heard the values (LangGraph's SDK
    suite's ``test_extensions`` failed on it about every other run)."""

    async def collect(events: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
        return [e async for e in events]

    async def scenario() -> None:
        client: Any = get_client(url=url)
        for _ in range(5):
            created = await client.threads.create()
            async with client.threads.stream(created["thread_id"], assistant_id="agent") as thread:
                heard = asyncio.create_task(collect(thread.subscribe(["values"])))
                await asyncio.sleep(0.5)  # both connections open and waiting
                await thread.run.start(input=_say("pause 0.1"))
                values = await asyncio.wait_for(heard, 30)
                assert thread.interrupted
                assert values, "the subscription heard nothing before the watcher heard the ask"
                assert [_text(m) for m in values[0]["params"]["data"]["messages"]] == ["pause 0.1"]

    asyncio.run(scenario())


def test_every_connection_has_sent_a_runs_events_before_another_sends_its_pause(url: str) -> None:
    """A node that interrupts at once: the step's values are written a moment before the
    interrupt, and the SDK's subscription (one connection) must hear them before its lifecycle
    watcher (another) hears the ask, or the SDK ends the subscription without them (LangGraph's
    SDK suite's ``test_extensions`` lost the custom event written just before ``ask_human`` on
    PostgreSQL; its ``_sync`` tests with 0.4.3 waited for values that never came). A live stream
    holds an event that pauses or ends a run for `HOLD` seconds (`protocol_stream.sse`)."""

    async def collect(events: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
        return [e async for e in events]

    async def scenario() -> None:
        client: Any = get_client(url=url)
        for _ in range(5):
            created = await client.threads.create()
            async with client.threads.stream(created["thread_id"], assistant_id="agent") as thread:
                heard = asyncio.create_task(collect(thread.subscribe(["values"])))
                await asyncio.sleep(0.5)  # both connections open and waiting
                await thread.run.start(input=_say("ask"))
                values = await asyncio.wait_for(heard, 30)
                assert thread.interrupted
                assert values, "the subscription heard nothing before the watcher heard the ask"

    asyncio.run(scenario())


# --- the wire ----------------------------------------------------------------------------------


def test_the_stream_is_the_threads_log_numbered_alike_on_every_connection(url: str) -> None:
    thread_id = str(uuid.uuid4())
    answer = _command(url, thread_id, "run.start", {"assistant_id": "agent", "input": _say("hi")})
    assert answer.status_code == 200
    assert answer.json()["type"] == "success" and answer.json()["id"] == 1
    every = {"channels": ["values", "updates", "messages", "lifecycle", "input", "custom"]}
    first = _events(url, thread_id, every, "completed")
    lifecycle = [e["params"]["data"]["event"] for e in first if e["method"] == "lifecycle"]
    assert lifecycle == ["running", "completed"]
    assert [e["seq"] for e in first] == list(range(1, len(first) + 1))
    deltas = [
        e["params"]["data"]["delta"]["text"]
        for e in first
        if e["method"] == "messages" and e["params"]["data"]["event"] == "content-block-delta"
    ]
    assert "".join(deltas) == REPLY and len(deltas) > 1
    assert {e["method"] for e in first} >= {"values", "updates", "messages", "lifecycle"}
    # In the order the graph emitted them: the input's values, the node's tokens, its update.
    methods = [e["method"] for e in first]
    assert methods.index("values") < methods.index("messages") < methods.index("updates")
    # A second connection numbers alike; ``since`` and the channels filter what it sends.
    again = _events(url, thread_id, {**every, "since": 2}, "completed")
    assert [_same(e) for e in again] == [_same(e) for e in first if e["seq"] > 2]
    only = _events(url, thread_id, {"channels": ["lifecycle"]}, "completed")
    assert [e["seq"] for e in only] == [e["seq"] for e in first if e["method"] == "lifecycle"]


def test_an_interrupt_is_an_input_request_and_respond_resumes_the_thread(url: str) -> None:
    thread_id = str(uuid.uuid4())
    _command(url, thread_id, "run.start", {"assistant_id": "agent", "input": _say("ask")})
    body = {"channels": ["lifecycle", "input"]}
    asked = _events(url, thread_id, body, "interrupted")
    request = next(e for e in asked if e["method"] == "input.requested")
    interrupt_id = request["params"]["data"]["interrupt_id"]
    assert request["params"]["data"]["payload"] == "what is your name?"
    wrong = _command(
        url, thread_id, "input.respond", {"interrupt_id": "nope", "response": "x"}, cid=2
    )
    assert wrong.json() == {
        "type": "error",
        "id": 2,
        "error": "no_such_interrupt",
        "message": "unknown or already answered interrupt: nope",
    }
    answered = _command(
        url,
        thread_id,
        "input.respond",
        {"interrupt_id": interrupt_id, "response": "Ada", "namespace": []},
        cid=3,
    )
    assert answered.json() == {"type": "success", "id": 3, "result": {}}
    after = _events(url, thread_id, body, "completed")
    lifecycle = [e["params"]["data"]["event"] for e in after if e["method"] == "lifecycle"]
    assert lifecycle == ["running", "interrupted", "running", "completed"]
    state = httpx.get(f"{url}/threads/{thread_id}/state").json()
    assert state["values"]["messages"][-1]["content"] == "hello Ada"


def test_run_start_on_a_thread_waiting_at_an_interrupt_resumes_it(url: str) -> None:
    """As the reference decides (issue 48): ``run.start``'s input to a thread waiting at an
    interrupt is its answer. LangGraph's ``RemoteGraph`` (v3) resumes a thread so, sending a
    ``Command(resume=...)``'s value as the input; it was taken as a new input and the run
    failed (``Expected dict, got yes``)."""
    from langgraph.pregel.remote import RemoteGraph
    from langgraph.types import Command

    thread_id = str(uuid.uuid4())
    remote = RemoteGraph("agent", url=url)
    config: Any = {"configurable": {"thread_id": thread_id}}
    with remote.stream_events(_say("ask"), config, version="v3"):
        _events(url, thread_id, {"channels": ["lifecycle"]}, "interrupted")
    with remote.stream_events(Command(resume="Ada"), config, version="v3"):
        _events(url, thread_id, {"channels": ["lifecycle"]}, "completed")
    state = httpx.get(f"{url}/threads/{thread_id}/state").json()
    assert [m["content"] for m in state["values"]["messages"]] == ["ask", "hello Ada"]


def _cancel_once_running(url: str, thread_id: str, text: str) -> None:
    """A run of ``text`` started on the thread, cancelled once it runs."""
    started = _command(url, thread_id, "run.start", {"assistant_id": "agent", "input": _say(text)})
    run_id = started.json()["result"]["run_id"]
    deadline = time.monotonic() + 30
    while httpx.get(f"{url}/threads/{thread_id}/runs/{run_id}").json()["status"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert httpx.post(f"{url}/threads/{thread_id}/runs/{run_id}/cancel").status_code == 202


def test_a_cancelled_run_ends_its_stream_as_failed(url: str) -> None:
    thread_id = str(uuid.uuid4())
    _cancel_once_running(url, thread_id, "slow 5")
    events = _events(url, thread_id, {"channels": ["lifecycle"]}, "failed")
    assert events[-1]["params"]["data"]["error"] == "cancelled (requested)"


def test_a_failed_run_ends_its_stream_with_the_error_and_never_a_traceback(url: str) -> None:
    """SPEC §19.4, §25.4: the v3 stream's ``failed`` carries ``Type: message`` as the other
    paths show it (it carried the attempt's whole traceback, file paths included)."""
    thread_id = str(uuid.uuid4())
    _command(url, thread_id, "run.start", {"assistant_id": "agent", "input": _say("weather X")})
    events = _events(url, thread_id, {"channels": ["lifecycle"]}, "failed")
    error = events[-1]["params"]["data"]["error"]
    assert error == "ValueError: weather backend has no station for 'X'", error


def test_a_deleted_threads_runs_are_not_in_the_stream_of_the_next_thread_of_its_id(
    url: str,
) -> None:
    """Issue 46 item 4, D241: the thread's stream tells the runs of this thread, not those of a
    deleted thread of the same id (whose log numbering it continues)."""
    thread_id = str(uuid.uuid4())
    _cancel_once_running(url, thread_id, "slow 3")
    assert httpx.delete(f"{url}/threads/{thread_id}").status_code == 204
    _command(url, thread_id, "run.start", {"assistant_id": "agent", "input": _say("hi")})
    events = _events(url, thread_id, {"channels": ["lifecycle"]}, "completed")
    told = [e["params"]["data"]["event"] for e in events if e["method"] == "lifecycle"]
    assert "failed" not in told, told  # the deleted thread's cancelled run


def test_the_stream_of_a_thread_not_made_yet_waits_for_its_run_start(url: str) -> None:
    """As the reference (issue 48: an earlier SDK subscribes before its ``run.start`` made the
    thread, and was answered 404): the stream opens and carries the run once it starts."""
    thread_id = str(uuid.uuid4())
    got: list[dict[str, Any]] = []

    def listen() -> None:
        got.extend(_events(url, thread_id, {"channels": ["lifecycle"]}, "completed"))

    listener = threading.Thread(target=listen)
    listener.start()
    time.sleep(1.0)  # subscribed before the thread exists
    _command(url, thread_id, "run.start", {"assistant_id": "agent", "input": _say("hi")})
    listener.join(60)
    told = [e["params"]["data"]["event"] for e in got if e["method"] == "lifecycle"]
    assert told == ["running", "completed"], told


def test_what_is_not_served_is_refused_clearly(url: str) -> None:
    thread_id = str(uuid.uuid4())
    tree = _command(url, thread_id, "agent.getTree", {})
    assert tree.status_code == 501 and tree.json()["error"] == "not_supported"
    unknown = _command(url, thread_id, "run.fly", {})
    assert unknown.status_code == 200 and unknown.json()["error"] == "unknown_command"
    malformed = httpx.post(f"{url}/threads/{thread_id}/commands", json={"method": "run.start"})
    assert malformed.status_code == 400 and malformed.json()["error"] == "invalid_argument"
    bad = _command(url, thread_id, "run.start", {"assistant_id": "nope", "input": {}})
    assert bad.status_code == 200 and bad.json()["error"] == "invalid_argument"
    assert httpx.get(f"{url}/threads/{thread_id}").status_code == 404  # nothing was written
    _command(url, thread_id, "run.start", {"assistant_id": "agent", "input": _say("hi")})
    bodies: list[dict[str, Any]] = [
        {},
        {"channels": []},
        {"channels": ["debug"]},
        {"channels": ["values"], "since": -1},
    ]
    for body in bodies:
        refused = httpx.post(f"{url}/threads/{thread_id}/stream/events", json=body)
        assert refused.status_code == 422, body


# --- the WebSocket transport -------------------------------------------------------------------


def test_the_websocket_transport_streams_interrupts_and_resumes(url: str) -> None:
    async def scenario() -> None:
        client: Any = get_client(url=url)
        async with client.threads.stream(assistant_id="agent", transport="websocket") as thread:
            await thread.run.start(input=_say("ask"))
            snapshots = [s async for s in thread.values]
            assert snapshots and thread.interrupted
            await thread.run.respond("Grace")
            final = await thread.output
            assert final["messages"][-1]["content"] == "hello Grace"

    asyncio.run(scenario())


def test_a_websocket_subscription_has_the_events_written_before_it(url: str) -> None:
    """The SDK opens a socket per stream and subscribes on it after it starts the run: the
    socket read the thread's log from its accept, before the subscription came, and dropped what
    it read meanwhile (with 0.4.3, LangGraph's SDK suite's ``test_websocket_sync`` waited for
    values that never came on PostgreSQL). A subscription has every event of the log it lets
    through, the ones written before it included; an event two subscriptions let through is sent
    once."""
    thread_id = str(uuid.uuid4())
    _command(url, thread_id, "run.start", {"assistant_id": "agent", "input": _say("hi")})
    deadline = time.monotonic() + 30
    while httpx.get(f"{url}/threads/{thread_id}", timeout=10).json()["status"] != "idle":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    ws_url = url.replace("http://", "ws://")
    with connect(f"{ws_url}/threads/{thread_id}/stream/events") as socket:
        for cid, channels in ((1, ["lifecycle", "values"]), (2, ["lifecycle"])):
            body = {"id": cid, "method": "subscription.subscribe", "params": {"channels": channels}}
            socket.send(json.dumps(body))
        events: list[dict[str, Any]] = []
        while (
            not events
            or events[-1].get("method") != "lifecycle"
            or (events[-1]["params"]["data"]["event"] != "completed")
        ):
            events.append(json.loads(socket.recv(timeout=30)))
        answers = [e for e in events if e["type"] == "success"]
        assert [a["id"] for a in answers] == [1, 2]
        sent = [e for e in events if e["type"] == "event"]
        assert [e["method"] for e in sent if e["method"] == "lifecycle"] == ["lifecycle"] * 2
        assert any(e["method"] == "values" for e in sent)
        assert len({e["seq"] for e in sent}) == len(sent), "an event sent twice"
        with pytest.raises(TimeoutError):  # nothing more: each event once
            socket.recv(timeout=1)


def test_a_websocket_on_a_thread_not_made_yet_waits_for_its_run_start(url: str) -> None:
    """As the reference: the socket is not closed (it was, 4404, and the SDK's sync stream,
    opened before its ``run.start`` made the thread, then waited for values that never came:
    LangGraph's SDK suite's ``test_websocket_sync`` with 0.4.3 on PostgreSQL)."""
    thread_id = str(uuid.uuid4())
    ws_url = url.replace("http://", "ws://")
    with connect(f"{ws_url}/threads/{thread_id}/stream/events") as socket:
        body = {"channels": ["lifecycle"]}
        socket.send(json.dumps({"id": 1, "method": "subscription.subscribe", "params": body}))
        assert json.loads(socket.recv(timeout=10))["type"] == "success"
        with pytest.raises(TimeoutError):
            socket.recv(timeout=1)
        _command(url, thread_id, "run.start", {"assistant_id": "agent", "input": _say("hi")})
        seen = [json.loads(socket.recv(timeout=30))["params"]["data"]["event"] for _ in range(2)]
        assert seen == ["running", "completed"]


def test_a_websocket_subscribes_and_is_refused_what_it_may_not_do(url: str) -> None:
    ws_url = url.replace("http://", "ws://")
    with pytest.raises(InvalidStatus) as refused:
        connect(f"{ws_url}/threads/x/stream/events", origin=Origin("http://evil.example"))
    assert refused.value.response.status_code == 403
    thread_id = str(uuid.uuid4())
    _command(url, thread_id, "run.start", {"assistant_id": "agent", "input": _say("hi")})
    with connect(f"{ws_url}/threads/{thread_id}/stream/events") as socket:
        socket.send(json.dumps({"id": 7, "method": "subscription.subscribe", "params": {}}))
        assert json.loads(socket.recv(timeout=10))["error"] == "invalid_argument"
        subscribe = {
            "id": 8,
            "method": "subscription.subscribe",
            "params": {"channels": ["lifecycle"]},
        }
        socket.send(json.dumps(subscribe))
        assert json.loads(socket.recv(timeout=10)) == {
            "type": "success",
            "id": 8,
            "result": {"subscription_id": "1"},
        }
        seen: list[str] = []
        while not seen or seen[-1] != "completed":
            event = json.loads(socket.recv(timeout=30))
            assert event["method"] == "lifecycle"
            seen.append(event["params"]["data"]["event"])
        assert seen == ["running", "completed"]
