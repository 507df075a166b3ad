"""A store over N PL/Proxy partitions (SPEC §16): routing, the generated proxy, setup."""

from durable_graph.postgres.partitions.layout import (
    PROXY_KIND,
    Layout,
    grant,
    init,
    migrate,
    read_layout,
    verify,
)
from durable_graph.postgres.partitions.routing import (
    partition_of_entry,
    partition_of_thread,
    root_of,
)

__all__ = [
    "PROXY_KIND",
    "Layout",
    "grant",
    "init",
    "migrate",
    "partition_of_entry",
    "partition_of_thread",
    "read_layout",
    "root_of",
    "verify",
]
