"""The rules of SPEC §4-§5 written once for the embedded stores, over a small storage interface.

- `storage`: the `Storage` / `Tx` Protocols: one read or write of a table per method.
- `rows`: the rows a storage hands out, named after ``migrations/0001.tables.sql``.
- `checkpointer`, `run_queue`: the rules (check order, errors, writes), over any storage.
- `common`: claim and lease checks, snapshots, the store's own encodings, the wait loop.

The two storages are `durable_graph.memory.store` (dicts) and `durable_graph.sqlite` (one file); the
PL/pgSQL functions of ``sql/`` are the independent second implementation, and
``tests/test_differential.py`` compares the two.
"""

from durable_graph.embedded.checkpointer import EmbeddedCheckpointer
from durable_graph.embedded.run_queue import EmbeddedRunQueue
from durable_graph.embedded.storage import Signal, Storage, Tx

__all__ = ["EmbeddedCheckpointer", "EmbeddedRunQueue", "Signal", "Storage", "Tx"]
