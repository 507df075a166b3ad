"""The HTTP layer of ``durable-graph serve`` (SPEC §14.6): LangGraph Server's paths over the store.

Thin on purpose: each route checks its request, awaits `Threads` / `Runs` (coroutines on the async
store: no request, stream or join holds a thread while it waits, SPEC §20.1) and writes the answer
in the reference server's shape. A join (``/join``, ``/runs/wait``) ends when its client goes
away; a stream is an async generator Starlette cancels on the client's disconnect. Before any
route, `guard.Guard` refuses other origins' pages (403), bodies that are not JSON (415) and
bodies over the limit (413). Errors: a body that is not JSON or does not fit the schema, or a
thread id the service cannot answer for (`check_thread_id`) -> 422 ``{"detail": ...}``; unknown
thread, run or assistant -> 404; a busy thread (``reject``, `update_state` during a run) or an
existing thread id -> 409; never a 500 for a client's mistake. A token, when set, is required as
``x-api-key`` (what ``langgraph-sdk`` sends for ``api_key``) or ``Authorization: Bearer``.
"""

from __future__ import annotations

import copy
import hmac
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from functools import partial
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.authentication import AuthCredentials
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.errors import NotFound, ThreadBusy, ValidationError
from durable_graph.langgraph.async_saver import AsyncDurableSaver
from durable_graph.langgraph.factory import ServedGraph
from durable_graph.langgraph.store import AsyncDurableStore
from durable_graph.service.a2a import a2a_routes
from durable_graph.service.assistant_endpoints import AssistantEndpoints
from durable_graph.service.assistants import Assistants
from durable_graph.service.assistants import Conflict as AssistantConflict
from durable_graph.service.auth import FILTERS, SCOPE_USER, TENANT, USER, Denied, User, UserAuth
from durable_graph.service.crons import Crons, CronSettings
from durable_graph.service.guard import (
    DEFAULT_MAX_BODY_BYTES,
    Guard,
    Origins,
    cors_options,
    parse_body,
    parse_json_body,
    parse_list_body,
)
from durable_graph.service.http_app import assemble
from durable_graph.service.http_config import RUN_HEADERS, HttpConfig
from durable_graph.service.mcp import mcp_routes
from durable_graph.service.metrics import metrics
from durable_graph.service.openapi import openapi_document
from durable_graph.service.protocol_commands import Commands
from durable_graph.service.protocol_socket import serve_socket
from durable_graph.service.protocol_stream import once_visible, request_filter, sse
from durable_graph.service.records import check_thread_id, run_path
from durable_graph.service.requests import (
    BadRequest,
    ClientGone,
    Json,
    RouteRow,
    body_of,
    dict_field,
    error,
    int_param,
    route_table,
    str_field,
    until_disconnect,
)
from durable_graph.service.retention import ThreadTtlConfig, requested_ttl, ttl_json
from durable_graph.service.runs import THREAD_MODES, Conflict_, Runs
from durable_graph.service.store import StoreApi
from durable_graph.service.threads import Conflict, Threads

Handler = Callable[[Request], Awaitable[Response]]
TOKEN_REQUIRED = "a valid token is required (x-api-key)"
T = TypeVar("T")


async def _authenticate(connection: HTTPConnection, user_auth: UserAuth) -> User:
    """The request's user (once a request: kept in its scope, as ``request.user`` too), made
    its `TENANT`. `Denied` when refused."""
    user = connection.scope.get(SCOPE_USER)
    if not isinstance(user, User):
        user = await user_auth.authenticate(connection)
        connection.scope[SCOPE_USER] = connection.scope["user"] = user
        connection.scope["auth"] = AuthCredentials(list(user.permissions))
    TENANT.set(user.identity)
    return user


async def _authorize(
    request: Request, user_auth: UserAuth, permission: tuple[str, str] | None
) -> None:
    """The user's ``auth`` for one request (SPEC §20.4): its user is the request's `TENANT`;
    its ``@auth.on`` handler for ``permission`` sees the request's path ids and body (as the
    reference's ``value``); the filter it returns is the request's `FILTERS`, the metadata it
    leaves is the body's (`body_of`). `Denied` when refused."""
    user = await _authenticate(request, user_auth)
    USER.set((user_auth, user))  # for the routes that authorize their own actions (/mcp, /a2a)
    if permission is None:
        return
    parsed = parse_json_body(await request.body(), {}) if request.method != "GET" else {}
    body: dict[str, Any] = parsed if isinstance(parsed, dict) else {}  # a batch: its runs
    value: dict[str, Any] = copy.deepcopy({**body, **request.path_params})  # theirs to change
    if "metadata" in value and not isinstance(value["metadata"], dict):
        return  # the endpoint refuses it by name (422)
    FILTERS.set(await user_auth.authorize(user, *permission, value))
    if isinstance(value.get("metadata"), dict) and value["metadata"] != body.get("metadata"):
        request.state.metadata = value["metadata"]


def _by_group(rows: Sequence[tuple[str, *RouteRow]]) -> dict[str, list[RouteRow]]:
    """The route table's rows, group by group (``http.disable_<group>`` drops one)."""
    groups: dict[str, list[RouteRow]] = {}
    for group, methods, path, endpoint, permission in rows:
        groups.setdefault(group, []).append((methods, path, endpoint, permission))
    return groups


def create_app(
    store: AsyncCheckpointer,
    graphs: Mapping[str, ServedGraph],
    *,
    saver: AsyncDurableSaver | None = None,
    graph_store: AsyncDurableStore | None = None,
    user_auth: UserAuth | None = None,
    token: str | None = None,
    allowed_hosts: Sequence[str] | None = None,
    origins: Origins | None = None,
    cors: Mapping[str, Any] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    cron_settings: CronSettings | None = None,
    thread_ttl: ThreadTtlConfig | None = None,
    http: HttpConfig | None = None,
    user_app: Starlette | None = None,
) -> Starlette:
    """The service's ASGI app over ``store`` for ``graphs`` (name -> compiled graph or its
    factory), which get ``graph_store`` as their LangGraph ``store`` and are read through
    ``saver`` (the workers' own, with langgraph.json's ``encryption``); with
    ``allowed_hosts``, a request naming another ``Host`` is refused (400). Browser pages of
    ``origins`` (besides the server's own) may use it, with the CORS settings ``cors``
    (LangGraph's ``http.cors`` keys but the origins); bodies are at most ``max_body_bytes``;
    ``thread_ttl`` (``checkpointer.ttl``) gives new threads their default TTL (SPEC §24.1).
    With ``user_auth`` (``langgraph.json``'s ``auth``), its handlers authenticate and authorize
    every request and the user is the request's tenant (`auth`); else the single ``token``.
    ``http`` (the rest of ``langgraph.json``'s ``http``) and the user's ``user_app``
    (``http.app``) are served as `durable_graph.service.http_app` says."""
    http = http or HttpConfig()
    if graph_store is None:  # the graphs' store and /store/* are the store's items (SPEC §20.3)
        graph_store = AsyncDurableStore(store.run_queue)
    threads = Threads(store, graphs, graph_store, saver)
    if thread_ttl is not None and thread_ttl.default_ttl is not None:
        threads.default_ttl = (thread_ttl.default_ttl, thread_ttl.strategy)
    assistants = Assistants(store, list(graphs))
    runs = Runs(store, threads, assistants)
    commands = Commands(threads, runs)
    crons = Crons(store, runs, cron_settings or CronSettings())
    items = StoreApi(graph_store)

    def authorized(connection: HTTPConnection) -> bool:
        if user_auth is not None:  # the WebSocket transport is not offered with users (D195)
            return False
        if token is None:
            return True
        headers = connection.headers
        given = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
        return hmac.compare_digest(given.encode(), token.encode())

    def guarded(
        fn: Callable[..., Awaitable[Response]],
        permission: tuple[str, str] | None = None,
        *,
        liveness: bool = False,
    ) -> Handler:
        """``fn`` for a request that passed the token or the user's ``auth`` (its user the
        request's tenant; its ``@auth.on`` handler asked for ``permission``: resource,
        action), its thread id checked; the store's refusals as 4xx answers. ``liveness``
        (``/ok``, ``/info``) is answered to anyone with users, as the reference answers it."""

        async def endpoint(request: Request) -> Response:
            if user_auth is None and not authorized(request):
                return error(401, TOKEN_REQUIRED)
            RUN_HEADERS.set(http.headers.configurable(request.headers))
            try:
                if user_auth is not None and not liveness:
                    await _authorize(request, user_auth, permission)
                if "thread_id" in request.path_params:
                    check_thread_id(request.path_params["thread_id"])
                return await fn(request, **request.path_params)
            except Denied as exc:
                return error(exc.status, exc.detail)
            except BadRequest as exc:
                return error(422, str(exc))
            except ValidationError as exc:
                return error(422, str(exc))
            except NotFound as exc:
                return error(404, str(exc))
            except (ThreadBusy, Conflict, Conflict_, AssistantConflict) as exc:
                return error(409, str(exc) or "the thread is busy")
            except ClientGone:
                return Response(status_code=499)  # never sent: the client has gone

        endpoint.__name__, endpoint.__doc__ = fn.__name__, fn.__doc__  # /openapi.json's names
        return endpoint

    async def authenticate(connection: HTTPConnection) -> Response | None:
        """The token or the user's ``authenticate`` ahead of the routes (`http_app`), as
        ``guarded`` asks it: None when the request may go on, else the refusal."""
        if user_auth is None:
            return None if authorized(connection) else error(401, TOKEN_REQUIRED)
        try:
            await _authenticate(connection, user_auth)
        except Denied as exc:
            return error(exc.status, exc.detail)
        return None

    # --- assistants ------------------------------------------------------------------------

    async def ok(request: Request) -> Response:
        return Json({"ok": True})

    async def queue_metrics(request: Request) -> Response:
        return await metrics(store, TENANT.get(), request.query_params.get("format", ""))

    async def info(request: Request) -> Response:
        return Json({"version": "durable-graph", "flags": {"assistants": True, "crons": True}})

    # --- threads ---------------------------------------------------------------------------

    async def create_thread(request: Request) -> Response:
        body = await body_of(request)
        thread_id = str_field(body, "thread_id")
        metadata = dict_field(body, "metadata") or {}
        if_exists = body.get("if_exists") or "raise"
        if if_exists not in ("raise", "do_nothing"):
            raise BadRequest("if_exists: 'raise' or 'do_nothing'")
        # SPEC §24.1: checked before anything is written; langgraph.json's default otherwise.
        ttl = requested_ttl(body.get("ttl"), thread_ttl) if "ttl" in body else None
        return Json(await threads.create(thread_id, metadata, if_exists, ttl))

    async def get_thread(request: Request, thread_id: str) -> Response:
        found = await threads.get(thread_id)
        include = [i.strip() for i in request.query_params.get("include", "").split(",")]
        if "ttl" in include and (ttl := await store.thread_ttl(thread_id)) is not None:
            found["ttl"] = ttl_json(ttl)  # as the reference: only when it has one
        return Json(found)

    async def update_thread(request: Request, thread_id: str) -> Response:
        body = await body_of(request)
        ttl = requested_ttl(body["ttl"], None) if body.get("ttl") is not None else None
        return Json(await threads.update(thread_id, dict_field(body, "metadata") or {}, ttl))

    async def delete_thread(request: Request, thread_id: str) -> Response:
        await threads.delete(thread_id)
        await crons.delete_of_thread(thread_id)  # a thread's crons end with it (D241)
        return Response(status_code=204)

    async def search_threads(request: Request) -> Response:
        body = await body_of(request)
        ids = body.get("ids")
        if ids is not None and (
            not isinstance(ids, list) or not all(isinstance(i, str) for i in ids)
        ):
            raise BadRequest("ids: a list of thread ids")
        status = str_field(body, "status")
        if status is not None and status not in ("idle", "busy", "interrupted", "error"):
            raise BadRequest("status: idle, busy, interrupted or error")
        found = await threads.search(
            dict_field(body, "metadata"),
            status,
            ids,
            int_param(body, "limit", 10, lo=1),
            int_param(body, "offset", 0),
        )
        return Json(found)

    async def prune_threads(request: Request) -> Response:
        body = await body_of(request)
        strategy = body.get("strategy", "delete")
        return Json({"pruned_count": await threads.prune(body.get("thread_ids", []), strategy)})

    async def count_threads(request: Request) -> Response:
        body = await body_of(request)
        found = await threads.search(
            dict_field(body, "metadata"), str_field(body, "status"), None, 10**9, 0
        )
        return Json(len(found))

    async def copy_thread(request: Request, thread_id: str) -> Response:
        return Json(await threads.copy(thread_id))

    async def get_state(
        request: Request, thread_id: str, checkpoint_id: str | None = None
    ) -> Response:
        subgraphs = request.query_params.get("subgraphs", "false").lower() in ("1", "true")
        return Json(await threads.state(thread_id, checkpoint_id, subgraphs))

    async def get_state_at(request: Request, thread_id: str) -> Response:
        body = await body_of(request)
        checkpoint = dict_field(body, "checkpoint") or {}
        return Json(await threads.state(thread_id, checkpoint.get("checkpoint_id"), False))

    async def update_state(request: Request, thread_id: str) -> Response:
        body = await body_of(request)
        checkpoint = dict_field(body, "checkpoint") or {}
        checkpoint_id = str_field(body, "checkpoint_id") or checkpoint.get("checkpoint_id")
        result = await threads.update_state(
            thread_id,
            body.get("values"),
            str_field(body, "as_node"),
            checkpoint_id,
        )
        return Json(result)

    async def history(request: Request, thread_id: str) -> Response:
        body = await body_of(request) if request.method == "POST" else dict(request.query_params)
        before = body.get("before")
        if isinstance(before, dict):
            before = before.get("checkpoint_id")
        if before is not None and not isinstance(before, str):
            raise BadRequest("before: a checkpoint id or a checkpoint")
        checkpoint: Any = body.get("checkpoint") if isinstance(body.get("checkpoint"), dict) else {}
        found = await threads.history(
            thread_id,
            int_param(body, "limit", 10, lo=1),
            before,
            dict_field(body, "metadata"),
            (checkpoint or {}).get("checkpoint_id"),
        )
        return Json(found)

    # --- runs ------------------------------------------------------------------------------

    def located(entry: Any, response: Response) -> Response:
        response.headers["Content-Location"] = run_path(entry.thread_id, entry.entry_id)
        return response

    async def create_run(request: Request, thread_id: str | None = None) -> Response:
        body = await body_of(request)
        entry = await runs.create(thread_id, body)
        return located(entry, Json(runs.json(entry)))

    async def create_batch(request: Request) -> Response:
        entries = await runs.create_batch(parse_list_body(await request.body()))
        return Json([runs.json(entry) for entry in entries])

    # --- crons -----------------------------------------------------------------------------

    async def create_cron(request: Request, thread_id: str | None = None) -> Response:
        return Json(await crons.create(thread_id, await body_of(request)))

    async def update_cron(request: Request, cron_id: str) -> Response:
        return Json(await crons.update(cron_id, await body_of(request)))

    async def delete_cron(request: Request, cron_id: str) -> Response:
        await crons.delete(cron_id)
        return Response(status_code=204)

    async def search_crons(request: Request) -> Response:
        return Json(await crons.search(await body_of(request)))

    async def count_crons(request: Request) -> Response:
        return Json(await crons.count(await body_of(request)))

    def stream_of(entry: Any, last_event_id: str | None, cancel_on_disconnect: bool) -> Response:
        where = run_path(entry.thread_id, entry.entry_id)
        frames = runs.sse(entry, last_event_id)
        return StreamingResponse(
            runs.cancelling(entry, frames) if cancel_on_disconnect else frames,
            media_type="text/event-stream",
            headers={
                "Location": f"{where}/stream",
                "Content-Location": where,
                "Cache-Control": "no-store",
            },
        )

    async def stream_run(request: Request, thread_id: str | None = None) -> Response:
        body = await body_of(request)
        entry = await runs.create(thread_id, body)
        return stream_of(entry, None, body.get("on_disconnect") == "cancel")

    async def wait_run(request: Request, thread_id: str | None = None) -> Response:
        body = await body_of(request)
        entry = await runs.create(thread_id, body)
        try:
            values = await until_disconnect(request, runs.join(entry))
        except ClientGone:
            if body.get("on_disconnect") == "cancel":
                await runs.cancel_unless_ended(entry)
            raise
        return located(entry, Json(values))

    async def list_runs(request: Request, thread_id: str) -> Response:
        q = request.query_params
        status = q.get("status")
        found = await runs.list(
            thread_id, int_param(q, "limit", 10, lo=1), int_param(q, "offset", 0), status
        )
        return Json(found)

    async def get_run(request: Request, thread_id: str, run_id: str) -> Response:
        entry = await runs.entry(thread_id, run_id)
        return Json(runs.json(entry))

    async def delete_run(request: Request, thread_id: str, run_id: str) -> Response:
        entry = await runs.entry(thread_id, run_id)
        await runs.delete(entry)
        return Response(status_code=204)

    async def join_run(request: Request, thread_id: str, run_id: str) -> Response:
        entry = await runs.entry(thread_id, run_id)
        return Json(await until_disconnect(request, runs.join(entry)))

    async def join_stream(request: Request, thread_id: str, run_id: str) -> Response:
        entry = await runs.entry(thread_id, run_id)
        cancel = request.query_params.get("cancel_on_disconnect") in ("1", "true", "True")
        return stream_of(entry, request.headers.get("last-event-id"), cancel)

    async def join_thread_stream(request: Request, thread_id: str) -> Response:
        q = request.query_params
        # The reference reads ``stream_modes`` (comma-separated); the SDK sends ``stream_mode``
        # (repeated): both are read here, so a client's choice is never dropped.
        asked = [m.strip() for v in q.getlist("stream_modes") for m in v.split(",")]
        asked += q.getlist("stream_mode")
        modes = asked or ["run_modes"]
        for mode in modes:
            if mode not in THREAD_MODES:
                raise BadRequest(f"stream_mode: {mode!r} is not one of {', '.join(THREAD_MODES)}")
        if not await threads.exists(thread_id):
            raise NotFound(f"thread {thread_id} not found")
        return StreamingResponse(
            runs.thread_sse(thread_id, request.headers.get("last-event-id"), modes),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store"},
        )

    async def cancel_runs(request: Request) -> Response:
        action = request.query_params.get("action", "interrupt")
        await runs.cancel_many(await body_of(request), action)
        return Response(status_code=204)

    async def cancel_run(request: Request, thread_id: str, run_id: str) -> Response:
        entry = await runs.entry(thread_id, run_id)
        action = request.query_params.get("action", "interrupt")
        await runs.cancel(entry, action)
        if request.query_params.get("wait") in ("1", "true"):
            await until_disconnect(request, runs.join(entry, timedelta(seconds=30)))
            return Response(status_code=204)
        return Response(status_code=202)

    # --- the streaming protocol (protocol_commands, protocol_stream) -------------------------

    async def command(request: Request, thread_id: str) -> Response:
        status, answer = await commands.handle(thread_id, parse_body(await request.body()))
        return Json(answer, status_code=status)

    async def stream_events(request: Request, thread_id: str) -> Response:
        where = request_filter(await body_of(request))
        frames = sse(store, thread_id, where, threads.saver.serde)
        if not await threads.exists(thread_id):  # not yet: waits for it, as the reference
            frames = once_visible(store, thread_id, partial(threads.exists, thread_id), frames)
        return StreamingResponse(
            frames,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store"},
        )

    async def events_socket(websocket: WebSocket) -> None:
        RUN_HEADERS.set(http.headers.configurable(websocket.headers))
        await serve_socket(websocket, store, commands, authorized)

    # The route table, by group: a ``disable_<group>`` flag of langgraph.json's ``http`` drops a
    # group (404), and `http_app.assemble` puts the groups, the user's ``http.app`` and the
    # middleware together as the reference does. A new group's routes go under its name; runs,
    # crons and the streaming protocol (which starts runs too) are "runs", as the reference
    # gates them with disable_runs.
    assistant_api = AssistantEndpoints(assistants, threads)
    # fmt: off
    rows: list[tuple[str, *RouteRow]] = [  # (group, methods, path, endpoint, `auth` permission)
        ("assistants", "POST", "/assistants", assistant_api.create_assistant, ("assistants", "create")),
        ("assistants", "POST", "/assistants/search", assistant_api.search_assistants, ("assistants", "search")),
        ("assistants", "POST", "/assistants/count", assistant_api.count_assistants, ("assistants", "search")),
        ("assistants", "GET", "/assistants/{assistant_id}", assistant_api.get_assistant, ("assistants", "read")),
        ("assistants", "PATCH", "/assistants/{assistant_id}", assistant_api.update_assistant, ("assistants", "update")),
        ("assistants", "DELETE", "/assistants/{assistant_id}", assistant_api.delete_assistant, ("assistants", "delete")),
        ("assistants", "POST", "/assistants/{assistant_id}/versions", assistant_api.assistant_versions, ("assistants", "read")),
        ("assistants", "POST", "/assistants/{assistant_id}/latest", assistant_api.set_latest_assistant, ("assistants", "update")),
        ("assistants", "GET", "/assistants/{assistant_id}/graph", assistant_api.assistant_graph, ("assistants", "read")),
        ("assistants", "GET", "/assistants/{assistant_id}/schemas", assistant_api.assistant_schemas, ("assistants", "read")),
        ("assistants", "GET", "/assistants/{assistant_id}/subgraphs", assistant_api.assistant_subgraphs, ("assistants", "read")),
        ("assistants", "GET", "/assistants/{assistant_id}/subgraphs/{namespace}", assistant_api.assistant_subgraphs, ("assistants", "read")),
        ("threads", "POST", "/threads", create_thread, ("threads", "create")),
        ("threads", "POST", "/threads/search", search_threads, ("threads", "search")),
        ("threads", "POST", "/threads/count", count_threads, ("threads", "search")),
        ("threads", "POST", "/threads/prune", prune_threads, ("threads", "delete")),
        ("threads", "GET", "/threads/{thread_id}", get_thread, ("threads", "read")),
        ("threads", "PATCH", "/threads/{thread_id}", update_thread, ("threads", "update")),
        ("threads", "DELETE", "/threads/{thread_id}", delete_thread, ("threads", "delete")),
        ("threads", "POST", "/threads/{thread_id}/copy", copy_thread, ("threads", "read")),
        ("threads", "GET", "/threads/{thread_id}/stream", join_thread_stream, ("threads", "read")),
        ("threads", "GET", "/threads/{thread_id}/state", get_state, ("threads", "read")),
        ("threads", "POST", "/threads/{thread_id}/state", update_state, ("threads", "update")),
        ("threads", "POST", "/threads/{thread_id}/state/checkpoint", get_state_at, ("threads", "read")),
        ("threads", "GET", "/threads/{thread_id}/state/{checkpoint_id}", get_state, ("threads", "read")),
        ("threads", "GET,POST", "/threads/{thread_id}/history", history, ("threads", "read")),
        ("runs", "POST", "/threads/{thread_id}/runs", create_run, ("threads", "create_run")),
        ("runs", "POST", "/threads/{thread_id}/runs/crons", create_cron, ("crons", "create")),
        ("runs", "POST", "/runs/crons", create_cron, ("crons", "create")),
        ("runs", "POST", "/runs/crons/search", search_crons, ("crons", "search")),
        ("runs", "POST", "/runs/crons/count", count_crons, ("crons", "search")),
        ("runs", "PATCH", "/runs/crons/{cron_id}", update_cron, ("crons", "update")),
        ("runs", "DELETE", "/runs/crons/{cron_id}", delete_cron, ("crons", "delete")),
        ("runs", "GET", "/threads/{thread_id}/runs", list_runs, ("threads", "read")),
        ("runs", "POST", "/threads/{thread_id}/runs/stream", stream_run, ("threads", "create_run")),
        ("runs", "POST", "/threads/{thread_id}/runs/wait", wait_run, ("threads", "create_run")),
        ("runs", "GET", "/threads/{thread_id}/runs/{run_id}", get_run, ("threads", "read")),
        ("runs", "DELETE", "/threads/{thread_id}/runs/{run_id}", delete_run, ("threads", "delete")),
        ("runs", "GET", "/threads/{thread_id}/runs/{run_id}/join", join_run, ("threads", "read")),
        ("runs", "GET", "/threads/{thread_id}/runs/{run_id}/stream", join_stream, ("threads", "read")),
        ("runs", "POST", "/threads/{thread_id}/runs/{run_id}/cancel", cancel_run, ("threads", "update")),
        ("runs", "POST", "/threads/{thread_id}/commands", command, ("threads", "create_run")),
        ("runs", "POST", "/threads/{thread_id}/stream/events", stream_events, ("threads", "read")),
        ("runs", "POST", "/runs", create_run, ("threads", "create_run")),
        ("runs", "POST", "/runs/batch", create_batch, ("threads", "create_run")),
        ("runs", "POST", "/runs/cancel", cancel_runs, ("threads", "update")),
        ("runs", "POST", "/runs/stream", stream_run, ("threads", "create_run")),
        ("runs", "POST", "/runs/wait", wait_run, ("threads", "create_run")),
        ("store", "PUT", "/store/items", items.put_item, ("store", "put")),
        ("store", "GET", "/store/items", items.get_item, ("store", "get")),
        ("store", "DELETE", "/store/items", items.delete_item, ("store", "delete")),
        ("store", "POST", "/store/items/search", items.search_items, ("store", "search")),
        ("store", "POST", "/store/namespaces", items.list_namespaces, ("store", "list_namespaces")),
    ]
    # fmt: on

    async def openapi(request: Request) -> Response:
        """The routes served (the user's ``http.app`` ones too), as OpenAPI."""
        return Json(openapi_document(request.app.routes))

    groups: dict[str, list[BaseRoute]] = {
        "meta": [
            Route("/", guarded(ok, liveness=True), methods=["GET"]),
            Route("/info", guarded(info, liveness=True), methods=["GET"]),
            Route("/metrics", guarded(queue_metrics), methods=["GET"]),
            Route("/openapi.json", guarded(openapi, liveness=True), methods=["GET"]),
        ],
        **{name: route_table(guarded, table) for name, table in _by_group(rows).items()},
        "ui": [],  # generative UI is not served (langgraph.json's "ui" is refused)
        "mcp": mcp_routes(assistants, threads, runs, guarded),  # /mcp: service/mcp.py
        "a2a": a2a_routes(assistants, threads, runs, guarded),  # /a2a/{assistant_id}: a2a.py
    }
    groups["runs"].append(WebSocketRoute("/threads/{thread_id}/stream/events", events_socket))
    origins = origins or Origins()
    guard = []
    if allowed_hosts:
        guard.append(Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)))
    if origins.configured:  # outside the guard, so that its refusals reach an allowed page too
        guard.append(Middleware(CORSMiddleware, **cors_options(origins, cors or {})))
    guard.append(Middleware(Guard, origins=origins, max_body_bytes=max_body_bytes))
    liveness = [Route("/ok", guarded(ok, liveness=True), methods=["GET"])]
    return assemble(liveness, groups, http, guard=guard, check=authenticate, user_app=user_app)
