"""A store over N PL/Proxy partitions (SPEC §16): `routing` (which partition holds a thread or
an entry), `proxy` (the generated routing functions), `layout` (init, migrate, verify, grant),
`checks` (whether a proxy and its partitions are current).

The package imports only `routing`: `durable_graph.postgres.migrations` checks a proxy with
`checks` as a store opens on it, and `layout` migrates with `migrations`, so importing `layout`
here would close a circle.
"""

from durable_graph.postgres.partitions.routing import (
    partition_of_entry,
    partition_of_thread,
    root_of,
)

__all__ = ["partition_of_entry", "partition_of_thread", "root_of"]
