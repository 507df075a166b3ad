"""The SqlCalls of the item store (``sql/74_items.sql``; `durable_graph.core.items`). Same shape
as `durable_graph.postgres.calls`: validate, then one function call whose rows the decoder turns
into model values."""

from __future__ import annotations

from datetime import UTC

from durable_graph.core import items
from durable_graph.core.items import ScoredItem, StoredItem
from durable_graph.core.scalars import check_optional_identifier, decode_json
from durable_graph.postgres.calls import SqlCall, _call
from durable_graph.postgres.config import PostgresConfig
from durable_graph.postgres.rows import Row, each, exactly_one, first_or_none


def _item_of(row: Row) -> StoredItem:
    expires, ttl = row["expires_at"], row["ttl"]
    return StoredItem(
        tuple(row["namespace"]),
        row["key"],
        decode_json(row["value"]),
        row["created_at"].astimezone(UTC),
        row["updated_at"].astimezone(UTC),
        None if expires is None else expires.astimezone(UTC),
        None if ttl is None else float(ttl),
    )


def put_item(
    config: PostgresConfig,
    namespace: object,
    key: object,
    value: object,
    ttl: object,
    tenant: object,
) -> SqlCall[StoredItem]:
    args = [
        ("text[]", list(items.check_namespace("namespace", namespace))),
        ("text", items.check_key(key)),
        ("text", items.check_item_value(value, config.max_value_bytes)),
        ("double precision", items.check_ttl(ttl)),
        ("text", check_optional_identifier("tenant", tenant)),
    ]
    return _call(config, "put_item", "dg_put_item_v1", args, exactly_one(_item_of))


def put_indexed_item(
    config: PostgresConfig,
    namespace: object,
    key: object,
    value: object,
    vectors: object,
    ttl: object,
    tenant: object,
) -> SqlCall[StoredItem]:
    ns = items.check_namespace("namespace", namespace)
    k = items.check_key(key)
    text = items.check_item_value(value, config.max_value_bytes)
    checked = items.check_vectors(vectors)
    args = [
        ("text[]", list(ns)),
        ("text", k),
        ("text", text),
        ("text[]", list(checked)),
        ("double precision[]", [list(v) for v in checked.values()]),
        ("double precision", items.check_ttl(ttl)),
        ("text", check_optional_identifier("tenant", tenant)),
    ]
    return _call(config, "put_indexed_item", "dg_put_indexed_item_v1", args, exactly_one(_item_of))


def get_item(
    config: PostgresConfig, namespace: object, key: object, refresh_ttl: object, tenant: object
) -> SqlCall[StoredItem | None]:
    args = [
        ("text[]", list(items.check_namespace("namespace", namespace))),
        ("text", items.check_key(key)),
        ("boolean", items.check_refresh(refresh_ttl)),
        ("text", check_optional_identifier("tenant", tenant)),
    ]
    return _call(config, "get_item", "dg_get_item_v1", args, first_or_none(_item_of))


def delete_item(
    config: PostgresConfig, namespace: object, key: object, tenant: object
) -> SqlCall[bool]:
    args = [
        ("text[]", list(items.check_namespace("namespace", namespace))),
        ("text", items.check_key(key)),
        ("text", check_optional_identifier("tenant", tenant)),
    ]
    decode = exactly_one(lambda row: bool(row["removed"]))
    return _call(config, "delete_item", "dg_delete_item_v1", args, decode)


def search_items(
    config: PostgresConfig,
    prefix: object,
    filter: object,
    limit: object,
    offset: object,
    refresh_ttl: object,
    tenant: object,
) -> SqlCall[list[StoredItem]]:
    lim, off = items.check_page(limit, offset)
    args = [
        ("text[]", list(items.check_namespace("prefix", prefix, allow_empty=True))),
        ("text", items.check_filter(filter, config.max_value_bytes)),
        ("integer", lim),
        ("integer", off),
        ("boolean", items.check_refresh(refresh_ttl)),
        ("text", check_optional_identifier("tenant", tenant)),
    ]
    return _call(config, "search_items", "dg_search_items_v1", args, each(_item_of))


def search_items_by_vector(
    config: PostgresConfig,
    prefix: object,
    vector: object,
    filter: object,
    limit: object,
    offset: object,
    refresh_ttl: object,
    tenant: object,
) -> SqlCall[list[ScoredItem]]:
    pre = items.check_namespace("prefix", prefix, allow_empty=True)
    query = items.check_vector("vector", vector)
    lim, off = items.check_page(limit, offset)
    args = [
        ("text[]", list(pre)),
        ("double precision[]", list(query)),
        ("text", items.check_filter(filter, config.max_value_bytes)),
        ("integer", lim),
        ("integer", off),
        ("boolean", items.check_refresh(refresh_ttl)),
        ("text", check_optional_identifier("tenant", tenant)),
    ]
    decode = each(
        lambda row: ScoredItem(_item_of(row), None if row["score"] is None else float(row["score"]))
    )
    return _call(config, "search_items_by_vector", "dg_search_items_by_vector_v1", args, decode)


def item_namespaces(
    config: PostgresConfig,
    prefix: object,
    suffix: object,
    max_depth: object,
    limit: object,
    offset: object,
    tenant: object,
) -> SqlCall[list[tuple[str, ...]]]:
    pre = items.check_optional_namespace("prefix", prefix)
    suf = items.check_optional_namespace("suffix", suffix)
    lim, off = items.check_page(limit, offset)
    args = [
        ("text[]", None if pre is None else list(pre)),
        ("text[]", None if suf is None else list(suf)),
        ("integer", items.check_max_depth(max_depth)),
        ("integer", lim),
        ("integer", off),
        ("text", check_optional_identifier("tenant", tenant)),
    ]
    decode = each(lambda row: tuple(row["namespace"]))
    return _call(config, "item_namespaces", "dg_item_namespaces_v1", args, decode)


def sweep_items(config: PostgresConfig, batch: object) -> SqlCall[int]:
    args = [("integer", items.check_sweep_batch(batch))]
    decode = exactly_one(lambda row: int(row["swept"]))
    return _call(config, "sweep_items", "dg_sweep_items_v1", args, decode)


__all__ = [
    "delete_item",
    "get_item",
    "item_namespaces",
    "put_indexed_item",
    "put_item",
    "search_items",
    "search_items_by_vector",
    "sweep_items",
]
