"""LangGraph Server's assistant paths (``/assistants/...``) over `Assistants`, each asking the
user's ``auth`` for its ``("assistants", action)``; a graph's drawing, schemas and subgraphs come
from the graph the assistant names (`Threads.graph`)."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from durable_graph.service.assistants import Assistants
from durable_graph.service.records import assistant_id_of
from durable_graph.service.requests import Guarded, Json, body_of
from durable_graph.service.schemas import served_schemas, subgraph_schemas
from durable_graph.service.threads import Threads


def assistant_routes(assistants: Assistants, threads: Threads, guarded: Guarded) -> list[BaseRoute]:
    """The ``/assistants`` paths, in the order `create_app`'s table lists them."""

    async def get_assistant(request: Request, assistant_id: str) -> Response:
        return Json(await assistants.get(assistant_id))

    async def create_assistant(request: Request) -> Response:
        return Json(await assistants.create(await body_of(request)))

    async def update_assistant(request: Request, assistant_id: str) -> Response:
        return Json(await assistants.update(assistant_id, await body_of(request)))

    async def delete_assistant(request: Request, assistant_id: str) -> Response:
        await assistants.delete(assistant_id)
        return Response(status_code=204)

    async def assistant_versions(request: Request, assistant_id: str) -> Response:
        return Json(await assistants.versions(assistant_id, await body_of(request)))

    async def set_latest_assistant(request: Request, assistant_id: str) -> Response:
        body = await body_of(request)
        return Json(await assistants.set_latest(assistant_id, body.get("version")))

    async def search_assistants(request: Request) -> Response:
        return Json(await assistants.search(await body_of(request)))

    async def count_assistants(request: Request) -> Response:
        return Json(await assistants.count(await body_of(request)))

    async def graph_of_assistant(assistant_id: str) -> Any:
        return await threads.graph((await assistants.get(assistant_id))["graph_id"])

    async def assistant_graph(request: Request, assistant_id: str) -> Response:
        if assistant_id in threads.graphs:  # a graph's name too, here only, as the reference
            assistant_id = assistant_id_of(assistant_id)
        graph = await graph_of_assistant(assistant_id)
        xray = request.query_params.get("xray", "false").lower() in ("1", "true")
        return Json(graph.get_graph(xray=xray).to_json())

    async def assistant_schemas(request: Request, assistant_id: str) -> Response:
        name = (await assistants.get(assistant_id))["graph_id"]
        return Json(await served_schemas(threads, name))

    async def assistant_subgraphs(
        request: Request, assistant_id: str, namespace: str | None = None
    ) -> Response:
        name = (await assistants.get(assistant_id))["graph_id"]
        recurse = request.query_params.get("recurse", "false").lower() in ("1", "true")
        graph = await threads.graph(name)
        return Json(await asyncio.to_thread(subgraph_schemas, name, graph, namespace, recurse))

    return [
        Route("/assistants", guarded(create_assistant, ("assistants", "create")), methods=["POST"]),
        Route(
            "/assistants/search",
            guarded(search_assistants, ("assistants", "search")),
            methods=["POST"],
        ),
        Route(
            "/assistants/count",
            guarded(count_assistants, ("assistants", "search")),
            methods=["POST"],
        ),
        Route(
            "/assistants/{assistant_id}",
            guarded(get_assistant, ("assistants", "read")),
            methods=["GET"],
        ),
        Route(
            "/assistants/{assistant_id}",
            guarded(update_assistant, ("assistants", "update")),
            methods=["PATCH"],
        ),
        Route(
            "/assistants/{assistant_id}",
            guarded(delete_assistant, ("assistants", "delete")),
            methods=["DELETE"],
        ),
        Route(
            "/assistants/{assistant_id}/versions",
            guarded(assistant_versions, ("assistants", "read")),
            methods=["POST"],
        ),
        Route(
            "/assistants/{assistant_id}/latest",
            guarded(set_latest_assistant, ("assistants", "update")),
            methods=["POST"],
        ),
        Route(
            "/assistants/{assistant_id}/graph",
            guarded(assistant_graph, ("assistants", "read")),
            methods=["GET"],
        ),
        Route(
            "/assistants/{assistant_id}/schemas",
            guarded(assistant_schemas, ("assistants", "read")),
            methods=["GET"],
        ),
        Route(
            "/assistants/{assistant_id}/subgraphs",
            guarded(assistant_subgraphs, ("assistants", "read")),
            methods=["GET"],
        ),
        Route(
            "/assistants/{assistant_id}/subgraphs/{namespace}",
            guarded(assistant_subgraphs, ("assistants", "read")),
            methods=["GET"],
        ),
    ]


__all__ = ["assistant_routes"]
