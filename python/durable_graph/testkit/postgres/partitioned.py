"""A throwaway partitioned store for tests: PostgreSQL servers, N partition databases spread
over them round-robin, a proxy database on the first, set up by
`durable_graph.postgres.partitions.layout.init` (SPEC §16.4)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg
from psycopg import sql

from durable_graph.postgres.partitions import layout
from durable_graph.testkit.postgres import server as pg_server
from durable_graph.testkit.postgres.clock import PgClock
from durable_graph.testkit.postgres.schema import store_sequences, store_tables


@dataclass
class PartitionedStore:
    """The servers, the partitions' DSNs (by number), the proxy's DSN and the schema."""

    servers: list[pg_server.PgServer]
    partitions: list[str]
    proxy: str
    schema: str

    def server_of(self, part: int) -> pg_server.PgServer:
        return self.servers[part % len(self.servers)]

    _resetters: list[tuple[psycopg.Connection[Any], bytes]] = field(default_factory=list)

    def reset(self) -> None:
        """Empty every partition, all at once (what `reset_store` does, as one statement a
        partition on a connection kept open: DELETE rather than TRUNCATE, which costs file
        operations per table; the sequences restart at their partition offsets)."""
        if not self._resetters:
            for dsn in self.partitions:
                conn = psycopg.connect(dsn, autocommit=True)
                self._resetters.append((conn, _reset_script(conn, self.schema)))
        errors: list[BaseException] = []

        def run(i: int) -> None:
            conn, script = self._resetters[i]
            try:
                try:
                    conn.execute(script)
                except psycopg.OperationalError:  # the server restarted since: reconnect once
                    conn.close()
                    conn = psycopg.connect(self.partitions[i], autocommit=True)
                    self._resetters[i] = (conn, script)
                    conn.execute(script)
            except BaseException as exc:  # reported below, on the caller's thread
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(self._resetters))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def close(self) -> None:
        for conn, _ in self._resetters:
            conn.close()
        self._resetters.clear()

    def clock(self) -> MultiClock:
        """A test clock moving every partition's clock together."""
        return MultiClock([PgClock(dsn, self.schema) for dsn in self.partitions])


class MultiClock:
    """`ClockControl` over several partitions' `PgClock`s."""

    def __init__(self, clocks: Sequence[PgClock]) -> None:
        self._clocks = list(clocks)

    def advance(self, delta: timedelta) -> None:
        for clock in self._clocks:
            clock.advance(delta)


def _reset_script(conn: psycopg.Connection[Any], schema: str) -> bytes:
    """One statement emptying a partition as `reset_store` does."""
    tables = store_tables(conn, schema)
    sequences = store_sequences(conn, schema)
    parts: list[sql.Composable] = [sql.SQL("SET session_replication_role = replica")]
    parts += [sql.SQL("DELETE FROM {}").format(sql.Identifier(schema, t)) for t in tables]
    parts += [
        sql.SQL("ALTER SEQUENCE {} RESTART").format(sql.Identifier(schema, q)) for q in sequences
    ]
    parts += [
        sql.SQL("DELETE FROM {}").format(sql.Identifier(schema, "limits")),
        sql.SQL("INSERT INTO {} DEFAULT VALUES").format(sql.Identifier(schema, "limits")),
        sql.SQL("SET session_replication_role = origin"),
    ]
    clock = conn.execute(
        "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'dg_test_clock'", (schema,)
    ).fetchone()
    if clock:
        parts.append(
            sql.SQL("UPDATE {} SET clock_offset = interval '0'").format(
                sql.Identifier(schema, "dg_test_clock")
            )
        )
    return sql.SQL("; ").join(parts).as_bytes(conn)


def create(
    servers: Sequence[pg_server.PgServer],
    n: int,
    schema: str,
    prefix: str = "dg_part",
    proxy_db: str = "dg_proxy",
    homes: Sequence[tuple[str, str]] | None = None,
) -> PartitionedStore:
    """Make the databases and run `layout.init`. Partition ``i`` lives on server ``i %
    len(servers)``, or, with ``homes``, on ``homes[i % len(homes)]``: (an admin DSN of its
    server, a DSN template for the partition with ``{db}``, e.g. a replicated pair's multi-host
    DSN). The proxy is on the first server."""
    if homes is None:
        homes = [(s.dsn(), f"host={s.host} port={s.port} dbname={{db}}") for s in servers]
    dsns = []
    for part in range(n):
        admin_dsn, template = homes[part % len(homes)]
        db = f"{prefix}{part}"
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
        # No user: the proxy connects to a partition as the calling role.
        dsns.append(template.format(db=db))
    with psycopg.connect(servers[0].dsn(), autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(proxy_db)))
    proxy = servers[0].dsn(proxy_db)
    layout.init(proxy, dsns, schema)
    full = [layout.with_credentials(d, proxy) for d in dsns]
    return PartitionedStore(list(servers), full, proxy, schema)


@contextlib.contextmanager
def started(count: int = 3, n: int = 8, schema: str = "dg") -> Iterator[PartitionedStore]:
    """``count`` fresh throwaway servers (fsync off) holding a store of ``n`` partitions."""
    servers: list[pg_server.PgServer] = []
    try:
        for _ in range(count):
            servers.append(pg_server.start())
        store = create(servers, n, schema)
        try:
            yield store
        finally:
            store.close()
    finally:
        for server in servers:
            server.stop()


__all__ = ["MultiClock", "PartitionedStore", "create", "started"]
