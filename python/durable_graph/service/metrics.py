"""``GET /metrics`` (SPEC §25.3): the run queue's depth as LangGraph Server reports it.

Prometheus text by default (``lg_api_num_pending_runs`` and ``lg_api_num_running_runs``, the
reference's names, and ``durable_graph_runs{state=...}`` for every state), or the reference's
JSON (``?format=json``: ``{"queue": {"n_pending", "n_running",
"pending_runs_wait_time_max_secs"}}``). Read from `RunQueue.stats` in one store call: the same
answer from every API process. With users (``auth``) a user sees the counts of their own runs
only (their tenant's, SPEC §20.4); the reference's HTTP and connection-pool figures are not
reported (they are per process, and a scraper of several processes would add them wrongly).
"""

from __future__ import annotations

from starlette.responses import JSONResponse, PlainTextResponse, Response

from durable_graph.core.async_protocols import AsyncCheckpointer

PROMETHEUS_TYPE = "text/plain; version=0.0.4; charset=utf-8"


async def metrics(store: AsyncCheckpointer, tenant: str | None, form: str) -> Response:
    """The queue's figures for ``tenant`` in ``form`` (``json``; anything else Prometheus)."""
    stats = await store.run_queue.stats(tenant)
    waited = stats.oldest_waiting_age
    if form == "json":
        queue = {
            "n_pending": stats.open,
            "n_running": stats.running,
            "pending_runs_wait_time_max_secs": None if waited is None else waited.total_seconds(),
        }
        return JSONResponse({"queue": queue})
    lines = [
        "# HELP lg_api_num_pending_runs Runs waiting for a worker.",
        "# TYPE lg_api_num_pending_runs gauge",
        f"lg_api_num_pending_runs {stats.open}",
        "# HELP lg_api_num_running_runs Runs a worker is running.",
        "# TYPE lg_api_num_running_runs gauge",
        f"lg_api_num_running_runs {stats.running}",
        "# HELP durable_graph_runs Runs (queue entries) by state.",
        "# TYPE durable_graph_runs gauge",
        *(f'durable_graph_runs{{state="{s}"}} {n}' for s, n in stats.counts().items()),
        "# HELP durable_graph_oldest_waiting_seconds Age of the oldest run waiting.",
        "# TYPE durable_graph_oldest_waiting_seconds gauge",
        f"durable_graph_oldest_waiting_seconds {0.0 if waited is None else waited.total_seconds()}",
    ]
    return PlainTextResponse("\n".join(lines) + "\n", media_type=PROMETHEUS_TYPE)
