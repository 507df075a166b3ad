"""``/mcp``: every assistant an MCP tool (SPEC §25.2), as LangGraph Server serves it.

The Model Context Protocol over its Streamable HTTP transport, stateless and JSON only, as the
reference answers it: ``POST`` carries one JSON-RPC message (``initialize``, ``ping``,
``tools/list``, ``tools/call``; a notification or a response is acknowledged with 202), ``GET``
(no server stream) is 405, ``DELETE`` (no session) 404. A tool is an assistant: its name the
assistant's name made an MCP tool name (`tool_name`), its ``inputSchema`` the graph's input
schema (a list of LangChain messages is asked for as one user message, `simplify_schema`). A
call runs the assistant's graph as a stateless run, a durable queue entry like any other
(`Runs.create` on a thread of its own, joined), and answers its output as text (the Python
``repr`` of the values, as the reference) or, when the run failed, ``isError`` with the error's
type. The user's ``auth`` is asked what the reference's own calls would ask: ``assistants``
``search`` (and ``read`` for each tool), then ``threads`` ``create_run`` with the run's body.

Refused, never a 500: a body that is not JSON or not one JSON-RPC message, or an ``Accept``
without ``application/json`` or ``text/event-stream``, is 400 (the reference's status) with a
JSON-RPC error; a method's bad params are ``-32602``; an unknown method ``-32601``.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from durable_graph import __version__
from durable_graph.core.errors import NotFound, ValidationError
from durable_graph.service.assistants import Assistants
from durable_graph.service.auth import Denied, authorize_action
from durable_graph.service.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    RpcError,
    accepts,
    answer,
    error_response,
    parse,
)
from durable_graph.service.requests import BadRequest, Guarded, Json, until_disconnect
from durable_graph.service.runs import Runs
from durable_graph.service.schemas import served_schemas
from durable_graph.service.threads import Threads

log = logging.getLogger("durable_graph.service")

PROTOCOL_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The MCP revisions served; a client asking for another is offered the latest."""
PAGE: Final = 100
"""Tools one ``tools/list`` answers; ``nextCursor`` asks for the next page."""
MAX_TOOLS: Final = 1000
"""Assistants a ``tools/call`` looks among for its tool, as the reference."""
MAX_TOOL_NAME: Final = 128
_INVALID_TOOL_CHARS: Final = re.compile(r"[^a-zA-Z0-9_\-.]")
MESSAGE_TYPES: Final = frozenset(
    f"{kind}{suffix}"
    for kind in ("AI", "Human", "Chat", "System", "Function", "Tool")
    for suffix in ("Message", "MessageChunk")
)
"""LangChain's message classes, as a graph's input schema names them in ``$defs``."""
MESSAGE_SUPPORT_TYPES: Final = frozenset(
    {
        "ToolCall",
        "ToolCallChunk",
        "InvalidToolCall",
        "UsageMetadata",
        "InputTokenDetails",
        "OutputTokenDetails",
    }
)


def mcp_routes(
    assistants: Assistants, threads: Threads, runs: Runs, guarded: Guarded
) -> list[BaseRoute]:
    """``/mcp``, behind the token or the user's ``auth`` (each method asks its own actions)."""
    server = McpServer(assistants, threads, runs)
    return [Route("/mcp", guarded(server.endpoint), methods=["GET", "POST", "DELETE"])]


class McpServer:
    """The MCP methods over the service's assistants and runs."""

    def __init__(self, assistants: Assistants, threads: Threads, runs: Runs) -> None:
        self.assistants = assistants
        self.threads = threads
        self.runs = runs

    async def endpoint(self, request: Request) -> Response:
        if request.method == "GET":  # no stream of the server's own: as the reference
            return Response(status_code=405)
        if request.method == "DELETE":  # no session to end
            return Response(status_code=404)
        try:
            message = parse(await request.body())
        except RpcError as exc:
            return error_response(exc, status=400)
        if not accepts(request.headers.get("accept", ""), "application/json") and not accepts(
            request.headers.get("accept", ""), "text/event-stream"
        ):
            refused = "Accept header must include application/json or text/event-stream"
            return error_response(RpcError(INVALID_REQUEST, refused), status=400)
        if not isinstance(message, dict):
            refused = "Invalid message format: one JSON-RPC message, an object"
            return error_response(RpcError(INVALID_REQUEST, refused), status=400)
        if message.get("jsonrpc") != "2.0":
            refused = "Invalid JSON-RPC message: missing or invalid jsonrpc version"
            return error_response(RpcError(INVALID_REQUEST, refused), status=400)
        id_, method = message.get("id"), message.get("method")
        if id_ is not None and method:
            if isinstance(id_, bool) or not isinstance(id_, str | int):
                refused = "Invalid JSON-RPC request: id must be a string or a number"
                return error_response(RpcError(INVALID_REQUEST, refused), status=400)
            return Json(answer(id_, await self.call(request, method, message.get("params"))))
        if id_ is not None or method:  # a response or a notification: nothing to answer
            return Response(status_code=202)
        refused = "Invalid message format: neither a JSON-RPC request, response nor notification"
        return error_response(RpcError(INVALID_REQUEST, refused), status=400)

    async def call(
        self, request: Request, method: object, params: object
    ) -> dict[str, Any] | RpcError:
        """The result of ``method``, or its error; the store's refusals as JSON-RPC errors."""
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return RpcError(INVALID_PARAMS, "Invalid params: must be an object")
        try:
            if method == "initialize":
                return initialize(params)
            if method == "ping":
                return {}
            if method == "tools/list":
                return await self.tools_list(params)
            if method == "tools/call":
                return await self.tools_call(request, params)
            return RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
        except RpcError as exc:
            return exc
        except (BadRequest, ValidationError, NotFound) as exc:
            return RpcError(INVALID_PARAMS, str(exc))
        except Denied as exc:
            return RpcError(INVALID_PARAMS, f"Access denied: {exc.detail}")
        except Exception:  # a fault of ours: logged, never the client's traceback
            log.exception("mcp: %s failed", method)
            return RpcError(INTERNAL_ERROR, "Internal server error")

    async def tools_list(self, params: dict[str, Any]) -> dict[str, Any]:
        """A page of tools, one per assistant whose schema can be built (the first of each
        name); ``nextCursor`` (a string, as MCP's cursors are) when the page is full."""
        cursor = params.get("cursor")
        try:
            offset = max(int(cursor), 0) if cursor is not None else 0
        except (TypeError, ValueError):
            offset = 0  # as the reference: an unreadable cursor is the first page
        asked = await authorize_action("assistants", "search", {"limit": PAGE, "offset": offset})
        found = await self.assistants.search(
            {"limit": PAGE, "offset": offset, **_handler_metadata(asked)}
        )
        tools, names = [], set()
        schemas: dict[str, dict[str, Any] | None] = {}
        for assistant in found:
            name = tool_name(assistant["name"])
            if not name or name in names:
                log.warning("mcp: assistant %r: its tool name is taken", assistant["name"])
                continue
            names.add(name)
            try:
                await authorize_action(
                    "assistants", "read", {"assistant_id": assistant["assistant_id"]}
                )
            except Denied:
                continue  # the reference's read of its schemas would fail: not listed
            graph_id = assistant["graph_id"]
            if graph_id not in schemas:
                schemas[graph_id] = (await served_schemas(self.threads, graph_id))["input_schema"]
            if (tool := _tool(assistant, name, schemas[graph_id])) is not None:
                tools.append(tool)
        result: dict[str, Any] = {"tools": tools}
        if len(found) == PAGE:
            result["nextCursor"] = str(offset + PAGE)
        return result

    async def tools_call(self, request: Request, params: dict[str, Any]) -> dict[str, Any]:
        """Run the tool's assistant as a stateless run on ``arguments`` (its ``context`` too)
        and answer its output."""
        name = params.get("name")
        if not name or not isinstance(name, str):
            raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}")
        asked = await authorize_action("assistants", "search", {"limit": MAX_TOOLS})
        found = await self.assistants.search({"limit": MAX_TOOLS, **_handler_metadata(asked)})
        matching = [a for a in found if tool_name(a["name"]) == name]
        if not matching:
            raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}")
        if len(matching) > 1:
            raise RpcError(INVALID_PARAMS, "Multiple tools found with the same name.")
        body: dict[str, Any] = {
            "assistant_id": matching[0]["assistant_id"],
            "input": params.get("arguments", {}),
        }
        if params.get("context") is not None:
            body["context"] = params["context"]
        body = await authorize_action("threads", "create_run", body)
        entry = await self.runs.create(None, body)
        value = await until_disconnect(request, self.runs.join(entry))
        if isinstance(value, dict) and isinstance(value.get("__error__"), dict):
            text = str(value["__error__"].get("error"))
            return {"isError": True, "content": [{"type": "text", "text": text}]}
        return {"content": [{"type": "text", "text": repr(value)}]}


def initialize(params: dict[str, Any]) -> dict[str, Any]:
    """The handshake: the revision the client asks for when served, else the latest."""
    asked = params.get("protocolVersion")
    version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1]
    return {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "durable-graph", "version": __version__},
    }


def tool_name(name: object) -> str:
    """An assistant's name as an MCP tool name (``[a-zA-Z0-9_.-]{1,128}``): whitespace runs an
    underscore, other characters dropped, cut at 128 ('' when nothing is left)."""
    if not isinstance(name, str):
        return ""
    return _INVALID_TOOL_CHARS.sub("", re.sub(r"\s+", "_", name.strip()))[:MAX_TOOL_NAME]


def simplify_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A graph's input schema for a model to fill, as the reference gives it: LangChain's
    message definitions dropped, and a property that is a list of messages asked for as the
    user's one message (a string, which LangGraph's ``add_messages`` takes as a human one)."""
    defs = schema.get("$defs")
    if not isinstance(defs, dict) or not set(defs) & MESSAGE_TYPES:
        return schema
    kept = {k: v for k, v in defs.items() if k not in MESSAGE_TYPES | MESSAGE_SUPPORT_TYPES}
    simplified = {k: v for k, v in schema.items() if k != "$defs"}
    if kept:
        simplified["$defs"] = kept
    properties = schema.get("properties")
    if isinstance(properties, dict):
        simplified["properties"] = {
            key: (
                {
                    "type": "string",
                    "title": prop.get("title", key),
                    "description": "The user message to send to the agent.",
                }
                if _lists_messages(prop)
                else prop
            )
            for key, prop in properties.items()
        }
    return simplified


def _lists_messages(prop: object) -> bool:
    if not isinstance(prop, dict) or prop.get("type") != "array":
        return False
    items = prop.get("items") or {}
    options = (items.get("oneOf") or items.get("anyOf") or []) if isinstance(items, dict) else []
    return any(
        isinstance(o, dict) and str(o.get("$ref", "")).removeprefix("#/$defs/") in MESSAGE_TYPES
        for o in options
    )


def _tool(
    assistant: dict[str, Any], name: str, schema: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The tool of ``assistant``, None when its graph's input schema cannot be built."""
    if schema is None:
        log.warning("mcp: assistant %s has no input schema: not a tool", assistant["assistant_id"])
        return None
    input_schema = simplify_schema(schema)
    input_schema.setdefault("type", "object")  # MCP: an object's schema
    return {
        "name": name,
        "title": assistant["name"],
        "description": assistant.get("description")
        or f"Tool based on the {assistant['name']} assistant",
        "inputSchema": input_schema,
        "annotations": {
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": False,
            "openWorldHint": True,
        },
    }


def _handler_metadata(asked: dict[str, Any]) -> dict[str, Any]:
    """What an ``@auth.on.assistants.search`` handler added to the search (its ``metadata``)."""
    return {"metadata": asked["metadata"]} if isinstance(asked.get("metadata"), dict) else {}


__all__ = ["McpServer", "mcp_routes", "simplify_schema", "tool_name"]
