"""Where a call goes in a partitioned store (SPEC §16.1): the routing hash, for every language.

A store of N partitions (N a power of two, 1..1024) routes:

- a **thread-keyed** call by its thread's **root**: the thread id up to its first U+001F (the
  whole id when it has none). A child or subgraph thread is named ``root + U+001F + suffix``
  (LangGraph's subgraph namespaces are), so a thread tree lives in one partition. The partition
  is ``h & (N - 1)`` where ``h`` is the first four bytes of the MD5 digest of the root's UTF-8
  bytes read as a big-endian signed 32-bit integer. In SQL (as the proxy computes it):
  ``('x' || left(md5(root), 8))::bit(32)::int4 & (N - 1)``; in Python: `partition_of_thread`.
- an **entry-keyed** call by its entry id: partition ``entry_id & (N - 1)`` (each partition's
  entry ids and fencing tokens count in steps of N from an offset equal to its number, so both
  are ≡ the partition mod N and unique store-wide).
- a **store-wide** call (lease, listings, sweeps, ``submit_many``) on several partitions, merged
  by the proxy (``sql/proxy/``).
"""

from __future__ import annotations

import hashlib

from durable_graph.core.errors import ValidationError

ROOT_SEPARATOR = "\x1f"
"""U+001F: a thread id's root ends before its first one."""

MAX_PARTITIONS = 1024


def check_partitions(value: object) -> int:
    """N: a power of two, 1..1024."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValidationError(f"partitions must be an int, got {type(value).__name__}")
    if not 1 <= value <= MAX_PARTITIONS or value & (value - 1):
        raise ValidationError(
            f"partitions must be a power of two in 1..{MAX_PARTITIONS}, got {value}"
        )
    return value


def root_of(thread_id: str) -> str:
    """The thread id up to its first U+001F."""
    return thread_id.split(ROOT_SEPARATOR, 1)[0]


def thread_hash(thread_id: str) -> int:
    """The signed 32-bit routing hash of ``thread_id``'s root."""
    digest = hashlib.md5(root_of(thread_id).encode("utf-8"), usedforsecurity=False).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


def partition_of_thread(thread_id: str, partitions: int) -> int:
    """The partition holding ``thread_id`` (and its whole tree) in a store of ``partitions``."""
    return thread_hash(thread_id) & (check_partitions(partitions) - 1)


def partition_of_entry(entry_id: int, partitions: int) -> int:
    """The partition holding queue entry ``entry_id``."""
    return entry_id & (check_partitions(partitions) - 1)


__all__ = [
    "MAX_PARTITIONS",
    "ROOT_SEPARATOR",
    "check_partitions",
    "partition_of_entry",
    "partition_of_thread",
    "root_of",
    "thread_hash",
]
