"""LangGraph's long-term memory on durable_graph (SPEC §20.3 "the store").

`DurableStore(run_queue)` over a sync store's queue and `AsyncDurableStore(run_queue)` over an
async one are LangGraph `BaseStore`s: each op of a ``batch`` is one store call
(`RunQueue.put_item`, `get_item`, `delete_item`, `search_items`, `item_namespaces`), so the
items live in the store's own database, with its tenant (``tenant=``: every item of this store
object is that tenant's; another tenant's are unknown). They behave as LangGraph's
``PostgresStore`` (its own tests are the measure, ``make langgraph-suite``), with two choices of
ours: expired items are never returned, swept or not (D200, ``PostgresStore``'s
``omit_expired=True``), and the order operators of a filter compare numbers as numbers (D201).

``ttl`` is LangGraph's ``TTLConfig`` (``default_ttl`` and ``sweep_interval_minutes`` in minutes,
``refresh_on_read``); `start_ttl_sweeper` deletes expired items every so often. ``index`` is
LangGraph's ``IndexConfig`` (`durable_graph.langgraph.store_index`): with one, a put embeds the
value's indexed fields with the configured ``embed`` and the store keeps the vectors
(`RunQueue.put_indexed_item`), and a search with a ``query`` ranks items by cosine similarity to
the query's embedding, computed by the store (in SQL on PostgreSQL), with each item's ``score``
(`RunQueue.search_items_by_vector`). Without one, a put's ``index`` and a search's ``query`` are
ignored, as LangGraph's stores ignore them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from typing import Final

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from durable_graph.core.async_protocols import AsyncRunQueue
from durable_graph.core.errors import ValidationError
from durable_graph.core.items import ScoredItem, StoredItem
from durable_graph.core.run_queue import RunQueue
from durable_graph.core.scalars import check_optional_identifier
from durable_graph.langgraph.store_index import (
    StoreIndex,
    check_index,
    query_vector,
    texts,
    vectors,
)

SWEEP_BATCH: Final = 1000
"""Items one sweep call deletes; `sweep_ttl` calls again until fewer come back."""
DEFAULT_SWEEP_MINUTES: Final = 5.0
CALLS_IN_FLIGHT: Final = 4
"""The most store calls one `AsyncDurableStore` has in flight: more concurrent ``aget`` /
``aput`` calls wait their turn here, not for a pool connection (whose wait is bounded: thousands
of gathered calls would otherwise time out waiting for one)."""


def _checked(
    tenant: object, ttl: TTLConfig | None, index: object
) -> tuple[str | None, TTLConfig | None, StoreIndex | None]:
    if ttl is not None and not isinstance(ttl, dict):
        raise ValidationError(f"ttl must be a TTLConfig dict or None, got {type(ttl).__name__}")
    return check_optional_identifier("tenant", tenant), ttl, check_index(index)


def _item(found: StoredItem) -> Item:
    return Item(
        value=found.value,
        key=found.key,
        namespace=found.namespace,
        created_at=found.created_at,
        updated_at=found.updated_at,
    )


def _search_item(found: StoredItem, score: float | None = None) -> SearchItem:
    return SearchItem(
        namespace=found.namespace,
        key=found.key,
        value=found.value,
        created_at=found.created_at,
        updated_at=found.updated_at,
        score=score,
    )


def _scored(found: list[ScoredItem]) -> list[SearchItem]:
    return [_search_item(s.item, s.score) for s in found]


def _validated(ops: Iterable[Op]) -> list[Op]:
    """The ops, every namespace checked before any runs (LangGraph's `InvalidNamespaceError`),
    so a batch with one bad op changes nothing."""
    listed = list(ops)
    for op in listed:
        validate_op_namespace(op)
    return listed


def _conditions(op: ListNamespacesOp) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    prefix: tuple[str, ...] | None = None
    suffix: tuple[str, ...] | None = None
    for condition in op.match_conditions or ():
        if condition.match_type == "prefix" and prefix is None:
            prefix = tuple(condition.path)
        elif condition.match_type == "suffix" and suffix is None:
            suffix = tuple(condition.path)
        else:
            raise ValidationError(
                "match_conditions must hold at most one prefix and one suffix condition"
            )
    return prefix, suffix


def _sweep_minutes(ttl: TTLConfig | None, given: float | None) -> float:
    minutes = given if given is not None else (ttl or {}).get("sweep_interval_minutes")
    return float(minutes) if minutes else DEFAULT_SWEEP_MINUTES


class DurableStore(BaseStore):
    """LangGraph's `BaseStore` over a sync store's run queue (``store.run_queue``)."""

    supports_ttl = True

    def __init__(
        self,
        run_queue: RunQueue,
        *,
        tenant: str | None = None,
        ttl: TTLConfig | None = None,
        index: object = None,
    ) -> None:
        self.tenant, self.ttl_config, self._index = _checked(tenant, ttl, index)
        self.index_config = None if self._index is None else self._index.config
        self._queue = run_queue
        self._stop: threading.Event | None = None
        self._sweeper: threading.Thread | None = None

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._one(op) for op in _validated(ops)]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def _one(self, op: Op) -> Result:
        q, t = self._queue, self.tenant
        if isinstance(op, GetOp):
            found = q.get_item(op.namespace, op.key, op.refresh_ttl, t)
            return None if found is None else _item(found)
        if isinstance(op, PutOp):
            if op.value is None:
                q.delete_item(op.namespace, op.key, t)
            elif self._index is None:
                q.put_item(op.namespace, op.key, op.value, op.ttl, t)
            else:
                pairs = texts(self._index, op.value, op.index)
                embedded = (
                    self._index.embeddings.embed_documents([x for _, x in pairs]) if pairs else []
                )
                fields = vectors(self._index, pairs, embedded)
                q.put_indexed_item(op.namespace, op.key, op.value, fields, op.ttl, t)
            return None
        if isinstance(op, SearchOp):
            if op.query and self._index is not None:
                vector = query_vector(self._index, self._index.embeddings.embed_query(op.query))
                return _scored(
                    q.search_items_by_vector(
                        op.namespace_prefix, vector, op.filter, op.limit, op.offset,
                        op.refresh_ttl, t,
                    )
                )  # fmt: skip
            found_items = q.search_items(
                op.namespace_prefix, op.filter, op.limit, op.offset, op.refresh_ttl, t
            )
            return [_search_item(i) for i in found_items]
        if isinstance(op, ListNamespacesOp):
            prefix, suffix = _conditions(op)
            return q.item_namespaces(prefix, suffix, op.max_depth, op.limit, op.offset, t)
        raise ValidationError(f"op must be a GetOp, PutOp, SearchOp or ListNamespacesOp: {op!r}")

    # --- TTL ----------------------------------------------------------------------------------

    def sweep_ttl(self) -> int:
        """Delete every expired item (of every tenant); how many."""
        total = 0
        while True:
            swept = self._queue.sweep_items(SWEEP_BATCH)
            total += swept
            if swept < SWEEP_BATCH:
                return total

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> threading.Thread:
        """Sweep every ``sweep_interval_minutes`` (else the TTL config's, else 5) in a daemon
        thread until `stop_ttl_sweeper`; the running one when one runs."""
        if self._sweeper is not None and self._sweeper.is_alive():
            return self._sweeper
        interval = _sweep_minutes(self.ttl_config, sweep_interval_minutes) * 60
        stop = threading.Event()

        def run() -> None:
            while not stop.wait(interval):
                try:
                    self.sweep_ttl()
                except Exception:  # a failed sweep is tried again next interval
                    continue

        self._stop = stop
        self._sweeper = threading.Thread(target=run, name="durable-store-sweeper", daemon=True)
        self._sweeper.start()
        return self._sweeper

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; True when it stopped (or none ran) within ``timeout`` seconds."""
        if self._sweeper is None or self._stop is None:
            return True
        self._stop.set()
        self._sweeper.join(timeout)
        stopped = not self._sweeper.is_alive()
        if stopped:
            self._sweeper = self._stop = None
        return stopped


class AsyncDurableStore(BaseStore):
    """LangGraph's `BaseStore` over an async store's run queue (``store.run_queue``).

    The sync methods (``get``, ``put``, ...) work from another thread than the event loop's, as
    LangGraph's ``AsyncPostgresStore``'s do: they run the call on the loop the store was first
    used on (`abatch`, or the loop running when it was made)."""

    supports_ttl = True

    def __init__(
        self,
        run_queue: AsyncRunQueue,
        *,
        tenant: str | None = None,
        ttl: TTLConfig | None = None,
        index: object = None,
    ) -> None:
        self.tenant, self.ttl_config, self._index = _checked(tenant, ttl, index)
        self.index_config = None if self._index is None else self._index.config
        self._queue = run_queue
        self._sweeper: asyncio.Task[None] | None = None
        self._slots: asyncio.Semaphore | None = None
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    def for_tenant(self, tenant: str | None) -> AsyncDurableStore:
        """This store for ``tenant``'s items (itself when it is that tenant's): the same queue,
        TTL configuration and loop; a user's under the service (SPEC §20.4)."""
        if tenant == self.tenant:
            return self
        other = AsyncDurableStore(self._queue, tenant=tenant, ttl=self.ttl_config)
        other._index, other.index_config = self._index, self.index_config
        other._loop = self._loop
        return other

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        listed = _validated(ops)
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        if self._slots is None:
            self._slots = asyncio.Semaphore(CALLS_IN_FLIGHT)
        async with self._slots:
            return [await self._one(op) for op in listed]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        listed = _validated(ops)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if self._loop is None or running is self._loop:
            raise asyncio.InvalidStateError(
                "Synchronous calls to AsyncDurableStore are only allowed from a different "
                "thread than its event loop's; from the loop, use the async methods (aget, ...)"
            )
        return asyncio.run_coroutine_threadsafe(self.abatch(listed), self._loop).result()

    async def _one(self, op: Op) -> Result:
        q, t = self._queue, self.tenant
        if isinstance(op, GetOp):
            found = await q.get_item(op.namespace, op.key, op.refresh_ttl, t)
            return None if found is None else _item(found)
        if isinstance(op, PutOp):
            if op.value is None:
                await q.delete_item(op.namespace, op.key, t)
            elif self._index is None:
                await q.put_item(op.namespace, op.key, op.value, op.ttl, t)
            else:
                pairs = texts(self._index, op.value, op.index)
                embedded = (
                    await self._index.embeddings.aembed_documents([x for _, x in pairs])
                    if pairs
                    else []
                )
                fields = vectors(self._index, pairs, embedded)
                await q.put_indexed_item(op.namespace, op.key, op.value, fields, op.ttl, t)
            return None
        if isinstance(op, SearchOp):
            if op.query and self._index is not None:
                embedded_query = await self._index.embeddings.aembed_query(op.query)
                vector = query_vector(self._index, embedded_query)
                return _scored(
                    await q.search_items_by_vector(
                        op.namespace_prefix, vector, op.filter, op.limit, op.offset,
                        op.refresh_ttl, t,
                    )
                )  # fmt: skip
            found_items = await q.search_items(
                op.namespace_prefix, op.filter, op.limit, op.offset, op.refresh_ttl, t
            )
            return [_search_item(i) for i in found_items]
        if isinstance(op, ListNamespacesOp):
            prefix, suffix = _conditions(op)
            return await q.item_namespaces(prefix, suffix, op.max_depth, op.limit, op.offset, t)
        raise ValidationError(f"op must be a GetOp, PutOp, SearchOp or ListNamespacesOp: {op!r}")

    # --- TTL ----------------------------------------------------------------------------------

    async def sweep_ttl(self) -> int:
        """Delete every expired item (of every tenant); how many."""
        total = 0
        while True:
            swept = await self._queue.sweep_items(SWEEP_BATCH)
            total += swept
            if swept < SWEEP_BATCH:
                return total

    async def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> asyncio.Task[None]:
        """Sweep every ``sweep_interval_minutes`` (else the TTL config's, else 5) in a task until
        `stop_ttl_sweeper`; the running one when one runs."""
        if self._sweeper is not None and not self._sweeper.done():
            return self._sweeper
        interval = _sweep_minutes(self.ttl_config, sweep_interval_minutes) * 60

        async def run() -> None:
            while True:
                await asyncio.sleep(interval)
                try:
                    await self.sweep_ttl()
                except Exception:  # a failed sweep is tried again next interval
                    continue

        self._sweeper = asyncio.create_task(run(), name="durable-store-sweeper")
        return self._sweeper

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; True when it stopped (or none ran) within ``timeout`` seconds."""
        task, self._sweeper = self._sweeper, None
        if task is None:
            return True
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=timeout)
        return bool(done)


__all__ = ["AsyncDurableStore", "DurableStore"]
