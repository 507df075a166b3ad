"""``GET /openapi.json`` (SPEC §25.3): the routes `serve` answers, as an OpenAPI 3.1 document.

Made from the route table itself (path, methods, path parameters, the handler's name and
docstring), so it never lists a route that is not served or misses one that is. It describes
the API's shape, not its bodies: those are LangGraph Server's (its SDKs and docs), which
`serve` answers as the reference does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from starlette.routing import BaseRoute, Route

from durable_graph._version import __version__

ANSWERS = {
    "200": {"description": "done"},
    "401": {"description": "no valid token or user"},
    "404": {"description": "not found (or another user's)"},
    "409": {"description": "conflict: the thread is busy, or it exists"},
    "422": {"description": "a request argument is wrong; the message names it"},
}


def openapi_document(routes: Sequence[BaseRoute]) -> dict[str, Any]:
    """The document for ``routes`` (HTTP routes only; the WebSocket transport is not OpenAPI's;
    nor a route marked ``include_in_schema=False``, a spelling of another's path)."""
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        if not isinstance(route, Route) or not route.methods or not route.include_in_schema:
            continue
        parameters = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in route.param_convertors
        ]
        for method in sorted(route.methods - {"HEAD"}):
            operation: dict[str, Any] = {
                "operationId": method.lower() + re.sub(r"\W+", "_", route.path).rstrip("_"),
                "summary": route.name.replace("_", " "),
                "responses": ANSWERS,
            }
            doc = getattr(route.endpoint, "__doc__", None)
            if doc:
                operation["description"] = " ".join(doc.split())
            if parameters:
                operation["parameters"] = parameters
            paths.setdefault(route.path, {})[method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "durable-graph serve: LangGraph Server's API", "version": __version__},
        "paths": paths,
    }
