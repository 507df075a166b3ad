"""``/a2a/{assistant_id}``: every assistant an A2A agent (SPEC §25.2), as LangGraph Server serves it.

The Agent2Agent protocol's JSON-RPC binding: ``SendMessage`` (``message/send``),
``SendStreamingMessage`` (``message/stream``, server-sent events), ``GetTask`` (``tasks/get``),
``CancelTask`` (``tasks/cancel``), ``ListTasks`` and ``GetExtendedAgentCard``; the agent card at
``GET /a2a/{assistant_id}``, its ``.well-known/agent-card.json`` and the domain's
``/.well-known/agent-card.json?assistant_id=``. A task is a run: its ``contextId`` the thread,
its id ``{thread_id}:{run_id}``; a message sent to a task waiting for input (an ``interrupt()``)
resumes it (its text, or a data part's ``resume``), and the runs that go on with a task carry
its id in their metadata (``a2a.task_id``). Every message is a run through `Runs` (a durable
queue entry, on a thread made when the context is new), joined or streamed. The spec's slash
names are answered in its lower-case names (``completed``, ``agent``), the 1.0 names in 1.0's
(``TASK_STATE_COMPLETED``, ``ROLE_AGENT``, a result ``{"task": ...}``), as the reference does.

The user's ``auth`` is asked what the reference's own calls would ask: ``assistants`` ``read``,
``threads`` ``read`` for a task, ``create_run`` for a message, ``update`` for a cancel, ``search``
for a list; another user's task is as unknown as a missing one (``-32001``).

Refused, never a 500: JSON-RPC's own errors (``-32700`` to ``-32602``) and A2A's (``-32001`` task
not found, ``-32002`` not cancelable, ``-32004`` a message to an ended task, ``-32005`` a part
that cannot be input), in a 200 answer as JSON-RPC over HTTP gives them; an ``Accept`` that
allows neither JSON nor (for a stream) events is 400, as the reference.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from durable_graph import __version__
from durable_graph.core.errors import NotFound, StoreError, ThreadBusy, ValidationError
from durable_graph.core.model import QueueEntry
from durable_graph.service import a2a_messages as msgs
from durable_graph.service.a2a_messages import PartsRefused, now, to_spec
from durable_graph.service.a2a_tasks import (
    SCOPE_HEADER,
    Tasks,
    a2a_of,
    history_length,
    history_scope,
    task_id_of,
    task_params,
)
from durable_graph.service.assistants import Assistants
from durable_graph.service.auth import Denied, authorize_action
from durable_graph.service.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    Id,
    RpcError,
    accepts,
    answer,
    error_response,
    parse,
    valid_id,
)
from durable_graph.service.records import check_thread_id, run_id_of
from durable_graph.service.requests import BadRequest, Guarded, Json, dumps, until_disconnect
from durable_graph.service.runs import Runs
from durable_graph.service.schemas import served_schemas
from durable_graph.service.threads import Threads

log = logging.getLogger("durable_graph.service")

TASK_NOT_FOUND: Final = -32001
TASK_NOT_CANCELABLE: Final = -32002
UNSUPPORTED_OPERATION: Final = -32004
CONTENT_TYPE_NOT_SUPPORTED: Final = -32005
SLASH_NAMES: Final = {
    "message/send": "SendMessage",
    "message/stream": "SendStreamingMessage",
    "tasks/get": "GetTask",
    "tasks/cancel": "CancelTask",
}
METHODS: Final = frozenset({*SLASH_NAMES.values(), "ListTasks", "GetExtendedAgentCard"})
SCOPE_EXTENSION: Final = "https://langchain.com/a2a/extensions/history-scope/v1"
MODES: Final = ["application/json", "text/plain"]


def a2a_routes(
    assistants: Assistants, threads: Threads, runs: Runs, guarded: Guarded
) -> list[BaseRoute]:
    """The A2A paths, behind the token or the user's ``auth`` (each method asks its own)."""
    server = A2aServer(assistants, threads, runs)
    methods = ["GET", "POST", "DELETE"]
    return [
        Route("/a2a/{assistant_id}", guarded(server.endpoint), methods=methods),
        Route(
            "/a2a/{assistant_id}/",
            guarded(server.endpoint),
            methods=methods,
            include_in_schema=False,  # the same path with its slash, as the reference
        ),
        Route("/a2a/{assistant_id}/.well-known/agent-card.json", guarded(server.card)),
        Route("/a2a/{assistant_id}/.well-known/agent.json", guarded(server.card)),
        Route("/.well-known/agent-card.json", guarded(server.card)),
    ]


@dataclass(frozen=True, slots=True)
class Sending:
    """A message checked and its run made: what the answer of ``SendMessage`` is built from."""

    entry: QueueEntry
    task_id: str
    message: dict[str, Any]
    length: int | None
    scope: str
    task_ids: dict[str, str]


class A2aServer:
    """The A2A methods over the service's assistants, threads and runs."""

    def __init__(self, assistants: Assistants, threads: Threads, runs: Runs) -> None:
        self.assistants = assistants
        self.threads = threads
        self.runs = runs
        self.tasks = Tasks(threads, runs)

    # --- HTTP --------------------------------------------------------------------------------

    async def endpoint(self, request: Request, assistant_id: str) -> Response:
        if request.method == "GET":  # the agent's URL: its card
            return await self.card(request, assistant_id)
        if request.method != "POST":
            return Response(status_code=405)
        try:
            message = parse(await request.body())
        except RpcError as exc:
            return error_response(RpcError(exc.code, "Invalid JSON payload"))
        if not isinstance(message, dict):
            return error_response(
                RpcError(INVALID_REQUEST, "Invalid message format: expected object")
            )
        id_, method = message.get("id"), message.get("method")
        if message.get("jsonrpc") != "2.0":
            refused = "Invalid JSON-RPC message: missing or invalid jsonrpc version"
            return error_response(
                RpcError(INVALID_REQUEST, refused), id_ if valid_id(id_) else None
            )
        spec = isinstance(method, str) and method in SLASH_NAMES
        method = SLASH_NAMES.get(method, method) if isinstance(method, str) else method
        if not valid_id(id_):
            refused = "Invalid JSON-RPC request: 'id' must be a string, number, or null"
            return error_response(RpcError(INVALID_REQUEST, refused))
        if method is not None and not isinstance(method, str):
            refused = "Method not found: method must be a string"
            return error_response(RpcError(METHOD_NOT_FOUND, refused), id_)
        if method is not None and method not in METHODS:
            return error_response(RpcError(METHOD_NOT_FOUND, f"Method not found: {method}"), id_)
        params = message.get("params", {})
        if method in ("SendMessage", "SendStreamingMessage"):
            if not isinstance(params, dict):
                refused = "Invalid params: must be an object"
                return error_response(RpcError(INVALID_PARAMS, refused), id_)
            if not isinstance(params.get("message"), dict) or not params["message"]:
                refused = "Missing or invalid 'message' in params"
                return error_response(RpcError(INVALID_PARAMS, refused), id_)
        streaming = method == "SendStreamingMessage"
        wanted = "text/event-stream" if streaming else "application/json"
        if not accepts(request.headers.get("accept", ""), wanted):
            refused = f"Accept header must include {wanted}" + (
                " for streaming" if streaming else ""
            )
            return error_response(RpcError(INVALID_REQUEST, refused), id_, status=400)
        if id_ is not None and method:
            if not isinstance(params, dict):
                params = {}  # as the reference: the methods find what they need missing
            return await self.request(request, id_, method, params, assistant_id, spec)
        if id_ is not None and ("result" in message or "error" in message):
            return Response(status_code=202)  # a response: nothing to answer
        if id_ is not None:
            refused = "Invalid JSON-RPC request: missing 'method' field"
            return error_response(RpcError(INVALID_REQUEST, refused), id_)
        refused = "Invalid message format: must be a JSON-RPC request or notification"
        return error_response(RpcError(INVALID_REQUEST, refused))

    async def request(
        self,
        request: Request,
        id_: Id,
        method: str,
        params: dict[str, Any],
        assistant_id: str,
        spec: bool,
    ) -> Response:
        """One method's answer (a stream of them for ``SendStreamingMessage``)."""
        try:
            assistant_id = str(uuid.UUID(assistant_id))
        except ValueError:
            refused = RpcError(INVALID_PARAMS, "Invalid assistant ID: must be a UUID")
            return error_response(refused, id_)
        if method == "SendStreamingMessage":
            return StreamingResponse(
                self.stream(request, id_, params, assistant_id, spec),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-store"},
            )
        try:
            outcome: dict[str, Any] | RpcError = await _guarded(
                self.call(request, method, params, assistant_id)
            )
        except RpcError as exc:
            outcome = exc
        body = answer(id_, outcome)
        return Json(to_spec(body) if spec else body)

    async def call(
        self, request: Request, method: str, params: dict[str, Any], assistant_id: str
    ) -> dict[str, Any]:
        if method == "SendMessage":
            sending = await self.send(request, params, assistant_id)
            values = await until_disconnect(request, self.runs.join(sending.entry))
            return {"task": self.task_json(sending, values, assistant_id)}
        if method == "GetTask":
            return await self.get_task(request, params, assistant_id)
        if method == "CancelTask":
            return await self.cancel_task(params, assistant_id)
        if method == "ListTasks":
            return await self.tasks.list(request, params, assistant_id)
        return await self.agent_card(request, assistant_id)  # GetExtendedAgentCard

    async def card(self, request: Request, assistant_id: str | None = None) -> Response:
        """The agent card (400 with a JSON-RPC error object when there is none, as the
        reference); the domain's names its agent by ``?assistant_id=``."""
        assistant_id = (
            assistant_id
            or request.query_params.get("assistant_id")
            or os.environ.get("DEFAULT_A2A_ASSISTANT_ID")
        )
        try:
            if not assistant_id:
                raise RpcError(INVALID_PARAMS, "Missing required query parameter: assistant_id")
            return JSONResponse(await _guarded(self.agent_card(request, assistant_id)))
        except RpcError as exc:
            status = 500 if exc.code == INTERNAL_ERROR else 400
            return JSONResponse({"error": exc.json()}, status_code=status)

    # --- the methods ---------------------------------------------------------------------------

    async def send(
        self, request: Request, params: dict[str, Any], assistant_id: str, stream: bool = False
    ) -> Sending:
        """Check a message as the reference checks it, in its order, and make its run (its
        ``messages`` streamed too with ``stream``)."""
        configuration = params.get("configuration")
        if configuration is None:
            configuration = {}
        if not isinstance(configuration, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: 'configuration' must be an object")
        length = history_length(configuration.get("historyLength"))
        scope = history_scope(configuration, request)
        message = params.get("message")
        if not isinstance(message, dict) or not message:
            raise RpcError(INVALID_PARAMS, "Missing 'message' in params")
        if not message.get("messageId"):
            raise RpcError(INVALID_PARAMS, "Missing required 'messageId' in message")
        if not message.get("role"):
            raise RpcError(INVALID_PARAMS, "Missing required 'role' in message")
        parts = message.get("parts", [])
        if not isinstance(parts, list):
            raise RpcError(INVALID_PARAMS, "Invalid params: 'parts' must be an array")
        if not parts:
            raise RpcError(INVALID_PARAMS, "Message must contain at least one part")
        assistant = await self.assistant(assistant_id)
        await self.check_takes_messages(assistant, parts)
        context_id, task_id = message.get("contextId"), message.get("taskId")
        if context_id is not None and not isinstance(context_id, str):
            raise RpcError(INVALID_PARAMS, "contextId must be a string")
        if task_id is not None and not isinstance(task_id, str):
            raise RpcError(INVALID_PARAMS, "taskId must be a string")
        task_ids: dict[str, str] = {}
        start_id = None
        if task_id is None:
            thread_id = context_id or str(uuid.uuid4())
            start_id = str(uuid.uuid4())
            mark = {"task_start_id": start_id}
        else:
            task = await self.tasks.resolve(task_id, context_id, assistant_id)
            if task is None:
                raise RpcError(TASK_NOT_FOUND, f"Task not found: {task_id}")
            if task.state in msgs.TERMINAL_STATES:
                refused = "A terminal task cannot accept another message"
                raise RpcError(UNSUPPORTED_OPERATION, refused)
            thread_id, task_ids, mark = task.context_id, task.task_ids, {"task_id": task_id}
        if any(msgs.is_a2ui(p) for p in parts):
            raise RpcError(INVALID_PARAMS, "A2UI is not enabled for this agent")
        try:
            role = str(message.get("role"))
            run_input = msgs.run_input(parts, role, str(message["messageId"]), mark)
        except PartsRefused as exc:
            raise RpcError(CONTENT_TYPE_NOT_SUPPORTED, str(exc)) from None
        command = await self.command(message, parts, run_input, context_id, thread_id, task_id)
        body: dict[str, Any] = {
            "thread_id": thread_id,
            "assistant_id": assistant_id,
            "input": run_input or None,
            "metadata": {"a2a": mark},
            "if_not_exists": "create",
        }
        if command is not None:
            body["command"] = command
        if stream:
            body["stream_mode"] = ["messages", "values"]
        if params.get("context") is not None:
            body["context"] = params["context"]
        entry = await self.create_run(body)
        if task_id is None:
            task_id = f"{entry.thread_id}:{run_id_of(entry.entry_id)}"
            task_ids = await self.tasks.task_ids(entry.thread_id, assistant_id)
            task_ids.setdefault(str(start_id), task_id)
        return Sending(entry, task_id, message, length, scope, task_ids)

    async def command(
        self,
        message: dict[str, Any],
        parts: list[Any],
        run_input: dict[str, Any],
        context_id: str | None,
        thread_id: str,
        task_id: str | None,
    ) -> dict[str, Any] | None:
        """The run's ``Command``: the message's own (LangGraph's extension), else a resume of a
        task waiting for input, by a data part's ``resume`` or the message's text (taken out
        of ``run_input``)."""
        command = message.get("command")
        if command is not None:
            if not isinstance(command, dict):
                raise RpcError(INVALID_PARAMS, "command: must be an object (resume, update, goto)")
            if command.get("resume") and not context_id:
                refused = "contextId is required when resuming a task with command.resume"
                raise RpcError(INVALID_PARAMS, refused)
            if command.get("resume") and task_id is None:
                raise RpcError(INVALID_PARAMS, "taskId is required when resuming a task")
            return command
        try:
            found, value = msgs.resume_of_parts(parts)
        except ValueError as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from None
        context_id = thread_id if task_id is not None else context_id
        if found:
            if not context_id or not task_id:
                refused = "contextId and taskId are required when resuming a task"
                raise RpcError(INVALID_PARAMS, refused)
            if not await self.tasks.waits_for_input(context_id):
                raise RpcError(INVALID_PARAMS, "Task is not awaiting input")
            run_input.pop("resume", None)
            return {"resume": value}
        text = msgs.text_of_parts(parts)
        if text is None or not context_id or not task_id:
            return None
        if not await self.tasks.waits_for_input(context_id):
            return None
        run_input.pop("messages", None)
        return {"resume": text}

    async def stream(
        self, request: Request, id_: Id, params: dict[str, Any], assistant_id: str, spec: bool
    ) -> AsyncIterator[bytes]:
        """``SendStreamingMessage``: the task as submitted, its agent's words as they come
        (``working`` updates), then its answer (an artifact) and its last state (``final``)."""

        def event(outcome: dict[str, Any] | RpcError) -> bytes:
            body = answer(id_, outcome)
            return (
                b"event: message\r\ndata: " + dumps(to_spec(body) if spec else body) + b"\r\n\r\n"
            )

        try:
            sending = await _guarded(self.send(request, params, assistant_id, stream=True))
        except RpcError as exc:
            yield event(exc)
            return
        task_id, context_id = sending.task_id, sending.entry.thread_id
        sent = {"kind": "message", **sending.message, "taskId": task_id, "contextId": context_id}
        submitted = {"state": "TASK_STATE_SUBMITTED", "timestamp": now()}
        ids = {"taskId": task_id, "contextId": context_id}
        task = {"kind": "task", "id": task_id, "contextId": context_id, "history": [sent]}
        yield event({"task": {**task, "status": submitted}})
        try:
            async for name, data, _ in self.runs.events(sending.entry, ["messages"]):
                said = msgs.stream_message(data, task_id, context_id)
                if name.startswith("messages/") and said is not None:
                    yield event(said)
            values = await self.runs.join(sending.entry)
        except (NotFound, StoreError):  # its thread deleted meanwhile, the store gone
            log.warning("a2a: the stream of task %s ended early", task_id, exc_info=True)
            yield event(RpcError(INTERNAL_ERROR, "Internal server error"))
            return
        values = values if isinstance(values, dict) else {"values": values}
        if isinstance(values.get("__error__"), dict):
            said = msgs.agent_message(str(values["__error__"].get("message")), task_id, context_id)
            failed = {"state": "TASK_STATE_FAILED", "message": said, "timestamp": now()}
            yield event({**ids, "kind": "status-update", "status": failed, "final": True})
            return
        if "__interrupt__" in values:
            artifact = msgs.interrupt_artifact(values["__interrupt__"])
            yield event({**ids, "kind": "artifact-update", "artifact": artifact})
            state = "TASK_STATE_INPUT_REQUIRED"
        else:
            artifact = msgs.response_artifact(msgs.response_parts(values), assistant_id)
            update = {"kind": "artifact-update", "artifact": artifact, "append": False}
            yield event({**ids, **update, "lastChunk": True})
            state = "TASK_STATE_COMPLETED"
        last = {"state": state, "timestamp": now()}
        yield event({**ids, "kind": "status-update", "status": last, "final": True})

    async def get_task(
        self, request: Request, params: dict[str, Any], assistant_id: str
    ) -> dict[str, Any]:
        task_id, context_id = task_params(params)
        task = await self.tasks.resolve(task_id, context_id, assistant_id)
        if task is None:
            where = f" in context '{context_id}'" if context_id else ""
            raise RpcError(TASK_NOT_FOUND, f"Task not found: {task_id}{where}")
        length = history_length(params.get("historyLength"))
        scope = history_scope(params, request)
        status: dict[str, Any] = {"state": task.state, "timestamp": task.run["updated_at"]}
        found: dict[str, Any] = {"kind": "task", "id": task.task_id, "contextId": task.context_id}
        found["status"] = status
        if length != 0:
            messages = await self.tasks.run_messages(task)
            found["history"] = msgs.history(
                messages, task.task_id, task.context_id, length, scope, task.task_ids
            )
        if task.state == "TASK_STATE_COMPLETED":
            status["message"] = msgs.agent_message("Task completed successfully", task.task_id)
        elif task.state == "TASK_STATE_FAILED":
            said = f"Task failed with status: {task.run['status']}"
            status["message"] = msgs.agent_message(said, task.task_id)
        return found

    async def cancel_task(self, params: dict[str, Any], assistant_id: str) -> dict[str, Any]:
        """Cancel the task's run; a task waiting for input is ended (its interrupt answered by
        nothing, ``as_node`` ``__end__``) and marked by a cancelled run of its own, as the
        reference does."""
        task_id, context_id = task_params(params)
        task = await self.tasks.resolve(task_id, context_id, assistant_id)
        if task is None:
            raise RpcError(TASK_NOT_FOUND, f"Task not found: {task_id}")
        if task.state in msgs.TERMINAL_STATES:
            raise RpcError(TASK_NOT_CANCELABLE, "Task is not cancelable in its current state")
        ctx = task.context_id
        try:
            if task.state == "TASK_STATE_INPUT_REQUIRED":
                mark = {**a2a_of(task.run), "task_id": task_id_of(ctx, task.run)}
                marker = {"assistant_id": assistant_id, "metadata": {"a2a": mark}}
                entry = await self.create_run({**marker, "thread_id": ctx, "after_seconds": 3600})
                await self.runs.cancel_unless_ended(entry)
                await authorize_action("threads", "update", {"thread_id": ctx})
                await self.threads.update_state(ctx, None, "__end__", None)
            elif task.run["status"] not in ("pending", "running"):
                raise RpcError(TASK_NOT_CANCELABLE, "Task has no active run to cancel")
            else:
                await authorize_action("threads", "update", {"thread_id": ctx})
                entry = await self.runs.entry(ctx, task.run["run_id"])
                await self.runs.cancel_unless_ended(entry)
                await self.runs.join(entry, timedelta(seconds=30))
        except (ValidationError, NotFound, ThreadBusy) as exc:
            raise RpcError(INTERNAL_ERROR, f"Failed to cancel task: {exc}") from None
        said = msgs.agent_message("Task was canceled", task_id)
        status = {"state": "TASK_STATE_CANCELED", "timestamp": now(), "message": said}
        return {"kind": "task", "id": task_id, "contextId": ctx, "status": status}

    async def agent_card(self, request: Request, assistant_id: str) -> dict[str, Any]:
        """The assistant as an A2A agent: one skill (itself), JSON-RPC at ``/a2a/{id}``."""
        assistant = await self.assistant(assistant_id)
        schemas = await served_schemas(self.threads, assistant["graph_id"])
        schema = schemas.get("input_schema") or schemas.get("state_schema") or {}
        properties = schema.get("properties") or {}
        name = assistant["name"]
        description = assistant.get("description") or f"{name} assistant"
        inputs, outputs = _modes(assistant)
        url = f"{_base_url(request, assistant_id)}/a2a/{assistant_id}"
        scope = {
            "uri": SCOPE_EXTENSION,
            "description": "Choose task-only or full-context response history",
            "required": False,
            "params": {
                "header": SCOPE_HEADER,
                "values": ["context", "task"],
                "default": "context",
                "methods": ["SendMessage", "GetTask", "ListTasks"],
            },
        }
        skill = {
            "id": f"{assistant['assistant_id']}-main",
            "name": f"{name} Capabilities",
            "description": description,
            "tags": ["assistant", "langgraph"],
            "examples": [],
            "inputModes": inputs,
            "outputModes": outputs,
            "metadata": {
                "inputSchema": {
                    "required": schema.get("required") or [],
                    "properties": sorted(properties),
                    "supportsA2A": "messages" in properties,
                }
            },
        }
        return {
            "name": name,
            "description": description,
            "url": url,
            "supportedInterfaces": [
                {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
            "capabilities": {
                "streaming": True,
                "pushNotifications": False,
                "stateTransitionHistory": False,
                "extensions": [scope],
            },
            "defaultInputModes": inputs,
            "defaultOutputModes": outputs,
            "skills": [skill],
            "version": __version__,
        }

    # --- what the methods read and make ----------------------------------------------------------

    async def assistant(self, assistant_id: str) -> dict[str, Any]:
        await authorize_action("assistants", "read", {"assistant_id": assistant_id})
        try:
            return await self.assistants.get(assistant_id)
        except NotFound:
            raise RpcError(INVALID_PARAMS, f"Assistant '{assistant_id}' not found") from None
        except ValidationError as exc:
            refused = f"Failed to get assistant '{assistant_id}': {exc}"
            raise RpcError(INVALID_PARAMS, refused) from None

    async def check_takes_messages(self, assistant: dict[str, Any], parts: list[Any]) -> None:
        """Text and file parts are messages: the graph's input must have ``messages``."""
        if not any(
            isinstance(p, dict) and ("text" in p or "file" in p or msgs.is_a2ui(p)) for p in parts
        ):
            return
        schemas = await served_schemas(self.threads, assistant["graph_id"])
        schema = schemas.get("input_schema") or schemas.get("state_schema")
        if not schema:
            raise RpcError(
                INVALID_PARAMS,
                f"Assistant '{assistant['assistant_id']}' has no input schema defined. A2A "
                "conversational agents using text or file parts must have an input schema "
                "with a 'messages' field.",
            )
        properties = schema.get("properties") or {}
        if "messages" not in properties:
            raise RpcError(
                INVALID_PARAMS,
                f"Assistant '{assistant['assistant_id']}' (graph '{assistant['graph_id']}') does "
                "not support A2A conversational messages. Graph input schema must include a "
                "'messages' field to accept text or file parts. Available input fields: "
                f"{list(properties)}",
            )

    async def create_run(self, body: dict[str, Any]) -> QueueEntry:
        """A run of the REST body ``body`` (its ``thread_id`` included), as the user's
        ``create_run`` handler leaves it; refusals as the reference words them."""
        thread_id = body.pop("thread_id")
        try:
            body = await authorize_action("threads", "create_run", {**body, "thread_id": thread_id})
            body.pop("thread_id", None)
            return await self.runs.create(check_thread_id(thread_id, "contextId"), body)
        except Denied:
            raise RpcError(INVALID_PARAMS, "Access denied to assistant or thread") from None
        except NotFound as exc:
            raise RpcError(INVALID_PARAMS, f"Failed to create run: {exc}") from None
        except (ValidationError, BadRequest) as exc:
            raise RpcError(INVALID_PARAMS, f"Invalid request: {exc}") from None
        except ThreadBusy as exc:
            raise RpcError(
                INVALID_PARAMS, f"Failed to create run: {exc or 'thread busy'}"
            ) from None

    def task_json(self, sending: Sending, values: Any, assistant_id: str) -> dict[str, Any]:
        """``SendMessage``'s task: its history, its state, its answer or its interrupts."""
        task_id, ctx = sending.task_id, sending.entry.thread_id
        values = values if isinstance(values, dict) else {"values": values}
        task: dict[str, Any] = {"kind": "task", "id": task_id, "contextId": ctx}
        if sending.length != 0:
            task["history"] = msgs.history(
                values.get("messages"),
                task_id,
                ctx,
                sending.length,
                sending.scope,
                sending.task_ids,
            )
        if isinstance(values.get("__error__"), dict):
            said = f"Error executing assistant: {values['__error__'].get('error')}"
            task["status"] = {
                "state": "TASK_STATE_FAILED",
                "message": msgs.agent_message(said, task_id, ctx),
            }
        elif "__interrupt__" in values:
            task["status"] = {"state": "TASK_STATE_INPUT_REQUIRED", "timestamp": now()}
            task["artifacts"] = [msgs.interrupt_artifact(values["__interrupt__"])]
        else:
            task["status"] = {"state": "TASK_STATE_COMPLETED", "timestamp": now()}
            parts = msgs.response_parts(values)
            task["artifacts"] = [msgs.response_artifact(parts, assistant_id)]
        return task


async def _guarded(call: Any) -> Any:
    """``call``'s result; the user's refusals and the service's as JSON-RPC errors (a fault of
    ours logged and answered as ``-32603``, never with its traceback)."""
    try:
        return await call
    except RpcError:
        raise
    except Denied as exc:
        raise RpcError(INVALID_PARAMS, f"Access denied: {exc.detail}") from None
    except (NotFound, ValidationError, BadRequest) as exc:
        raise RpcError(INVALID_PARAMS, str(exc)) from None
    except Exception:
        log.exception("a2a: a method failed")
        raise RpcError(INTERNAL_ERROR, "Internal server error") from None


def _modes(assistant: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The agent's input and output modes: ``metadata.a2a.input_modes`` / ``output_modes``."""
    metadata = assistant.get("metadata") or {}
    a2a = metadata.get("a2a") if isinstance(metadata, dict) else None
    if a2a is None:
        return list(MODES), list(MODES)
    if not isinstance(a2a, dict):
        raise RpcError(INVALID_PARAMS, "Assistant metadata.a2a must be an object.")
    out = []
    for field in ("input_modes", "output_modes"):
        value = a2a.get(field)
        if value is None:
            out.append(list(MODES))
        elif (
            isinstance(value, list)
            and value
            and all(isinstance(m, str) and m.strip() for m in value)
        ):
            out.append([m.strip() for m in value])
        else:
            refused = f"Assistant metadata.a2a.{field} must be a non-empty array of strings."
            raise RpcError(INVALID_PARAMS, refused)
    return out[0], out[1]


def _base_url(request: Request, assistant_id: str) -> str:
    """Where the service is reached: ``LANGGRAPH_API_URL``, else the request's own URL."""
    configured = os.environ.get("LANGGRAPH_API_URL")
    if configured:
        return configured.rstrip("/")
    scheme = request.headers.get("x-forwarded-proto") or request.url.scheme
    host, port = request.url.hostname or "localhost", request.url.port
    path = request.url.path.rstrip("/")
    for suffix in (
        "/.well-known/agent-card.json",
        "/.well-known/agent.json",
        f"/a2a/{assistant_id}",
    ):
        path = path.removesuffix(suffix)
    if port and (scheme, port) not in (("http", 80), ("https", 443)):
        return f"{scheme}://{host}:{port}{path}"
    return f"{scheme}://{host}{path}"


__all__ = ["A2aServer", "a2a_routes"]
