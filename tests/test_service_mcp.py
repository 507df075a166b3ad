"""``/mcp`` (SPEC §25.2) with the ``mcp`` package's own client over Streamable HTTP: every
assistant a tool, a call a stateless run of its graph (a durable queue entry), a failure an
``isError`` result, bad input a JSON-RPC error; on ``serve`` (SQLite, PostgreSQL) and, with
DURABLE_GRAPH_LANGGRAPH_DEV, on LangGraph's ``langgraph dev``, which serves ``/mcp`` by default."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent

from service_support import SERVED_KINDS, served_url

AUTH_CONFIG = Path(__file__).parent / "service_auth" / "langgraph.json"
JSON = {"accept": "application/json, text/event-stream"}
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
    with served_url(request, tmp_path_factory, AUTH_CONFIG, "svcmcp") as url:
        yield url, request.param


async def _session(url: str, token: str | None, work: Any) -> Any:
    """``work(session)`` in an initialized MCP session with ``url``'s ``/mcp``."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await work(session)


def _text(result: CallToolResult) -> str:
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
    return result.content[0].text


def test_mcp_client_lists_each_assistant_as_a_tool(served: tuple[str, str]) -> None:
    url, _ = served

    async def work(session: ClientSession) -> Any:
        return await session.list_tools()

    tools = asyncio.run(_session(url, None, work)).tools
    assert [t.name for t in tools] == ["agent"]
    tool = tools[0]
    assert tool.description == "Tool based on the agent assistant"
    # A list of LangChain messages is asked for as the user's one message, as the reference.
    assert tool.input_schema["type"] == "object"
    assert tool.input_schema["properties"]["messages"]["type"] == "string"
    assert "$defs" not in tool.input_schema


def test_mcp_tool_call_runs_the_graph_as_a_stateless_run(served: tuple[str, str]) -> None:
    url, target = served

    async def work(session: ClientSession) -> Any:
        asked = await session.call_tool("agent", {"messages": "lookup mcp owls"})
        listed = await session.call_tool(
            "agent", {"messages": [{"role": "user", "content": "lookup mcp bats"}]}
        )
        return asked, listed

    asked, listed = asyncio.run(_session(url, None, work))
    assert not asked.is_error and "'looked up mcp owls'" in _text(asked)
    assert not listed.is_error and "'looked up mcp bats'" in _text(listed)
    if target != "reference":  # its stateless runs delete their threads; ours keep them
        found = HTTP.post(f"{url}/threads/search", json={"limit": 100}).json()
        ran = [t for t in found if "lookup mcp owls" in str(t["values"])]
        assert len(ran) == 1, "one thread of its own"
        runs = HTTP.get(f"{url}/threads/{ran[0]['thread_id']}/runs").json()
        assert [r["status"] for r in runs] == ["success"]  # a queue entry like any run


def test_mcp_failed_run_is_an_error_result_and_unknown_tool_invalid_params(
    served: tuple[str, str],
) -> None:
    url, _ = served

    async def work(session: ClientSession) -> Any:
        failed = await session.call_tool("agent", {"messages": "weather mars"})
        with pytest.raises(MCPError) as unknown:
            await session.call_tool("nobody", {})
        return failed, unknown.value

    failed, unknown = asyncio.run(_session(url, None, work))
    assert failed.is_error and _text(failed) == "ValueError"  # the type, never a traceback
    assert unknown.code == -32602 and "Unknown tool: nobody" in str(unknown)


def test_mcp_transport_answers_as_the_reference(served: tuple[str, str]) -> None:
    url, _ = served
    mcp = f"{url}/mcp"
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
    shake = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}
    answered = HTTP.post(mcp, json=shake, headers=JSON)
    assert answered.status_code == 200
    assert answered.json()["id"] == 0
    assert answered.json()["result"]["protocolVersion"] == "2025-06-18"
    assert answered.json()["result"]["capabilities"] == {"tools": {"listChanged": False}}
    later = {**shake, "params": {**init, "protocolVersion": "2099-01-01"}}
    assert HTTP.post(mcp, json=later, headers=JSON).json()["result"]["protocolVersion"] == (
        "2025-11-25"
    )
    ping = HTTP.post(mcp, json={"jsonrpc": "2.0", "id": "p", "method": "ping"}, headers=JSON)
    assert ping.json() == {"jsonrpc": "2.0", "id": "p", "result": {}}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert HTTP.post(mcp, json=note, headers=JSON).status_code == 202
    assert HTTP.get(mcp, headers=JSON).status_code == 405  # no server stream
    assert HTTP.delete(mcp, headers=JSON).status_code == 404  # no session


def test_mcp_bad_input_is_a_jsonrpc_error_never_a_500(served: tuple[str, str]) -> None:
    url, target = served
    mcp = f"{url}/mcp"
    unknown = HTTP.post(mcp, json={"jsonrpc": "2.0", "id": 1, "method": "nope"}, headers=JSON)
    assert unknown.status_code == 200 and unknown.json()["error"]["code"] == -32601
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {}}
    assert HTTP.post(mcp, json=call, headers=JSON).json()["error"]["code"] == -32602
    broken = HTTP.post(mcp, content=b"{nope", headers={**JSON, "content-type": "application/json"})
    assert broken.status_code == 400
    assert HTTP.post(mcp, json={"id": 1, "method": "ping"}, headers=JSON).status_code == 400
    assert HTTP.post(mcp, json=[], headers=JSON).status_code == 400
    plain = {"accept": "text/plain"}
    assert (
        HTTP.post(
            mcp, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=plain
        ).status_code
        == 400
    )
    if target == "reference":
        return  # below, the reference answers 500 (its own bug) or a string where we say why
    assert broken.json()["error"]["code"] == -32700 and broken.json()["id"] is None
    params = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": []}
    assert HTTP.post(mcp, json=params, headers=JSON).json()["error"]["code"] == -32602
    bad = {"jsonrpc": "2.0", "id": 4, "method": "tools/call"}
    for arguments in ([1, 2], {"messages": 7}, "text"):
        answer = HTTP.post(
            mcp, json={**bad, "params": {"name": "agent", "arguments": arguments}}, headers=JSON
        )
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert "error" in body or body["result"]["isError"], body
        assert "Traceback" not in answer.text and ".py" not in answer.text
    listed = {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"cursor": None}}
    assert HTTP.post(mcp, json=listed, headers=JSON).json()["result"]["tools"]


def test_mcp_asks_the_users_auth(served_auth: tuple[str, str]) -> None:
    url, target = served_auth
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert HTTP.post(f"{url}/mcp", json=ping, headers=JSON).status_code == 401

    async def work(session: ClientSession) -> Any:
        tools = await session.list_tools()
        called = await session.call_tool("agent", {"messages": "lookup ada's own"})
        return tools, called

    tools, called = asyncio.run(_session(url, "token-ada", work))
    assert [t.name for t in tools.tools] == ["agent"]
    assert "looked up ada's own" in _text(called)
    if target == "reference":
        return  # its stateless run's thread is deleted once the run ends
    # The run's thread is ada's (her handler's metadata on it), unknown to bob.
    for token, seen in (("token-ada", 1), ("token-bob", 0)):
        found = HTTP.post(
            f"{url}/threads/search",
            json={"limit": 100},
            headers={"Authorization": f"Bearer {token}"},
        ).json()
        mine = [t for t in found if "lookup ada's own" in str(t["values"])]
        assert len(mine) == seen
        assert all(t["metadata"]["owner"] == "ada" for t in mine)
