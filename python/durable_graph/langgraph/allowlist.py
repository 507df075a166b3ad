"""Which typed values a saver loads as their types (SPEC §14.1): a compiled graph's own schema
types, without an environment variable.

The savers' serializer is LangGraph's `JsonPlusSerializer` with pickle off and msgpack restricted
(`codec.safe_serializer`): on load it rebuilds only LangGraph's safe types
(``SAFE_MSGPACK_TYPES``: datetimes, UUIDs, decimals, paths, LangGraph's own values...), anything
else comes back as plain data. A graph's state types are allowed on top of those, as LangGraph
itself does under ``LANGGRAPH_STRICT_MSGPACK=true``: when a graph is compiled, LangGraph collects
the types named by its state, input, output, context and node input schemas and by its channels'
value and update types (recursively through containers, unions, TypedDicts, dataclasses and
pydantic models), adds LangChain's message classes, and hands that allow-list to its
checkpointer (`BaseCheckpointSaver.with_allowlist`), which our savers accept. The allow-list is the
graph's, held in memory: nothing stored names what may be loaded, so a row written by anyone
else cannot widen it, and nothing is imported that the graph's own code does not name.

LangGraph does that collection only in strict mode, a switch read when a graph is compiled
(``langgraph._internal._serde.STRICT_MSGPACK_ENABLED``). `enable` turns on that collection alone
(LangGraph's serializer defaults stay as they are: the switch of the serializers is another one,
``langgraph.checkpoint.serde._msgpack``), and importing the savers calls it. For other savers in
the process it changes nothing visible: a permissive serializer (LangGraph's default) keeps
allowing everything, and a restricted one gains its graph's schema types, as strict mode would
give it. A graph compiled before `durable_graph.langgraph` was imported has no allow-list: give
it one with ``graph.checkpointer = saver.with_allowlist(types)``, or compile it after the import.
"""

from __future__ import annotations


def enable() -> bool:
    """Turn on LangGraph's compile-time schema allow-lists; False if this LangGraph has none."""
    try:
        from langgraph._internal import _serde
    except ImportError:  # a LangGraph without allow-lists: nothing to collect
        return False
    if not getattr(_serde, "_SUPPORTS_ALLOWLIST", False):
        return False
    setattr(_serde, "STRICT_MSGPACK_ENABLED", True)  # noqa: B010 - not exported by LangGraph
    return True


__all__ = ["enable"]
