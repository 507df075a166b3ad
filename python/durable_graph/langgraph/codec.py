"""How LangGraph's checkpoints, metadata and writes become the store's JSON (SPEC §12).

Pure functions shared by the sync and async savers. Values that are plain JSON are stored as
JSON; anything else goes through LangGraph's typed serializer, restricted to its msgpack
allow-list (never pickle: a stored ``pickle`` type is refused on load), as base64 text. So nothing
stored can run code when it is read back.

Layout of `Commit.state`: ``{"cp": <checkpoint without channel_values>, "values": {channel:
<encoded>}, "lg_parent": <LangGraph's parent id or null>, "sp": <committed on a store parent>}``. LangGraph's own parent id lives
here, because the store's ``parent_id`` is the head the saver last wrote (forks are puts whose
LangGraph parent is not the head).

Namespaces: namespace ``""`` is the thread itself; a subgraph namespace is a child thread of it
named ``<thread_id> NS_SEP <namespace>``, so `delete_thread` cascades and `children()` lists the
namespaces.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.base import (
    Checkpoint as LGCheckpoint,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from durable_graph.core.errors import ValidationError
from durable_graph.core.model import Checkpoint, PendingWrite
from durable_graph.langgraph.encryption import SealingSerializer

NS_SEP = "\x1f"
"""Separates a thread id from a subgraph namespace in a child thread's id (ASCII unit separator)."""

GEN_SEP = "\x1f#"
"""Marks the generation of a special write's channel (see `special_channel`)."""

STORE_PARENT_KEY = "sp"
"""Key of `Commit.state` saying whether the checkpoint was committed on a store parent."""

TYPED_KEY = "__dg_typed__"
"""Key of the metadata entry that holds the non-JSON metadata values, each typed."""


def safe_serializer() -> JsonPlusSerializer:
    """LangGraph's serializer with pickle off and msgpack restricted to its safe types."""
    return JsonPlusSerializer(pickle_fallback=False, allowed_msgpack_modules=None)


def store_thread(thread_id: str, ns: str) -> str:
    """The store thread of a LangGraph (thread, namespace)."""
    if NS_SEP in thread_id:
        raise ValidationError("thread_id: must not contain U+001F (the namespace separator)")
    return thread_id if ns == "" else f"{thread_id}{NS_SEP}{ns}"


def split_thread(store_thread_id: str) -> tuple[str, str]:
    """(LangGraph thread id, namespace) of a store thread."""
    root, _, ns = store_thread_id.partition(NS_SEP)
    return root, ns


def config_parts(config: RunnableConfig) -> tuple[str, str, str | None]:
    """(thread_id, checkpoint_ns, checkpoint_id) of a config; `ValidationError` without a thread."""
    conf = config.get("configurable") or {}
    thread_id = conf.get("thread_id")
    if thread_id is None:
        raise ValidationError("config: configurable.thread_id is required")
    ns = conf.get("checkpoint_ns") or ""
    checkpoint_id = conf.get("checkpoint_id")
    return str(thread_id), str(ns), checkpoint_id


_JSON_SCALARS = (bool, int, str, type(None))


def is_json(value: Any, depth: int = 0) -> bool:
    """True when ``value`` round-trips exactly through `json` (tuples and bytes do not)."""
    # Exact types only (a str or int subclass does not come back as itself). Plain loops, not
    # all(...): every put checks its metadata and values here.
    if depth > 500:
        return False
    kind = type(value)
    if kind in _JSON_SCALARS:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is list:
        for item in value:  # noqa: SIM110 - see above
            if not is_json(item, depth + 1):
                return False
        return True
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not is_json(item, depth + 1):
                return False
        return True
    return False


def encode(serde: SerializerProtocol, value: object) -> dict[str, Any]:
    """``{"j": value}`` for plain JSON, else ``{"t": type, "b": base64}`` from the typed serializer
    (always that under ``encryption``'s blob handlers: plain JSON would be plaintext at rest)."""
    if is_json(value) and not (isinstance(serde, SealingSerializer) and serde.seals_blobs):
        return {"j": value}
    type_, data = serde.dumps_typed(value)
    if type_ == "pickle":
        raise ValidationError("value: would need pickle, which this saver never stores")
    return {"t": type_, "b": base64.b64encode(data).decode("ascii")}


def decode(serde: SerializerProtocol, stored: Mapping[str, Any]) -> Any:
    if "j" in stored:
        return stored["j"]
    type_ = stored["t"]
    if type_.partition("+")[0] == "pickle":
        raise ValidationError("stored value: pickle is never loaded")
    return serde.loads_typed((type_, base64.b64decode(stored["b"])))


def encode_checkpoint(
    serde: SerializerProtocol, checkpoint: LGCheckpoint, lg_parent: str | None
) -> dict[str, Any]:
    rest = {k: v for k, v in checkpoint.items() if k != "channel_values"}
    values = {k: encode(serde, v) for k, v in checkpoint.get("channel_values", {}).items()}
    return {"cp": encode(serde, rest), "values": values, "lg_parent": lg_parent}


def decode_checkpoint(serde: SerializerProtocol, state: Mapping[str, Any]) -> LGCheckpoint:
    rest = dict(decode(serde, state["cp"]))
    rest["channel_values"] = {k: decode(serde, v) for k, v in state["values"].items()}
    return cast(LGCheckpoint, rest)


def encode_metadata(serde: SerializerProtocol, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """JSON values as they are (so the store can filter on them); others typed under TYPED_KEY."""
    plain: dict[str, Any] = {}
    typed: dict[str, Any] = {}
    for key, value in metadata.items():
        if is_json(value):
            plain[key] = value
        else:
            typed[key] = encode(serde, value)
    if typed:
        plain[TYPED_KEY] = typed
    return serde.seal_json(plain) if isinstance(serde, SealingSerializer) else plain


def decode_metadata(serde: SerializerProtocol, stored: object) -> CheckpointMetadata:
    if not isinstance(stored, dict):
        return cast(CheckpointMetadata, {})
    if isinstance(serde, SealingSerializer):
        stored = serde.open_json(stored)
    out = {k: v for k, v in stored.items() if k != TYPED_KEY}
    for key, value in (stored.get(TYPED_KEY) or {}).items():
        out[key] = decode(serde, value)
    return cast(CheckpointMetadata, out)


def metadata_matches(metadata: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    return not filter or all(k in metadata and metadata[k] == v for k, v in filter.items())


def special_channel(channel: str, generation: int) -> str:
    """The stored channel of a special write (ERROR, INTERRUPT, SCHEDULED, RESUME).

    LangGraph overwrites those; the store keeps the first write per key. So each special write is
    stored under a new generation and reads keep the newest generation per (task, channel).
    """
    return f"{channel}{GEN_SEP}{generation}"


def is_special(channel: str) -> bool:
    return channel in WRITES_IDX_MAP


def next_generation(existing: Sequence[PendingWrite], task_id: str, channel: str) -> int:
    prefix = f"{channel}{GEN_SEP}"
    gens = [
        int(w.channel[len(prefix) :])
        for w in existing
        if w.task_id == task_id and w.channel.startswith(prefix)
    ]
    return max(gens, default=0) + 1


def decode_writes(
    serde: SerializerProtocol, writes: Sequence[PendingWrite]
) -> list[tuple[str, str, Any]]:
    """LangGraph's pending writes, in its ``writes_sort_key`` order: (task_path, task_id, idx).

    The store returns them by (task_path, task_id, index); within a task, a special write (the
    newest generation of each) takes LangGraph's index for its channel (``WRITES_IDX_MAP``,
    negative: before the task's regular writes), as LangGraph's own savers store it.
    """
    newest: dict[tuple[str, str], tuple[int, PendingWrite]] = {}
    order: list[tuple[tuple[str, str, int], tuple[str, str] | PendingWrite]] = []
    position: dict[tuple[str, str], int] = {}
    for w in writes:
        channel, sep, gen = w.channel.partition(GEN_SEP)
        group = (w.task_path, w.task_id)
        if sep and is_special(channel):
            key = (w.task_id, channel)
            if key not in newest:
                order.append(((w.task_path, w.task_id, WRITES_IDX_MAP[channel]), key))
            if key not in newest or int(gen) > newest[key][0]:
                newest[key] = (int(gen), w)
        else:
            idx = position.get(group, 0)
            position[group] = idx + 1
            order.append(((w.task_path, w.task_id, idx), w))
    order.sort(key=lambda item: item[0])  # stable: ties keep the store's order
    out: list[tuple[str, str, Any]] = []
    for _, item in order:
        if isinstance(item, PendingWrite):
            out.append((item.task_id, item.channel, decode(serde, cast(Any, item.value))))
        else:
            w = newest[item][1]
            out.append((w.task_id, item[1], decode(serde, cast(Any, w.value))))
    return out


def to_tuple(serde: SerializerProtocol, cp: Checkpoint) -> CheckpointTuple:
    thread_id, ns = split_thread(cp.thread_id)
    state = cast(Mapping[str, Any], cp.state)
    config: RunnableConfig = {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": cp.checkpoint_id,
        }
    }
    lg_parent = state.get("lg_parent")
    parent: RunnableConfig | None = None
    # The store left the checkpoint with no parent (prune removed the one it was committed on):
    # it reports none, as PostgresSaver's prune leaves it. A thread's first checkpoint has no
    # store parent either, but keeps LangGraph's (STORE_PARENT_KEY: it was committed on none).
    if cp.parent_id is None and state.get(STORE_PARENT_KEY):
        lg_parent = None
    if lg_parent is not None:
        parent = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": lg_parent,
            }
        }
    return CheckpointTuple(
        config=config,
        checkpoint=decode_checkpoint(serde, state),
        metadata=decode_metadata(serde, cp.metadata),
        parent_config=parent,
        pending_writes=decode_writes(serde, cp.writes),
    )
