"""The in-memory storage's item store (SPEC §20.3) — `ItemsTx`, a part of
`durable_graph.memory.store.MemoryTx` (as `durable_graph.sqlite.items` is of the SQLite one)."""

from __future__ import annotations

import copy
from collections.abc import Generator, Mapping
from dataclasses import replace
from datetime import datetime

from durable_graph.core.items import StoredItem
from durable_graph.memory.state import State


def _copy(item: StoredItem) -> StoredItem:
    return replace(item, value=copy.deepcopy(item.value))


class ItemsTx:
    """Items over the store's dict (the `Tx` methods of SPEC §20.3)."""

    __slots__ = ()
    _s: State
    now: datetime

    def item_row(
        self, tenant: str | None, namespace: tuple[str, ...], key: str
    ) -> StoredItem | None:
        item = self._s.items.get((tenant, namespace, key))
        return None if item is None else _copy(item)

    def put_item_row(self, tenant: str | None, item: StoredItem) -> None:
        self._s.items[(tenant, item.namespace, item.key)] = _copy(item)

    def drop_item(self, tenant: str | None, namespace: tuple[str, ...], key: str) -> bool:
        self._s.item_vectors.pop((tenant, namespace, key), None)
        return self._s.items.pop((tenant, namespace, key), None) is not None

    def item_rows(self, tenant: str | None, prefix: tuple[str, ...]) -> Generator[StoredItem]:
        n = len(prefix)
        found = [
            item for (t, ns, _), item in self._s.items.items() if t == tenant and ns[:n] == prefix
        ]
        found.sort(key=lambda item: item.updated_at, reverse=True)
        return (_copy(item) for item in found)

    def sweep_item_rows(self, batch: int) -> int:
        gone = [
            k
            for k, item in self._s.items.items()
            if item.expires_at is not None and item.expires_at <= self.now
        ][:batch]
        for k in gone:
            del self._s.items[k]
            self._s.item_vectors.pop(k, None)
        return len(gone)

    def put_item_vectors(
        self,
        tenant: str | None,
        namespace: tuple[str, ...],
        key: str,
        updated_at: datetime,
        vectors: Mapping[str, tuple[float, ...]],
    ) -> None:
        self._s.item_vectors[(tenant, namespace, key)] = (updated_at, dict(vectors))

    def item_vectors(
        self, tenant: str | None, namespace: tuple[str, ...], key: str
    ) -> tuple[datetime, dict[str, tuple[float, ...]]] | None:
        found = self._s.item_vectors.get((tenant, namespace, key))
        return None if found is None else (found[0], dict(found[1]))


__all__ = ["ItemsTx"]
