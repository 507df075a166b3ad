"""``durable-graph serve``: the part of LangGraph Server's API that ``langgraph-sdk`` and
``RemoteGraph`` use, over a durable_graph store (SPEC §14.6). Extra ``durable-graph[service]``.

`create_app(store, graphs)` is the ASGI app over an async store (`durable_graph.aio`: no request,
stream or join holds a thread while it waits, SPEC §20.1); ``durable-graph serve --config
langgraph.json`` runs it under uvicorn with in-process workers (``--workers N``) or none
(``--workers 0``, workers run elsewhere with ``durable-graph worker --langgraph-config
langgraph.json``). The service keeps no state of its own: threads, runs and streams are the
store's (see `records`), so any number of API processes and workers share one store.
``docs/service.md`` lists the endpoints.
"""

from __future__ import annotations

from durable_graph.service.app import create_app

__all__ = ["create_app"]
