"""Observability (SPEC §13): the observer and store wrapper (`observer`), `tracing`, `metrics`."""

from durable_graph.observe.observer import (
    CallInfo,
    Observer,
    Observers,
    TraceContext,
    call_info,
    observed,
    outcome_name,
)

__all__ = [
    "CallInfo",
    "Observer",
    "Observers",
    "TraceContext",
    "call_info",
    "observed",
    "outcome_name",
]
