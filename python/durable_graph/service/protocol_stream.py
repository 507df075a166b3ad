"""``POST /threads/{thread_id}/stream/events``: a thread's protocol events as SSE (SPEC §20.2).

The stream is the thread's, not a run's: it follows the thread's log from its first event across
every run (a run, its interrupt, the run that resumes it), translated by `protocol_events`, and
sends what the request's filter (``channels``, ``namespaces``, ``depth``, ``since``) lets
through, until the client goes away (as LangGraph Server's: it does not end with a run). It
waits as `follow` does (`await_events_after`: NOTIFY on PostgreSQL, polling across SQLite
processes), re-reads the thread's runs when an event names a run it does not know and while
nothing arrives, and sends an SSE comment every `KEEPALIVE` of silence so that proxies and
clients' read timeouts keep an idle stream open.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any, Final

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.errors import ValidationError
from durable_graph.core.model import QueueEntry, WatchPolicy
from durable_graph.langgraph.streaming import EVENT_PREFIX
from durable_graph.service.protocol_events import Filter, Translator, is_channel

PAGE: Final = 1000
WAIT: Final = timedelta(milliseconds=500)
"""How long the stream waits for new events before it re-reads the thread's runs."""
KEEPALIVE: Final = 10.0
"""Seconds of silence after which an SSE comment is sent."""
RUNS_READ: Final = 1000
"""Runs of a thread a stream knows (the most recent)."""


def request_filter(body: Mapping[str, Any]) -> Filter:
    """The filter of an ``EventStreamRequest`` body, checked (`ValidationError` naming the
    field)."""
    channels = body.get("channels")
    if not isinstance(channels, list) or not channels:
        raise ValidationError("channels: required, a non-empty list of channels")
    bad = [c for c in channels if not is_channel(c)]
    if bad:
        raise ValidationError(
            f"channels: unsupported {bad[:5]!r}; values, updates, messages, tools, custom, "
            "lifecycle, input, checkpoints, tasks or custom:<name>"
        )
    namespaces = body.get("namespaces")
    if namespaces is not None and not (
        isinstance(namespaces, list)
        and all(isinstance(n, list) and all(isinstance(s, str) for s in n) for n in namespaces)
    ):
        raise ValidationError("namespaces: a list of namespaces (lists of strings)")
    depth = _count(body, "depth")
    since = _count(body, "since")
    return Filter(channels, namespaces, depth, since)


def _count(body: Mapping[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"{name}: a non-negative integer")
    return value


async def thread_events(
    store: AsyncCheckpointer, thread_id: str, serde: Any = None
) -> AsyncIterator[Any]:
    """The thread's protocol events, from its first, without end; ``None`` after each wait in
    which nothing arrived (the caller's chance to send a keepalive). ``serde``: the savers'
    serializer, which opens the log's events under ``encryption``."""
    translator = Translator(serde)
    runs: dict[str, QueueEntry] = {}  # attempt run id -> entry
    entries: dict[int, QueueEntry] = {}

    async def reread() -> None:
        info = await store.thread(thread_id)
        for entry in await store.run_queue.entries(thread_id=thread_id, limit=RUNS_READ):
            if info is None or entry.submitted_at < info.created_at:
                continue  # a run of an earlier thread of this id is not this thread's (D241)
            entries[entry.entry_id] = entry
            for attempt in entry.attempts:
                runs[attempt.run_id] = entry

    def ends(upto: int) -> list[dict[str, Any]]:
        """Terminal lifecycles of the runs closed at or before the log's event ``upto``."""
        out: list[dict[str, Any]] = []
        for entry_id in sorted(entries):
            entry = entries[entry_id]
            if entry.closed and (entry.closed_at_seq or 0) <= upto:
                out += translator.end(entry)
        return out

    await reread()
    seen = 0
    while True:
        events = await store.events_after(thread_id, seen, PAGE)
        for event in events:
            for item in ends(event.seq - 1):
                yield item
            if event.kind.startswith(EVENT_PREFIX) and event.run_id is not None:
                if event.run_id not in runs:  # a run begun since the last read
                    await reread()
                    for item in ends(event.seq - 1):
                        yield item
                entry = runs.get(event.run_id)
                if entry is not None:
                    for item in translator.event(entry, event):
                        yield item
            seen = event.seq
        if events:
            continue
        await reread()
        for item in ends(seen):
            yield item
        await store.await_events_after(thread_id, seen, WAIT, WatchPolicy())
        yield None


def frame(event: Mapping[str, Any]) -> bytes:
    data = json.dumps(event, separators=(",", ":"), default=str)
    return f"event: {event['method']}\ndata: {data}\nid: {event['seq']}\n\n".encode()


async def sse(
    store: AsyncCheckpointer, thread_id: str, where: Filter, serde: Any = None
) -> AsyncIterator[bytes]:
    """The SSE body of a thread's stream through ``where`` (``serde``: `thread_events`')."""
    quiet_since = time.monotonic()
    async for event in thread_events(store, thread_id, serde):
        if event is not None:
            if where.matches(event):
                quiet_since = time.monotonic()
                yield frame(event)
        elif time.monotonic() - quiet_since >= KEEPALIVE:
            quiet_since = time.monotonic()
            yield b": keepalive\n\n"


async def once_visible(
    store: AsyncCheckpointer,
    thread_id: str,
    visible: Callable[[], Awaitable[bool]],
    frames: AsyncIterator[bytes],
) -> AsyncIterator[bytes]:
    """``frames`` once the thread is there for this request (``visible``), keepalives until
    then: as the reference, the stream of a thread not made yet waits for it (a client may
    subscribe before its ``run.start`` creates it). Woken by the thread's first event; a thread
    another user makes never becomes visible, so its stream shows nothing."""
    quiet_since = time.monotonic()
    while not await visible():
        await store.await_events_after(thread_id, 0, WAIT, WatchPolicy())
        if time.monotonic() - quiet_since >= KEEPALIVE:
            quiet_since = time.monotonic()
            yield b": keepalive\n\n"
    async for item in frames:
        yield item


__all__ = ["frame", "once_visible", "request_filter", "sse", "thread_events"]
