"""``/a2a/{assistant_id}`` (SPEC §25.2) with the ``a2a-sdk`` client and the protocol's JSON-RPC:
the agent card, a message a task (its ``contextId`` the thread), an interrupt a task waiting for
input that a reply resumes, the stream, cancel, list, and bad input as JSON-RPC errors; on
``serve`` (SQLite, PostgreSQL) and, with DURABLE_GRAPH_LANGGRAPH_DEV, on ``langgraph dev``."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)

from service_support import SERVED_KINDS, served_url

AUTH_CONFIG = Path(__file__).parent / "service_auth" / "langgraph.json"
AGENT = "fe096781-5601-53d2-b2f6-0d3403f7e9ca"
"""The ``agent`` graph's assistant, the same id on both servers."""
JSON = {"accept": "application/json"}
HTTP = httpx.Client(timeout=60)
"""Every plain request of these tests: a run of the graph may take seconds on a loaded machine
(httpx's own default is 5 s)."""


@pytest.fixture(scope="module", params=SERVED_KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    with served_url(request, tmp_path_factory) as url:
        yield url, request.param


@pytest.fixture(scope="module", params=SERVED_KINDS)
def served_auth(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    with served_url(request, tmp_path_factory, AUTH_CONFIG, "svca2a") as url:
        yield url, request.param


def _rpc(
    url: str, method: str, params: Any, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
    answered = HTTP.post(f"{url}/a2a/{AGENT}", json=body, headers=headers or JSON)
    assert answered.status_code == 200, answered.text
    assert "Traceback" not in answered.text and ".py" not in answered.text
    found: dict[str, Any] = answered.json()
    assert found["id"] == body["id"]
    return found


def _message(text: str, **more: Any) -> dict[str, Any]:
    part = {"kind": "text", "text": text}
    return {"message": {"role": "user", "messageId": str(uuid.uuid4()), "parts": [part], **more}}


def _stream(url: str, params: Any) -> list[dict[str, Any]]:
    body = {"jsonrpc": "2.0", "id": 7, "method": "message/stream", "params": params}
    headers = {"accept": "text/event-stream"}
    with HTTP.stream("POST", f"{url}/a2a/{AGENT}", json=body, headers=headers) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        return [json.loads(line[5:]) for line in r.iter_lines() if line.startswith("data:")]


def test_agent_card_names_the_assistant_and_its_jsonrpc_url(served: tuple[str, str]) -> None:
    url, _ = served
    card = HTTP.get(f"{url}/a2a/{AGENT}/.well-known/agent-card.json").json()
    assert card == HTTP.get(f"{url}/a2a/{AGENT}").json()
    assert card["name"] == "agent"
    assert card["url"] == f"{url}/a2a/{AGENT}"
    assert card["supportedInterfaces"] == [
        {"url": f"{url}/a2a/{AGENT}", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    assert card["capabilities"]["streaming"] is True
    assert card["skills"][0]["metadata"]["inputSchema"]["supportsA2A"] is True
    root = HTTP.get(f"{url}/.well-known/agent-card.json", params={"assistant_id": AGENT})
    assert root.json()["url"] == card["url"]
    unknown = HTTP.get(f"{url}/a2a/{uuid.uuid4()}")
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == -32602
    assert HTTP.get(f"{url}/.well-known/agent-card.json").status_code == 400


def test_a2a_sdk_client_sends_a_message_and_gets_its_task(served: tuple[str, str]) -> None:
    url, _ = served

    async def talk() -> tuple[Any, Any]:
        client = await create_client(f"{url}/a2a/{AGENT}", ClientConfig(streaming=False))
        message = Message(message_id="m1", role=Role.ROLE_USER, parts=[Part(text="lookup owls")])
        answers = [a async for a in client.send_message(SendMessageRequest(message=message))]
        task = answers[-1].task
        return task, await client.get_task(GetTaskRequest(id=task.id))

    task, got = asyncio.run(talk())
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [p.text for a in task.artifacts for p in a.parts] == ["looked up owls"]
    assert [p.text for m in task.history for p in m.parts] == ["lookup owls", "looked up owls"]
    assert task.id == f"{task.context_id}:{task.id.split(':', 1)[1]}"  # the thread and its run
    assert got.status.state == TaskState.TASK_STATE_COMPLETED and got.id == task.id


def test_a_task_waiting_for_input_is_resumed_by_a_reply(served: tuple[str, str]) -> None:
    url, target = served
    asked = _rpc(url, "message/send", _message("ask me"))["result"]
    assert asked["status"]["state"] == "input-required"
    assert asked["artifacts"][0]["name"] == "Interrupt"
    assert asked["artifacts"][0]["parts"][0]["data"]["value"] == "what is your name?"
    task_id, context_id = asked["id"], asked["contextId"]
    got = _rpc(url, "tasks/get", {"id": task_id})["result"]
    assert got["status"]["state"] == "input-required"
    # The context is a thread like any other: the run API sees it.
    thread = HTTP.get(f"{url}/threads/{context_id}").json()
    assert thread["status"] == "interrupted"
    replied = _rpc(url, "message/send", _message("ada", taskId=task_id, contextId=context_id))
    done = replied["result"]
    assert done["id"] == task_id and done["status"]["state"] == "completed"
    assert done["artifacts"][0]["parts"] == [{"kind": "text", "text": "hello ada"}]
    assert [m["role"] for m in done["history"]] == ["user", "agent"]
    later = _rpc(url, "GetTask", {"id": task_id, "historyLength": 1})["result"]
    assert later["status"]["state"] == "TASK_STATE_COMPLETED"  # 1.0's names for 1.0's methods
    assert [m["parts"][0]["text"] for m in later["history"]] == ["hello ada"]
    again = _rpc(url, "message/send", _message("more", taskId=task_id, contextId=context_id))
    assert again["error"]["code"] == -32004  # an ended task takes no more messages
    listed = _rpc(url, "ListTasks", {"contextId": context_id, "historyLength": 0})["result"]
    assert [t["id"] for t in listed["tasks"]] == [task_id]
    assert listed["tasks"][0]["status"]["state"] == "TASK_STATE_COMPLETED"
    if target != "reference":
        runs = HTTP.get(f"{url}/threads/{context_id}/runs").json()
        assert len(runs) == 2 and {r["status"] for r in runs} == {"success"}  # queue entries


def test_a_failed_run_is_a_failed_task_without_its_traceback(served: tuple[str, str]) -> None:
    url, _ = served
    failed = _rpc(url, "message/send", _message("weather mars"))["result"]
    assert failed["status"]["state"] == "failed"
    said = failed["status"]["message"]["parts"][0]["text"]
    assert said == "Error executing assistant: ValueError"


def test_message_stream_sends_the_task_the_words_and_the_end(served: tuple[str, str]) -> None:
    url, _ = served
    events = [e["result"] for e in _stream(url, _message("lookup dogs"))]
    assert events[0]["kind"] == "task" and events[0]["status"]["state"] == "submitted"
    assert events[0]["history"][0]["parts"] == [{"kind": "text", "text": "lookup dogs"}]
    working = [e for e in events if e.get("kind") == "status-update" and not e["final"]]
    assert [w["status"]["message"]["parts"][0]["text"] for w in working] == ["looked up dogs"]
    artifact, last = events[-2], events[-1]
    assert artifact["kind"] == "artifact-update" and artifact["lastChunk"] is True
    assert artifact["artifact"]["parts"] == [{"kind": "text", "text": "looked up dogs"}]
    assert last["kind"] == "status-update" and last["final"] is True
    assert last["status"]["state"] == "completed"
    # A chat model's tokens: each update the message so far.
    words = [
        e["result"]["status"]["message"]["parts"][0]["text"]
        for e in _stream(url, _message("hi"))
        if e["result"].get("kind") == "status-update" and not e["result"]["final"]
    ]
    assert len(words) > 3 and words[-1] == "I am a durable agent, streaming one token at a time"
    assert all(words[i + 1].startswith(words[i]) for i in range(len(words) - 1))
    asked = [e["result"] for e in _stream(url, _message("ask in a stream"))]
    assert asked[-2]["artifact"]["name"] == "Interrupt"
    assert asked[-1]["status"]["state"] == "input-required" and asked[-1]["final"] is True
    failed = [e["result"] for e in _stream(url, _message("weather venus"))]
    assert failed[-1]["status"]["state"] == "failed" and failed[-1]["final"] is True
    assert "venus" in failed[-1]["status"]["message"]["parts"][0]["text"]


def test_cancel_ends_a_task_waiting_for_input(served: tuple[str, str]) -> None:
    url, _ = served
    asked = _rpc(url, "message/send", _message("ask to cancel"))["result"]
    cancelled = _rpc(url, "tasks/cancel", {"id": asked["id"]})["result"]
    assert cancelled["status"]["state"] == "canceled"
    got = _rpc(url, "tasks/get", {"id": asked["id"]})["result"]
    assert got["status"]["state"] == "canceled"
    again = _rpc(url, "tasks/cancel", {"id": asked["id"]})
    assert again["error"]["code"] == -32002


def test_bad_input_is_a_jsonrpc_error_never_a_500(served: tuple[str, str]) -> None:
    url, _ = served
    a2a = f"{url}/a2a/{AGENT}"

    def code(body: Any, where: str = a2a) -> int:
        answered = HTTP.post(where, json=body, headers=JSON)
        assert answered.status_code == 200, answered.text
        found: int = answered.json()["error"]["code"]
        return found

    ok = {"role": "user", "messageId": "q", "parts": [{"text": "x"}]}
    send = {"jsonrpc": "2.0", "id": 1, "method": "message/send"}
    assert code([]) == -32600
    assert code({"id": 1, "method": "message/send"}) == -32600
    assert code({"jsonrpc": "2.0", "id": 1}) == -32600
    assert code({"jsonrpc": "2.0", "id": 1, "method": "foo"}) == -32601
    assert code({**send, "params": []}) == -32602
    assert code({**send, "params": {"message": {**ok, "messageId": None}}}) == -32602
    assert code({**send, "params": {"message": {**ok, "parts": [{"foo": 1}]}}}) == -32005
    assert code({**send, "params": {"message": {**ok, "parts": "text"}}}) == -32602
    assert code({**send, "params": {"message": ok, "configuration": {"historyLength": 11}}}) == (
        -32602
    )
    assert code({**send, "params": {"message": {**ok, "contextId": 7}}}) == -32602
    assert code({**send, "params": {"message": {**ok, "taskId": "a:b"}}}) == -32001
    get = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get"}
    assert code({**get, "params": {}}) == -32602
    assert code({**get, "params": {"id": f"{uuid.uuid4()}:{uuid.uuid4()}"}}) == -32001
    assert code({**send, "params": {"message": ok}}, f"{url}/a2a/not-a-uuid") == -32602
    assert code({**send, "params": {"message": ok}}, f"{url}/a2a/{uuid.uuid4()}") == -32602
    broken = HTTP.post(a2a, content=b"{nope", headers={**JSON, "content-type": "application/json"})
    assert broken.status_code == 200 and broken.json()["error"]["code"] == -32700
    sent = {**send, "params": {"message": ok}}
    assert HTTP.post(a2a, json=sent, headers={"accept": "text/event-stream"}).status_code == 400
    assert HTTP.delete(a2a).status_code == 405


def test_a2a_asks_the_users_auth(served_auth: tuple[str, str]) -> None:
    url, _ = served_auth
    ada, bob = ({"Authorization": f"Bearer token-{who}", **JSON} for who in ("ada", "bob"))
    ping = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}}
    assert HTTP.post(f"{url}/a2a/{AGENT}", json=ping, headers=JSON).status_code == 401
    mine = _rpc(url, "message/send", _message("lookup ada's task"), ada)["result"]
    assert mine["status"]["state"] == "completed"
    assert _rpc(url, "tasks/get", {"id": mine["id"]}, ada)["result"]["id"] == mine["id"]
    # Another user's task is as unknown as a missing one; so is its context.
    assert _rpc(url, "tasks/get", {"id": mine["id"]}, bob)["error"]["code"] == -32001
    assert _rpc(url, "tasks/cancel", {"id": mine["id"]}, bob)["error"]["code"] == -32001
    listed = _rpc(url, "ListTasks", {"contextId": mine["contextId"]}, bob)["result"]
    assert listed["tasks"] == []
    thread = HTTP.get(f"{url}/threads/{mine['contextId']}", headers=ada).json()
    assert thread["metadata"]["owner"] == "ada"
    assert HTTP.get(f"{url}/threads/{mine['contextId']}", headers=bob).status_code == 404
    # Nor may bob write into ada's context.
    sent = _rpc(url, "message/send", _message("lookup bob's", contextId=mine["contextId"]), bob)
    assert "error" in sent
