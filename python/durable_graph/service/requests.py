"""What a route of ``durable-graph serve`` reads from its request and how it answers (SPEC
§14.6, §20): the JSON body (with the ``metadata`` an ``@auth.on`` handler left), typed query and
body fields refused by name (`BadRequest`: a 422, never a 500), the reference server's JSON
shapes, and a join that ends as soon as its client goes away (`until_disconnect`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from contextlib import suppress
from typing import Any, Protocol, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from durable_graph.service.guard import parse_body

T = TypeVar("T")


class Guarded(Protocol):
    """`create_app`'s ``guarded``: an endpoint behind the token or the user's ``auth`` (its
    ``@auth.on`` handler asked for ``permission``), the store's refusals as 4xx answers."""

    def __call__(
        self,
        fn: Callable[..., Awaitable[Response]],
        permission: tuple[str, str] | None = None,
        *,
        liveness: bool = False,
    ) -> Callable[[Request], Awaitable[Response]]: ...


class BadRequest(Exception):
    """422 with this message."""


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"detail": message}, status_code=status)


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), default=str).encode()


class Json(JSONResponse):
    def render(self, content: Any) -> bytes:
        return dumps(content)


async def body_of(request: Request) -> dict[str, Any]:
    """The request's JSON object, with ``metadata`` as the ``@auth.on`` handler left it."""
    body = parse_body(await request.body())
    metadata = getattr(request.state, "metadata", None)
    return body if metadata is None else {**body, "metadata": metadata}


def int_param(params: Mapping[str, Any], name: str, default: int, *, lo: int = 0) -> int:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise BadRequest(f"{name}: must be an integer")
    try:
        number = int(value)
    except ValueError:
        raise BadRequest(f"{name}: must be an integer") from None
    if number < lo:
        raise BadRequest(f"{name}: must be >= {lo}")
    return number


def str_field(body: Mapping[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise BadRequest(f"{name}: must be a string")
    return value


def dict_field(body: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    value = body.get(name)
    if value is not None and not isinstance(value, dict):
        raise BadRequest(f"{name}: must be an object")
    return value


class ClientGone(Exception):
    """The client of a join went away: there is no one to answer."""


async def until_disconnect(request: Request, wait: Coroutine[Any, Any, T]) -> T:
    """``wait``'s result, or `ClientGone` (``wait`` cancelled) as soon as the client disconnects:
    a join whose client left holds nothing (its body has been read, so the next message the
    server hands over is ``http.disconnect``)."""
    waiting = asyncio.ensure_future(wait)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not waiting.done():
            waiting.cancel()
            with suppress(asyncio.CancelledError):
                await waiting
    if waiting.cancelled():
        raise ClientGone
    return waiting.result()


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


RouteRow = tuple[str, str, Callable[..., Awaitable[Response]], tuple[str, str]]
"""A route as a table row: its methods (comma-separated), path, endpoint, and the ``(resource,
action)`` its user's ``auth`` is asked for (SPEC §20.4)."""


def route_table(guarded: Guarded, rows: Sequence[RouteRow]) -> list[BaseRoute]:
    """Each row as a route behind ``guarded``: the service's paths read as one table."""
    return [
        Route(path, guarded(endpoint, permission), methods=methods.split(","))
        for methods, path, endpoint, permission in rows
    ]


__all__ = [
    "BadRequest",
    "ClientGone",
    "Guarded",
    "Json",
    "RouteRow",
    "body_of",
    "dict_field",
    "dumps",
    "error",
    "int_param",
    "route_table",
    "str_field",
    "until_disconnect",
]
