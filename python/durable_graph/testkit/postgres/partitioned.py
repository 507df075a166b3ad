"""A throwaway partitioned store for tests: PostgreSQL servers, N partition databases spread
over them round-robin, a proxy database on the first, set up by
`durable_graph.postgres.partitions.init` (SPEC §16.4)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta

import psycopg
from psycopg import sql

from durable_graph.postgres import partitions
from durable_graph.testkit.postgres import server as pg_server
from durable_graph.testkit.postgres.clock import PgClock
from durable_graph.testkit.postgres.schema import reset_store


@dataclass
class PartitionedStore:
    """The servers, the partitions' DSNs (by number), the proxy's DSN and the schema."""

    servers: list[pg_server.PgServer]
    partitions: list[str]
    proxy: str
    schema: str

    def server_of(self, part: int) -> pg_server.PgServer:
        return self.servers[part % len(self.servers)]

    def reset(self) -> None:
        """Empty every partition (`reset_store`; the sequences restart at their offsets)."""
        for dsn in self.partitions:
            with psycopg.connect(dsn, autocommit=True) as conn:
                reset_store(conn, self.schema)

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


def create(
    servers: Sequence[pg_server.PgServer],
    n: int,
    schema: str,
    prefix: str = "dg_part",
    proxy_db: str = "dg_proxy",
) -> PartitionedStore:
    """Make the databases and run `partitions.init`."""
    dsns = []
    for part in range(n):
        server = servers[part % len(servers)]
        db = f"{prefix}{part}"
        with psycopg.connect(server.dsn(), autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
        dsns.append(server.dsn(db))
    with psycopg.connect(servers[0].dsn(), autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(proxy_db)))
    proxy = servers[0].dsn(proxy_db)
    partitions.init(proxy, dsns, schema)
    return PartitionedStore(list(servers), dsns, proxy, schema)


@contextlib.contextmanager
def started(count: int = 3, n: int = 8, schema: str = "dg") -> Iterator[PartitionedStore]:
    """``count`` fresh throwaway servers (fsync off) holding a store of ``n`` partitions."""
    servers: list[pg_server.PgServer] = []
    try:
        for _ in range(count):
            servers.append(pg_server.start())
        yield create(servers, n, schema)
    finally:
        for server in servers:
            server.stop()


__all__ = ["MultiClock", "PartitionedStore", "create", "started"]
