"""JSON-RPC 2.0 as ``/mcp`` and ``/a2a/{assistant_id}`` speak it (SPEC §25.2): the error codes,
the envelope of an answer, and the refusals both make before a method runs. A client's mistake
is an error object with the code the protocol gives it, never a 500 or a traceback.
"""

from __future__ import annotations

from typing import Any, Final

from starlette.responses import Response

from durable_graph.core.errors import ValidationError
from durable_graph.service.guard import parse_json_body
from durable_graph.service.requests import Json

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603

Id = str | int | float | None


class RpcError(Exception):
    """A method's JSON-RPC error: ``code`` and ``message`` (the answer's ``error``)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message}


def parse(raw: bytes) -> Any:
    """A request body as JSON (the service's limits on depth and numbers apply), or `RpcError`
    ``PARSE_ERROR`` naming what is wrong."""
    try:
        return parse_json_body(raw, None)
    except ValidationError as exc:
        raise RpcError(PARSE_ERROR, f"Parse error: {exc}") from None


def answer(id_: Id, outcome: dict[str, Any] | RpcError) -> dict[str, Any]:
    """The response object to request ``id_``: its ``result``, or its ``error``."""
    if isinstance(outcome, RpcError):
        return {"jsonrpc": "2.0", "id": id_, "error": outcome.json()}
    return {"jsonrpc": "2.0", "id": id_, "result": outcome}


def error_response(error: RpcError, id_: Id = None, status: int = 200) -> Response:
    """``error`` as a whole HTTP answer (200, as JSON-RPC over HTTP answers its errors, unless
    the transport says otherwise)."""
    return Json(answer(id_, error), status_code=status)


def accepts(header: str, media_type: str) -> bool:
    """Whether an ``Accept`` header allows ``media_type`` (``*/*`` and ``type/*`` included)."""
    for media_range in header.lower().split(","):
        candidate = media_range.split(";", 1)[0].strip()
        if candidate in ("*/*", media_type):
            return True
        if candidate.endswith("/*") and media_type.startswith(candidate[:-1]):
            return True
    return False


def valid_id(value: object) -> bool:
    """A request id JSON-RPC allows: a string, a number or null (never a boolean)."""
    return value is None or (isinstance(value, str | int | float) and not isinstance(value, bool))


__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "RpcError",
    "accepts",
    "answer",
    "error_response",
    "parse",
    "valid_id",
]
