"""`durable-graph dashboard`: a read-only web page over a store (extra durable-graph[dashboard])."""

from __future__ import annotations

try:
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "the dashboard needs Starlette and uvicorn: pip install 'durable-graph[dashboard]'"
    ) from exc

from durable_graph.dashboard.app import create_app

__all__ = ["create_app"]
