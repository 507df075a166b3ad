"""Users and tenants (SPEC §20.4): ``langgraph.json``'s ``auth``, run as LangGraph Server runs it.

``{"auth": {"path": "./auth.py:auth"}}`` names a ``langgraph_sdk.Auth``. For each request its
``@auth.authenticate`` handler is called with the arguments it names (``request``,
``authorization``, ``headers``, ``path``, ``method``, ``query_params``, ``path_params``); it
returns the user (an identity string, a dict with ``identity``, or an object with one) or raises
``Auth.exceptions.HTTPException`` (401 unless it says otherwise). The user's identity is the
request's **tenant** (`TENANT`): the threads, runs, crons, assistants and store items a request
makes are that tenant's, and another tenant's are as unknown as missing ones (404), in every
API process, because the tenant is kept in the store with each of them.

Then, for each action, the most specific ``@auth.on`` handler (resource and action, resource,
action, any) is called with ``ctx`` (an ``AuthContext``: user, permissions, resource, action)
and ``value`` (what the request asks, as the reference passes it; a handler may change its
``metadata``): ``None`` or ``True`` allow, ``False`` (or a failed ``assert``) is 403, a dict is a
filter on the resource's metadata (``{"key": v}``, ``{"key": {"$eq": v}}``,
``{"key": {"$contains": v}}``) that what the request reads or changes must match (404 otherwise).
"""

from __future__ import annotations

import copy
import inspect
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Final

from langgraph_sdk import Auth
from langgraph_sdk.auth.types import AuthContext
from starlette.requests import HTTPConnection

from durable_graph.core.errors import ValidationError
from durable_graph.langgraph.config_file import load_object

log = logging.getLogger("durable_graph.service")

TENANT: ContextVar[str | None] = ContextVar("durable_graph_service_tenant", default=None)
"""The tenant of the request being served (None without ``auth``): set by the app's guard for
the request's own task, read where the service reads or writes the store (D195)."""

FILTERS: ContextVar[dict[str, Any] | None] = ContextVar(
    "durable_graph_service_filters", default=None
)
"""The metadata filter the request's ``@auth.on`` handler returned, if any."""

USER: ContextVar[tuple[UserAuth, User] | None] = ContextVar(
    "durable_graph_service_user", default=None
)
"""The request's ``auth`` and user (None without ``auth``): set by the app's guard, for the routes
that ask the user's handlers for an action of their own choosing (`authorize_action`)."""

AUTHENTICATE_ARGS: Final = frozenset(
    {"request", "authorization", "headers", "path", "method", "query_params", "path_params"}
)


class Denied(Exception):
    """The request is refused by the user's handlers: ``status`` (401, 403...) and ``detail``."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class User:
    """The authenticated user as LangGraph's ``BaseUser``: what ``authenticate`` returned."""

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self._fields = dict(fields)

    @property
    def identity(self) -> str:
        return str(self._fields["identity"])

    @property
    def display_name(self) -> str:
        return str(self._fields.get("display_name") or self.identity)

    @property
    def is_authenticated(self) -> bool:
        return bool(self._fields.get("is_authenticated", True))

    @property
    def permissions(self) -> Sequence[str]:
        return list(self._fields.get("permissions") or [])

    def __getitem__(self, key: str) -> Any:
        return self._fields[key]

    def __contains__(self, key: object) -> bool:
        return key in self._fields

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)


def _user(found: Any) -> User:
    """What ``authenticate`` returned, as a `User` (`Denied` 500 for what is no user)."""
    if isinstance(found, str):
        return User({"identity": found})
    if isinstance(found, Mapping) and isinstance(found.get("identity"), str):
        return User(found)
    identity = getattr(found, "identity", None)
    if isinstance(identity, str):
        fields = {
            name: getattr(found, name)
            for name in ("identity", "display_name", "is_authenticated", "permissions")
            if hasattr(found, name)
        }
        return User(fields)
    raise Denied(500, "the auth handler returned no identity")


class UserAuth:
    """A ``langgraph_sdk.Auth``'s handlers, called for the service's requests."""

    def __init__(self, auth: Auth) -> None:
        if auth._authenticate_handler is None:
            raise ValidationError("auth: the Auth object has no @auth.authenticate handler")
        self.auth = auth
        self.authenticate_handler = auth._authenticate_handler
        params = inspect.signature(self.authenticate_handler).parameters
        unknown = [
            n for n, p in params.items() if n not in AUTHENTICATE_ARGS and p.default is p.empty
        ]
        if unknown:
            raise ValidationError(
                f"auth: authenticate takes {', '.join(unknown)}; it may take "
                f"{', '.join(sorted(AUTHENTICATE_ARGS))}"
            )
        self.authenticate_args = [n for n in params if n in AUTHENTICATE_ARGS]

    @classmethod
    def load(cls, base: Path, spec: str) -> UserAuth:
        """The ``Auth`` object ``spec`` names (``./auth.py:auth`` from ``base``, or
        ``module:attr``)."""
        where, _, attr = spec.rpartition(":")
        if not where or not attr:
            raise ValidationError(f"auth.path: {spec!r} is not './file.py:name' or 'module:name'")
        auth = load_object(base, spec, "auth.path")
        if not isinstance(auth, Auth):
            raise ValidationError(f"auth.path: {spec} is not a langgraph_sdk.Auth")
        return cls(auth)

    async def authenticate(self, connection: HTTPConnection) -> User:
        """The request's user, or `Denied` (401 unless the handler says otherwise)."""
        scope = connection.scope
        headers = dict(scope.get("headers") or [])
        authorization = headers.get(b"authorization")
        offered: dict[str, Any] = {
            "request": connection,
            "authorization": authorization.decode("latin-1") if authorization else None,
            "headers": headers,
            "path": scope.get("path", ""),
            "method": scope.get("method", "WEBSOCKET"),
            "query_params": connection.query_params,
            "path_params": connection.path_params,
        }
        try:
            found: Any = self.authenticate_handler(
                **{n: offered[n] for n in self.authenticate_args}
            )
            if inspect.isawaitable(found):
                found = await found
        except Auth.exceptions.HTTPException as exc:
            raise Denied(exc.status_code, str(exc.detail or "Unauthorized")) from None
        except Exception:  # the user's code: a refusal, never a 500 with its traceback
            log.warning("auth: authenticate raised", exc_info=True)
            raise Denied(401, "Unauthorized") from None
        return _user(found)

    async def authorize(
        self, user: User, resource: str, action: str, value: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The most specific ``@auth.on`` handler's answer for ``resource``/``action``: a
        metadata filter, None when allowed without one; `Denied` 403 when refused."""
        handler = self._handler(resource, action)
        if handler is None:
            return None
        ctx = AuthContext(
            permissions=user.permissions,
            user=user,
            resource=resource,  # type: ignore[arg-type]
            action=action,  # type: ignore[arg-type]
        )
        try:
            result = handler(ctx=ctx, value=value)
            if inspect.isawaitable(result):
                result = await result
        except Auth.exceptions.HTTPException as exc:
            raise Denied(exc.status_code, str(exc.detail or "Forbidden")) from None
        except AssertionError as exc:
            raise Denied(403, str(exc) or "Forbidden") from None
        if result is None or result is True:
            return None
        if result is False:
            raise Denied(403, "Forbidden")
        if not isinstance(result, dict):
            log.warning("auth: a handler of %s.%s returned %r", resource, action, result)
            raise Denied(403, "Forbidden: the authorization handler gave no answer")
        return result

    def _handler(self, resource: str, action: str) -> Any:
        for key in ((resource, action), (resource, "*"), ("*", action), ("*", "*")):
            handlers = self.auth._handlers.get(key)
            if handlers:
                return handlers[-1]
        return self.auth._global_handlers[-1] if self.auth._global_handlers else None


async def authorize_action(resource: str, action: str, value: dict[str, Any]) -> dict[str, Any]:
    """For a route whose one request does several things (``/mcp``, ``/a2a``: a JSON-RPC method
    names them), what the reference's own calls for them would ask: the user's ``@auth.on``
    handler for ``resource``/``action`` is given a copy of ``value`` (what the REST route
    would be given), its filter is the request's `FILTERS` from now on, and the copy is returned
    as the handler left it (its ``metadata`` the request's). Without ``auth``, ``value``.
    `Denied` when refused."""
    found = USER.get()
    if found is None:
        return value
    user_auth, user = found
    value = copy.deepcopy(value)
    FILTERS.set(await user_auth.authorize(user, resource, action, value))
    return value


def matches(metadata: Mapping[str, Any], filters: Mapping[str, Any] | None) -> bool:
    """Whether ``metadata`` passes an ``@auth.on`` filter (every key: equal, ``$eq``, or
    ``$contains`` for a list value)."""
    for key, wanted in (filters or {}).items():
        have = metadata.get(key)
        if isinstance(wanted, dict) and set(wanted) <= {"$eq", "$contains"} and wanted:
            if "$eq" in wanted and have != wanted["$eq"]:
                return False
            if "$contains" in wanted:
                items = have if isinstance(have, list) else []
                needed = wanted["$contains"]
                if not all(n in items for n in (needed if isinstance(needed, list) else [needed])):
                    return False
        elif have != wanted:
            return False
    return True


def visible(metadata: Mapping[str, Any]) -> bool:
    """Whether the request's own filter lets it see a resource with ``metadata``."""
    return matches(metadata, FILTERS.get())
