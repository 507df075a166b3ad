"""The app ``serve`` serves (SPEC §25.1): the service's route groups, ``langgraph.json``'s
``http`` settings (`HttpConfig`) and the user's ``http.app``, put together as LangGraph Server
puts them together (its ``langgraph_api.server``, D276-D279).

- **Routes, in the order they are tried**: ``/ok``, ``/metrics`` and ``/openapi.json``; the
  user's routes; ``/`` and ``/info``; then the service's groups (assistants, threads, runs,
  store, ...). So a user's route shadows ``/``, ``/info`` and every route of the
  groups (``POST /threads`` included), never ``/ok``, ``/metrics`` or ``/openapi.json``. A
  ``disable_<group>`` flag leaves its group out: its paths are 404 ``{"detail": "Not Found"}``.
  ``disable_meta`` leaves ``/ok`` alone, after the user's routes, as the reference does.
- **Middleware, outermost first**: the service's guard (`guard`: the ``Host``, CORS, origins,
  sizes), so that nothing of the user's runs for a request it refuses; then the user's app's
  middleware, around the user's routes and the service's alike; then, with
  ``middleware_order: "auth_first"``, the user's middleware moves inside the service's
  authentication (`Authenticated`), route by route. The user's routes are authenticated only
  with ``enable_custom_route_auth``, as the reference; ``request.user`` is then the user.
- **Lifespan**: the user's app's, entered once ``serve``'s store is open and its workers have
  started, left before they stop. A lifespan that fails stops ``serve``.
- **mount_prefix**: all of the above under ``/prefix``; ``/`` and ``/ok`` (and ``/metrics``
  unless ``disable_meta``) answer at the root as well, behind the guard, for health checks.

The user's app object is the app served (its ``state``, exception handlers and FastAPI
features hold), its routes and middleware rearranged as above.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from durable_graph.core.errors import ValidationError
from durable_graph.langgraph.config_file import load_object
from durable_graph.service.guard import JsonBodies
from durable_graph.service.http_config import HttpConfig

log = logging.getLogger("durable_graph.service")

SHADOWABLE: Final = frozenset({"/", "/info"})
"""The meta paths a user's route takes over (the reference's "shadowable" ones)."""
ROOT: Final = frozenset({"/", "/ok", "/metrics"})
"""The paths answered at the root too under a ``mount_prefix``."""

Check = Callable[[HTTPConnection], Awaitable[Response | None]]


class Authenticated:
    """The service's authentication as ASGI middleware (for the user's routes with
    ``enable_custom_route_auth``, and before the user's middleware with ``auth_first``): an
    HTTP request passes ``check`` (the token, or the user's ``authenticate``) or is answered
    by the refusal it returns. WebSockets pass: their endpoint checks them."""

    def __init__(self, app: ASGIApp, check: Check) -> None:
        self.app = app
        self.check = check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = await self.check(Request(scope))  # its body is the route's to read
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


def load_user_app(base: Path, spec: str) -> Starlette:
    """The user's app ``http.app`` names (``./file.py:app`` from ``base``, or ``module:app``),
    loaded as the graphs are; `ValidationError` naming ``http.app`` when it is no Starlette or
    FastAPI app, or when its ``debug`` would show clients tracebacks (SPEC §19.4)."""
    app = load_object(base, spec, "http.app")
    if not isinstance(app, Starlette):
        raise ValidationError(
            f"http.app: {spec} is a {type(app).__name__}, not a Starlette or FastAPI app"
        )
    if app.debug:
        raise ValidationError(
            f"http.app: {spec} has debug=True: its error pages would show clients tracebacks "
            "and file paths; serve it with debug=False"
        )
    return app


def with_middleware(
    routes: Sequence[BaseRoute], middleware: Sequence[Middleware]
) -> list[BaseRoute]:
    """``routes``, each route's app wrapped in ``middleware`` (the first outermost), in place."""
    for route in routes:
        for cls, args, kwargs in reversed(middleware):
            route.app = cls(route.app, *args, **kwargs)  # type: ignore[attr-defined]
    return list(routes)


async def http_error(request: Request, exc: Exception) -> Response:
    """An ``HTTPException`` (404, 405 of the router) as the reference answers it: JSON."""
    assert isinstance(exc, HTTPException)
    if exc.status_code in (204, 304):
        return Response(status_code=exc.status_code, headers=exc.headers)
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)


def assemble(
    ok: Sequence[BaseRoute],
    groups: Mapping[str, Sequence[BaseRoute]],
    http: HttpConfig,
    *,
    guard: Sequence[Middleware],
    check: Check,
    user_app: Starlette | None = None,
) -> Starlette:
    """The served app (see the module docstring): ``ok`` (``/ok``), the route ``groups`` (one
    per `http_config.GROUPS` name, ``meta`` among them) but those ``http`` disables, behind the
    ``guard`` middleware; ``check`` authenticates a request where the service does so ahead of
    its routes; ``user_app`` is ``http.app``'s app."""
    served = {name: list(routes) for name, routes in groups.items() if name not in http.disabled}
    meta = served.pop("meta", [])
    if "meta" in http.disabled:
        first, after = [], list(ok)  # /ok as a plain liveness answer, after the user's routes
    else:
        first = [*ok, *(r for r in meta if _path(r) not in SHADOWABLE)]
        after = [r for r in meta if _path(r) in SHADOWABLE]
    app = user_app if user_app is not None else Starlette()
    theirs = list(app.user_middleware)
    user_routes = list(app.routes)
    authenticated = Middleware(Authenticated, check=check)
    if http.auth_first:  # their middleware inside the service's authentication, route by route
        around = theirs
        services = [Middleware(JsonBodies), authenticated, *theirs]
        outer: list[Middleware] = []
    else:  # theirs around everything; the service's routes authenticate in their endpoints
        around = []
        services = [Middleware(JsonBodies)]
        outer = theirs
    if http.custom_route_auth:
        user_routes = with_middleware(user_routes, [authenticated, *around])
    else:
        user_routes = with_middleware(user_routes, around)
    # Route by route, not one mount: a mount's pattern stops at a newline a thread id may hold,
    # which must reach its route to be refused by name (422, D146).
    ours = with_middleware([r for group in served.values() for r in group], services)
    app.router.routes = [
        *with_middleware(first, [Middleware(JsonBodies), *around]),
        *user_routes,
        *with_middleware(after, [Middleware(JsonBodies), *around]),
        *ours,
    ]
    app.exception_handlers.setdefault(HTTPException, http_error)
    app.middleware_stack = None  # built again, with what is set here, at the first request
    if not http.mount_prefix:
        app.user_middleware = [*guard, *outer]
        return app
    app.user_middleware = outer
    at_root = ROOT if "meta" not in http.disabled else ROOT - {"/metrics"}
    root = [_copy(r) for r in [*ok, *groups.get("meta", [])] if _path(r) in at_root]
    mount = Mount(http.mount_prefix, app)
    mount.path_regex = re.compile(mount.path_regex.pattern, re.DOTALL)  # see `ours` above
    prefixed = Starlette(
        routes=[*with_middleware(root, [Middleware(JsonBodies)]), mount],
        middleware=guard,
        exception_handlers={HTTPException: http_error},
        lifespan=app.router.lifespan_context,
    )
    prefixed.state = app.state
    return prefixed


def _path(route: BaseRoute) -> Any:
    return getattr(route, "path", None)


def _copy(route: BaseRoute) -> Route:
    """A route of its own for the same endpoint (the one served under the prefix is wrapped)."""
    assert isinstance(route, Route)
    return Route(route.path, route.endpoint, methods=sorted(route.methods or ()), name=route.name)


__all__ = ["Authenticated", "assemble", "http_error", "load_user_app", "with_middleware"]
