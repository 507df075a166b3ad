"""The SQLite storage's item store (``migrate_v8.sql``; SPEC §20.3) — `ItemsTx`, a part of
`durable_graph.sqlite.storage.SqliteTx`."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Generator, Mapping
from datetime import datetime

from durable_graph.core.items import StoredItem
from durable_graph.core.scalars import decode_json, to_micros
from durable_graph.sqlite.queries import Queries
from durable_graph.sqlite.rows import at, ts


def _ns(namespace: tuple[str, ...]) -> str:
    """The namespace as its ``namespace`` text: compact JSON, non-ASCII kept (so a prefix's text is the
    start of its namespaces' text)."""
    return json.dumps(list(namespace), ensure_ascii=False, separators=(",", ":"))


def _item_of(row: sqlite3.Row) -> StoredItem:
    ttl = row["ttl"]
    return StoredItem(
        tuple(json.loads(row["namespace"])),
        row["key"],
        decode_json(row["value"]),
        at(row["created_at"]),
        at(row["updated_at"]),
        ts(row["expires_at"]),
        None if ttl is None else float(ttl),
    )


class ItemsTx(Queries):
    """Items over the transaction's connection (the `Tx` methods of SPEC §20.3)."""

    __slots__ = ()
    _now_us: int

    def item_row(
        self, tenant: str | None, namespace: tuple[str, ...], key: str
    ) -> StoredItem | None:
        row = self._one(
            "SELECT * FROM items WHERE tenant = ? AND namespace = ? AND key = ?",
            (tenant or "", _ns(namespace), key),
        )
        return None if row is None else _item_of(row)

    def put_item_row(self, tenant: str | None, item: StoredItem) -> None:
        self._run(
            "INSERT OR REPLACE INTO items (tenant, namespace, key, value, created_at, updated_at,"
            " expires_at, ttl) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                tenant or "", _ns(item.namespace), item.key,
                json.dumps(item.value, ensure_ascii=False, separators=(",", ":")),
                to_micros(item.created_at), to_micros(item.updated_at),
                None if item.expires_at is None else to_micros(item.expires_at), item.ttl,
            ),
        )  # fmt: skip

    def drop_item(self, tenant: str | None, namespace: tuple[str, ...], key: str) -> bool:
        self._run(
            "DELETE FROM item_vectors WHERE tenant = ? AND namespace = ? AND key = ?",
            (tenant or "", _ns(namespace), key),
        )
        return (
            self._run(
                "DELETE FROM items WHERE tenant = ? AND namespace = ? AND key = ?",
                (tenant or "", _ns(namespace), key),
            )
            > 0
        )

    def item_rows(self, tenant: str | None, prefix: tuple[str, ...]) -> Generator[StoredItem]:
        params: list[object]
        if not prefix:
            where, params = "tenant = ?", [tenant or ""]
        else:
            start = _ns(prefix)[:-1]  # without its ']'
            where = (
                "tenant = ? AND namespace >= ? AND substr(namespace, 1, ?) = ?"
                " AND substr(namespace, ? + 1, 1) IN (',', ']')"
            )
            params = [tenant or "", start, len(start), start, len(start)]
        # Newest first, decoded one at a time: a search reads only as far as its page.
        rows = self._conn.execute(
            f"SELECT * FROM items WHERE {where} ORDER BY updated_at DESC", params
        )
        try:
            for row in rows:
                yield _item_of(row)
        finally:  # a search that stopped early ends the statement before its next write
            rows.close()

    def sweep_item_rows(self, batch: int) -> int:
        gone = self._all(
            "SELECT tenant, namespace, key FROM items WHERE expires_at IS NOT NULL"
            " AND expires_at <= ? ORDER BY expires_at LIMIT ?",
            (self._now_us, batch),
        )
        for row in gone:
            keys = (row["tenant"], row["namespace"], row["key"])
            where = "WHERE tenant = ? AND namespace = ? AND key = ?"
            self._run(f"DELETE FROM item_vectors {where}", keys)
            self._run(f"DELETE FROM items {where}", keys)
        return len(gone)

    def put_item_vectors(
        self,
        tenant: str | None,
        namespace: tuple[str, ...],
        key: str,
        updated_at: datetime,
        vectors: Mapping[str, tuple[float, ...]],
    ) -> None:
        keys = (tenant or "", _ns(namespace), key)
        self._run("DELETE FROM item_vectors WHERE tenant = ? AND namespace = ? AND key = ?", keys)
        at_us = to_micros(updated_at)
        for field, vector in vectors.items():
            self._run(
                "INSERT INTO item_vectors (tenant, namespace, key, field, updated_at, embedding)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (*keys, field, at_us, json.dumps(list(vector), separators=(",", ":"))),
            )

    def item_vectors(
        self, tenant: str | None, namespace: tuple[str, ...], key: str
    ) -> tuple[datetime, dict[str, tuple[float, ...]]] | None:
        rows = self._all(
            "SELECT field, updated_at, embedding FROM item_vectors"
            " WHERE tenant = ? AND namespace = ? AND key = ?",
            (tenant or "", _ns(namespace), key),
        )
        if not rows:
            return None
        vectors = {r["field"]: tuple(float(x) for x in json.loads(r["embedding"])) for r in rows}
        return at(rows[0]["updated_at"]), vectors


__all__ = ["ItemsTx"]
