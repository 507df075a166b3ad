"""The SQLite store: the embedded rules (`durable_graph.embedded`) over one database file.

One file holds both halves (the tables of ``schema.sql``, named as in ``migrations/``); many
threads and many processes may open it. `connection` holds the file, its connections and
transactions; `storage` the SQL of each storage operation.

- **Store time** (D4) is the injectable ``clock``, read once per write after ``BEGIN IMMEDIATE``
  holds the lock; timestamps are integer microseconds since the epoch.
- **Values** are compact JSON text from `validation.encode_json`, decoded on every read. Nothing
  is pickled.
- **Tokens** come from one counter row shared by claims and leases (D3); entry ids are
  ``AUTOINCREMENT`` (never reused, even after `reclaim`); a deleted thread keeps its
  ``threads`` row (``live = 0``) with its last seq, so a new thread of that id continues it.
- **Waits** wake at once on a write through the same store object; other processes' writes are
  seen by reading again every poll interval (SPEC §11).
- **Files of version 1** (the tables of before this layout: ``claims``, ``tombstones``,
  ``writes``, ``entries``, ``attempts``) are migrated in place by the first `open` that may write;
  ``read_only=True`` refuses them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from durable_graph.core.errors import ValidationError
from durable_graph.core.validation import check_clock
from durable_graph.embedded.checkpointer import EmbeddedCheckpointer
from durable_graph.embedded.run_queue import EmbeddedRunQueue
from durable_graph.sqlite.connection import (
    SCHEMA_VERSION,
    SqliteConfig,
    SqliteStorage,
    open_storage,
)


class SqliteCheckpointer(EmbeddedCheckpointer):
    """The Checkpointer (SPEC §4) in one SQLite file, safe from many threads and processes;
    ``.run_queue`` is its `SqliteRunQueue` (SPEC §5)."""

    def __init__(self, storage: SqliteStorage) -> None:
        """Use `SqliteCheckpointer.open`."""
        super().__init__(storage)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        config: SqliteConfig = SqliteConfig(),
        clock: Callable[[], float] = time.time,
    ) -> SqliteCheckpointer:
        """Open the store in the file at ``path``, creating the file and schema when missing
        (``0600``) and migrating a version-1 file; with ``config.read_only``, only open an
        existing current store."""
        if not isinstance(path, (str, os.PathLike)):
            raise ValidationError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        text = os.fspath(path)
        if not isinstance(text, str) or text in ("", ":memory:") or text.startswith("file:"):
            raise ValidationError(
                f"path must name a file, got {text!r} (durable_graph.memory keeps a store in memory)"
            )
        if not isinstance(config, SqliteConfig):
            raise ValidationError(f"config must be a SqliteConfig, got {type(config).__name__}")
        check_clock(clock)
        return cls(open_storage(text, config, clock))


SqliteRunQueue = EmbeddedRunQueue
"""The SQLite store's run queue: the embedded queue rules (kept for its import path)."""


__all__ = ["SCHEMA_VERSION", "SqliteCheckpointer", "SqliteConfig", "SqliteRunQueue"]
