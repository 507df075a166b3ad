"""LangGraph on durable_graph (SPEC §12): checkpoint savers with this store's guarantees.

`DurableSaver(store)` over a sync store and `AsyncDurableSaver(store)` over an async store are
LangGraph `BaseCheckpointSaver`s; `saver.for_run(claim, run_id)` fences every write by a run's
claim. `graph_handler(graph, saver)` (sync `Worker`) and `async_graph_handler(graph, async_saver)`
(`AsyncWorker`) run a compiled graph for each queue entry, with the submission's run config
(`graph_submission`, `run_request`) and its stream written into the event log (`streaming`);
values cross the queue as JSON (`values`). `DurableStore` / `AsyncDurableStore` are LangGraph
`BaseStore`s over the store's items (long-term memory, SPEC §20.3). Needs the extra ``durable-graph[langgraph]``.
"""

from __future__ import annotations

from durable_graph.langgraph.async_saver import AsyncDurableSaver
from durable_graph.langgraph.codec import safe_serializer
from durable_graph.langgraph.handler import async_graph_handler, graph_handler, output_of
from durable_graph.langgraph.run_request import RunRequest, graph_submission, run_request
from durable_graph.langgraph.saver import DurableSaver
from durable_graph.langgraph.store import AsyncDurableStore, DurableStore

__all__ = [
    "AsyncDurableSaver",
    "AsyncDurableStore",
    "DurableSaver",
    "DurableStore",
    "RunRequest",
    "async_graph_handler",
    "graph_handler",
    "graph_submission",
    "output_of",
    "run_request",
    "safe_serializer",
]
