"""The item store (SPEC §20.3 "the store"): LangGraph's long-term memory, kept in the store.

An item is a JSON object under a namespace (a tuple of labels) and a key, of one tenant (SPEC §5
rule 9: another tenant's items are as unknown as missing ones). The store methods are on the
`RunQueue` Protocol (`put_item`, `get_item`, `delete_item`, `search_items`, `item_namespaces`,
`sweep_items`); `durable_graph.langgraph.store` is LangGraph's `BaseStore` over them.

The rules every backend follows (``sql/74_items.sql`` on PostgreSQL, `durable_graph.embedded.items`
on the embedded stores), as LangGraph's ``PostgresStore`` behaves:

- a namespace is 1..20 labels, each a non-empty str without ``.`` (an identifier: 1..512 UTF-8
  bytes, no NUL); a key is an identifier;
- ``ttl`` is minutes (a positive finite number, or None: the item never expires); an item whose
  ``expires_at`` is at or before store-now is expired: no read returns it (D200), and
  `sweep_items` deletes it; ``refresh_ttl`` on a read moves a live item's ``expires_at`` to
  store-now plus its ``ttl``;
- a search's ``filter`` maps top-level keys of the value to a JSON value (equality) or to
  ``{"$eq"|"$ne"|"$gt"|"$gte"|"$lt"|"$lte": value}``; equality is JSON equality (``1 == 1.0``,
  ``true != 1``); the order operators compare two numbers or two strings (code point order) and
  are false otherwise, as is every operator on a missing key (D201);
- a search returns items newest ``updated_at`` first (then namespace, key), ``offset`` skipped,
  ``limit`` at most;
- an item put with vectors (`put_indexed_item`: one embedding per indexed field, the
  ``store.index`` of LangGraph) keeps them until it is put again or deleted (a plain `put_item`
  leaves them stale: they no longer count, D296); a search by vector (`search_items_by_vector`)
  ranks the live items that have current vectors of the query's length by their best field's
  cosine similarity to it (a zero vector scores 0), highest first, then the other items with no
  score (D298), each run as a search orders; `item_namespaces` the distinct namespaces (cut to ``max_depth`` labels)
  matching ``prefix`` and ``suffix`` (a label ``*`` matches any label), in label order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from durable_graph.core.errors import ValidationError
from durable_graph.core.model import JSON
from durable_graph.core.scalars import (
    check_bool,
    check_identifier,
    check_int,
    encode_json,
    to_micros,
)

MAX_LABELS: Final = 20
"""The most labels a namespace (a prefix, a suffix) has."""
MAX_ITEMS_PAGE: Final = 1000
"""The most items (namespaces) one search (`item_namespaces`) returns."""
MAX_OFFSET: Final = 1_000_000
MAX_TTL_MINUTES: Final = 36500 * 24 * 60
"""A century, as every duration of the store (SPEC §8 rule 1)."""
MAX_FILTER_KEYS: Final = 100
MAX_DIMS: Final = 16000
"""The most dimensions a vector has (pgvector's limit)."""
MAX_FIELDS: Final = 1000
"""The most vectors (indexed fields) one item has."""
OPERATORS: Final = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


@dataclass(frozen=True, slots=True)
class StoredItem:
    """An item as the store holds it; times at the store's clock."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, JSON]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    ttl: float | None
    """Minutes, as put; None when the item never expires."""


def check_namespace(name: str, value: object, *, allow_empty: bool = False) -> tuple[str, ...]:
    """A tuple (or list) of 1..20 labels (0.. with ``allow_empty``), each an identifier without
    ``.`` (in a pattern of `item_namespaces`, a label ``*`` matches any label)."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ValidationError(f"{name} must be a tuple of str, got {type(value).__name__}")
    labels = tuple(value)
    if not labels and not allow_empty:
        raise ValidationError(f"{name} must have at least one label")
    if len(labels) > MAX_LABELS:
        raise ValidationError(f"{name} must have at most {MAX_LABELS} labels, got {len(labels)}")
    for i, label in enumerate(labels):
        check_identifier(f"{name}[{i}]", label)
        if "." in label:
            raise ValidationError(f"{name}[{i}] must not contain '.'")
    return labels


@dataclass(frozen=True, slots=True)
class ScoredItem:
    """An item a search by vector found, with its cosine similarity to the query vector (None:
    the item has no current vectors of the query's length)."""

    item: StoredItem
    score: float | None


def check_vector(name: str, value: object) -> tuple[float, ...]:
    """1..16000 numbers, each 0 or of magnitude 1e-150..1e150 (so no product or sum of a
    cosine overflows or underflows, in SQL as here): an embedding."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise ValidationError(f"{name} must be a list of numbers, got {type(value).__name__}")
    if not 1 <= len(value) <= MAX_DIMS:
        raise ValidationError(f"{name} must have 1..{MAX_DIMS} numbers, got {len(value)}")
    out: list[float] = []
    for x in value:
        if isinstance(x, bool) or not isinstance(x, int | float):
            raise ValidationError(f"{name} must hold numbers only, got {x!r}")
        if not (x == 0 or 1e-150 <= abs(x) <= 1e150):
            raise ValidationError(
                f"{name} must hold numbers that are 0 or of magnitude 1e-150..1e150, got {x!r}"
            )
        out.append(float(x))
    return tuple(out)


def check_vectors(value: object) -> dict[str, tuple[float, ...]]:
    """An item's vectors: at most 1000 fields (each an identifier, LangGraph's field path) to a
    vector (`check_vector`), all of one length; ``{}``: the item has none."""
    if not isinstance(value, Mapping):
        raise ValidationError(f"vectors must be a dict, got {type(value).__name__}")
    if len(value) > MAX_FIELDS:
        raise ValidationError(f"vectors must have at most {MAX_FIELDS} fields")
    checked = {
        check_identifier("vectors field", field): check_vector(f"vectors[{field!r}]", vector)
        for field, vector in value.items()
    }
    if len({len(v) for v in checked.values()}) > 1:
        raise ValidationError("vectors must all have one length")
    return checked


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine similarity of two vectors of one length; 0 when either is zero (as
    ``_dg_cosine`` in ``sql/74_item_vectors.sql``)."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norms if norms > 0 else 0.0


def check_optional_namespace(name: str, value: object) -> tuple[str, ...] | None:
    """None, or a pattern of `item_namespaces` (0..20 labels, ``*`` any label)."""
    if value is None:
        return None
    return check_namespace(name, value, allow_empty=True)


def check_key(value: object) -> str:
    return check_identifier("key", value)


def check_item_value(value: object, max_bytes: int) -> str:
    """The value as JSON text: an object (str keys), at most ``max_bytes`` encoded."""
    if not isinstance(value, Mapping):
        raise ValidationError(f"value must be a dict, got {type(value).__name__}")
    return encode_json("value", dict(value), max_bytes)


def check_ttl(value: object) -> float | None:
    """None, or minutes: a positive finite number of at most a century."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(
            f"ttl must be a number of minutes or None, got {type(value).__name__}"
        )
    ttl = float(value)
    if not math.isfinite(ttl) or ttl <= 0 or ttl > MAX_TTL_MINUTES:
        raise ValidationError(f"ttl must be more than 0 and at most {MAX_TTL_MINUTES} minutes")
    return ttl


def ttl_delta(ttl: float) -> timedelta:
    """``ttl`` minutes, to the microsecond (as ``sql/74_items.sql`` computes it)."""
    return timedelta(microseconds=round(ttl * 60_000_000))


def check_filter(value: object, max_bytes: int) -> str | None:
    """None, or the filter as JSON text: at most 100 top-level keys (identifiers), each a JSON
    value (equality) or a one-key object ``{operator: JSON value}`` of `OPERATORS`."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValidationError(f"filter must be a dict or None, got {type(value).__name__}")
    if len(value) > MAX_FILTER_KEYS:
        raise ValidationError(f"filter must have at most {MAX_FILTER_KEYS} keys")
    for key, cond in value.items():
        check_identifier("filter key", key)
        if (
            isinstance(cond, Mapping)
            and any(str(k).startswith("$") for k in cond)
            and (len(cond) != 1 or next(iter(cond)) not in OPERATORS)
        ):
            raise ValidationError(
                f"filter[{key!r}] must be a JSON value or one of {{op: value}} with op one "
                f"of {', '.join(OPERATORS)}"
            )
    text = encode_json("filter", dict(value), max_bytes)
    return None if not value else text


def check_page(limit: object, offset: object) -> tuple[int, int]:
    return (
        check_int("limit", limit, minimum=1, maximum=MAX_ITEMS_PAGE),
        check_int("offset", offset, minimum=0, maximum=MAX_OFFSET),
    )


def check_max_depth(value: object) -> int | None:
    if value is None:
        return None
    return check_int("max_depth", value, minimum=1, maximum=MAX_LABELS)


def check_refresh(value: object) -> bool:
    return check_bool("refresh_ttl", value)


def check_sweep_batch(value: object) -> int:
    return check_int("batch", value, minimum=1, maximum=100_000)


# --- the rules evaluated in Python (the embedded stores; sql/74_items.sql on PostgreSQL) -------


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality (jsonb's): numbers by value, bool only equal to bool, objects by keys."""
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _ordered(op: str, a: Any, b: Any) -> bool:
    if not ((_is_number(a) and _is_number(b)) or (isinstance(a, str) and isinstance(b, str))):
        return False
    if op == "$gt":
        return bool(a > b)
    if op == "$gte":
        return bool(a >= b)
    if op == "$lt":
        return bool(a < b)
    return bool(a <= b)


def matches(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether ``value`` passes ``filter`` (checked by `check_filter`)."""
    for key, cond in (filter or {}).items():
        if key not in value:
            return False
        got = value[key]
        if isinstance(cond, Mapping) and len(cond) == 1 and next(iter(cond)) in OPERATORS:
            op, want = next(iter(cond.items()))
            if op == "$eq":
                ok = json_equal(got, want)
            elif op == "$ne":
                ok = not json_equal(got, want)
            else:
                ok = _ordered(op, got, want)
        else:
            ok = json_equal(got, cond)
        if not ok:
            return False
    return True


def _labels_match(labels: Sequence[str], pattern: Sequence[str]) -> bool:
    return all(p == "*" or p == label for label, p in zip(labels, pattern, strict=True))


def namespace_matches(
    namespace: tuple[str, ...], prefix: tuple[str, ...] | None, suffix: tuple[str, ...] | None
) -> bool:
    if prefix and (
        len(namespace) < len(prefix) or not _labels_match(namespace[: len(prefix)], prefix)
    ):
        return False
    return not suffix or (
        len(namespace) >= len(suffix) and _labels_match(namespace[-len(suffix) :], suffix)
    )


def search_order(item: StoredItem) -> tuple[int, tuple[str, ...], str]:
    """Newest ``updated_at`` first, then namespace and key (code point order)."""
    return (-to_micros(item.updated_at), item.namespace, item.key)


__all__ = [
    "MAX_ITEMS_PAGE",
    "OPERATORS",
    "ScoredItem",
    "StoredItem",
    "check_filter",
    "check_item_value",
    "check_key",
    "check_max_depth",
    "check_namespace",
    "check_optional_namespace",
    "check_page",
    "check_refresh",
    "check_sweep_batch",
    "check_ttl",
    "check_vector",
    "check_vectors",
    "cosine",
    "json_equal",
    "matches",
    "namespace_matches",
    "search_order",
    "ttl_delta",
]
