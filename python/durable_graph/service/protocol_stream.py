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

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime, timedelta
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
HOLD: Final = 0.2
"""Seconds a live stream holds an event that pauses or ends a run (`sse`)."""
LIVE: Final = timedelta(seconds=5)
"""How recent an event is for its stream to be live (clocks of the store and the service may
differ a little; a replay of older events holds none)."""


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
    async for item in timed_events(store, thread_id, serde):
        yield None if item is None else item[0]


async def timed_events(
    store: AsyncCheckpointer, thread_id: str, serde: Any = None
) -> AsyncIterator[tuple[dict[str, Any], datetime] | None]:
    """`thread_events`, each with the store time of what it tells (the log event's commit, a
    run's close)."""
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

    def ends(upto: int) -> list[tuple[dict[str, Any], datetime]]:
        """Terminal lifecycles of the runs closed at or before the log's event ``upto``."""
        out: list[tuple[dict[str, Any], datetime]] = []
        for entry_id in sorted(entries):
            entry = entries[entry_id]
            if entry.closed and (entry.closed_at_seq or 0) <= upto:
                at = entry.closed_at or datetime.now(UTC)
                out += [(item, at) for item in translator.end(entry)]
        return out

    await reread()
    seen = 0
    while True:
        events = await store.events_after(thread_id, seen, PAGE)
        for event in events:
            for ended in ends(event.seq - 1):
                yield ended
            if event.kind.startswith(EVENT_PREFIX) and event.run_id is not None:
                if event.run_id not in runs:  # a run begun since the last read
                    await reread()
                    for ended in ends(event.seq - 1):
                        yield ended
                entry = runs.get(event.run_id)
                if entry is not None:
                    for item in translator.event(entry, event):
                        yield item, event.committed_at
            seen = event.seq
        if events:
            continue
        await reread()
        for ended in ends(seen):
            yield ended
        await store.await_events_after(thread_id, seen, WAIT, WatchPolicy())
        yield None


async def hold(event: Mapping[str, Any], at: datetime) -> None:
    """Wait `HOLD` before sending ``event`` when it pauses or ends a run and what it tells was
    committed within `LIVE` of now (see `sse`)."""
    if pauses(event) and datetime.now(UTC) - at < LIVE:
        await asyncio.sleep(HOLD)


def pauses(event: Mapping[str, Any]) -> bool:
    """``event`` pauses or ends a run: an ``input.requested``, the root's terminal lifecycle."""
    if event["method"] == "input.requested":
        return True
    params = event["params"]
    data = params.get("data")
    return (
        event["method"] == "lifecycle"
        and not params.get("namespace")
        and isinstance(data, dict)
        and data.get("event") in ("interrupted", "completed", "failed")
    )


def frame(event: Mapping[str, Any]) -> bytes:
    data = json.dumps(event, separators=(",", ":"), default=str)
    return f"event: {event['method']}\ndata: {data}\nid: {event['seq']}\n\n".encode()


async def sse(
    store: AsyncCheckpointer, thread_id: str, where: Filter, serde: Any = None
) -> AsyncIterator[bytes]:
    """The SSE body of a thread's stream through ``where`` (``serde``: `thread_events`').

    An event that pauses or ends a run (`pauses`) told within `LIVE` of now is sent `HOLD`
    seconds late: a client reads a thread on several connections (the SDK: a subscription and a
    lifecycle watcher, which ends the subscription when it hears the pause), each waking for the
    same write on its own, so the others have sent the run's earlier events by then. A stream
    replaying older events holds none."""
    quiet_since = time.monotonic()
    async for item in timed_events(store, thread_id, serde):
        if item is not None:
            event, at = item
            if where.matches(event):
                await hold(event, at)
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


__all__ = [
    "frame",
    "once_visible",
    "pauses",
    "request_filter",
    "sse",
    "thread_events",
    "timed_events",
]
