"""``GET /openapi.json`` (SPEC §25.3): the routes `serve` answers, as an OpenAPI 3.1 document.

Made from the routes served (path, methods, path parameters, the handler's name and
docstring: the service's and those of the user's ``http.app``, but a disabled group's), so it
never lists a route that is not served or misses one that is. It describes
the API's shape, not its bodies: those are LangGraph Server's (its SDKs and docs), which
`serve` answers as the reference does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from starlette.routing import BaseRoute, Mount, Route

from durable_graph._version import __version__

ANSWERS = {
    "200": {"description": "done"},
    "401": {"description": "no valid token or user"},
    "404": {"description": "not found (or another user's)"},
    "409": {"description": "conflict: the thread is busy, or it exists"},
    "422": {"description": "a request argument is wrong; the message names it"},
}


def _routes(routes: Sequence[BaseRoute], prefix: str = "") -> list[tuple[str, Route]]:
    """Each HTTP route of ``routes`` with its whole path, a mount's routes included."""
    out: list[tuple[str, Route]] = []
    for route in routes:
        if isinstance(route, Mount):
            out += _routes(route.routes, prefix + route.path)
        elif isinstance(route, Route) and route.methods and route.include_in_schema:
            out.append((prefix + route.path, route))
    return out


def openapi_document(routes: Sequence[BaseRoute]) -> dict[str, Any]:
    """The document for ``routes`` (HTTP routes only; the WebSocket transport is not OpenAPI's;
    nor a route marked ``include_in_schema=False``, a spelling of another's path)."""
    paths: dict[str, dict[str, Any]] = {}
    for path, route in _routes(routes):
        assert route.methods is not None
        parameters = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in route.param_convertors
        ]
        for method in sorted(route.methods - {"HEAD"}):
            operation: dict[str, Any] = {
                "operationId": method.lower() + re.sub(r"\W+", "_", path).rstrip("_"),
                "summary": route.name.replace("_", " "),
                "responses": ANSWERS,
            }
            doc = getattr(route.endpoint, "__doc__", None)
            if doc:
                operation["description"] = " ".join(doc.split())
            if parameters:
                operation["parameters"] = parameters
            paths.setdefault(path, {}).setdefault(method.lower(), operation)  # the first wins
    return {
        "openapi": "3.1.0",
        "info": {"title": "durable-graph serve: LangGraph Server's API", "version": __version__},
        "paths": paths,
    }
