"""LangGraph Server's assistant paths' endpoints (``/assistants/...``) over `Assistants`; a
graph's drawing, schemas and subgraphs come from the graph the assistant names (`Threads.graph`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from durable_graph.service.assistants import Assistants
from durable_graph.service.records import assistant_id_of
from durable_graph.service.requests import Json, body_of
from durable_graph.service.schemas import served_schemas, subgraph_schemas
from durable_graph.service.threads import Threads


class AssistantEndpoints:
    """The ``/assistants`` paths' endpoints over `Assistants` (``create_app``'s route table names
    them, each with the ``("assistants", action)`` its user's ``auth`` is asked for)."""

    def __init__(self, assistants: Assistants, threads: Threads) -> None:
        self.assistants = assistants
        self.threads = threads

    async def get_assistant(self, request: Request, assistant_id: str) -> Response:
        return Json(await self.assistants.get(assistant_id))

    async def create_assistant(self, request: Request) -> Response:
        return Json(await self.assistants.create(await body_of(request)))

    async def update_assistant(self, request: Request, assistant_id: str) -> Response:
        return Json(await self.assistants.update(assistant_id, await body_of(request)))

    async def delete_assistant(self, request: Request, assistant_id: str) -> Response:
        await self.assistants.delete(assistant_id)
        return Response(status_code=204)

    async def assistant_versions(self, request: Request, assistant_id: str) -> Response:
        return Json(await self.assistants.versions(assistant_id, await body_of(request)))

    async def set_latest_assistant(self, request: Request, assistant_id: str) -> Response:
        body = await body_of(request)
        return Json(await self.assistants.set_latest(assistant_id, body.get("version")))

    async def search_assistants(self, request: Request) -> Response:
        return Json(await self.assistants.search(await body_of(request)))

    async def count_assistants(self, request: Request) -> Response:
        return Json(await self.assistants.count(await body_of(request)))

    async def graph_of_assistant(self, assistant_id: str) -> Any:
        return await self.threads.graph((await self.assistants.get(assistant_id))["graph_id"])

    async def assistant_graph(self, request: Request, assistant_id: str) -> Response:
        if assistant_id in self.threads.graphs:  # a graph's name too, here only, as the reference
            assistant_id = assistant_id_of(assistant_id)
        graph = await self.graph_of_assistant(assistant_id)
        xray = request.query_params.get("xray", "false").lower() in ("1", "true")
        return Json(graph.get_graph(xray=xray).to_json())

    async def assistant_schemas(self, request: Request, assistant_id: str) -> Response:
        name = (await self.assistants.get(assistant_id))["graph_id"]
        return Json(await served_schemas(self.threads, name))

    async def assistant_subgraphs(
        self, request: Request, assistant_id: str, namespace: str | None = None
    ) -> Response:
        name = (await self.assistants.get(assistant_id))["graph_id"]
        recurse = request.query_params.get("recurse", "false").lower() in ("1", "true")
        graph = await self.threads.graph(name)
        return Json(await asyncio.to_thread(subgraph_schemas, name, graph, namespace, recurse))


__all__ = ["AssistantEndpoints"]
