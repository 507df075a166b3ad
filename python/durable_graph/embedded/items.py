"""The item store for the embedded stores, over a `Storage` (as ``sql/74_items.sql`` on
PostgreSQL; the rules are `durable_graph.core.items`'s)."""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from contextlib import closing
from dataclasses import replace
from datetime import datetime
from itertools import groupby

from durable_graph.core.items import (
    ScoredItem,
    StoredItem,
    check_filter,
    check_item_value,
    check_key,
    check_max_depth,
    check_namespace,
    check_optional_namespace,
    check_page,
    check_refresh,
    check_sweep_batch,
    check_ttl,
    check_vector,
    check_vectors,
    cosine,
    matches,
    namespace_matches,
    search_order,
    ttl_delta,
)
from durable_graph.core.model import JSON
from durable_graph.core.scalars import check_optional_identifier, decode_json
from durable_graph.embedded.storage import Storage, Tx


def _live(item: StoredItem, now: datetime) -> bool:
    return item.expires_at is None or item.expires_at > now


def _refreshed(tx: Tx, tenant: str | None, item: StoredItem) -> StoredItem:
    if item.ttl is None:
        return item
    item = replace(item, expires_at=tx.now + ttl_delta(item.ttl))
    tx.put_item_row(tenant, item)
    return item


def _rank(found: ScoredItem) -> tuple[bool, float, int, tuple[str, ...], str]:
    """Scored items first, highest score first; then the unscored (D298); each run in search
    order."""
    unscored = found.score is None
    return (unscored, 0.0 if found.score is None else -found.score, *search_order(found.item))


def _page(newest_first: Generator[StoredItem], count: int) -> list[StoredItem]:
    """The first ``count`` items in search order (`search_order`) of items given newest first:
    each run of one ``updated_at`` is sorted by namespace and key, and reading stops after the
    run that completes ``count``."""
    out: list[StoredItem] = []
    with closing(newest_first):
        for _, run in groupby(newest_first, key=lambda i: i.updated_at):
            out.extend(sorted(run, key=search_order))
            if len(out) >= count:
                break
    return out[:count]


class EmbeddedItems:
    """The item calls of `EmbeddedRunQueue` (SPEC §20.3)."""

    _storage: Storage
    _max: int

    def put_item(
        self,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, JSON],
        ttl: float | None = None,
        tenant: str | None = None,
    ) -> StoredItem:
        return self._put(namespace, key, value, None, ttl, tenant)

    def put_indexed_item(
        self,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, JSON],
        vectors: Mapping[str, Sequence[float]],
        ttl: float | None = None,
        tenant: str | None = None,
    ) -> StoredItem:
        return self._put(namespace, key, value, vectors, ttl, tenant)

    def _put(
        self,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, JSON],
        vectors: Mapping[str, Sequence[float]] | None,
        ttl: float | None,
        tenant: str | None,
    ) -> StoredItem:
        ns = check_namespace("namespace", namespace)
        k = check_key(key)
        text = check_item_value(value, self._max)
        checked = None if vectors is None else check_vectors(vectors)
        minutes = check_ttl(ttl)
        t = check_optional_identifier("tenant", tenant)
        with self._storage.write() as tx:
            old = tx.item_row(t, ns, k)
            created = tx.now if old is None or not _live(old, tx.now) else old.created_at
            expires = None if minutes is None else tx.now + ttl_delta(minutes)
            item = StoredItem(ns, k, decode_json(text), created, tx.now, expires, minutes)
            tx.put_item_row(t, item)
            if checked is not None:
                tx.put_item_vectors(t, ns, k, tx.now, checked)
            return item

    def get_item(
        self,
        namespace: Sequence[str],
        key: str,
        refresh_ttl: bool = False,
        tenant: str | None = None,
    ) -> StoredItem | None:
        ns = check_namespace("namespace", namespace)
        k = check_key(key)
        refresh = check_refresh(refresh_ttl)
        t = check_optional_identifier("tenant", tenant)
        with self._storage.write() if refresh else self._storage.read() as tx:
            item = tx.item_row(t, ns, k)
            if item is None or not _live(item, tx.now):
                return None
            return _refreshed(tx, t, item) if refresh else item

    def delete_item(self, namespace: Sequence[str], key: str, tenant: str | None = None) -> bool:
        ns = check_namespace("namespace", namespace)
        k = check_key(key)
        t = check_optional_identifier("tenant", tenant)
        with self._storage.write() as tx:
            return tx.drop_item(t, ns, k)

    def search_items(
        self,
        prefix: Sequence[str],
        filter: Mapping[str, JSON] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool = False,
        tenant: str | None = None,
    ) -> list[StoredItem]:
        pre = check_namespace("prefix", prefix, allow_empty=True)
        text = check_filter(filter, self._max)
        lim, off = check_page(limit, offset)
        refresh = check_refresh(refresh_ttl)
        t = check_optional_identifier("tenant", tenant)
        wanted = None if text is None else decode_json(text)
        with self._storage.write() if refresh else self._storage.read() as tx:
            page = _page(
                (i for i in tx.item_rows(t, pre) if _live(i, tx.now) and matches(i.value, wanted)),
                off + lim,
            )[off:]
            return [_refreshed(tx, t, i) for i in page] if refresh else page

    def search_items_by_vector(
        self,
        prefix: Sequence[str],
        vector: Sequence[float],
        filter: Mapping[str, JSON] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool = False,
        tenant: str | None = None,
    ) -> list[ScoredItem]:
        pre = check_namespace("prefix", prefix, allow_empty=True)
        query = check_vector("vector", vector)
        text = check_filter(filter, self._max)
        lim, off = check_page(limit, offset)
        refresh = check_refresh(refresh_ttl)
        t = check_optional_identifier("tenant", tenant)
        wanted = None if text is None else decode_json(text)
        with self._storage.write() if refresh else self._storage.read() as tx:
            scored: list[ScoredItem] = []
            for item in tx.item_rows(t, pre):
                if not (_live(item, tx.now) and matches(item.value, wanted)):
                    continue
                found = tx.item_vectors(t, item.namespace, item.key)
                current = {} if found is None or found[0] != item.updated_at else found[1]
                scores = [cosine(query, v) for v in current.values() if len(v) == len(query)]
                scored.append(ScoredItem(item, max(scores) if scores else None))
            scored.sort(key=_rank)
            page = scored[off : off + lim]
            if not refresh:
                return page
            return [ScoredItem(_refreshed(tx, t, s.item), s.score) for s in page]

    def item_namespaces(
        self,
        prefix: Sequence[str] | None = None,
        suffix: Sequence[str] | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
        tenant: str | None = None,
    ) -> list[tuple[str, ...]]:
        pre = check_optional_namespace("prefix", prefix)
        suf = check_optional_namespace("suffix", suffix)
        depth = check_max_depth(max_depth)
        lim, off = check_page(limit, offset)
        t = check_optional_identifier("tenant", tenant)
        with self._storage.read() as tx:
            # The stored prefix narrows by the labels before the first wildcard.
            fixed: list[str] = []
            for label in pre or ():
                if label == "*":
                    break
                fixed.append(label)
            seen = {
                i.namespace if depth is None else i.namespace[:depth]
                for i in tx.item_rows(t, tuple(fixed))
                if _live(i, tx.now) and namespace_matches(i.namespace, pre, suf)
            }
        return sorted(seen)[off : off + lim]

    def sweep_items(self, batch: int = 1000) -> int:
        size = check_sweep_batch(batch)
        with self._storage.write() as tx:
            return tx.sweep_item_rows(size)


__all__ = ["EmbeddedItems"]
