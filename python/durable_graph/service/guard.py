"""What ``durable-graph serve`` refuses before any route runs (SPEC §20.5, D145): requests from a
browser page of another origin, bodies that are not JSON, bodies over the size limit.

- **Origins.** A request carrying an ``Origin`` is served only when that origin is the server's
  own (the scheme and ``Host`` it was reached by, or a loopback name with the server's port) or
  one the deployment allows (`Origins`: ``--allow-origin``, ``langgraph.json``'s ``http.cors``);
  otherwise 403, whatever the method: a page elsewhere can neither write nor read. A request
  without ``Origin`` but with ``Sec-Fetch-Site: cross-site`` / ``same-site`` (a browser's
  ``<img>``, ``<script>`` or link) is refused too. Clients that are not browsers send neither.
  A WebSocket upgrade from another origin is refused before it (403: a page may open a socket
  anywhere, CORS does not apply to sockets).
- **Content type** (`JsonBodies`, around the service's own routes: a user's ``http.app``
  routes take what they take). A body (or a ``POST``/``PUT``/``PATCH`` declaring a type) must be
  ``application/json`` (UTF-8): 415 otherwise, so the types a page may send anywhere without a
  CORS preflight (``text/plain``, forms) never reach a route. A body without a ``Content-Type``
  is read as JSON, as non-browser clients send it (a browser sending one also sends ``Origin``).
- **Size.** A body over ``max_body_bytes`` is refused with 413 *while it is read*: a declared
  ``Content-Length`` over the limit before a byte of the body is read, a chunked one as soon as
  the limit is passed; the connection is then closed unread. The body (at most the limit) is
  handed to the route as read.

`parse_body` reads a body as the routes take it: a JSON object of at most `MAX_BODY_DEPTH`
nested containers, finite numbers, no key twice (422 otherwise, never a 500).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from durable_graph.core.errors import ValidationError

DEFAULT_MAX_BODY_BYTES: Final = 8 * 2**20
"""8 MiB: far above any run request or state update a client sends, far below a store value's
limit (64 MiB), and what one request may make the server hold."""
MAX_BODY_DEPTH: Final = 100
"""Containers a body may nest (the body itself is one): LangGraph's messages need about ten;
deeper input would reach Python's recursion limit in LangGraph's own code before the store."""
MAX_NUMBER_DIGITS: Final = 309
"""The digits of the largest double; the store refuses larger numbers anyway."""
LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH"})


# --- origins ---------------------------------------------------------------------------------


def _origin_parts(origin: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of a serialized origin (``scheme://host[:port]``), None if it is not
    one (``null``, a path, credentials, another scheme)."""
    try:
        parts = urlsplit(origin.strip().lower())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment or "@" in parts.netloc:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return parts.scheme, host, port if port is not None else _DEFAULT_PORTS[parts.scheme]


def check_origin(value: str) -> str:
    """An origin as a deployment names it (``https://app.example.com``, ``http://localhost:3000``)
    in the form browsers send it; `ValidationError` otherwise."""
    parts = _origin_parts(value)
    if parts is None:
        raise ValidationError(
            f"origin {value!r}: must be scheme://host[:port] (http or https, no path), or '*'"
        )
    scheme, host, port = parts
    return f"{scheme}://{host}" + ("" if port == _DEFAULT_PORTS[scheme] else f":{port}")


@dataclass(frozen=True, slots=True)
class Origins:
    """The browser origins a deployment allows besides the server's own: exact origins, any
    (``*``), or those a regular expression matches in full (``http.cors.allow_origin_regex``)."""

    exact: frozenset[str] = frozenset()
    any: bool = False
    regex: str | None = None

    @classmethod
    def of(cls, origins: Iterable[str], regex: str | None = None) -> Origins:
        listed = [o.strip() for o in origins if o.strip()]
        if regex is not None:
            try:
                re.compile(regex)
            except re.error as exc:
                raise ValidationError(
                    f"allow_origin_regex: not a regular expression ({exc})"
                ) from None
        return cls(
            exact=frozenset(check_origin(o) for o in listed if o != "*"),
            any="*" in listed,
            regex=regex or None,
        )

    def union(self, other: Origins) -> Origins:
        """Both sets of origins (the first one's regex, else the other's)."""
        return Origins(self.exact | other.exact, self.any or other.any, self.regex or other.regex)

    @property
    def configured(self) -> bool:
        return bool(self.exact or self.any or self.regex)

    def allows(self, origin: str) -> bool:
        if self.any:
            return True
        if self.regex is not None and re.fullmatch(self.regex, origin):
            return True
        return _origin_parts(origin) is not None and check_origin(origin) in self.exact


def _own_origin(scope: Scope, headers: Headers, origin: str) -> bool:
    """Whether ``origin`` is this server as the client reached it: the request's scheme and
    ``Host``, or a loopback name with the port the server listens on."""
    given = _origin_parts(origin)
    scheme = {"ws": "http", "wss": "https"}.get(scope.get("scheme", "http"), scope.get("scheme"))
    if given is None or given[0] != scheme:
        return False
    host = headers.get("host")
    if host and _origin_parts(f"{given[0]}://{host}") == given:
        return True
    server = scope.get("server")
    return given[1] in LOOPBACK_NAMES and server is not None and given[2] == server[1]


def cors_settings(config: str | Path) -> tuple[Origins, dict[str, Any]]:
    """The allowed origins and the CORS settings of ``langgraph.json``'s ``http.cors``
    (LangGraph's keys: ``allow_origins``, ``allow_origin_regex``, ``allow_methods``,
    ``allow_headers``, ``allow_credentials``, ``expose_headers``, ``max_age``); none without it."""
    try:
        data = json.loads(Path(config).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValidationError(f"config: cannot read {config} as JSON ({exc})") from None
    http = data.get("http") if isinstance(data, dict) else None
    cors = http.get("cors") if isinstance(http, dict) else None
    if cors is None:
        return Origins(), {}
    if not isinstance(cors, dict):
        raise ValidationError("config: http.cors must be an object")
    lists = ("allow_origins", "allow_methods", "allow_headers", "expose_headers")
    for key in lists:
        value = cors.get(key)
        if value is not None and (
            not isinstance(value, list) or not all(isinstance(v, str) for v in value)
        ):
            raise ValidationError(f"config: http.cors.{key} must be a list of strings")
    regex = cors.get("allow_origin_regex")
    if regex is not None and not isinstance(regex, str):
        raise ValidationError("config: http.cors.allow_origin_regex must be a string")
    if not isinstance(cors.get("allow_credentials", False), bool):
        raise ValidationError("config: http.cors.allow_credentials must be true or false")
    max_age = cors.get("max_age", 600)
    if not isinstance(max_age, int) or isinstance(max_age, bool) or max_age < 0:
        raise ValidationError("config: http.cors.max_age must be a number of seconds")
    origins = Origins.of(cors.get("allow_origins") or [], regex)
    settings = {k: cors[k] for k in (*lists[1:], "allow_credentials", "max_age") if k in cors}
    return origins, settings


def cors_options(origins: Origins, cors: Mapping[str, Any]) -> dict[str, Any]:
    """Starlette's CORS options for the allowed ``origins``: ``cors``'s settings, by default
    every method and request header, and the run's ``Location`` headers readable."""
    return {
        "allow_origins": ["*"] if origins.any else sorted(origins.exact),
        "allow_origin_regex": origins.regex,
        "allow_methods": cors.get("allow_methods") or ["*"],
        "allow_headers": cors.get("allow_headers") or ["*"],
        "allow_credentials": bool(cors.get("allow_credentials", False)),
        "expose_headers": cors.get("expose_headers") or ["Content-Location", "Location"],
        "max_age": cors.get("max_age", 600),
    }


# --- the middleware ----------------------------------------------------------------------------


def _refusal(status: int, message: str, *, close: bool = False) -> JSONResponse:
    headers = {"connection": "close"} if close else None
    return JSONResponse({"detail": message}, status_code=status, headers=headers)


def _is_json(content_type: str) -> bool:
    media, *params = (p.strip().lower() for p in content_type.split(";"))
    if media != "application/json":
        return False
    for param in params:
        name, _, value = param.partition("=")
        if name.strip() == "charset" and value.strip().strip('"') not in ("utf-8", "utf8"):
            return False
    return True


class Guard:
    """The ASGI middleware of the module docstring (origins and size), around every route."""

    def __init__(self, app: ASGIApp, *, origins: Origins, max_body_bytes: int) -> None:
        self.app = app
        self.origins = origins
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            # A page of another origin may open a WebSocket anywhere (no CORS): refused before
            # the upgrade (the server answers it 403).
            origin = Headers(scope=scope).get("origin")
            if origin is not None and not (
                _own_origin(scope, Headers(scope=scope), origin) or self.origins.allows(origin)
            ):
                await send({"type": "websocket.close", "code": 1008})
                return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refused = self._refused(scope, headers)
        if refused is not None:
            await refused(scope, receive, send)
            return
        body = await self._read(receive)
        if body is None:
            limit = self.max_body_bytes
            await _refusal(413, f"the body is over {limit} bytes", close=True)(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    def _refused(self, scope: Scope, headers: Headers) -> JSONResponse | None:
        """The answer to a request refused on its headers alone, else None."""
        origin = headers.get("origin")
        if origin is not None:
            if not (_own_origin(scope, headers, origin) or self.origins.allows(origin)):
                return _refusal(403, f"requests from origin {origin!r} are not allowed")
        elif headers.get("sec-fetch-site", "").lower() in ("cross-site", "same-site"):
            return _refusal(403, "requests from another site's page are not allowed")
        declared = _declared_length(headers)
        if declared > self.max_body_bytes:
            return _refusal(413, f"the body is over {self.max_body_bytes} bytes", close=True)
        return None

    async def _read(self, receive: Receive) -> bytes | None:
        """The whole body, or None as soon as it passes the limit (the rest is never read)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client went away: the route sees what came
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


def _declared_length(headers: Headers) -> int:
    length = headers.get("content-length")
    return int(length) if length is not None and length.strip().isdigit() else 0


class JsonBodies:
    """The content type of the module docstring: a request to the service's own routes with a
    body (or a ``POST``/``PUT``/``PATCH``) that declares a type other than JSON is 415."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            content_type = headers.get("content-type")
            has_body = (
                _declared_length(headers) > 0
                or "chunked" in headers.get("transfer-encoding", "").lower()
            )
            if (
                content_type is not None
                and (has_body or scope["method"] in _BODY_METHODS)
                and not _is_json(content_type)
            ):
                refused = f"bodies must be application/json (UTF-8), not {content_type!r}"
                await _refusal(415, refused)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` giving the route ``body`` in one message, then the client's own messages
    (a disconnect while a stream is open)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


# --- bodies ------------------------------------------------------------------------------------


class _Refused(ValueError):
    """A body refused while decoding (its message says why)."""


def _number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {text[:40]} is out of range")
    return value


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_NUMBER_DIGITS:
        raise _Refused(f"a number has more than {MAX_NUMBER_DIGITS} digits")
    return int(text)


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Refused(f"the key {key[:80]!r} appears twice in one object")
            seen.add(key)
    return out


def _lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _check_tree(value: Any, *, strings: bool) -> None:
    """At most `MAX_BODY_DEPTH` nested containers and, with ``strings`` (the text escapes a
    surrogate), no lone surrogate in a key or string; without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = [*item, *item.values()] if strings else item.values()
        elif isinstance(item, list):
            children = item
        else:
            if strings and isinstance(item, str) and _lone_surrogate(item):
                raise _Refused("a string holds a lone surrogate (\\ud800-\\udfff)")
            continue
        if depth > MAX_BODY_DEPTH:
            raise _Refused(f"it nests deeper than {MAX_BODY_DEPTH} arrays and objects")
        stack.extend((c, depth + 1) for c in children if strings or isinstance(c, (dict, list)))


_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")


def parse_body(raw: bytes) -> dict[str, Any]:
    """A request body as the routes take it (``{}`` when empty); `ValidationError` naming what
    is wrong otherwise (see the module docstring)."""
    body = parse_json_body(raw, {})
    if not isinstance(body, dict):
        raise ValidationError("body must be a JSON object")
    return body


def parse_list_body(raw: bytes) -> list[Any]:
    """A body that is a JSON array (``POST /runs/batch``), checked as `parse_body` checks."""
    body = parse_json_body(raw, [])
    if not isinstance(body, list):
        raise ValidationError("body must be a JSON array")
    return body


def parse_json_body(raw: bytes, empty: Any) -> Any:
    """``raw`` as JSON (``empty`` when there is none), refused as the module docstring says."""
    if not raw:
        return empty
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"body is not UTF-8: {exc}") from None
    try:
        body = json.loads(
            text,
            object_pairs_hook=_object,
            parse_float=_number,
            parse_int=_integer,
            parse_constant=_constant,
        )
    except RecursionError:
        raise ValidationError(
            f"body is refused: it nests deeper than {MAX_BODY_DEPTH} arrays and objects"
        ) from None
    except _Refused as exc:
        raise ValidationError(f"body is refused: {exc}") from None
    except ValueError as exc:
        raise ValidationError(f"body is not JSON: {exc}") from None
    try:
        _check_tree(body, strings=_SURROGATE_ESCAPE.search(text) is not None)
    except _Refused as exc:
        raise ValidationError(f"body is refused: {exc}") from None
    return body
