"""The SDK's stream frames of a run's events (``runs.stream``, ``runs.join_stream``, the thread
stream): each store event (``lg.<mode>``, its payload opened) as the frames of the modes a client
asked for, in the shapes the reference sends — ``messages`` accumulated token by token into
``messages/partial``, ``messages-tuple`` as LangGraph streams it, ``checkpoints`` and ``tasks``
taken from the debug chunks, a subgraph's frames named ``<mode>|<namespace>``."""

from __future__ import annotations

import json
from typing import Any, Final

from langchain_core.messages import BaseMessageChunk, message_chunk_to_message

from durable_graph.langgraph.values import from_json, message_dict, to_json

NS_SEP: Final = "|"
"""Between a mode and a subgraph's namespace in a frame's name (``updates|child:1``)."""


def frame(event: str, data: Any, seq: int | None) -> bytes:
    text = f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n"
    if seq is not None:
        text += f"id: {seq}\n"
    return (text + "\n").encode()


class FrameMapper:
    """Store events -> the SSE frames of the requested SDK modes."""

    def __init__(self, modes: list[str]) -> None:
        self.modes = modes
        self.messages: dict[str, Any] = {}  # id -> accumulated chunk ("messages" mode)
        self.metadata: dict[str, Any] = {}  # id -> its metadata (on a message's first token)

    def frames(self, kind: str, payload: Any) -> list[tuple[str, Any]]:
        mode = kind.removeprefix("lg.")
        data = payload.get("data") if isinstance(payload, dict) else None
        ns = payload.get("ns") if isinstance(payload, dict) else None
        suffix = "".join(f"{NS_SEP}{n}" for n in ns) if ns else ""
        out: list[tuple[str, Any]] = []
        if mode == "messages":
            if not isinstance(data, list) or len(data) != 2:
                return out
            chunk, metadata = data
            loaded = from_json(chunk)
            key = getattr(loaded, "id", None) or ""
            metadata = self.metadata.setdefault(key, metadata)
            if "messages-tuple" in self.modes:
                out.append((f"messages{suffix}", [message_dict(chunk), metadata]))
            if "messages" in self.modes:
                out.extend(self._partial(key, loaded, metadata))
            return out
        if mode == "debug" and isinstance(data, dict):
            typed = data.get("type")
            if "checkpoints" in self.modes and typed == "checkpoint":
                out.append((f"checkpoints{suffix}", message_dict(data.get("payload"))))
            if "tasks" in self.modes and typed in ("task", "task_result"):
                out.append((f"tasks{suffix}", message_dict(data.get("payload"))))
        if mode in self.modes:
            out.append((f"{mode}{suffix}", message_dict(data)))
        return out

    def _partial(self, key: str, loaded: Any, metadata: Any) -> list[tuple[str, Any]]:
        """``messages`` mode, as the reference: a message's metadata first, then each token as
        the message so far (``messages/partial``), or a whole message a node returned without
        streaming it (``messages/complete``)."""
        out: list[tuple[str, Any]] = []
        if key not in self.messages:
            out.append(("messages/metadata", {key: {"metadata": metadata}}))
        if not isinstance(loaded, BaseMessageChunk):
            self.messages[key] = loaded
            return [*out, ("messages/complete", [message_dict(to_json(loaded, lenient=True))])]
        so_far = loaded if key not in self.messages else self.messages[key] + loaded
        self.messages[key] = so_far
        whole = message_chunk_to_message(so_far)  # "ai", as the reference sends a partial
        return [*out, ("messages/partial", [message_dict(to_json(whole, lenient=True))])]


__all__ = ["NS_SEP", "FrameMapper", "frame"]
