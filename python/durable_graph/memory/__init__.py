"""The in-memory backend: `InMemoryCheckpointer` (sync) and `AsyncInMemoryCheckpointer`."""

from durable_graph.memory.async_store import AsyncInMemoryCheckpointer
from durable_graph.memory.store import InMemoryCheckpointer, InMemoryRunQueue, MemoryStorage

__all__ = ["AsyncInMemoryCheckpointer", "InMemoryCheckpointer", "InMemoryRunQueue", "MemoryStorage"]
