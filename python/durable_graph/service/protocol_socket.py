"""``WebSocket /threads/{thread_id}/stream/events``: the streaming protocol's WebSocket transport
(SPEC §20.2; the SDK's ``threads.stream(..., transport="websocket")``).

Every frame the client sends is a command (`protocol_commands`), answered by a frame: the SDK
opens with ``subscription.subscribe`` (its params the filter of an HTTP stream: ``channels``,
``namespaces``, ``depth``, ``since``), answered ``{"subscription_id"}``; more subscriptions may
follow, and ``subscription.unsubscribe`` drops one. Each subscription reads the thread's
protocol events from the first (`protocol_stream.timed_events`, the same translation, numbering
and holds as the HTTP stream), from when it is made: what it lets through (after its ``since``)
is sent, the events written before it came included, as the reference replays them; an event
two subscriptions let through is sent once. The socket carries them until either side closes.
``run.start`` and ``input.respond`` are served on the socket as on ``/commands``.

Refusals, after the upgrade (a browser cannot read a refused upgrade's status): close code 4000
plus the HTTP status the SDK reads as final — 4401 without the token, 4422 for a thread id the
service cannot answer for; a frame that is not a command is answered ``invalid_argument``. A
thread not made yet is waited for, as the reference and the HTTP stream do (the SDK opens its
sockets before its ``run.start`` makes the thread: closing them 4404 ended its stream for good). A foreign page's upgrade is refused before it (`guard`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.errors import ValidationError
from durable_graph.core.model import WatchPolicy
from durable_graph.service.guard import parse_body
from durable_graph.service.protocol_commands import Commands
from durable_graph.service.protocol_events import Filter
from durable_graph.service.protocol_stream import WAIT, hold, request_filter, timed_events
from durable_graph.service.records import check_thread_id


class Socket:
    """One client's socket on one thread: its subscriptions and what it is sent."""

    def __init__(self, websocket: WebSocket, store: AsyncCheckpointer, commands: Commands) -> None:
        self.websocket = websocket
        self.store = store
        self.commands = commands
        self.pumps: dict[str, asyncio.Task[None]] = {}  # subscription id -> its reader
        self.sent: set[int] = set()  # the events' seqs sent (once each, whichever matched)
        self.failed = asyncio.Event()  # a subscription's read failed on the store's side
        self.next_id = 1
        self.lock = asyncio.Lock()  # one frame at a time: answers and events interleave

    async def send(self, message: dict[str, Any]) -> None:
        async with self.lock:
            await self.websocket.send_text(json.dumps(message, separators=(",", ":"), default=str))

    async def pump(self, thread_id: str, where: Filter) -> None:
        """A subscription's events, from the thread's first (the events written before it was
        made are its too: a client subscribes after it starts a run, on a new socket)."""
        try:
            while await self.store.thread(thread_id) is None:  # not made yet: waits for it
                await self.store.await_events_after(thread_id, 0, WAIT, WatchPolicy())
            serde = self.commands.threads.saver.serde  # opens the log under encryption (D289)
            async for item in timed_events(self.store, thread_id, serde):
                if item is None:
                    continue
                event, at = item
                if event["seq"] not in self.sent and where.matches(event):
                    self.sent.add(event["seq"])
                    await hold(event, at)  # as the HTTP stream (each SDK stream is a socket)
                    await self.send(event)
        except Exception:
            self.failed.set()
            raise

    def close(self) -> None:
        for task in self.pumps.values():
            task.cancel()

    async def command(self, thread_id: str, raw: str) -> None:
        try:
            command: Any = parse_body(raw.encode())
        except ValidationError as exc:
            await self.send(_error(None, "invalid_argument", f"a frame is a command: {exc}"))
            return
        method = command.get("method")
        cid = command.get("id") if isinstance(command.get("id"), int) else None
        params = command.get("params") if isinstance(command.get("params"), dict) else {}
        if method == "subscription.subscribe" and cid is not None:
            try:
                where = request_filter(params)
            except ValidationError as exc:
                await self.send(_error(cid, "invalid_argument", str(exc)))
                return
            subscription_id = str(self.next_id)
            self.next_id += 1
            await self.send(_success(cid, {"subscription_id": subscription_id}))
            self.pumps[subscription_id] = asyncio.create_task(self.pump(thread_id, where))
        elif method == "subscription.unsubscribe" and cid is not None:
            pump = self.pumps.pop(str(params.get("subscription_id")), None)
            if pump is None:
                await self.send(_error(cid, "no_such_subscription", "unknown subscription"))
            else:
                pump.cancel()
                await self.send(_success(cid, {}))
        else:
            _, answer = await self.commands.handle(thread_id, command)
            await self.send(answer)


async def serve_socket(
    websocket: WebSocket,
    store: AsyncCheckpointer,
    commands: Commands,
    authorized: Callable[[WebSocket], bool],
) -> None:
    thread_id = websocket.path_params["thread_id"]
    await websocket.accept()
    if not authorized(websocket):
        await websocket.close(code=4401, reason="a valid token is required (x-api-key)")
        return
    try:
        check_thread_id(thread_id)
    except ValidationError as exc:
        await websocket.close(code=4422, reason=str(exc)[:120])
        return
    socket = Socket(websocket, store, commands)
    reader = asyncio.create_task(_read(socket, thread_id))
    failing = asyncio.create_task(socket.failed.wait())
    try:
        await asyncio.wait({reader, failing}, return_when=asyncio.FIRST_COMPLETED)
        failed = socket.failed.is_set()
        if failed or (reader.done() and not reader.cancelled() and reader.exception()):
            # The stream or a command failed on the store's side: say so, then close (the
            # SDK reads an unsolicited error frame as the reason its stream ended).
            with contextlib.suppress(Exception):
                await socket.send(_error(None, "unknown_error", "the thread's stream failed"))
                await websocket.close(code=1011)
    finally:
        socket.close()
        for task in (reader, failing, *socket.pumps.values()):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def _read(socket: Socket, thread_id: str) -> None:
    """The client's frames, each a command, until it goes away."""
    with contextlib.suppress(WebSocketDisconnect):
        while True:
            await socket.command(thread_id, await socket.websocket.receive_text())


def _success(cid: int, result: dict[str, Any]) -> dict[str, Any]:
    return {"type": "success", "id": cid, "result": result}


def _error(cid: int | None, code: str, message: str) -> dict[str, Any]:
    return {"type": "error", "id": cid, "error": code, "message": message}


__all__ = ["serve_socket"]
