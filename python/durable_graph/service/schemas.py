"""The JSON schemas of a graph, as ``GET /assistants/{id}/schemas`` answers them.

LangGraph Server's shape: ``input_schema``, ``output_schema``, ``state_schema`` (one property per
channel a client sees, typed by what an update of it takes), ``config_schema`` (the
``configurable`` part only) and ``context_schema``. A schema LangGraph or pydantic cannot build —
a channel of a type pydantic has no schema for, say a LangChain message class under some
pydantic versions — is answered as ``null`` (or, for one state channel, as any value) and
logged, never a 500: a client asks for schemas to draw a form, not to fail.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langgraph.pregel import Pregel
from pydantic import TypeAdapter, create_model

log = logging.getLogger("durable_graph.service")

if TYPE_CHECKING:
    from durable_graph.service.threads import Threads

HIDDEN_CONFIGURABLE = ("thread_id", "checkpoint_id", "checkpoint_ns")
"""Keys of ``configurable`` the service sets itself: not a client's to give."""


def graph_schemas(name: str, graph: Pregel[Any, Any, Any, Any]) -> dict[str, Any]:
    """Every schema of ``graph`` (served as ``name``), each None when it cannot be built."""
    return {
        "graph_id": name,
        "input_schema": _or_none(name, "input", graph.get_input_jsonschema),
        "output_schema": _or_none(name, "output", graph.get_output_jsonschema),
        "state_schema": _or_none(name, "state", lambda: state_schema(graph)),
        "config_schema": _or_none(name, "config", lambda: configurable_schema(graph)),
        "context_schema": _or_none(name, "context", graph.get_context_jsonschema),
    }


async def served_schemas(threads: Threads, name: str) -> dict[str, Any]:
    """`graph_schemas` of the served graph ``name``, built off the loop (pydantic takes
    milliseconds to seconds)."""
    return await asyncio.to_thread(graph_schemas, name, await threads.graph(name))


def subgraph_schemas(
    name: str, graph: Pregel[Any, Any, Any, Any], namespace: str | None, recurse: bool
) -> dict[str, Any]:
    """``/assistants/{id}/subgraphs[/{namespace}]``: each subgraph of ``graph`` (those under
    ``namespace``; nested ones too with ``recurse``) by its namespace, with its schemas."""
    return {
        ns: {k: v for k, v in graph_schemas(f"{name}|{ns}", sub).items() if k != "graph_id"}
        for ns, sub in graph.get_subgraphs(namespace=namespace, recurse=recurse)
        if isinstance(sub, Pregel)  # a remote subgraph has no schemas to read here
    }


def state_schema(graph: Pregel[Any, Any, Any, Any]) -> dict[str, Any]:
    """An object with one optional property per streamed channel, of its update type (any value
    where pydantic has no schema for that type)."""
    fields: dict[str, Any] = {}
    for channel in graph.stream_channels_list:
        update = getattr(graph.channels[channel], "UpdateType", Any)  # a managed value: any
        fields[channel] = (update if _has_schema(update) else Any, None)
    model: Any = create_model(graph.get_name("State"), **fields)
    schema: dict[str, Any] = model.model_json_schema()
    return schema


def configurable_schema(graph: Pregel[Any, Any, Any, Any]) -> dict[str, Any]:
    """The schema of the run config's ``configurable`` (``{}`` when the graph declares none)."""
    config: Any = graph.config_schema()
    field = getattr(config, "model_fields", {}).get("configurable")
    if field is None:
        return {}
    schema: dict[str, Any] = TypeAdapter(field.annotation).json_schema()
    for key in HIDDEN_CONFIGURABLE:
        schema.get("properties", {}).pop(key, None)
    config_type = getattr(graph, "config_type", None)
    if isinstance(config_type, type):
        schema["title"] = config_type.__name__  # the name pydantic's schema loses
    return schema


def _has_schema(kind: Any) -> bool:
    try:
        TypeAdapter(kind).json_schema()
    except Exception:
        return False
    return True


def _or_none(name: str, which: str, build: Callable[[], Any]) -> Any:
    try:
        return build()
    except Exception as exc:  # any failure of a user's types: logged, answered as null
        log.warning("graph %s: no %s schema (%s: %s)", name, which, type(exc).__name__, exc)
        return None
