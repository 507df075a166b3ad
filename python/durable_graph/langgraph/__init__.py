"""LangGraph on durable_graph (SPEC §12): checkpoint savers with this store's guarantees.

`DurableSaver(store)` over a sync store and `AsyncDurableSaver(store)` over an async store are
LangGraph `BaseCheckpointSaver`s; `saver.for_run(claim, run_id)` fences every write by a run's
claim. `graph_handler(graph)` runs a compiled graph for each queue entry. Needs the extra
``durable-graph[langgraph]``.
"""

from __future__ import annotations

from durable_graph.langgraph.async_saver import AsyncDurableSaver
from durable_graph.langgraph.codec import safe_serializer
from durable_graph.langgraph.handler import async_graph_handler, graph_handler, output_of
from durable_graph.langgraph.saver import DurableSaver

__all__ = [
    "AsyncDurableSaver",
    "DurableSaver",
    "async_graph_handler",
    "graph_handler",
    "output_of",
    "safe_serializer",
]
