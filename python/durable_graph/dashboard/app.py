"""The read-only dashboard as a Starlette application over any sync `Checkpointer` (SPEC §13).

Pages (server-rendered HTML, `durable_graph.dashboard.render`): ``/`` the queue by state with
counts, the oldest waiting age, the leases each worker holds and the entries, paged;
``/entry/<id>`` an entry with its attempts, failure and output; ``/threads``; ``/thread?id=``
a thread with its history (each checkpoint diffed against its parent), pending writes,
children, queue entries, recorded outputs and its event log, tailed live from
``/thread/events`` (server-sent events fed by `Checkpointer.await_events_after`, which waits on
the store's notifications where it has them).

The endpoints are plain functions: Starlette runs them in its thread pool, so the blocking store
calls never stall the event loop. With a ``token``, every request must carry it
(``Authorization: Bearer``, the ``dg_token`` cookie, or ``?token=`` once, which sets the
cookie), and an entry's page offers two actions, retry and cancel (``POST``, same origin, CSRF
token: `durable_graph.dashboard.actions`); without one, nothing is written.

Served on a loopback address, a request is answered only when its ``Host`` header is
``localhost``, ``127.0.0.1`` or ``[::1]`` with the server's port (400 otherwise): a web page the
operator visits cannot rebind its own name to 127.0.0.1 and read the store (DNS rebinding). A
page's memory is bounded: a thread page shows `HISTORY_PAGE` checkpoints (older ones a link
away) and every value cut to `render.SHOWN_CHARS` characters with its size and a link to the whole
value (``/thread/value``). A live tail holds one of `MAX_TAILS` slots, given back by the response
itself when it ends, however it ends (the client gone before the first byte or mid-send, the
request cancelled, a server-side error: `_TailResponse`).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import StoreError, ValidationError
from durable_graph.core.listing import ENTRY_STATES
from durable_graph.core.model import Checkpoint, QueueEntry
from durable_graph.dashboard import actions, render
from durable_graph.dashboard.actions import Actions
from durable_graph.dashboard.assets import CSS, JS
from durable_graph.dashboard.scheduling import scheduling_page
from durable_graph.observe import readable
from durable_graph.worker.flow import output_effect_key

PAGE = 50
"""Entries and threads shown per page."""
HISTORY_PAGE = 10
"""Checkpoints a thread page shows (each with its diff); an "older" link pages on."""
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
"""The ``Host`` names a dashboard served on a loopback address answers to (with its port)."""
EVENTS_SHOWN = 100
EFFECTS_SHOWN = 100  # one page of a thread's effects; a "more" link pages on
"""The newest events a thread page starts its tail with."""
MAX_TAILS = 16
"""Live tails open at once: each holds a worker thread of the pool the pages are served from."""

_HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",  # no referrer elsewhere; Origin kept for the actions
    "cache-control": "no-store",
}


class _Guard:
    """Security headers on every response; with a token, refuse requests that lack it."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not host_allowed(scope):
            await PlainTextResponse("this Host is not served here", status_code=400)(
                scope, receive, send
            )
            return
        request = Request(scope)
        from_query = request.query_params.get("token")
        if self.token is not None and not self._allowed(request, from_query):
            await PlainTextResponse("a token is required", status_code=401)(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.encode(), v.encode()) for k, v in _HEADERS.items()]
                if self.token is not None and from_query is not None:
                    cookie = f"dg_token={self.token}; HttpOnly; SameSite=Strict; Path=/"
                    headers.append((b"set-cookie", cookie.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _allowed(self, request: Request, from_query: str | None) -> bool:
        assert self.token is not None
        bearer = request.headers.get("authorization", "")
        given = [
            from_query,
            request.cookies.get("dg_token"),
            bearer[7:] if bearer.lower().startswith("bearer ") else None,
        ]
        want = self.token.encode()
        return any(g is not None and hmac.compare_digest(g.encode(), want) for g in given)


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


def host_allowed(scope: Scope) -> bool:
    """Whether a request's ``Host`` may be answered: always on a non-loopback bind (the token
    guards that); on a loopback one, only `LOOPBACK_NAMES` with the server's port (bare on port
    80), so that no other site's name, rebound to 127.0.0.1, reaches the pages."""
    server = scope.get("server")
    if not server or not isinstance(server[0], str) or not _is_loopback(server[0]):
        return True
    port = server[1]
    given = [v for k, v in scope.get("headers", []) if k == b"host"]
    if len(given) != 1:
        return False
    host = given[0].decode("latin-1").lower()
    allowed = {f"{name}:{port}" for name in LOOPBACK_NAMES}
    if port == 80:
        allowed.update(LOOPBACK_NAMES)
    return host in allowed


def _int(request: Request, name: str) -> int | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    if not value.isdigit():
        raise ValidationError(f"{name} must be a positive integer")
    return int(value)


def _now() -> datetime:
    return datetime.now(UTC)


class Dashboard:
    """The endpoints, over one store."""

    def __init__(
        self, store: Checkpointer, tail_wait: timedelta, actions: Actions | None = None
    ) -> None:
        self.store = store
        self.queue = store.run_queue
        self.tail_wait = tail_wait
        self.tails = threading.BoundedSemaphore(MAX_TAILS)
        self.actions = actions
        """Retry and cancel (`durable_graph.dashboard.actions`): only with a token."""

    def queue_page(self, request: Request) -> Response:
        state = request.query_params.get("state") or None
        if state is not None and state not in ENTRY_STATES:
            raise ValidationError(f"state must be one of {', '.join(ENTRY_STATES)}")
        after = _int(request, "after")
        entries = self.queue.entries(state=state, after=after, limit=PAGE)  # type: ignore[arg-type]
        running = self.queue.entries(state="running", limit=1000)
        holders: dict[str, list[QueueEntry]] = {}
        for e in running:
            holders.setdefault(e.lease_holder or "?", []).append(e)
        stats = self.queue.stats()
        next_after = entries[-1].entry_id if len(entries) == PAGE else None
        # The registry a page at a time (issue 37 item 9), continued after the last holder.
        workers = self.queue.workers(
            after=request.query_params.get("workers_after") or None, limit=PAGE
        )
        next_workers = workers[-1].holder if len(workers) == PAGE else None
        html = render.queue_page(
            stats,
            entries,
            sorted(holders.items()),
            _now(),
            state,
            next_after,
            actions=self.actions is not None,
            workers=workers,
            next_workers_after=next_workers,
        )
        return HTMLResponse(html)

    def scheduling_page(self, request: Request) -> Response:
        """SPEC §15: waiting by kind, limits with their live leases, schedules and next runs."""
        html = scheduling_page(
            self.queue.stats(),
            self.queue.limits(),
            self.queue.schedules(),
            self.queue.entries(state="running", limit=1000),
            _now(),
        )
        return HTMLResponse(html)

    def entry_page(self, request: Request) -> Response:
        entry_id: int = request.path_params["entry_id"]
        found = self.queue.entries(after=entry_id + 1, limit=1)
        if not found or found[0].entry_id != entry_id:
            return HTMLResponse(render.not_found(f"entry {entry_id}"), status_code=404)
        entry = found[0]
        output = None
        if entry.outcome is None:
            output = self.store.get_effect(entry.thread_id, output_effect_key(entry_id))
        # Its retries are entries of its thread (issue 26 item 13: linked both ways).
        later = self.queue.entries(thread_id=entry.thread_id, limit=PAGE)
        retries = sorted(e.entry_id for e in later if e.retry_of == entry_id)
        now = _now()
        forms = ""
        if self.actions is not None:
            kind = None if entry.outcome is None else type(entry.outcome).__name__
            forms = actions.forms(
                entry_id,
                self.actions.csrf,
                can_cancel=entry.outcome is None,
                can_retry=kind in ("Failed", "Cancelled"),
            )
        html = render.entry_page(
            entry,
            now,
            output,
            retries=retries,
            actions_html=forms,
            actions=self.actions is not None,
        )
        return HTMLResponse(html)

    def threads_page(self, request: Request) -> Response:
        after = request.query_params.get("after") or None
        threads = self.store.threads(after=after, limit=PAGE)
        next_after = threads[-1].thread_id if len(threads) == PAGE else None
        # Subgraph namespace threads are listed on their root's page, not as threads.
        roots = [t for t in threads if readable.is_top_level(t.thread_id)]
        return HTMLResponse(render.threads_page(roots, next_after))

    def thread_page(self, request: Request) -> Response:
        thread_id = request.query_params.get("id", "")
        info = self.store.thread(thread_id)
        if info is None:
            # A thread whose runs all failed before committing has entries but no commit.
            queued = self.queue.entries(thread_id=thread_id, limit=PAGE) if thread_id else []
            if queued:
                return HTMLResponse(render.queued_thread_page(thread_id, queued, _now()))
            return HTMLResponse(render.not_found(f"thread {thread_id!r}"), status_code=404)
        before = request.query_params.get("before") or None
        history = self.store.history(thread_id, before=before, limit=HISTORY_PAGE + 1)
        older = history[HISTORY_PAGE - 1].checkpoint_id if len(history) > HISTORY_PAGE else None
        history = history[:HISTORY_PAGE]
        head = self.store.get(thread_id) if before is None else None
        if head is not None and history and history[0].checkpoint_id == head.checkpoint_id:
            history[0] = head  # the head as `get` reads it: with its pending writes
        parents: dict[str, Checkpoint] = {cp.checkpoint_id: cp for cp in history}
        for cp in history:
            if cp.parent_id is not None and cp.parent_id not in parents:
                found = self.store.get(thread_id, cp.parent_id)
                if found is not None:
                    parents[found.checkpoint_id] = found
        entries = self.queue.entries(thread_id=thread_id, limit=PAGE)
        # Every effect of the thread, a page at a time; outputs link to their entry.
        effects_after = request.query_params.get("effects_after") or None
        effects = self.store.effects(thread_id, after=effects_after, limit=EFFECTS_SHOWN)
        output_of = {output_effect_key(e.entry_id): e.entry_id for e in entries}
        events = self.store.events_after(
            thread_id, max(0, info.last_seq - EVENTS_SHOWN), limit=EVENTS_SHOWN
        )
        html = render.thread_page(
            info,
            history,
            parents,
            self.store.children(thread_id),
            entries,
            effects,
            output_of,
            len(effects) == EFFECTS_SHOWN,
            events,
            _now(),
            older,
        )
        return HTMLResponse(html)

    def value_page(self, request: Request) -> Response:
        """One whole value of a thread, as JSON: a checkpoint (state, metadata, pending
        writes), an effect's value, or an event's payload — what a page cut short."""
        thread_id = request.query_params.get("id", "")
        checkpoint_id = request.query_params.get("checkpoint")
        effect_key = request.query_params.get("effect")
        seq = _int(request, "seq")
        value: object
        if checkpoint_id is not None:
            cp = self.store.get(thread_id, checkpoint_id)
            if cp is None:
                return HTMLResponse(render.not_found(f"checkpoint {checkpoint_id!r}"), 404)
            value = {
                "checkpoint_id": cp.checkpoint_id,
                "state": readable.readable_state(cp.state),  # LangGraph's: channel values
                "metadata": cp.metadata,
                "writes": [
                    {
                        "task_id": w.task_id,
                        "channel": w.channel,
                        "value": readable.readable_write(w.value),
                    }
                    for w in cp.writes
                ],
            }
        elif effect_key is not None:
            effect = self.store.get_effect(thread_id, effect_key)
            if effect is None:
                return HTMLResponse(render.not_found(f"effect {effect_key!r}"), 404)
            value = effect.value
        elif seq is not None and seq >= 1:
            found = self.store.events_after(thread_id, seq - 1, limit=1)
            if not found or found[0].seq != seq:
                return HTMLResponse(render.not_found(f"event {seq}"), 404)
            value = found[0].payload
        else:
            raise ValidationError("give checkpoint, effect or seq (>= 1)")
        body = json.dumps(value, ensure_ascii=False, sort_keys=True, indent=1)
        return Response(body, media_type="application/json")

    def event_stream(self, request: Request) -> Response:
        thread_id = request.query_params.get("id", "")
        after = _int(request, "after") or 0
        self.store.events_after(thread_id, after, limit=1)  # checks the arguments up front
        return _TailResponse(self, thread_id, after)

    def tail(self, thread_id: str, after: int, stop: threading.Event) -> Iterator[str]:
        """The live tail's messages until ``stop`` is set or the store closes (the slot is the
        response's: `_TailResponse`)."""
        yield "retry: 2000\n: tail open\n\n"
        while not stop.is_set():
            try:
                events = self.store.await_events_after(thread_id, after, self.tail_wait)
            except StoreError:
                return  # the store closed (shutdown): the browser reconnects later
            for ev in events:
                yield f"id: {ev.seq}\nevent: store-event\ndata: {render.event_json(ev)}\n\n"
                after = ev.seq
            if not events:
                yield ": keep-alive\n\n"  # a gone client is noticed on the next write


class _Slot:
    """One of the dashboard's `MAX_TAILS` tail slots: taken when made (if one is free), given
    back by `release` exactly once, whichever exit path calls it first."""

    def __init__(self, slots: threading.BoundedSemaphore) -> None:
        self._slots = slots
        self._lock = threading.Lock()
        self.taken = slots.acquire(blocking=False)

    def release(self) -> None:
        with self._lock:
            taken, self.taken = self.taken, False
        if taken:
            self._slots.release()


def _next_message(messages: Iterator[str]) -> str | None:
    return next(messages, None)


_BUSY = "retry: 30000\n: too many live tails open; try again later\n\n"


class _TailResponse(StreamingResponse):
    """A live tail holding one of the dashboard's `MAX_TAILS` slots for exactly as long as the
    response runs: taken when it starts, given back in ``finally`` when it ends, on every exit
    path — the stream done, the server's error, the request's task cancelled (the server
    stopping), the client gone before the first byte or mid-send — never left to the garbage
    collector (issue 24) and never to how a server reports a gone client (issue 46 item 10).

    It sends the stream itself rather than through `StreamingResponse.__call__`: that one
    listens for the client's ``http.disconnect`` only under ASGI spec versions before 2.4 and
    otherwise relies on ``send`` raising once the client is gone — a server whose ``send``
    returns quietly then (uvicorn's does) would run a gone client's tail, slot and thread
    forever. Here a watcher always reads ``receive`` until ``http.disconnect``, then stops the
    tail (its thread returns within one ``tail_wait``) and ends the response; a ``send`` that
    raises (``OSError``, a server of spec 2.4) ends it too."""

    def __init__(self, dashboard: Dashboard, thread_id: str, after: int) -> None:
        self._dashboard = dashboard
        self._stop = threading.Event()
        self._messages = dashboard.tail(thread_id, after, self._stop)
        super().__init__(
            iter(()),
            media_type="text/event-stream",
            headers={"x-accel-buffering": "no"},
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        slot = _Slot(self._dashboard.tails)
        try:
            if not slot.taken:
                self._stop.set()
                await self._send_all(send, iter([_BUSY]))
                return
            async with anyio.create_task_group() as group:
                group.start_soon(self._watch, receive, group.cancel_scope)
                await self._send_all(send, self._messages)
                group.cancel_scope.cancel()  # the tail ended (the store closed): stop watching
        finally:
            self._stop.set()
            slot.release()

    async def _watch(self, receive: Receive, scope: anyio.CancelScope) -> None:
        """Until the client is gone, then end the response (its stream cancelled)."""
        while (await receive())["type"] != "http.disconnect":
            pass
        self._stop.set()
        scope.cancel()

    async def _send_all(self, send: Send, messages: Iterator[str]) -> None:
        """The response: headers, then each message as it comes (read in a worker thread: the
        store's wait blocks), then the end; a ``send`` to a gone client ends it quietly."""
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            while (message := await anyio.to_thread.run_sync(_next_message, messages)) is not None:
                body = message.encode("utf-8")
                await send({"type": "http.response.body", "body": body, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            return  # the client went mid-send (a server of ASGI spec 2.4 raises it)


def _static(body: str, media_type: str) -> Any:
    def endpoint(request: Request) -> Response:
        return Response(body, media_type=media_type)

    return endpoint


def create_app(
    store: Checkpointer,
    token: str | None = None,
    *,
    tail_wait: timedelta = timedelta(seconds=1),
) -> ASGIApp:
    """The dashboard over ``store`` (which the caller opens and closes); ``token`` see module."""
    if token is not None and (not isinstance(token, str) or len(token) < 16):
        raise ValidationError("token must be a string of at least 16 characters")
    d = Dashboard(store, tail_wait, None if token is None else Actions(store.run_queue, token))
    posts = []
    if d.actions is not None:  # retry and cancel: behind the token (issue 26 item 13)
        posts = [
            Route(f"/entry/{{entry_id:int}}/{name}", d.actions.endpoint(name), methods=["POST"])
            for name in ("cancel", "retry")
        ]

    def bad_request(request: Request, exc: Exception) -> Response:
        return HTMLResponse(
            render.page("Bad request", f"<h1>Bad request</h1><p>{render.text(exc)}</p>"), 400
        )

    app = Starlette(
        routes=[
            Route("/", d.queue_page),
            Route("/entry/{entry_id:int}", d.entry_page),
            Route("/threads", d.threads_page),
            Route("/scheduling", d.scheduling_page),
            Route("/thread", d.thread_page),
            Route("/thread/events", d.event_stream),
            Route("/thread/value", d.value_page),
            Route("/static/dashboard.css", _static(CSS, "text/css")),
            Route("/static/dashboard.js", _static(JS, "text/javascript")),
            *posts,
        ],
        exception_handlers={ValidationError: bad_request},
    )
    return _Guard(app, token)


__all__ = ["HISTORY_PAGE", "LOOPBACK_NAMES", "Dashboard", "create_app", "host_allowed"]
