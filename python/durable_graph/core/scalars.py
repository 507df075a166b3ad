"""Checks of plain values — identifiers, ints, durations, timestamps, JSON — and their encoding.

The part of the argument checks that needs no model value, so that the values' own invariants
(`durable_graph.core.model`'s policies) use them too without an import circle: every caller
imports them from `durable_graph.core.validation`, the one place the checks are named.

Values are stored as JSON text: compact (``separators=(",", ":")``, ``ensure_ascii=False``) and
decoded on read, so every read returns fresh objects and nothing executable is ever stored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, TypeVar

from durable_graph.core.errors import ValidationError

T = TypeVar("T")

MAX_IDENTIFIER_BYTES = 512
MAX_JSON_DEPTH = 512
DEFAULT_MAX_VALUE_BYTES = 64 * 1024 * 1024
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
MAX_PAGE_ROWS = 100_000
"""The largest ``limit`` / ``batch`` the SQL functions accept (sql/README.md); the PostgreSQL
caller clamps larger requests to it (a page is byte-bounded anyway)."""
MAX_JSON_NUMBER = 17976931348623157 * 10**292
"""1.7976931348623157e308, the largest double as Python writes it: a JSON number beyond it
reads back as infinity in most languages, so every backend refuses it (SPEC §10 rule 1)."""
MAX_DURATION = timedelta(days=36500)
"""Durations longer than a century are refused: store-now + ttl must stay a valid timestamp."""

STORE_EVENT_PREFIX = "store."


# --- primitives ----------------------------------------------------------------------------


def check_identifier(name: str, value: object) -> str:
    """A str of 1..512 UTF-8 bytes with no NUL and no lone surrogate."""
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a str, got {type(value).__name__}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValidationError(f"{name} must not contain lone surrogates") from None
    if size == 0:
        raise ValidationError(f"{name} must not be empty")
    if size > MAX_IDENTIFIER_BYTES:
        raise ValidationError(f"{name} must be at most {MAX_IDENTIFIER_BYTES} UTF-8 bytes")
    if "\x00" in value:
        raise ValidationError(f"{name} must not contain NUL")
    return value


MAX_TASK_PATH_BYTES = 4096
"""A pending write's task path: 0..4096 UTF-8 bytes (LangGraph's paths of nested tasks are long)."""


def check_task_path(name: str, value: object) -> str:
    """A str of 0..4096 UTF-8 bytes with no NUL and no lone surrogate (``""``: no path)."""
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a str, got {type(value).__name__}")
    if value == "":
        return value
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValidationError(f"{name} must not contain lone surrogates") from None
    if size > MAX_TASK_PATH_BYTES:
        raise ValidationError(f"{name} must be at most {MAX_TASK_PATH_BYTES} UTF-8 bytes")
    if "\x00" in value:
        raise ValidationError(f"{name} must not contain NUL")
    return value


def check_optional_identifier(name: str, value: object) -> str | None:
    return None if value is None else check_identifier(name, value)


def check_int(name: str, value: object, *, minimum: int, maximum: int = INT64_MAX) -> int:
    """An int (not a bool) in ``minimum..maximum``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValidationError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum or value > maximum:
        raise ValidationError(f"{name} must be between {minimum} and {maximum}, got {value}")
    return value


def check_duration(name: str, value: object, *, allow_zero: bool = False) -> timedelta:
    """A `timedelta`, positive (or zero when allowed), at most a century (SPEC §8 rule 1)."""
    if not isinstance(value, timedelta):
        raise ValidationError(f"{name} must be a datetime.timedelta, got {type(value).__name__}")
    if value < timedelta(0) or (value == timedelta(0) and not allow_zero):
        raise ValidationError(f"{name} must be {'>= 0' if allow_zero else 'positive'}, got {value}")
    if value > MAX_DURATION:
        raise ValidationError(f"{name} must be at most {MAX_DURATION.days} days")
    return value


def check_timestamp(name: str, value: object) -> datetime | None:
    """None, or a timezone-aware datetime, returned in UTC with its microseconds (rule 3)."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise ValidationError(f"{name} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(f"{name} must be timezone-aware")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValidationError(f"{name} is out of range") from None


def check_str(name: str, value: object) -> str:
    """Any str that can be encoded as UTF-8 (free text such as `Failed.error`)."""
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a str, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"{name} must not contain lone surrogates") from None
    return value


# --- JSON ----------------------------------------------------------------------------------


def _path(name: str, parts: list[str | int]) -> str:
    return name + "".join(f"[{json.dumps(p, ensure_ascii=False)}]" for p in parts)


def _check_tree(name: str, value: object, parts: list[str | int], depth: int) -> None:
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return
    if kind is int:
        if abs(value) > MAX_JSON_NUMBER:  # type: ignore[arg-type]
            raise ValidationError(
                f"{_path(name, parts)} is outside the range of a double (|x| <= 1.8e308)"
            )
        return
    if kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise ValidationError(f"{_path(name, parts)} must be a finite float, got {value!r}")
        return
    if isinstance(value, (list, dict)) and (kind is list or kind is dict):
        if depth >= MAX_JSON_DEPTH:
            raise ValidationError(
                f"{_path(name, parts)} nests deeper than {MAX_JSON_DEPTH} containers"
            )
        if isinstance(value, list):
            for index, item in enumerate(value):
                parts.append(index)
                _check_tree(name, item, parts, depth + 1)
                parts.pop()
        else:
            for key, item in value.items():
                if type(key) is not str:
                    raise ValidationError(
                        f"{_path(name, parts)} has a key of type {type(key).__name__}; "
                        "JSON object keys must be str"
                    )
                parts.append(key)
                _check_tree(name, item, parts, depth + 1)
                parts.pop()
        return
    raise ValidationError(
        f"{_path(name, parts)} is a {kind.__name__}, which is not a JSON value "
        "(None, bool, int, float, str, list or dict with str keys)"
    )


def _find_surrogate(name: str, value: object, parts: list[str | int]) -> str | None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return _path(name, parts)
        return None
    if isinstance(value, list):
        items: list[tuple[str | int, object]] = list(enumerate(value))
    elif isinstance(value, dict):
        for key in value:
            try:
                key.encode("utf-8")
            except UnicodeEncodeError:
                return _path(name, parts) + " (a key)"
        items = list(value.items())
    else:
        return None
    for key, item in items:
        parts.append(key)
        found = _find_surrogate(name, item, parts)
        parts.pop()
        if found is not None:
            return found
    return None


def _is_tree(value: object) -> bool:
    """Whether `_check_tree` would accept ``value``: the same rules, walked depth first with a
    stack of iterators instead of recursion and path bookkeeping (the common case; on False,
    `_check_tree` names the first bad element). Depth first, like `_check_tree`, so a cycle
    fails at `MAX_JSON_DEPTH` after as many steps."""
    stack: list[Iterator[object]] = [iter((value,))]
    while stack:
        for item in stack[-1]:
            kind = type(item)
            if kind is str or kind is bool or item is None:
                continue
            if kind is int:
                if abs(item) > MAX_JSON_NUMBER:  # type: ignore[arg-type]
                    return False
                continue
            if kind is dict:
                if len(stack) > MAX_JSON_DEPTH:  # the item's depth is len(stack) - 1
                    return False
                for key in item:  # type: ignore[attr-defined]
                    if type(key) is not str:
                        return False
                stack.append(iter(item.values()))  # type: ignore[attr-defined]
                break
            if kind is list:
                if len(stack) > MAX_JSON_DEPTH:
                    return False
                stack.append(iter(item))  # type: ignore[call-overload]
                break
            if kind is not float or not math.isfinite(item):  # type: ignore[arg-type]
                return False
        else:
            stack.pop()
    return True


def encode_json(name: str, value: object, max_bytes: int, *, canonical: bool = False) -> str:
    """Check ``value`` is a JSON value that round-trips exactly, and encode it compactly.

    ``canonical`` sorts object keys: the form submissions are compared in (SPEC §8 rule 19).
    """
    if not _is_tree(value):
        _check_tree(name, value, [], 0)  # raises, naming the first bad element
    text = json.dumps(
        value,
        ensure_ascii=False,
        separators=(",", ":"),
        allow_nan=False,
        sort_keys=canonical,
    )
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        where = _find_surrogate(name, value, []) or name
        raise ValidationError(f"{where} must not contain lone surrogates") from None
    if size > max_bytes:
        raise ValidationError(f"{name} encodes to {size} bytes, over the limit of {max_bytes}")
    return text


def decode_json(text: str) -> Any:
    """Decode stored JSON text into fresh objects."""
    return json.loads(text)


def _identity(value: Any) -> Any:
    """A JSON value tagged by kind, so that ``==`` is JSON-value equality (``True != 1``)."""
    if isinstance(value, dict):
        return ("o", {k: _identity(v) for k, v in value.items()})
    if isinstance(value, list):
        return ("a", tuple(_identity(v) for v in value))
    if isinstance(value, Decimal):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    return ("c", value)  # True, False, None


def json_identity(text: str) -> Any:
    """What two JSON texts must share to be the same submission input (SPEC §10 rule 3): objects
    as unordered maps (a duplicate key: the last wins), arrays in order, strings by code point,
    numbers by mathematical value (parsed as `Decimal`: ``1``, ``1.0`` and ``1e0`` are equal,
    nothing is rounded to a double). The same rule as PostgreSQL's jsonb equality."""
    return _identity(json.loads(text, parse_float=Decimal, parse_int=Decimal))


def same_json(a: str, b: str) -> bool:
    """Whether two JSON texts are the same JSON value (`json_identity`)."""
    return a == b or json_identity(a) == json_identity(b)


# --- time ----------------------------------------------------------------------------------


def from_posix(seconds: float) -> datetime:
    """A store-clock reading as a UTC datetime, to the microsecond."""
    return datetime.fromtimestamp(seconds, tz=UTC)


def to_micros(value: datetime) -> int:
    """Microseconds since the epoch: how SQLite keeps timestamps, exactly."""
    delta = value - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(value: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=value)


def check_clock(value: object) -> None:
    if not callable(value):
        raise ValidationError("clock must be a zero-argument callable returning POSIX seconds")


def check_max_value_bytes(value: object) -> int:
    return check_int("max_value_bytes", value, minimum=1, maximum=2**40)
