"""``langgraph.json``'s ``http`` section (SPEC §25.1), read as LangGraph Server reads it.

`HttpConfig.of` checks every key but ``cors`` (`durable_graph.service.guard.cors_settings`
reads that one) and refuses a wrong value naming it, so ``serve`` stops at start:

- ``app``: ``"./file.py:app"`` or ``"module:app"``, a Starlette or FastAPI app served beside the
  service's routes (`durable_graph.service.http_app`); a JavaScript app is refused.
- ``mount_prefix``: every route under ``/prefix`` (a trailing ``/`` dropped, as the reference);
  ``/`` and ``/ok`` stay at the root for health checks.
- ``disable_assistants``, ``disable_threads``, ``disable_runs``, ``disable_store``,
  ``disable_meta``, ``disable_ui``, ``disable_mcp``, ``disable_a2a``: the route group is not
  served (404); ``disable_webhooks``: a run's webhook is never sent (its run runs).
- ``configurable_headers``: which request headers a run's ``configurable`` gets (`HeaderFilter`).
- ``middleware_order`` (``"middleware_first"``, the default, or ``"auth_first"``) and
  ``enable_custom_route_auth``: where the user's middleware and the service's authentication
  stand, for the app's routes as well as the service's.
- ``logging_headers``: the headers logs may show. The service logs none, so its ``excludes``
  hold as written; ``includes`` (headers it would have to log) are refused.

The flags are true or false only (the reference also takes ``"yes"``), and a key the schema does
not have is refused (the reference drops it without a word).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import unquote

from durable_graph.core.errors import ValidationError
from durable_graph.langgraph.config_file import HTTP_KEYS

GROUPS: Final = ("assistants", "threads", "runs", "store", "meta", "ui", "mcp", "a2a")
"""The route groups a ``disable_<group>`` flag drops (`durable_graph.service.app`'s table)."""
MIDDLEWARE_ORDERS: Final = ("middleware_first", "auth_first")
NEVER_COPIED: Final = frozenset({"authorization", "x-api-key", "x-service-key", "x-tenant-id"})
"""Headers no pattern copies into a run's ``configurable`` (credentials), as the reference."""
_SEGMENT: Final = re.compile(r"[A-Za-z0-9._~-]+")
_JS_SUFFIXES: Final = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".tsx", ".jsx")

RUN_HEADERS: ContextVar[Mapping[str, Any] | None] = ContextVar(
    "durable_graph_service_run_headers", default=None
)
"""What the request being served gives a run's ``configurable`` (`HeaderFilter.configurable`):
set with the request's user by the app's ``guarded``, read by `Runs.create`."""


def _pattern(text: str) -> re.Pattern[str]:
    """A header name pattern: literal characters and ``*`` for any run of them, in full."""
    return re.compile("".join(".*" if c == "*" else re.escape(c) for c in text) + r"\Z", re.S)


@dataclass(frozen=True, slots=True)
class HeaderFilter:
    """``http.configurable_headers``: a header goes into a run's ``configurable`` when it
    matches an ``includes`` pattern and no ``excludes`` one (none without ``includes``), never
    a credential (`NEVER_COPIED`); ``langsmith-trace`` always, with its ``baggage``'s
    ``langsmith-metadata``, ``-tags`` and ``-project``, as the reference."""

    includes: tuple[re.Pattern[str], ...] = ()
    excludes: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def of(cls, value: object, key: str = "http.configurable_headers") -> HeaderFilter:
        """The filter ``value`` (``includes``/``include``, ``excludes``/``exclude``: lists of
        patterns) describes; `ValidationError` naming ``key`` when it describes none."""
        given = _object(value, key)
        unknown = sorted(set(given) - {"includes", "include", "excludes", "exclude"})
        if unknown:
            raise ValidationError(f"config: {key}.{unknown[0]} is not a key of {key}")
        lists = {}
        for name in ("includes", "include", "excludes", "exclude"):
            patterns = given.get(name)
            if patterns is not None and (
                not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns)
            ):
                raise ValidationError(f"config: {key}.{name} must be a list of header names")
            lists[name] = patterns or []
        includes = lists["includes"] or lists["include"]  # the reference: the first one given
        excludes = lists["excludes"] or lists["exclude"]
        return cls(
            tuple(_pattern(p.lower()) for p in includes),
            tuple(_pattern(p.lower()) for p in excludes),
        )

    def copies(self, name: str) -> bool:
        """Whether the header ``name`` (lower case) goes into a run's ``configurable``."""
        if name in NEVER_COPIED or any(p.match(name) for p in self.excludes):
            return False
        return any(p.match(name) for p in self.includes)

    def configurable(self, headers: Mapping[str, str]) -> dict[str, Any]:
        """What a run created with these request ``headers`` (lower-case names) gets in its
        ``configurable``."""
        out: dict[str, Any] = {}
        for name, value in headers.items():
            if name == "langsmith-trace":
                out[name] = value
                out.update(_baggage(headers.get("baggage", "")))
            elif self.copies(name):
                out[name] = value
        return out


def _baggage(baggage: str) -> dict[str, Any]:
    """LangSmith's keys of a W3C ``baggage`` header, as the reference reads them."""
    out: dict[str, Any] = {}
    for item in baggage.split(","):
        key, sep, value = item.partition("=")
        if not sep:
            continue
        if key == "langsmith-metadata":
            try:
                metadata = json.loads(unquote(value))
            except ValueError:
                continue
            if isinstance(metadata, dict):
                out[key] = metadata
        elif key == "langsmith-tags":
            out[key] = unquote(value).split(",")
        elif key == "langsmith-project":
            out[key] = unquote(value)
    return out


@dataclass(frozen=True, slots=True)
class HttpConfig:
    """``langgraph.json``'s ``http`` section, checked (see the module docstring)."""

    app: str | None = None
    """``http.app`` as written (loaded by `durable_graph.service.http_app.load_user_app`)."""
    mount_prefix: str = ""
    """``""``, or ``/a/b``: no trailing ``/``."""
    disabled: frozenset[str] = frozenset()
    """The `GROUPS` not served."""
    disable_webhooks: bool = False
    headers: HeaderFilter = field(default_factory=HeaderFilter)
    auth_first: bool = False
    """``middleware_order: "auth_first"``: the service authenticates before the user's
    middleware runs (by default the user's middleware runs first)."""
    custom_route_auth: bool = False
    """``enable_custom_route_auth``: the user's routes need the token or a user too."""

    @classmethod
    def of(cls, http: object) -> HttpConfig:
        """The ``http`` object of ``langgraph.json`` (None: the defaults), checked;
        `ValidationError` naming the first wrong key."""
        if http is None:
            return cls()
        given = _object(http, "http")
        unknown = sorted(set(given) - HTTP_KEYS)
        if unknown:
            raise ValidationError(f"config: http.{unknown[0]} is not one of LangGraph's http keys")
        app = given.get("app")
        if app is not None:
            _check_app(app)
        flags = {}
        for key in ("enable_custom_route_auth", *(f"disable_{g}" for g in (*GROUPS, "webhooks"))):
            value = given.get(key, False)
            if not isinstance(value, bool):
                raise ValidationError(f"config: http.{key} must be true or false")
            flags[key] = value
        order = given.get("middleware_order") or "middleware_first"
        if order not in MIDDLEWARE_ORDERS:
            raise ValidationError(
                f"config: http.middleware_order must be 'middleware_first' or 'auth_first', "
                f"not {order!r}"
            )
        logging = given.get("logging_headers")
        if logging is not None:
            HeaderFilter.of(logging, "http.logging_headers")  # its keys and lists checked
            if logging.get("includes") or logging.get("include"):
                raise ValidationError(
                    "config: http.logging_headers.includes is not supported: the service logs "
                    "no request header (excludes hold as they are)"
                )
        headers = given.get("configurable_headers")
        return cls(
            app=app,
            mount_prefix=mount_prefix(given.get("mount_prefix")),
            disabled=frozenset(g for g in GROUPS if flags[f"disable_{g}"]),
            disable_webhooks=flags["disable_webhooks"],
            headers=HeaderFilter() if headers is None else HeaderFilter.of(headers),
            auth_first=order == "auth_first",
            custom_route_auth=flags["enable_custom_route_auth"],
        )


def mount_prefix(value: object) -> str:
    """``http.mount_prefix`` checked: ``""`` (none) or ``/segment[/segment...]``, each segment
    unreserved URL characters, not ``.`` nor ``..``; a trailing ``/`` is dropped."""
    if value is None:
        return ""
    if not isinstance(value, str) or not value.startswith("/"):
        raise ValidationError(
            f"config: http.mount_prefix must start with '/' ('/my-api', '/api/v1'), not {value!r}"
        )
    prefix = value[:-1] if value.endswith("/") else value
    segments = prefix.split("/")[1:] if prefix else []
    if not all(_SEGMENT.fullmatch(s) and s not in (".", "..") for s in segments):
        raise ValidationError(
            f"config: http.mount_prefix {value!r}: path segments of letters, digits and "
            "'.', '_', '~', '-' only"
        )
    return prefix


def _check_app(app: object) -> None:
    if not isinstance(app, str) or ":" not in app or not all(app.rpartition(":")[::2]):
        raise ValidationError(
            f"config: http.app must look like './path/to/file.py:app' or 'module:app', not {app!r}"
        )
    if app.rpartition(":")[0].endswith(_JS_SUFFIXES):
        raise ValidationError(f"config: http.app {app!r}: a JavaScript app is not served here")


def _object(value: object, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationError(f"config: {key} must be an object")
    return value


__all__ = ["GROUPS", "RUN_HEADERS", "HeaderFilter", "HttpConfig", "mount_prefix"]
