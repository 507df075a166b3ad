"""Observability (SPEC §13): the observer and store wrapper (`observer`), `tracing`, `metrics`."""

from durable_graph.observe import observer
from durable_graph.observe.observer import *  # noqa: F403 (the package exports observer's names)

__all__ = observer.__all__
