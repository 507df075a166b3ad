"""Runs for the service (SPEC §14.6): every run a queue entry, its stream the entry's events.

``multitask_strategy`` onto the queue: ``enqueue`` (the default) submits `Mode.ENQUEUE`;
``reject`` submits `Mode.REJECT` (`ThreadBusy` -> 409, nothing recorded); ``interrupt`` cancels
the thread's open entries (a running one stops at its next store call, its checkpoints and so
its input stay) and enqueues; ``rollback`` does the same and names the cancelled entries in the
new run request, whose handler deletes their runs' checkpoints before it applies its input
(under the thread's claim, so after the cancelled attempt has let go).
"""

from __future__ import annotations

import asyncio
import builtins
import json
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

import anyio
from langchain_core.messages import BaseMessageChunk, message_chunk_to_message

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.errors import EntryClosed, NotFound, ValidationError
from durable_graph.core.model import (
    ANY,
    JSON,
    Completed,
    Event,
    Failed,
    Mode,
    QueueEntry,
    Submission,
)
from durable_graph.core.validation import DEFAULT_MAX_VALUE_BYTES, check_submission
from durable_graph.langgraph.follow import afollow, run_ended
from durable_graph.langgraph.run_request import run_request
from durable_graph.langgraph.streaming import EVENT_PREFIX, listed_modes
from durable_graph.langgraph.values import from_json, message_dict, to_json
from durable_graph.service.auth import TENANT
from durable_graph.service.records import (
    assistant_id_of,
    check_thread_id,
    client_error,
    entry_id_of,
    object_field,
    run_id_of,
    run_json,
    run_status,
    service_part,
)
from durable_graph.service.threads import Threads
from durable_graph.service.webhooks import check_webhook, submit_delivery

if TYPE_CHECKING:
    from durable_graph.service.assistants import Assistants
from durable_graph.service.waits import EntryWatch, closed, started

STRATEGIES: Final = ("reject", "enqueue", "interrupt", "rollback")
SDK_MODES: Final = {
    "values": "values",
    "updates": "updates",
    "messages": "messages",
    "messages-tuple": "messages",
    "custom": "custom",
    "debug": "debug",
    "checkpoints": "debug",
    "tasks": "debug",
}
"""The SDK's stream modes served, and the store mode each reads (LangGraph's ``debug`` chunks
are its ``checkpoints`` and ``tasks`` chunks, typed: each is read back out of them)."""

NS_SEP: Final = "|"


class Runs:
    def __init__(
        self, store: AsyncCheckpointer, threads: Threads, assistants: Assistants | None = None
    ) -> None:
        self.store = store
        self.threads = threads
        self.assistants = assistants
        self.watch = EntryWatch(store)

    # --- assistants --------------------------------------------------------------------------

    def graph_of(self, assistant_id: object, *, by_name: bool = True) -> str:
        """The graph an assistant id (or, for runs, a graph name) names. As the reference: a
        string that is neither a UUID nor a graph name is 422, an unknown UUID 404."""
        if not isinstance(assistant_id, str):
            raise ValidationError("assistant_id: required, a string")
        for name in self.threads.graphs:
            if assistant_id == assistant_id_of(name) or (by_name and assistant_id == name):
                return name
        try:
            uuid.UUID(assistant_id)
        except ValueError:
            graphs = ", ".join(self.threads.graphs)
            if by_name:
                raise ValidationError(
                    f"Invalid assistant: {assistant_id!r}. Must be either a valid assistant UUID "
                    f"or one of the registered graphs: {graphs}"
                ) from None
            raise ValidationError("Invalid assistant ID: must be a UUID") from None
        raise NotFound(f"assistant {assistant_id} not found")

    # --- create ------------------------------------------------------------------------------

    async def create(
        self, thread_id: str | None, body: Mapping[str, Any], *, modes: Sequence[str] = ()
    ) -> QueueEntry:
        """Queue the run ``body`` asks for on ``thread_id`` (None: a thread of its own). Every
        argument is checked before anything is written, queued or cancelled (D147): a refused
        request leaves no thread, cancels no run and queues nothing. ``modes``: the store's
        stream modes instead of those of the SDK's ``stream_mode`` (the protocol's runs)."""
        body, assistant_id = await self._of_assistant(body)
        checked = self._check(thread_id, body, modes, assistant_id)
        strategy = checked.service["multitask_strategy"]
        if (
            thread_id is not None
            and checked.if_not_exists != "create"
            and not await self.threads.exists(thread_id)
        ):
            raise NotFound(f"thread {thread_id} not found")
        # Checked: from here on, writes.
        # A thread a run makes has the run's metadata, as the reference's (what an auth
        # filter asks of the run, its thread then has).
        metadata = checked.service["metadata"]
        if thread_id is None:  # a stateless run: a thread of its own
            thread_id = (await self.threads.create(None, metadata))["thread_id"]
        elif not await self.threads.exists(thread_id):
            await self.threads.create(thread_id, metadata, if_exists="do_nothing")
        info = await self.store.thread(thread_id)
        after_seq = info.last_seq if info is not None else 0
        queue = self.store.run_queue
        cancelled: list[int] = []
        if strategy in ("interrupt", "rollback"):
            for entry in await queue.open_entries(thread_id=thread_id, tenant=ANY):
                with suppress(EntryClosed, NotFound):
                    await submit_delivery(
                        self.store, await queue.cancel(entry.entry_id, entry.tenant)
                    )
                    cancelled.append(entry.entry_id)
        rollback = cancelled if strategy == "rollback" else []
        mode = Mode.REJECT if strategy == "reject" else Mode.ENQUEUE
        # A delayed start is the entry's not_before (SPEC §13): no worker takes it earlier. The
        # instant is this process's clock plus the delay (the store has no relative form).
        delay = checked.after_seconds
        not_before = datetime.now(UTC) + timedelta(seconds=delay) if delay else None
        ticket = await queue.submit(
            Submission(
                thread_id,
                checked.request(after_seq, rollback),
                tenant=TENANT.get(),
                mode=mode,
                not_before=not_before,
            )
        )
        created = await queue.entry(ticket.entry_id, tenant=TENANT.get())
        assert created is not None
        return created

    async def _of_assistant(self, body: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
        """A run of a stored assistant (D191) as a run of its graph with the assistant's config
        and context under the run's own, and the assistant's id; any other body as it is."""
        given = body.get("assistant_id")
        if self.assistants is None or not isinstance(given, str) or given in self.threads.graphs:
            return body, None
        if any(given == assistant_id_of(name) for name in self.threads.graphs):
            return body, None
        try:
            assistant = await self.assistants.get(given)
        except (NotFound, ValidationError):
            return body, None  # graph_of says why
        config = object_field(body, "config")
        configurable = {
            **(assistant["config"].get("configurable") or {}),
            **(config.get("configurable") or {}),
        }
        merged = {
            **body,
            "assistant_id": assistant["graph_id"],
            "config": {**assistant["config"], **config, "configurable": configurable},
            "context": {**assistant["context"], **object_field(body, "context")},
        }
        return merged, assistant["assistant_id"]

    def _check(
        self,
        thread_id: str | None,
        body: Mapping[str, Any],
        modes: Sequence[str] = (),
        assistant_id: str | None = None,
    ) -> _Checked:
        """Every argument of the run request ``body`` on ``thread_id``, as the store will check
        the submission (`ValidationError` naming the first wrong one); nothing read or written."""
        if thread_id is not None:
            check_thread_id(thread_id)
        checked = _checked(self.graph_of(body.get("assistant_id")), body, modes, assistant_id)
        check_submission(
            Submission(thread_id or "new", checked.request(0, [])), DEFAULT_MAX_VALUE_BYTES
        )
        return checked

    def submission_input(self, thread_id: str | None, body: Mapping[str, Any]) -> JSON:
        """What a worker gets as the input of the run ``body`` asks for on ``thread_id`` (a
        cron's runs), checked as `create` checks it; nothing read or written."""
        return self._check(thread_id, body).request(0, [])

    async def create_batch(self, bodies: Sequence[Any]) -> list[QueueEntry]:
        """``POST /runs/batch``: stateless runs, each on a thread of its own. Every run is
        checked before the first is queued, so a refused batch queues none (D186)."""
        if not bodies:
            raise ValidationError("body: a list of at least one run")
        for i, body in enumerate(bodies):
            if not isinstance(body, dict):
                raise ValidationError(f"[{i}]: a run must be an object")
            try:
                resolved, assistant_id = await self._of_assistant(body)
                self._check(None, resolved, (), assistant_id)
            except ValidationError as exc:
                raise ValidationError(f"[{i}]: {exc}") from None
        return [await self.create(None, body) for body in bodies]

    # --- reads -------------------------------------------------------------------------------

    async def entry(self, thread_id: str | None, run_id: str) -> QueueEntry:
        try:
            uuid.UUID(run_id)
        except ValueError:
            raise ValidationError("Invalid run ID: must be a UUID") from None
        entry_id = entry_id_of(run_id)
        tenant = TENANT.get()
        entry = None if entry_id is None else await self.store.run_queue.entry(entry_id, tenant)
        if entry is None or (thread_id is not None and entry.thread_id != thread_id):
            raise NotFound(f"run {run_id} not found")
        if not await self.threads.is_current(entry):  # a deleted thread's run (D241)
            raise NotFound(f"run {run_id} not found")
        if entry.entry_id in await self._rolled_back(entry.thread_id):
            raise NotFound(f"run {run_id} was rolled back")
        return entry

    async def _rolled_back(self, thread_id: str, entries: Any = None) -> set[int]:
        """Entries a later ``rollback`` run removed (LangGraph deletes such runs)."""
        if entries is None:
            entries = await self.store.run_queue.entries(thread_id=thread_id, limit=100)
        out: set[int] = set()
        for e in entries:
            ids = service_part(e).get("rollback") or []
            out.update(i for i in ids if isinstance(i, int))
        return out

    def json(self, entry: QueueEntry) -> dict[str, Any]:
        return run_json(entry, datetime.now(UTC))

    async def list(
        self, thread_id: str, limit: int, offset: int, status: str | None
    ) -> builtins.list[dict[str, Any]]:
        if not await self.threads.exists(thread_id):
            raise NotFound(f"thread {thread_id} not found")
        entries = await self.store.run_queue.entries(thread_id=thread_id, limit=1000)
        gone = await self._rolled_back(thread_id, entries)
        # This thread's runs: not those of a deleted thread of the same id (D241).
        info = await self.store.thread(thread_id)
        since = info.created_at if info is not None else None
        runs = [
            self.json(e)
            for e in entries
            if e.entry_id not in gone and since is not None and e.submitted_at >= since
        ]
        if status is not None:
            runs = [r for r in runs if r["status"] == status]
        return runs[offset : offset + limit]

    async def cancel(self, entry: QueueEntry, action: str) -> None:
        if action not in ("interrupt", "rollback"):
            raise ValidationError("action: 'interrupt' or 'rollback'")
        if entry.closed:  # as the reference: nothing to cancel is 404
            raise NotFound(f"run {run_id_of(entry.entry_id)} has ended: no matching run to cancel")
        with suppress(EntryClosed):
            closed = await self.store.run_queue.cancel(entry.entry_id, tenant=entry.tenant)
            await submit_delivery(self.store, closed)  # the run ended here: its webhook
        if action == "rollback":
            fresh = await self.store.run_queue.entry(entry.entry_id, entry.tenant) or entry
            await self.store.delete_runs([a.run_id for a in fresh.attempts])

    async def cancel_unless_ended(self, entry: QueueEntry, action: str = "interrupt") -> None:
        """Cancel the run as ``POST .../cancel`` would, unless it ended meanwhile: for
        ``on_disconnect: "cancel"`` (its client went away) and ``POST /runs/cancel``."""
        with suppress(NotFound):
            await self.cancel(entry, action)

    async def cancel_many(self, body: Mapping[str, Any], action: str) -> None:
        """``POST /runs/cancel`` (SPEC §25.3), as the reference: the runs ``thread_id`` and
        ``run_ids`` name, or every open run of this tenant with ``status`` (``pending``,
        ``running`` or ``all``); ended ones are left as they are; 404 when none is found."""
        if action not in ("interrupt", "rollback"):
            raise ValidationError("action: 'interrupt' or 'rollback'")
        status = body.get("status")
        if status is not None:
            if status not in ("pending", "running", "all"):
                raise ValidationError("status: 'pending', 'running' or 'all'")
            if body.get("thread_id") is not None or body.get("run_ids") is not None:
                raise ValidationError("status: cancels by status alone; omit thread_id, run_ids")
            found = await self._open_runs(status)
        else:
            thread_id, run_ids = body.get("thread_id"), body.get("run_ids")
            if not isinstance(thread_id, str) or not isinstance(run_ids, builtins.list):
                raise ValidationError("thread_id and run_ids: the runs to cancel (or a status)")
            found = []
            for run_id in run_ids:
                if not isinstance(run_id, str):
                    raise ValidationError("run_ids: a list of run ids")
                with suppress(NotFound):
                    found.append(await self.entry(check_thread_id(thread_id), run_id))
        if not found:
            raise NotFound("no runs found to cancel")
        for entry in found:
            if not entry.closed:
                await self.cancel_unless_ended(entry, action)

    async def _open_runs(self, status: str) -> builtins.list[QueueEntry]:
        """This tenant's open runs of ``status`` on the threads this request may see."""
        now, found, after = datetime.now(UTC), [], None
        while page := await self.store.run_queue.open_entries(TENANT.get(), after=after):
            after = page[-1].entry_id
            for entry in page:
                if entry.kind == "default" and status in ("all", run_status(entry, now)):
                    with suppress(ValidationError):
                        if await self.threads.exists(entry.thread_id):
                            found.append(entry)
        return found

    async def cancelling(
        self, entry: QueueEntry, frames: AsyncIterator[bytes]
    ) -> AsyncIterator[bytes]:
        """``frames`` of ``entry``'s stream, the run cancelled when they stop before its end:
        Starlette cancels a stream whose client disconnected, so the cancel is shielded."""
        ended = False
        try:
            async for frame in frames:
                yield frame
            ended = True
        finally:
            if not ended:
                with anyio.CancelScope(shield=True):
                    await self.cancel_unless_ended(entry)

    async def delete(self, entry: QueueEntry) -> None:
        if not entry.closed:
            raise Conflict_("a run that has not ended cannot be deleted; cancel it first")
        await self.store.delete_runs([a.run_id for a in entry.attempts])

    async def join(self, entry: QueueEntry, timeout: timedelta | None = None) -> Any:
        """The run's final values (with ``__interrupt__``), or ``{"__error__": ...}``; after
        ``timeout``, the thread's values then. Waits in `EntryWatch` (no thread, no store call of
        its own while it waits). A run that had ended before the join: the thread's state now,
        as the reference answers it (its error, its interrupts, else its values)."""
        ended = entry.closed
        try:
            async with asyncio.timeout(None if timeout is None else timeout.total_seconds()):
                entry = await self.watch.until(entry, closed)
        except TimeoutError:
            pass
        if not await self.threads.is_current(entry):
            # Its thread was deleted meanwhile (and maybe made again by someone else): never
            # another incarnation's state (D241).
            raise NotFound(f"run {run_id_of(entry.entry_id)} not found")
        if ended:
            return await self._thread_now(entry.thread_id)
        return await final_values(entry, self.threads)

    async def _thread_now(self, thread_id: str) -> Any:
        thread = await self.threads.get(thread_id)
        if thread["status"] == "error":
            last = await self.store.run_queue.entries(thread_id=thread_id, limit=1)
            if last and isinstance(last[0].outcome, Failed):
                return {"__error__": client_error(last[0].outcome.error)}
        interrupts = [i for pending in (thread["interrupts"] or {}).values() for i in pending]
        if thread["status"] == "interrupted" and interrupts:
            return {"__interrupt__": interrupts}
        return thread["values"]

    # --- streams -----------------------------------------------------------------------------

    async def sse(
        self, entry: QueueEntry, last_event_id: str | None, modes: builtins.list[str] | None = None
    ) -> AsyncIterator[bytes]:
        """The run's stream as LangGraph Server sends it (event names, data, ``id`` = seq)."""
        part = service_part(entry)
        modes = modes or builtins.list(part.get("sse_modes") or ["values"])
        after = int(part.get("after_seq") or 0)
        if last_event_id is None:
            if entry.closed:
                return  # as the reference: joining an ended run's stream sends nothing
            meta = {"run_id": run_id_of(entry.entry_id), "attempt": 1}
            yield _frame("metadata", meta, None)
        else:
            with suppress(ValueError):
                after = max(after, int(last_event_id))
        async for name, data, seq in self.events(entry, modes, after):
            yield _frame(name, data, seq)
        # No closing event: the reference ends the response (the SDK reads that as the end).

    async def events(
        self, entry: QueueEntry, modes: builtins.list[str], after: int | None = None
    ) -> AsyncIterator[tuple[str, Any, int | None]]:
        """The run's events in the SDK's ``modes`` (event name, data, seq) after ``after`` (by
        default, from its start) until it ends, then its ``error`` if it failed: its stream's
        frames, unencoded."""
        if after is None:
            after = int(service_part(entry).get("after_seq") or 0)
        mapper = _Mapper(modes)
        # A queued run has no events yet: wait for its start with the other waiters.
        await self.watch.until(entry, started)
        async for event in afollow(self.store, entry.entry_id, after, tenant=entry.tenant):
            for name, data in mapper.frames(event.kind, event.payload):
                yield name, data, event.seq
        ended = await self.store.run_queue.entry(entry.entry_id, entry.tenant)
        if ended is not None and isinstance(ended.outcome, Failed):
            yield "error", client_error(ended.outcome.error), None

    async def thread_sse(
        self, thread_id: str, last_event_id: str | None, modes: Sequence[str]
    ) -> AsyncIterator[bytes]:
        """``threads.join_stream``: the thread's runs as they go, from now (or after
        ``last_event_id``), as the reference sends them: a ``metadata`` frame as a run starts,
        the run's events in its own stream modes (``run_modes``), ``metadata`` ``run_done`` as
        it ends (``lifecycle`` sends only these two). It ends when the client leaves."""
        info = await self.store.thread(thread_id)
        if info is None:
            raise NotFound(f"thread {thread_id} not found")
        seen = info.last_seq
        if last_event_id is not None:
            with suppress(ValueError):
                seen = int(last_event_id)
        by_run: dict[str, QueueEntry | None] = {}  # an attempt's run id -> its entry
        mappers: dict[int, _Mapper] = {}  # entry id -> its frames
        going: set[int] = set()  # started here, not yet reported done
        while True:
            events = await self.store.events_after(thread_id, seen, THREAD_PAGE)
            for event in events:
                seen = event.seq
                checkpoint = event.kind == STORE_CHECKPOINT and "state_update" in modes
                if not (event.kind.startswith(EVENT_PREFIX) or checkpoint):
                    continue
                run_id = event.run_id or ""
                if run_id not in by_run:  # a run this stream has not met yet
                    for known in await self.store.run_queue.entries(thread_id=thread_id, limit=20):
                        by_run.update({a.run_id: known for a in known.attempts})
                entry = by_run.setdefault(run_id, None)  # None: no run of the queue's
                if checkpoint and entry is None:  # a client's update_state, perhaps
                    for frame in await self._state_update(thread_id, event):
                        yield frame
                if entry is None or checkpoint:
                    continue
                if entry.entry_id not in mappers:
                    # A thread's runs go one at a time: the ones before this have ended.
                    for frame in await self._runs_done(going, seen):
                        yield frame
                    mappers[entry.entry_id] = _Mapper(service_part(entry).get("sse_modes") or [])
                    going.add(entry.entry_id)
                    meta = {"run_id": run_id_of(entry.entry_id), "attempt": 1}
                    yield _frame("metadata", meta, None)
                if "run_modes" in modes:
                    for name, data in mappers[entry.entry_id].frames(event.kind, event.payload):
                        yield _frame(name, data, event.seq)
            if events:
                continue
            for frame in await self._runs_done(going, seen):
                yield frame
            # Woken by the next event at once; the wait bounds how late a run's end is seen.
            wait = THREAD_ENTRY_CHECK if going else THREAD_IDLE_WAIT
            await self.store.await_events_after(thread_id, seen, wait)

    async def _state_update(self, thread_id: str, event: Event) -> builtins.list[bytes]:
        """``state_update`` (the reference's thread stream mode): a checkpoint a client's
        ``update_state`` wrote (no run's: its source is ``update``), as the thread's state."""
        payload = event.payload if isinstance(event.payload, dict) else {}
        checkpoint_id = payload.get("checkpoint_id")
        if not isinstance(checkpoint_id, str):
            return []
        try:
            state = await self.threads.state(thread_id, checkpoint_id)
        except (NotFound, ValidationError):  # gone since (deleted, pruned)
            return []
        if (state.get("metadata") or {}).get("source") != "update":
            return []
        return [_frame("state_update", {"state": state, "thread_id": thread_id}, event.seq)]

    async def _runs_done(self, going: set[int], seen: int) -> builtins.list[bytes]:
        """``run_done`` frames of the runs in ``going`` that have ended by ``seen`` (taken out)."""
        frames = []
        for entry_id in sorted(going):
            ended = await self.store.run_queue.entry(entry_id, TENANT.get())
            if ended is None or run_ended(ended, seen):
                going.discard(entry_id)
                done = {"status": "run_done", "run_id": run_id_of(entry_id)}
                frames.append(_frame("metadata", done, None))
        return frames


THREAD_PAGE: Final = 1000
THREAD_ENTRY_CHECK: Final = timedelta(milliseconds=500)
THREAD_IDLE_WAIT: Final = timedelta(seconds=5)
THREAD_MODES: Final = ("run_modes", "lifecycle", "state_update")
"""``threads.join_stream``'s modes: ``state_update`` is read off the log's ``store.checkpoint``
event of a checkpoint no run wrote whose source is ``update`` (a client's ``update_state``)."""
STORE_CHECKPOINT: Final = "store.checkpoint"


async def final_values(entry: QueueEntry, threads: Threads) -> Any:
    outcome = entry.outcome
    if isinstance(outcome, Failed):
        return {"__error__": client_error(outcome.error)}
    if isinstance(outcome, Completed) and isinstance(outcome.output, dict):
        values = message_dict(outcome.output.get("values"))
        interrupts = outcome.output.get("interrupts") or []
        if isinstance(values, dict) and interrupts:
            values = {**values, "__interrupt__": message_dict(interrupts)}
        return values
    snap = await threads.snapshot(entry.thread_id, None)
    return (snap or {}).get("values") or {}


class Conflict_(Exception):
    """409 for a run."""


@dataclass(frozen=True, slots=True)
class _Checked:
    """A run request's arguments, checked; `request` is the entry's input once the thread's
    place (``after_seq``) and the runs a ``rollback`` cancelled are known."""

    fields: dict[str, Any]
    service: dict[str, Any]
    if_not_exists: str
    after_seconds: float = 0.0

    def request(self, after_seq: int, rollback: builtins.list[int]) -> JSON:
        service = {**self.service, "after_seq": after_seq}
        if rollback:
            service["rollback"] = rollback
        return run_request(**self.fields, service=service)


UNHONOURED: Final[dict[str, tuple[object, ...]]] = {
    "on_completion": (None, "keep"),
    "on_disconnect": (None, "continue", "cancel"),
    "feedback_keys": (None, []),
    "durability": (None, "sync", "async"),
}
"""Run options the service does not honour, each with the values it does (issue 36: fail
closed): deleting a run's thread when it ends, feedback keys, and
checkpointing only at exit (every step is durable here, which ``sync`` and ``async`` ask no
less than). ``on_disconnect: "cancel"`` is honoured by the stream and wait routes."""


def _checked(
    graph: str,
    body: Mapping[str, Any],
    store_modes: Sequence[str] = (),
    assistant_id: str | None = None,
) -> _Checked:
    """Every argument of a run request checked (`ValidationError` naming the first wrong one),
    nothing read or written."""
    for name, honoured in UNHONOURED.items():
        if body.get(name) not in honoured:
            raise ValidationError(f"{name}: {body.get(name)!r} is not supported by this service")
    modes = listed_modes(body.get("stream_mode", ["values"]), SDK_MODES) or ["values"]
    strategy = body.get("multitask_strategy") or "enqueue"
    if strategy not in STRATEGIES:
        raise ValidationError(f"multitask_strategy: one of {', '.join(STRATEGIES)}")
    if_not_exists = body.get("if_not_exists") or "reject"
    if if_not_exists not in ("reject", "create"):
        raise ValidationError("if_not_exists: 'reject' or 'create'")
    metadata = object_field(body, "metadata")
    webhook = check_webhook(body.get("webhook"))
    config = object_field(body, "config")
    context = object_field(body, "context")
    if context:
        configurable = config.get("configurable") or {}
        if not isinstance(configurable, dict):
            raise ValidationError("config.configurable: must be an object")
        config = {**config, "configurable": {**configurable, **context}}
    command = body.get("command")
    if command is not None and not isinstance(command, dict):
        raise ValidationError("command: must be an object (resume, update, goto)")
    checkpoint_id = body.get("checkpoint_id") or object_field(body, "checkpoint").get(
        "checkpoint_id"
    )
    if checkpoint_id is not None and not isinstance(checkpoint_id, str):
        raise ValidationError("checkpoint_id: must be a string")
    for name in ("interrupt_before", "interrupt_after"):
        nodes = body.get(name)
        if not (
            nodes is None
            or isinstance(nodes, str)
            or (isinstance(nodes, list) and all(isinstance(n, str) for n in nodes))
        ):
            raise ValidationError(f"{name}: a list of node names or '*'")
    fields: dict[str, Any] = {
        "input": body.get("input"),
        "command": command,
        "config": config,
        "checkpoint_id": checkpoint_id,
        "interrupt_before": body.get("interrupt_before"),
        "interrupt_after": body.get("interrupt_after"),
        "stream_mode": list(store_modes) or sorted({SDK_MODES[m] for m in modes}),
        "stream_subgraphs": bool(body.get("stream_subgraphs")),
        "graph": graph,
    }
    service: dict[str, Any] = {
        "assistant_id": assistant_id or assistant_id_of(graph),  # by the graph's name too
        "metadata": metadata,
        "multitask_strategy": strategy,
        "sse_modes": modes,
    }
    if webhook is not None:
        service["webhook"] = webhook
    run_request(**fields, service=service)  # its own checks (config, command, nodes...)
    return _Checked(fields, service, if_not_exists, _after_seconds(body.get("after_seconds")))


MAX_AFTER_SECONDS: Final = 366 * 24 * 3600


def _after_seconds(value: object) -> float:
    """``after_seconds``: a delayed start, 0 to a year of seconds."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:  # NaN
        raise ValidationError("after_seconds: a number of seconds, 0 or more")
    if value > MAX_AFTER_SECONDS:
        raise ValidationError(f"after_seconds: at most {MAX_AFTER_SECONDS} (a year)")
    return float(value)


def _frame(event: str, data: Any, seq: int | None) -> bytes:
    text = f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n"
    if seq is not None:
        text += f"id: {seq}\n"
    return (text + "\n").encode()


class _Mapper:
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
