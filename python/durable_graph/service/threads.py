"""Threads and their state for the service (SPEC §14.6), over the store and the graphs.

Each method is one endpoint's work, a coroutine on the async store (SPEC §20.1): no thread is
held while it waits; LangGraph's state is read and written through `AsyncDurableSaver`
(``aget_state``, ``aget_state_history``, ``aupdate_state``). They raise the store's errors
(`NotFound` -> 404, `ThreadBusy` -> 409, `ValidationError` -> 422, mapped in `app`).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Mapping
from contextlib import suppress
from datetime import UTC, datetime
from typing import Any, Final

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.errors import InvalidUpdateError
from langgraph.pregel import Pregel
from langgraph.store.base import BaseStore

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.errors import NotFound, StoreError, ValidationError
from durable_graph.core.items import MAX_ITEMS_PAGE
from durable_graph.core.model import ANY, Commit, Failed, QueueEntry
from durable_graph.langgraph import AsyncDurableSaver, codec
from durable_graph.langgraph.core import LANGGRAPH_NEXT
from durable_graph.langgraph.factory import GraphFactory, ServedGraph
from durable_graph.langgraph.values import from_json
from durable_graph.service.assistants import PREFIX as ASSISTANT_PREFIX
from durable_graph.service.auth import TENANT, visible
from durable_graph.service.records import (
    GRAPH_EFFECT,
    METADATA_UPDATE,
    THREAD_EFFECT,
    THREAD_SOURCE,
    check_thread_id,
    empty_state,
    iso,
    state_json,
)
from durable_graph.service.webhooks import PREFIX as WEBHOOK_PREFIX

log = logging.getLogger("durable_graph.service")

HOLDER: Final = "langgraph-api"
MAX_PRUNE: Final = 1000
"""Threads one ``POST /threads/prune`` names at most (each is a store call or more)."""
SEARCH_SCAN: Final = 10_000
"""Threads a search reads at most: without ``auth`` the store's first threads by id (every
thread is the one user's); with it, the user's own newest ones (D243)."""
OWNERS: Final = "dg-thread-owners"
"""The first label of the owners' thread index: items of no tenant, which no user of an
``auth`` deployment reaches (every user is a tenant), one namespace per owner (D243)."""
INDEXED: Final = "indexed"
"""The key of the item marking that the threads made before the index were indexed."""


class Threads:
    """The thread endpoints' work over ``store`` and ``graphs`` (name -> compiled graph)."""

    def __init__(
        self,
        store: AsyncCheckpointer,
        graphs: Mapping[str, ServedGraph],
        graph_store: BaseStore | None = None,
        saver: AsyncDurableSaver | None = None,
    ) -> None:
        self.store = store
        self.saver = saver or AsyncDurableSaver(store)
        self.graphs = dict(graphs)
        self.graph_store = graph_store
        self.default_graph = next(iter(graphs))
        self._read_graphs: dict[str, Pregel[Any, Any, Any, Any]] = {}
        self.default_ttl: tuple[float, str] | None = None
        """``checkpointer.ttl``'s default (minutes, strategy) for every thread made here."""

    async def graph(self, name: str) -> Pregel[Any, Any, Any, Any]:
        """The graph ``name`` for reading (state, history, schemas, drawing) over the store; a
        factory's, made once with a read runtime (`factory`, D194)."""
        graph = self._read_graphs.get(name)
        if graph is None:
            served = self.graphs[name]
            if isinstance(served, GraphFactory):
                try:
                    served = await served.make("assistants.read", {}, self.graph_store)
                except Exception as exc:  # the user's factory: a clear error, never a 500
                    raise ValidationError(f"graph {name}: its factory failed: {exc}") from exc
            graph = served.copy(update={"checkpointer": self.saver, "store": self.graph_store})
            self._read_graphs[name] = graph
        return graph

    # --- records ---------------------------------------------------------------------------

    async def exists(self, thread_id: str) -> bool:
        """The thread is there for this request: its tenant's (SPEC §20.4), passing its auth
        filter; another tenant's is as unknown as a missing one."""
        if await self.store.thread(thread_id) is None:
            return False
        record = await self._record(thread_id)
        if record.get("owner") != TENANT.get():
            return False
        return visible(await self._metadata(thread_id, record))

    async def _record(self, thread_id: str) -> dict[str, Any]:
        """What `create` recorded of the thread (metadata, created_at, owner)."""
        effect = await self.store.get_effect(thread_id, THREAD_EFFECT)
        return effect.value if effect is not None and isinstance(effect.value, dict) else {}

    async def _metadata(self, thread_id: str, record: dict[str, Any]) -> dict[str, Any]:
        """The thread's metadata: its creation's, each update merged over it in order."""
        metadata = dict(record.get("metadata") or {})
        for update in await self._metadata_updates(thread_id):
            metadata.update(update)
        return metadata

    async def create(
        self,
        thread_id: str | None,
        metadata: dict[str, Any],
        if_exists: str = "raise",
        ttl: tuple[float, str] | None = None,
    ) -> dict[str, Any]:
        """A new thread (``if_exists="do_nothing"``: an existing one of this request's, as it
        was); its TTL ``ttl``, else langgraph.json's default (SPEC §24.1)."""
        thread_id = check_thread_id(thread_id) if thread_id is not None else str(uuid.uuid4())
        if await self.store.thread(thread_id) is not None:
            if if_exists == "do_nothing" and await self.exists(thread_id):
                return await self.get(thread_id)
            raise Conflict(f"thread {thread_id} already exists")  # whoever's it is
        claim = await self.store.claim(thread_id, HOLDER)
        try:
            checkpoint = empty_checkpoint()
            await self.store.commit(
                claim,
                Commit(
                    checkpoint_id=checkpoint["id"],
                    parent_id=None,
                    run_id=HOLDER,
                    state=codec.encode_checkpoint(self.saver.serde, checkpoint, None),
                    metadata={"source": THREAD_SOURCE, "step": -2, "parents": {}},
                    next=LANGGRAPH_NEXT,
                ),
            )
            record = {"metadata": metadata, "created_at": iso(_now()), "owner": TENANT.get()}
            # Indexed before its record: a thread whose create fails half-way is at worst an
            # index entry that search reads past, never a thread that search cannot find.
            await self._index(thread_id, TENANT.get())
            await self.store.record_effect(claim, THREAD_EFFECT, record)
            ttl = ttl or self.default_ttl  # langgraph.json's checkpointer.ttl (SPEC §24.1)
            if ttl is not None:
                await self.store.set_thread_ttl(thread_id, *ttl)
        finally:
            with suppress(StoreError):
                await self.store.release_claim(claim)
        return await self.get(thread_id)

    async def update(
        self, thread_id: str, metadata: dict[str, Any], ttl: tuple[float, str] | None = None
    ) -> dict[str, Any]:
        """``threads.update``: ``metadata`` merged over the thread's, as the reference merges it;
        ``ttl``, if given, replaces the thread's TTL.

        Written under the thread's claim like every write, so a thread whose run is going is
        409 (`ThreadBusy`) until the run ends (D192)."""
        if not await self.exists(thread_id):
            raise NotFound(f"thread {thread_id} not found")
        claim = await self.store.claim(thread_id, HOLDER)
        try:
            number = len(await self._metadata_updates(thread_id)) + 1
            await self.store.record_effect(claim, f"{METADATA_UPDATE}{number:010d}", metadata)
        finally:
            with suppress(StoreError):
                await self.store.release_claim(claim)
        if ttl is not None:
            await self.store.set_thread_ttl(thread_id, *ttl)
        return await self.get(thread_id)

    async def _metadata_updates(self, thread_id: str) -> list[dict[str, Any]]:
        """The thread's metadata updates in order (their keys sort as they were numbered)."""
        updates: list[dict[str, Any]] = []
        after = METADATA_UPDATE
        while True:
            page = await self.store.effects(thread_id, after=after, limit=100)
            ours = [e for e in page if e.key.startswith(METADATA_UPDATE)]
            updates.extend(e.value for e in ours if isinstance(e.value, dict))
            if not page or len(ours) < len(page):
                return updates
            after = page[-1].key

    async def graph_name(self, thread_id: str) -> str:
        effect = await self.store.get_effect(thread_id, GRAPH_EFFECT)
        name = effect.value if effect is not None else None
        return name if isinstance(name, str) and name in self.graphs else self.default_graph

    async def graph_for(self, thread_id: str) -> Pregel[Any, Any, Any, Any]:
        return await self.graph(await self.graph_name(thread_id))

    async def get(self, thread_id: str) -> dict[str, Any]:
        info = await self.store.thread(thread_id)
        record = await self._record(thread_id) if info is not None else {}
        metadata = await self._metadata(thread_id, record)
        if info is None or record.get("owner") != TENANT.get() or not visible(metadata):
            raise NotFound(f"thread {thread_id} not found")
        graph = await self.store.get_effect(thread_id, GRAPH_EFFECT)
        if graph is not None and isinstance(graph.value, str):
            metadata.setdefault("graph_id", graph.value)
        try:
            snapshot = await self.snapshot(thread_id, None)
        except StoreError:
            raise
        except Exception:
            # A state LangGraph cannot rebuild (the pending input of a run that failed on it,
            # e.g. messages that are not messages) must not fail every search: the thread is
            # listed without values (reading its state fails as LangGraph's get_state does).
            log.warning("thread %r: its state cannot be read", thread_id, exc_info=True)
            snapshot = None
        status = await self.status(thread_id, snapshot)
        interrupts: dict[str, list[Any]] = {}
        for task in (snapshot or {}).get("tasks", []):
            if task["interrupts"]:
                interrupts[task["id"]] = task["interrupts"]
        return {
            "thread_id": thread_id,
            "created_at": record.get("created_at") or iso(info.created_at),
            "updated_at": iso(info.updated_at),
            "metadata": metadata,
            "status": status,
            "values": (snapshot or {}).get("values") or {},
            "interrupts": interrupts,
            "config": {},
        }

    async def status(self, thread_id: str, snapshot: dict[str, Any] | None) -> str:
        # Only this incarnation's runs (D241): a deleted thread's (delete-marked, first in the
        # thread's order until cancelled) do not make the next busy.
        opened = await self.store.run_queue.open_entries(thread_id=thread_id, tenant=ANY, limit=1)
        if opened and opened[0].thread_deleted:
            opened = await self.store.run_queue.open_entries(thread_id=thread_id, tenant=ANY)
        for entry in opened:
            if await self.is_current(entry):
                return "busy"
        # A failed last run first (SPEC §19.4): the failed step is left pending in the state,
        # and such a thread is not waiting for input.
        last = await self.store.run_queue.entries(thread_id=thread_id, limit=1)
        if last and isinstance(last[0].outcome, Failed) and await self.is_current(last[0]):
            return "error"
        if snapshot is not None and (snapshot["next"] or snapshot["interrupts"]):
            return "interrupted"
        return "idle"

    async def search(
        self,
        metadata: dict[str, Any] | None,
        status: str | None,
        ids: list[str] | None,
        limit: int,
        offset: int,
    ) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        tenant = TENANT.get()
        if ids is not None:
            candidates = [i for i in ids if await self.exists(check_thread_id(i, "ids[]"))]
        elif tenant is not None:
            candidates = await self._owned(tenant)
        else:
            candidates = []
            after: str | None = None
            while len(candidates) < SEARCH_SCAN:
                page = await self.store.threads(after=after, limit=100)
                if not page:
                    break
                candidates.extend(
                    t.thread_id
                    for t in page
                    # A subgraph's namespace, a stored assistant's versions: not threads a
                    # client made (D191).
                    if codec.NS_SEP not in t.thread_id
                    and not t.thread_id.startswith((ASSISTANT_PREFIX, WEBHOOK_PREFIX))
                )
                after = page[-1].thread_id
        for thread_id in candidates:
            try:
                thread = await self.get(thread_id)
            except NotFound:  # another tenant's, or one its auth filter hides
                continue
            if metadata and any(thread["metadata"].get(k) != v for k, v in metadata.items()):
                continue
            if status is not None and thread["status"] != status:
                continue
            found.append(thread)
        found.sort(key=lambda t: t["updated_at"] or "", reverse=True)
        return found[offset : offset + limit]

    async def delete(self, thread_id: str) -> None:
        """Delete the thread, ending its open runs (D241): the store marks them, and they are
        cancelled here so that their joins and streams end now, not when a worker meets them."""
        if not await self.exists(thread_id) or not await self.store.delete_thread(thread_id):
            raise NotFound(f"thread {thread_id} not found")
        owner = TENANT.get()
        if owner is not None:
            await self.store.run_queue.delete_item(_owner_namespace(owner), thread_id)
        for entry in await self.store.run_queue.open_entries(thread_id=thread_id, tenant=ANY):
            if entry.thread_deleted:  # not one submitted since, to a thread of the id made again
                with suppress(StoreError):
                    await self.store.run_queue.cancel(entry.entry_id, entry.tenant)

    async def is_current(self, entry: QueueEntry) -> bool:
        """The entry was made for the thread that now has its id (D241): the thread is there and
        the entry came after its first commit. The service makes a thread before it queues its
        runs, so an entry of a deleted thread (or one made again since) is never current: its
        run is as unknown as a missing one, and a join never reads the next thread's state."""
        info = await self.store.thread(entry.thread_id)
        return info is not None and entry.submitted_at >= info.created_at

    async def prune(self, thread_ids: object, strategy: object) -> int:
        """``POST /threads/prune`` (SPEC §24.3), as the reference answers it: how many of the
        threads this request may see were pruned (the rest, another tenant's included, are
        skipped as missing). ``delete`` deletes each as `delete` does; ``keep_latest`` keeps
        each namespace's latest checkpoint and what resuming from it needs (the saver's
        ``prune``, as LangGraph's ``PostgresSaver`` prunes), checked for every thread before
        any is pruned: a thread with a run going is 409 (its run writes on), a thread whose
        state needs older checkpoints (a ``DeltaChannel``) 422."""
        if not isinstance(thread_ids, list) or not all(isinstance(t, str) for t in thread_ids):
            raise ValidationError("thread_ids: a list of thread ids")
        if len(thread_ids) > MAX_PRUNE:
            raise ValidationError(f"thread_ids: at most {MAX_PRUNE} a request")
        if strategy not in ("delete", "keep_latest"):
            raise ValidationError("strategy: 'delete' or 'keep_latest'")
        ids = [check_thread_id(t, "thread_ids[]") for t in dict.fromkeys(thread_ids)]
        found = [t for t in ids if await self.exists(t)]
        if strategy == "delete":
            pruned = 0
            for thread_id in found:
                with suppress(NotFound):  # deleted meanwhile: not this request's doing
                    await self.delete(thread_id)
                    pruned += 1
            return pruned
        try:  # a thread with a run going: ThreadBusy (409), nothing pruned
            await self.saver.aprune(found, strategy="keep_latest")
        except NotImplementedError as exc:
            raise ValidationError(f"strategy: {exc}") from None
        return len(found)

    async def copy(self, thread_id: str) -> dict[str, Any]:
        target = str(uuid.uuid4())
        if not await self.exists(thread_id):
            raise NotFound(f"thread {thread_id} not found")
        await self._index(target, TENANT.get())  # the copy's record (owner) is the source's
        if not await self.store.copy_thread(thread_id, target):
            raise NotFound(f"thread {thread_id} not found")
        return await self.get(target)

    # --- the owners' index (D243) ----------------------------------------------------------

    async def _index(self, thread_id: str, owner: str | None) -> None:
        """List ``thread_id`` under its owner, so that a user's search reads their threads
        only, however many another user has. Without ``auth`` (no owner) there is one user,
        whose search reads every thread: nothing to index."""
        if owner is not None:
            await self.store.run_queue.put_item(_owner_namespace(owner), thread_id, {})

    async def _owned(self, owner: str) -> list[str]:
        """The ids of ``owner``'s threads, newest first, at most `SEARCH_SCAN` (an index entry
        of a thread deleted by other means, e.g. a TTL sweep, is read past by `get`)."""
        await self._index_earlier_threads()
        queue = self.store.run_queue
        ids: list[str] = []
        while len(ids) < SEARCH_SCAN:
            page = await queue.search_items(
                _owner_namespace(owner), limit=MAX_ITEMS_PAGE, offset=len(ids)
            )
            ids.extend(item.key for item in page)
            if len(page) < MAX_ITEMS_PAGE:
                break
        return list(dict.fromkeys(ids))[:SEARCH_SCAN]

    async def _index_earlier_threads(self) -> None:
        """Once per store: index the threads made before the index (their owner from their
        record). Idempotent, so API processes doing it at once only repeat each other."""
        queue = self.store.run_queue
        if await queue.get_item((OWNERS,), INDEXED) is not None:
            return
        after: str | None = None
        while page := await self.store.threads(after=after, limit=100):
            for info in page:
                if codec.NS_SEP in info.thread_id or info.thread_id.startswith(
                    (ASSISTANT_PREFIX, WEBHOOK_PREFIX)
                ):
                    continue  # not threads a client made (D191)
                owner = (await self._record(info.thread_id)).get("owner")
                if isinstance(owner, str):
                    await self._index(info.thread_id, owner)
            after = page[-1].thread_id
        await queue.put_item((OWNERS,), INDEXED, {"at": iso(_now())})

    # --- state -----------------------------------------------------------------------------

    def _config(self, thread_id: str, checkpoint_id: str | None) -> Any:
        conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
        if checkpoint_id is not None:
            conf["checkpoint_id"] = checkpoint_id
        return {"configurable": conf}

    async def snapshot(
        self, thread_id: str, checkpoint_id: str | None, subgraphs: bool = False
    ) -> dict[str, Any] | None:
        """The thread's state (at ``checkpoint_id``), None before any run."""
        graph = await self.graph_for(thread_id)
        snap = await graph.aget_state(self._config(thread_id, checkpoint_id), subgraphs=subgraphs)
        if snap.config is None or _is_record(snap.metadata):
            if checkpoint_id is not None and snap.config is None:
                raise NotFound(f"checkpoint {checkpoint_id} not found")
            return None
        return (await self._without_record_parent(thread_id, [state_json(snap)]))[0]

    async def state(
        self, thread_id: str, checkpoint_id: str | None, subgraphs: bool = False
    ) -> dict[str, Any]:
        if not await self.exists(thread_id):
            raise NotFound(f"thread {thread_id} not found")
        return await self.snapshot(thread_id, checkpoint_id, subgraphs) or empty_state(thread_id)

    async def history(
        self,
        thread_id: str,
        limit: int,
        before: str | None,
        metadata: dict[str, Any] | None,
        checkpoint_id: str | None,
    ) -> list[dict[str, Any]]:
        if not await self.exists(thread_id):
            raise NotFound(f"thread {thread_id} not found")
        graph = await self.graph_for(thread_id)
        out = []
        async for snap in graph.aget_state_history(
            self._config(thread_id, checkpoint_id),
            filter=metadata or None,
            before=self._config(thread_id, before) if before else None,
            limit=limit + 1,
        ):
            if _is_record(snap.metadata):
                continue
            out.append(state_json(snap))
        return await self._without_record_parent(thread_id, out[:limit])

    async def _without_record_parent(
        self, thread_id: str, states: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """``states`` with no parent that is the thread's record (`create`'s checkpoint, which
        a run that checkpoints only at exit has as its LangGraph parent, D287): the reference
        has no such checkpoint, so its first checkpoint has none."""
        listed = {(s["checkpoint"] or {}).get("checkpoint_id") for s in states}
        for state in states:
            parent = state["parent_checkpoint"]
            if parent is None or parent["checkpoint_id"] in listed or parent["checkpoint_ns"]:
                continue
            cp = await self.store.get(thread_id, parent["checkpoint_id"])
            if cp is not None and _is_record(cp.metadata):
                state["parent_checkpoint"] = None
        return states

    async def update_state(
        self,
        thread_id: str,
        values: Any,
        as_node: str | None,
        checkpoint_id: str | None,
    ) -> dict[str, Any]:
        if not await self.exists(thread_id):
            raise NotFound(f"thread {thread_id} not found")
        graph = await self.graph_for(thread_id)
        try:
            config = await graph.aupdate_state(
                self._config(thread_id, checkpoint_id), from_json(values), as_node=as_node
            )
        except StoreError:
            raise
        except (InvalidUpdateError, NotImplementedError, TypeError, ValueError) as exc:
            # LangGraph refuses the update (an unknown node, values its channels cannot take)
            # before it writes the checkpoint: the client's mistake, not the server's.
            raise ValidationError(f"values: the graph refused the update: {exc}") from None
        conf = config.get("configurable") or {}
        return {
            "checkpoint": {
                "thread_id": thread_id,
                "checkpoint_ns": conf.get("checkpoint_ns", ""),
                "checkpoint_id": conf.get("checkpoint_id"),
                "checkpoint_map": {},
            }
        }


def _owner_namespace(owner: str) -> tuple[str, str]:
    """The index namespace of ``owner``'s threads: a label may not hold ``.`` and is at most
    512 bytes, an identity may be anything, so the label is the identity's digest."""
    return (OWNERS, hashlib.sha256(owner.encode("utf-8", "surrogatepass")).hexdigest())


def _is_record(metadata: Any) -> bool:
    """The service's own first checkpoint of a thread."""
    return isinstance(metadata, dict) and metadata.get("source") == THREAD_SOURCE


class Conflict(Exception):
    """409: the request clashes with what exists."""


def _now() -> datetime:
    return datetime.now(UTC)
