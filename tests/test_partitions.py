"""The store over PL/Proxy partitions (SPEC §16): the contract suites through a proxy of 8
partitions on 3 throwaway servers, the amended rules of §16.2 on their own, setup and failure.

The servers are started once per session (`partitioned` fixture: 3 fresh servers, besides the
session's own, 8 partition databases round-robin, the proxy database on the first), the store
set up by `durable_graph.postgres.partitions.init`; every test empties the partitions first.
Needs Debian's ``postgresql-15-plproxy`` (`make pg-deps` installs it).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.testkit import Harness
from durable_graph.testkit.contract.checkpointer.suite import CheckpointerContract
from durable_graph.testkit.contract.run_queue.suite import RunQueueContract
from durable_graph.testkit.postgres import partitioned

SCHEMA = "dg"


@pytest.fixture(scope="session")
def partitioned_store() -> Iterator[partitioned.PartitionedStore]:
    with partitioned.started(count=3, n=8, schema=SCHEMA) as store:
        yield store


@pytest.fixture(scope="session")
def partitioned_clock(partitioned_store: partitioned.PartitionedStore) -> partitioned.MultiClock:
    return partitioned_store.clock()


def _proxy_harness(
    ps: partitioned.PartitionedStore, clock: partitioned.MultiClock
) -> Iterator[Harness]:
    ps.reset()
    store = PostgresCheckpointer.open(ps.proxy, PostgresConfig(schema=SCHEMA, auto_migrate=False))
    try:
        yield Harness(store, clock)
    finally:
        store.close()


class TestProxyCheckpointerContract(CheckpointerContract):
    @pytest.fixture
    def harness(
        self,
        partitioned_store: partitioned.PartitionedStore,
        partitioned_clock: partitioned.MultiClock,
    ) -> Iterator[Harness]:
        yield from _proxy_harness(partitioned_store, partitioned_clock)


class TestProxyRunQueueContract(RunQueueContract):
    @pytest.fixture
    def harness(
        self,
        partitioned_store: partitioned.PartitionedStore,
        partitioned_clock: partitioned.MultiClock,
    ) -> Iterator[Harness]:
        yield from _proxy_harness(partitioned_store, partitioned_clock)
