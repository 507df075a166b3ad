"""What the dashboard and the CLI show for stored values (SPEC §14.3): readable, never blobs.

- A checkpoint written by the LangGraph saver (state ``{"cp", "values", "lg_parent"}``) shows as
  its channel values, decoded with the saver's allow-listed serializer and written as JSON
  (messages as ``{"type": "ai", "content": ...}``), without LangGraph's bookkeeping
  (``channel_versions``, ``versions_seen``, ``branch:`` channels); its pending writes likewise.
  Without LangGraph installed, or for any other state, the stored JSON shows as it is.
- Subgraph namespace threads (``<root> U+001F <namespace>``) are listed under their root, not as
  threads of their own (`is_top_level`).
- A queue entry whose LangGraph run stopped at ``interrupt()`` is **waiting for input**, with the
  interrupt's value (`waiting_for`); an entry closed by a later INTERRUPT submission is
  **superseded** (`SUPERSEDED`: the stored outcome stays ``Interrupted``; the word "interrupted"
  is LangGraph's for a run stopped at ``interrupt()``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from durable_graph.core.model import JSON, Checkpoint, Completed, QueueEntry

NS_SEP: Final = "\x1f"
SUPERSEDED: Final = "superseded"
"""How the dashboard and CLI name an entry closed ``Interrupted(by=...)`` by a later INTERRUPT
submission (the listing state and stored value stay ``interrupted``)."""

LANGGRAPH_NEXT: Final = ("langgraph",)


def is_top_level(thread_id: str) -> bool:
    return NS_SEP not in thread_id


def is_langgraph_state(state: JSON) -> bool:
    return isinstance(state, dict) and {"cp", "values"} <= set(state) and "lg_parent" in state


def _serde() -> Any:
    from durable_graph.langgraph.codec import safe_serializer

    return safe_serializer()


def readable_state(state: JSON) -> JSON:
    """A LangGraph checkpoint's channel values as JSON (see the module docstring); any other
    state as it is."""
    if not is_langgraph_state(state):
        return state
    assert isinstance(state, dict)
    try:
        from durable_graph.langgraph.codec import decode
        from durable_graph.langgraph.values import message_dict, to_json
    except ImportError:
        return state
    serde = _serde()
    values: dict[str, JSON] = {}
    raw = state.get("values")
    for channel, stored in (raw if isinstance(raw, Mapping) else {}).items():
        if channel.startswith("branch:") or channel.startswith("__"):
            continue
        try:
            values[channel] = message_dict(to_json(decode(serde, stored), lenient=True))
        except Exception as exc:
            values[channel] = {"__unreadable__": f"{type(exc).__name__}: {exc}"}
    return values


def readable_write(value: JSON) -> JSON:
    """A pending write's value as JSON (the saver stores ``{"j": v}`` or a typed blob)."""
    if not (isinstance(value, dict) and ("j" in value or {"t", "b"} <= set(value))):
        return value
    try:
        from durable_graph.langgraph.codec import decode
        from durable_graph.langgraph.values import message_dict, to_json
    except ImportError:
        return value
    try:
        return message_dict(to_json(decode(_serde(), value), lenient=True))
    except Exception as exc:
        return {"__unreadable__": f"{type(exc).__name__}: {exc}"}


def readable_next(cp: Checkpoint) -> str:
    """The NEXT column: LangGraph's step and source for its checkpoints (their stored ``next``
    is the saver's marker), the stored ``next`` otherwise."""
    if tuple(cp.next) == LANGGRAPH_NEXT and isinstance(cp.metadata, dict):
        step, source = cp.metadata.get("step"), cp.metadata.get("source")
        return f"langgraph step {step} ({source})"
    return ",".join(cp.next) or "(end)"


def waiting_for(entry: QueueEntry) -> list[JSON] | None:
    """The interrupt values a completed LangGraph run waits on, or None."""
    outcome = entry.outcome
    if not isinstance(outcome, Completed):
        return None
    return waiting_for_output(outcome.output)


def waiting_for_output(output: JSON) -> list[JSON] | None:
    """`waiting_for` of a completed entry's output."""
    if not isinstance(output, dict):
        return None
    interrupts = output.get("interrupts")
    if not isinstance(interrupts, list) or not interrupts:
        return None
    return [i.get("value") if isinstance(i, dict) else i for i in interrupts]
