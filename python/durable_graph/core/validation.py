"""Argument checks and JSON encoding, written once and called by every backend (SPEC §2, §8).

Every public store method runs its arguments through these functions *before* it touches the
store, so bad input raises `ValidationError` naming the argument (and the path inside a JSON
value, e.g. ``commit.state["a"][3]``) and writes nothing.

Values are stored as JSON text: compact (``separators=(",", ":")``, ``ensure_ascii=False``) and
decoded on read, so every read returns fresh objects and nothing executable is ever stored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeVar

from durable_graph.core.errors import ValidationError

if TYPE_CHECKING:
    from durable_graph.core import model as m

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


# --- composite arguments ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EncodedEvent:
    kind: str
    payload: str
    created_at: datetime | None


@dataclass(frozen=True, slots=True)
class EncodedCommit:
    checkpoint_id: str
    parent_id: str | None
    run_id: str
    state: str
    metadata: str
    next: tuple[str, ...]
    events: tuple[EncodedEvent, ...]
    created_at: datetime | None
    parent_thread_id: str | None
    fence: m.Claim | None


@dataclass(frozen=True, slots=True)
class EncodedWrite:
    task_id: str
    channel: str
    index: int
    value: str


@dataclass(frozen=True, slots=True)
class EncodedSubmission:
    thread_id: str
    input: str
    """Canonical JSON (sorted keys): stored as is, and compared byte for byte."""
    tenant: str | None
    key: str | None
    mode: m.Mode
    max_attempts: int
    not_before: datetime | None = None
    retry_of: int | None = None
    priority: int = 0
    kind: str = "default"


def _sequence(name: str, value: object) -> Sequence[object]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ValidationError(f"{name} must be a tuple or list, got {type(value).__name__}")
    return value


def _items(name: str, values: object, kind: type[T]) -> Iterator[tuple[int, str, T]]:
    """Each item of the sequence ``values`` with its index and its name ``name[i]``, checked to
    be a ``kind``."""
    article = "an" if kind.__name__[0] in "AEIOU" else "a"
    for i, item in enumerate(_sequence(name, values)):
        where = f"{name}[{i}]"
        if not isinstance(item, kind):
            raise ValidationError(
                f"{where} must be {article} {kind.__name__}, got {type(item).__name__}"
            )
        yield i, where, item


def check_claim(name: str, value: object) -> m.Claim:
    from durable_graph.core.model import Claim

    if not isinstance(value, Claim):
        raise ValidationError(f"{name} must be a Claim, got {type(value).__name__}")
    check_identifier(f"{name}.thread_id", value.thread_id)
    check_int(f"{name}.token", value.token, minimum=0)
    return value


def check_lease(name: str, value: object) -> m.Lease:
    from durable_graph.core.model import Lease, QueueEntry

    if not isinstance(value, Lease) or not isinstance(value.entry, QueueEntry):
        raise ValidationError(f"{name} must be a Lease, got {type(value).__name__}")
    check_int(f"{name}.entry.entry_id", value.entry.entry_id, minimum=0)
    check_int(f"{name}.token", value.token, minimum=0)
    check_optional_identifier(f"{name}.entry.tenant", value.entry.tenant)
    return value


def check_events(name: str, events: object, max_bytes: int) -> tuple[EncodedEvent, ...]:
    from durable_graph.core.model import EventIn

    encoded = []
    for _, where, event in _items(name, events, EventIn):
        kind = check_identifier(f"{where}.kind", event.kind)
        if kind.startswith(STORE_EVENT_PREFIX):
            raise ValidationError(
                f"{where}.kind {kind!r}: kinds starting {STORE_EVENT_PREFIX!r} are the store's own"
            )
        encoded.append(
            EncodedEvent(
                kind=kind,
                payload=encode_json(f"{where}.payload", event.payload, max_bytes),
                created_at=check_timestamp(f"{where}.created_at", event.created_at),
            )
        )
    return tuple(encoded)


def check_commit(value: object, max_bytes: int) -> EncodedCommit:
    from durable_graph.core.model import Commit

    if not isinstance(value, Commit):
        raise ValidationError(f"commit must be a Commit, got {type(value).__name__}")
    next_nodes = tuple(
        check_identifier(f"commit.next[{i}]", node)
        for i, node in enumerate(_sequence("commit.next", value.next))
    )
    return EncodedCommit(
        checkpoint_id=check_identifier("commit.checkpoint_id", value.checkpoint_id),
        parent_id=check_optional_identifier("commit.parent_id", value.parent_id),
        run_id=check_identifier("commit.run_id", value.run_id),
        state=encode_json("commit.state", value.state, max_bytes),
        metadata=encode_json("commit.metadata", value.metadata, max_bytes),
        next=next_nodes,
        events=check_events("commit.events", value.events, max_bytes),
        created_at=check_timestamp("commit.created_at", value.created_at),
        parent_thread_id=check_optional_identifier(
            "commit.parent_thread_id", value.parent_thread_id
        ),
        fence=None if value.fence is None else check_claim("commit.fence", value.fence),
    )


def check_writes(name: str, writes: object, max_bytes: int) -> tuple[EncodedWrite, ...]:
    from durable_graph.core.model import PendingWrite

    encoded = []
    for i, where, write in _items(name, writes, PendingWrite):
        encoded.append(
            EncodedWrite(
                task_id=check_identifier(f"{where}.task_id", write.task_id),
                channel=check_identifier(f"{where}.channel", write.channel),
                index=i,
                value=encode_json(f"{where}.value", write.value, max_bytes),
            )
        )
    return tuple(encoded)


def check_submission(value: object, max_bytes: int) -> EncodedSubmission:
    from durable_graph.core.model import Mode, Submission

    if not isinstance(value, Submission):
        raise ValidationError(f"submission must be a Submission, got {type(value).__name__}")
    if not isinstance(value.mode, Mode):
        raise ValidationError(f"submission.mode must be a Mode, got {value.mode!r}")
    return EncodedSubmission(
        thread_id=check_identifier("submission.thread_id", value.thread_id),
        input=encode_json("submission.input", value.input, max_bytes, canonical=True),
        tenant=check_optional_identifier("submission.tenant", value.tenant),
        key=check_optional_identifier("submission.key", value.key),
        mode=value.mode,
        max_attempts=check_int(
            "submission.max_attempts", value.max_attempts, minimum=1, maximum=INT32_MAX
        ),
        not_before=check_timestamp("submission.not_before", value.not_before),
        # SPEC §15 (durable_graph.core.scheduling): the priority and the kind.
        priority=check_int(
            "submission.priority", value.priority, minimum=-INT32_MAX, maximum=INT32_MAX
        ),
        kind=check_identifier("submission.kind", value.kind),
    )


def check_retention(value: object) -> m.RetentionPolicy:
    from durable_graph.core.model import RetentionPolicy

    if not isinstance(value, RetentionPolicy):
        raise ValidationError(f"policy must be a RetentionPolicy, got {type(value).__name__}")
    if value.max_age is not None:
        check_duration("policy.max_age", value.max_age)
    return value


def check_tenant_filter(name: str, value: object, *, allow_any: bool) -> m.TenantFilter:
    from durable_graph.core.model import ANY

    if value is ANY:
        if not allow_any:
            raise ValidationError(f"{name} must be a str or None")
        return ANY
    return check_optional_identifier(name, value)


def check_claim_policy(value: object) -> m.ClaimPolicy:
    from durable_graph.core.model import ClaimPolicy

    if not isinstance(value, ClaimPolicy):
        raise ValidationError(f"policy must be a ClaimPolicy, got {type(value).__name__}")
    return value


def check_watch(value: object) -> m.WatchPolicy:
    from durable_graph.core.model import WatchPolicy

    if not isinstance(value, WatchPolicy):
        raise ValidationError(f"watch must be a WatchPolicy, got {type(value).__name__}")
    return value


def check_metadata_filter(value: object, max_bytes: int) -> dict[str, Any]:
    """`search(metadata=)`: a JSON object (str keys, JSON values); returned decoded, fresh."""
    if not isinstance(value, dict):
        raise ValidationError(f"metadata must be a dict, got {type(value).__name__}")
    decoded: dict[str, Any] = decode_json(encode_json("metadata", value, max_bytes))
    return decoded


def check_run_ids(value: object) -> tuple[str, ...]:
    """`latest_of_runs(run_ids=)`: a tuple or list of identifiers."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ValidationError(f"run_ids must be a tuple or list, got {type(value).__name__}")
    return tuple(check_identifier(f"run_ids[{i}]", r) for i, r in enumerate(value))


# --- outcomes ------------------------------------------------------------------------------


def check_error_text(name: str, value: object, max_bytes: int) -> str:
    """An attempt's failure text: a str whose JSON string form fits ``max_bytes``, as
    `Failed.error` (SPEC §10 rule 2, §13)."""
    text = check_str(name, value)
    size = len(json.dumps(text, ensure_ascii=False).encode("utf-8"))
    if size > max_bytes:
        raise ValidationError(f"{name} encodes to {size} bytes, over the limit of {max_bytes}")
    return text


def fit_error_text(text: str, max_bytes: int) -> str:
    """``text``, or its end after a "…" (where a traceback names the failure), cut to the
    fewest characters that pass `check_error_text` with ``max_bytes``."""

    def size(value: str) -> int:
        return len(json.dumps(value, ensure_ascii=False).encode("utf-8"))

    if size(text) <= max_bytes:
        return text
    if size("…") > max_bytes:
        return ""
    low, high = 1, len(text)  # the smallest cut that fits: "…" + text[high:] always does
    while low < high:
        middle = (low + high) // 2
        if size("…" + text[middle:]) <= max_bytes:
            high = middle
        else:
            low = middle + 1
    return "…" + text[low:]


def encode_outcome(value: object, max_bytes: int) -> tuple[str, str]:
    """An `EntryOutcome` as ``(kind, detail JSON)``: how every backend stores it."""
    from durable_graph.core.model import Cancelled, Completed, Failed, Interrupted

    if isinstance(value, Completed):
        return "completed", encode_json("outcome.output", value.output, max_bytes)
    if isinstance(value, Failed):
        detail = json.dumps(check_str("outcome.error", value.error), ensure_ascii=False)
        size = len(detail.encode("utf-8"))
        if size > max_bytes:  # SPEC §10 rule 2: the error text obeys max_value_bytes too
            raise ValidationError(
                f"outcome.error encodes to {size} bytes, over the limit of {max_bytes}"
            )
        return "failed", detail
    if isinstance(value, Cancelled):
        if value.reason not in ("thread_deleted", "requested"):
            raise ValidationError(
                f"outcome.reason must be 'thread_deleted' or 'requested', got {value.reason!r}"
            )
        return "cancelled", json.dumps(value.reason)
    if isinstance(value, Interrupted):
        return "interrupted", str(check_int("outcome.by", value.by, minimum=1))
    raise ValidationError(
        f"outcome must be Completed, Failed, Cancelled or Interrupted, got {type(value).__name__}"
    )


def decode_outcome(kind: str | None, detail: str | None) -> m.EntryOutcome | None:
    from durable_graph.core.model import Cancelled, Completed, Failed, Interrupted

    if kind is None:
        return None
    value: Any = decode_json(detail) if detail is not None else None
    if kind == "completed":
        return Completed(value)
    if kind == "failed":
        return Failed(value)
    if kind == "cancelled":
        return Cancelled(value)
    if kind == "interrupted":
        return Interrupted(value)
    raise ValueError(f"unknown outcome kind {kind!r}")
