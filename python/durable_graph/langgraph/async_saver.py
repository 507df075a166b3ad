"""`AsyncDurableSaver`: LangGraph's checkpointer over any async store (SPEC §12, §14.1).

Written once, async, as plain calls of the store's methods; `DurableSaver` (``generated.py``) is
this code made sync by ``tools/generate_stores.py`` (``async``/``await`` dropped, ``aput`` →
``put``, `AsyncCheckpointer` → `Checkpointer`, `asyncio.Lock` → `threading.Lock`). What a write
is made of, and which writes are held and why, is `core`'s.

Its sync methods run the async ones on the saver's event loop from another thread, as LangGraph's
async savers do (D88), and refuse from the loop's own thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import replace
from typing import Any, Self, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.base import Checkpoint as LGCheckpoint

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.errors import NotFound, StaleParent, ThreadBusy
from durable_graph.core.model import ANY, Checkpoint, Claim, PendingWrite, RetentionPolicy
from durable_graph.langgraph import codec
from durable_graph.langgraph.core import (
    PAGE,
    UNBOUND_HOLDER,
    Held,
    SaverCore,
    check_prune,
    counts_deltas,
    list_scope,
    listed,
    on_parent,
    refuse_deltas,
    store_filter,
    stored_config,
)

R = TypeVar("R")


class AsyncDurableSaver(SaverCore[AsyncCheckpointer]):
    """A LangGraph `BaseCheckpointSaver` whose store is the `AsyncCheckpointer` it is given."""

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: LGCheckpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Commit the checkpoint on the head this saver last wrote, under the run's claim (or
        one taken for the call); held task writes to that head land in the same transaction."""
        thread_id, st, commit = self._commit_of(config, checkpoint, metadata)
        async with self._guard(thread_id), self._claims(thread_id, st) as (claim, fence):
            parent = await self._head(st)
            fused, after = self._held_for_put(st, parent, commit.checkpoint_id)
            try:
                if fused and parent is not None:  # write-behind (core): one transaction
                    made = on_parent(commit, parent, fence)
                    await self.store.put_writes_and_commit(claim, parent, fused, made)
                else:
                    await self.store.commit(claim, on_parent(commit, parent, fence))
            except (StaleParent, NotFound):
                # The head moved (another writer, a delete): write the held writes on their own
                # (dropped if their checkpoint is gone), then commit on the head as it is now.
                if fused and parent is not None:
                    with suppress(NotFound):
                        await self._put_batch(claim, parent, fused, fence)
                self._heads.pop(st, None)
                await self.store.commit(claim, on_parent(commit, await self._head(st), fence))
            self._heads[st] = commit.checkpoint_id
            for early in after:  # sent before this put landed
                with suppress(NotFound):  # its checkpoint is gone: nothing to attach them to
                    await self._write(claim, st, early, fence)
        return stored_config(st, commit.checkpoint_id)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        thread_id, st, held = self._held_of(config, writes, task_id, task_path)
        async with self._guard(thread_id):
            if held.behind and held.checkpoint_id not in self._departed.get(st, ()):
                self._hold(st, held)  # lands with the next checkpoint
                return
            async with self._claims(thread_id, st) as (claim, fence):
                for h in [*self._held.pop(st, []), held]:  # what is held goes first, in order
                    try:
                        await self._write(claim, st, h, fence)
                    except NotFound:  # LangGraph wrote before that checkpoint's put landed
                        self._hold(st, replace(h, behind=False))

    # --- the parts of a write ---------------------------------------------------------------

    def _guard(self, thread_id: str) -> asyncio.Lock:
        """The lock that serializes this saver's writes to one LangGraph thread."""
        with self._guards_lock:
            lock: asyncio.Lock | None = self._guards.get(thread_id)
            if lock is None:
                lock = self._guards[thread_id] = asyncio.Lock()
            return lock

    @asynccontextmanager
    async def _claims(self, thread_id: str, st: str) -> AsyncIterator[tuple[Claim, Claim | None]]:
        """(the claim to write the store thread ``st`` under, the root claim fencing it if
        ``st`` is a namespace): the bound claim, or one taken for the call."""
        holder = self.bound[1] if self.bound else UNBOUND_HOLDER
        if self.bound is not None:
            root = self.bound[0]
        else:
            root = await self.store.claim(thread_id, holder, self.claim_policy)
        try:
            if st == thread_id:
                yield root, None
            else:
                child = await self.store.claim(st, holder, self.claim_policy)
                try:
                    yield child, root
                finally:
                    await self.store.release_claim(child)
        finally:
            if self.bound is None:
                await self.store.release_claim(root)

    async def _head(self, st: str) -> str | None:
        """The head this saver last wrote to ``st``, read from the store when unknown."""
        if st not in self._heads:
            info = await self.store.thread(st)
            self._heads[st] = info.head_id if info else None
        return self._heads[st]

    async def _write(self, claim: Claim, st: str, held: Held, fence: Claim | None) -> None:
        """Write one `put_writes` call (`NotFound` when its checkpoint is not stored)."""
        existing: Sequence[PendingWrite] = ()
        if any(codec.is_special(ch) for ch, _ in held.writes):  # numbered after stored ones
            cp = await self.store.get(st, held.checkpoint_id)
            if cp is None:
                raise NotFound("checkpoint not found")
            existing = cp.writes
        for batch in self._pending(held, existing):
            if batch:
                await self._put_batch(claim, held.checkpoint_id, batch, fence)

    async def _put_batch(
        self, claim: Claim, checkpoint_id: str, batch: Sequence[PendingWrite], fence: Claim | None
    ) -> None:
        if fence is None:
            await self.store.put_writes(claim, checkpoint_id, batch)
        else:  # a subgraph namespace: fenced by the root thread's claim, atomically
            await self.store.put_writes_fenced(claim, checkpoint_id, batch, fence)

    # --- LangGraph's other operations -------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id, ns, checkpoint_id = codec.config_parts(config)
        cp = await self.store.get(codec.store_thread(thread_id, ns), checkpoint_id)
        return None if cp is None else codec.to_tuple(self.serde, cp)

    async def adelete_thread(self, thread_id: str) -> None:
        async with self._guard(thread_id):
            await self.store.delete_thread(thread_id, self.bound[0] if self.bound else None)
            self._forget(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        if run_ids:
            await self.store.delete_runs(list(run_ids))
        self._heads.clear()

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        codec.store_thread(source_thread_id, "")
        codec.store_thread(target_thread_id, "")
        async with self._guard(target_thread_id):
            await self.store.copy_thread(source_thread_id, target_thread_id)
            self._forget(target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """LangGraph's ``prune``, as ``PostgresSaver`` 3.2 does it.

        ``"delete"`` deletes the threads. ``"keep_latest"`` keeps the latest checkpoint of each
        namespace (with its pending writes; it is left with no parent), and deletes a finished
        subgraph call's namespace (``name:task_id``) that started from a root checkpoint other
        than the kept one; a ``checkpointer=True`` subgraph's namespace keeps its latest. It
        refuses (`NotImplementedError`, nothing pruned) a batch in which a thread uses a
        ``DeltaChannel``: such a state is rebuilt from older checkpoints' writes, which a prune
        to one checkpoint would lose; and (`ThreadBusy`, nothing pruned) one in which a thread
        has a run open in the queue.
        """
        ids = check_prune(thread_ids, strategy)
        if strategy == "delete":
            for thread_id in ids:
                await self.adelete_thread(thread_id)
            return
        for thread_id in ids:  # its run writes on from the checkpoints a prune would drop
            if await self.store.run_queue.open_entries(thread_id=thread_id, tenant=ANY, limit=1):
                raise ThreadBusy(f"thread {thread_id} has a run going: prune it once it ends")
        namespaces = {t: [t, *await self._children(t)] for t in ids}
        refuse_deltas([t for t in ids if await self._uses_delta(namespaces[t])])
        for thread_id in ids:
            # Which namespaces are finished calls is read before anything of the thread goes.
            root = await self.store.get(thread_id)
            finished = [
                st
                for st in namespaces[thread_id][1:]
                if await self._finished_call(st, thread_id, root)
            ]
            for st in namespaces[thread_id]:
                if st in finished:
                    await self.store.delete_thread(st)
                    self._heads.pop(st, None)
                else:
                    await self.store.prune(st, RetentionPolicy(keep_last=1))

    async def _uses_delta(self, store_threads: Sequence[str]) -> bool:
        for st in store_threads:
            older = None
            while page := await self.store.history(st, before=older, limit=PAGE):
                if any(counts_deltas(cp) for cp in page):
                    return True
                older = page[-1].checkpoint_id
        return False

    async def _finished_call(self, st: str, thread_id: str, root: Checkpoint | None) -> bool:
        """Is ``st`` a subgraph call's namespace that started from a saved root checkpoint
        other than the root's latest (``root``)? Such a call is over: prune drops it."""
        if ":" not in codec.split_thread(st)[1]:
            return False  # a checkpointer=True subgraph: its state outlives each call
        head = await self.store.get(st)
        if head is None:
            return False
        parents = codec.decode_metadata(self.serde, head.metadata).get("parents")
        started = parents.get("") if isinstance(parents, dict) else None
        if not isinstance(started, str) or (root is not None and started == root.checkpoint_id):
            return False
        # Only once that root checkpoint is saved: a run may save the call first.
        return await self.store.get(thread_id, started) is not None

    async def _children(self, thread_id: str) -> Sequence[str]:
        """Every namespace thread of ``thread_id``, a page at a time."""
        found: list[str] = []
        while page := await self.store.children(thread_id, after=found[-1] if found else None):
            found += page
        return found

    async def _threads_to_list(
        self, thread_id: str | None, ns: str | None, after: str | None
    ) -> Sequence[str]:
        """The store threads to list after ``after`` (None: the first ones); empty at the end."""
        if thread_id is None:  # every thread, a page at a time
            return [t.thread_id for t in await self.store.threads(after=after, limit=PAGE)]
        if after is not None:  # one thread, or one with its namespaces: all in the first batch
            return []
        if ns is not None:
            return [codec.store_thread(thread_id, ns)]
        return [thread_id, *await self._children(thread_id)]

    async def _page(
        self, st: str, wanted: dict[str, object] | None, before: str | None
    ) -> Sequence[Checkpoint]:
        """``st``'s checkpoints before ``before``, newest first, a page (``wanted``: filtered
        in the store)."""
        if wanted is None:
            return await self.store.history(st, before=before, limit=PAGE)
        return await self.store.search(st, wanted, before=before, limit=PAGE)

    # (Last of LangGraph's methods: below it, ``list`` names the method, not the type.)
    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        thread_id, ns, exact, before_id = list_scope(config, before)
        wanted = store_filter(filter, self.serde)  # a JSON metadata filter is applied by the store
        left = limit
        after = None
        while threads := await self._threads_to_list(thread_id, ns, after):
            for st in threads:
                older = None
                while page := await self._page(st, wanted, older):
                    for cp in page:
                        if left is not None and left <= 0:
                            return
                        if listed(cp, exact, before_id, filter, self.serde):
                            yield codec.to_tuple(self.serde, cp)
                            if left is not None:
                                left -= 1
                    older = page[-1].checkpoint_id
            after = threads[-1]

    # --- LangGraph's sync API: the async one on the saver's loop, from another thread -------
    # (Not in DurableSaver: tools/generate_stores.py writes its async API, its sync one run in a
    # worker thread, in place of this section.)

    def __init__(self, store: AsyncCheckpointer, **kwargs: Any) -> None:
        super().__init__(store, **kwargs)
        self.loop: asyncio.AbstractEventLoop | None
        """The loop the sync methods run on (None when the saver was made outside one)."""
        try:
            self.loop = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None

    def _inherit(self, parent: Self) -> None:
        self.loop = self.loop or parent.loop

    def _on_loop(self, work: Coroutine[Any, Any, R]) -> R:
        loop = self.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or loop.is_closed() or running is loop:
            work.close()
            if loop is None or loop.is_closed():
                raise asyncio.InvalidStateError(
                    "AsyncDurableSaver's sync methods run on its event loop, and it has none "
                    "running: make the saver inside the loop, or use the async methods"
                )
            raise asyncio.InvalidStateError(
                "Synchronous calls to AsyncDurableSaver are only allowed from a different "
                "thread than its event loop's. From the loop's thread, use the async interface, "
                "e.g. `await checkpointer.aget_tuple(...)` or `await graph.ainvoke(...)`."
            )
        return asyncio.run_coroutine_threadsafe(work, loop).result()

    # LangGraph's own signatures (it reads put_writes' to know it takes a task_path).

    def put(
        self,
        config: RunnableConfig,
        checkpoint: LGCheckpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._on_loop(self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        return self._on_loop(self.aput_writes(config, writes, task_id, task_path))

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._on_loop(self.aget_tuple(config))

    def delete_thread(self, thread_id: str) -> None:
        return self._on_loop(self.adelete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        return self._on_loop(self.adelete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        return self._on_loop(self.acopy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        return self._on_loop(self.aprune(thread_ids, strategy=strategy))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        async def collect() -> Sequence[CheckpointTuple]:
            listing = self.alist(config, filter=filter, before=before, limit=limit)
            return [item async for item in listing]

        return iter(self._on_loop(collect()))


__all__ = ["AsyncDurableSaver"]
