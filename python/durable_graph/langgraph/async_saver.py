"""`AsyncDurableSaver`: LangGraph's checkpointer over any async store (SPEC §12).

The same rules as `DurableSaver` (see `saver.py`): bound writes fenced by the run's claim and
committed under its run id, unbound writes under a per-call claim, a per-thread guard (an
`asyncio.Lock`), early `put_writes` held until their checkpoint's `put`, special writes stored
per generation. Its sync methods are not offered: LangGraph calls the async ones from async
graphs (``ainvoke``, ``astream``).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import suppress
from dataclasses import replace
from typing import Any, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.base import Checkpoint as LGCheckpoint
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..aio.protocols import AsyncCheckpointer
from ..errors import NotFound, StaleParent, ValidationError
from ..model import Checkpoint, Claim, ClaimPolicy, Commit, RetentionPolicy
from . import codec
from .saver import _UNKNOWN, UNBOUND_HOLDER, Held, _Base, _keep, store_filter

T = TypeVar("T")


class AsyncDurableSaver(_Base):
    """A LangGraph `BaseCheckpointSaver` over an `AsyncCheckpointer`."""

    def __init__(
        self,
        store: AsyncCheckpointer,
        *,
        serde: SerializerProtocol | None = None,
        claim_policy: ClaimPolicy = ClaimPolicy(),
        bound: tuple[Claim, str] | None = None,
    ) -> None:
        super().__init__(serde=serde, claim_policy=claim_policy, bound=bound)
        self.store = store
        self._guards: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def for_run(self, claim: Claim, run_id: str) -> AsyncDurableSaver:
        """A saver whose writes are fenced by ``claim`` and committed under ``run_id``."""
        return AsyncDurableSaver(
            self.store, serde=self.serde, claim_policy=self.claim_policy, bound=(claim, run_id)
        )

    def _guard(self, thread_id: str) -> asyncio.Lock:
        lock = self._guards.get(thread_id)
        if lock is None:
            lock = asyncio.Lock()
            self._guards[thread_id] = lock
        return lock

    async def _with_claim(
        self,
        thread_id: str,
        st: str,
        fn: Callable[[Claim, Claim | None], Awaitable[T]],
    ) -> T:
        holder = self.bound[1] if self.bound else UNBOUND_HOLDER
        root = (
            self.bound[0]
            if self.bound
            else await self.store.claim(thread_id, holder, self.claim_policy)
        )
        try:
            if st == thread_id:
                return await fn(root, None)
            child = await self.store.claim(st, holder, self.claim_policy)
            try:
                return await fn(child, root)
            finally:
                await self.store.release_claim(child)
        finally:
            if self.bound is None:
                await self.store.release_claim(root)

    async def _head(self, st: str) -> str | None:
        head = self._heads.get(st, _UNKNOWN)
        if head is _UNKNOWN:
            info = await self.store.thread(st)
            head = info.head_id if info else None
        return cast(str | None, head)

    async def _commit(self, claim: Claim, st: str, commit: Commit, fence: Claim | None) -> None:
        parent = await self._head(st)
        commit = replace(commit, parent_id=parent, fence=fence)
        fused, after = self._plan_put(st, parent, commit.checkpoint_id)
        try:
            if fused and parent is not None:
                await self.store.put_writes_and_commit(claim, parent, fused, commit)
            else:
                await self.store.commit(claim, commit)
        except (StaleParent, NotFound):
            # As DurableSaver: held writes on their own, then commit on the head as it is now.
            self._heads.pop(st, None)
            if fused and parent is not None:
                with suppress(NotFound):
                    await self.store.put_writes(claim, parent, fused)
            await self.store.commit(claim, replace(commit, parent_id=await self._head(st)))
        self._heads[st] = commit.checkpoint_id
        for h in after:
            await self._put_held(claim, st, h, fence)

    async def _put_held(self, claim: Claim, st: str, h: Held, fence: Claim | None) -> None:
        with suppress(NotFound):  # its checkpoint is gone: nothing to attach the writes to
            await self._put_writes_claimed(claim, st, h.checkpoint_id, h.task_id, h.writes, fence)

    async def _put_held_or_keep(self, claim: Claim, st: str, h: Held, fence: Claim | None) -> None:
        try:
            await self._put_writes_claimed(claim, st, h.checkpoint_id, h.task_id, h.writes, fence)
        except NotFound:
            # LangGraph may write before that checkpoint's put has landed: hold the writes.
            with self._held_lock:
                self._hold(st, replace(h, behind=False))

    async def _put_writes_claimed(
        self,
        claim: Claim,
        st: str,
        checkpoint_id: str,
        task_id: str,
        writes: list[tuple[str, Any]],
        fence: Claim | None = None,
    ) -> None:
        existing = None
        if any(codec.is_special(ch) for ch, _ in writes):
            cp = await self.store.get(st, checkpoint_id)
            if cp is None:
                raise NotFound("checkpoint not found")
            existing = cp.writes
        regular, special = self._writes_for(existing, task_id, writes)
        for batch in (regular, special):
            if not batch:
                continue
            if fence is None:
                await self.store.put_writes(claim, checkpoint_id, batch)
            else:  # a subgraph namespace: fenced by the root thread's claim, atomically
                await self.store.put_writes_fenced(claim, checkpoint_id, batch, fence)

    # --- writes -----------------------------------------------------------------------------

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: LGCheckpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread_id, st, commit = self._commit_for(config, checkpoint, metadata)

        async def write(claim: Claim, fence: Claim | None) -> None:
            await self._commit(claim, st, commit, fence)

        async with self._guard(thread_id):
            await self._with_claim(thread_id, st, write)
        return self._stored_config(thread_id, codec.split_thread(st)[1], checkpoint["id"])

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        thread_id, ns, checkpoint_id = codec.config_parts(config)
        self._check_bound(thread_id)
        if checkpoint_id is None:
            raise ValidationError("config: configurable.checkpoint_id is required for put_writes")
        st = codec.store_thread(thread_id, ns)
        items = list(writes)
        if self._write_behind(config, items) and self._hold_behind(
            st, Held(checkpoint_id, task_id, items, behind=True)
        ):
            return

        async def write(claim: Claim, fence: Claim | None) -> None:
            for h in self._take_held(st):  # what is held goes first, in order
                await self._put_held_or_keep(claim, st, h, fence)
            await self._put_held_or_keep(
                claim, st, Held(checkpoint_id, task_id, items, False), fence
            )

        async with self._guard(thread_id):
            await self._with_claim(thread_id, st, write)

    async def adelete_thread(self, thread_id: str) -> None:
        async with self._guard(thread_id):
            await self.store.delete_thread(thread_id, self.bound[0] if self.bound else None)
            for st in [k for k in self._heads if codec.split_thread(k)[0] == thread_id]:
                del self._heads[st]

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        if run_ids:
            await self.store.delete_runs(list(run_ids))
        self._heads.clear()

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        codec.store_thread(source_thread_id, "")
        codec.store_thread(target_thread_id, "")
        async with self._guard(target_thread_id):
            await self.store.copy_thread(source_thread_id, target_thread_id)
            for st in [k for k in self._heads if codec.split_thread(k)[0] == target_thread_id]:
                del self._heads[st]

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        if strategy not in ("keep_latest", "delete"):
            raise ValidationError(f"strategy: unknown {strategy!r}")
        for thread_id in thread_ids:
            if strategy == "delete":
                await self.adelete_thread(thread_id)
                continue
            for st in [thread_id, *await self.store.children(thread_id)]:
                await self.store.prune(st, RetentionPolicy(keep_last=1))

    # --- reads ------------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id, ns, checkpoint_id = codec.config_parts(config)
        cp = await self.store.get(codec.store_thread(thread_id, ns), checkpoint_id)
        return None if cp is None else codec.to_tuple(self.serde, cp)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        thread_id, ns, before_id, everything = self._list_plan(config, before)
        exact = None if config is None else (config.get("configurable") or {}).get("checkpoint_id")
        left = limit
        for st in await self._threads_to_list(thread_id, ns, everything):
            before_cp: str | None = None
            wanted = store_filter(filter)  # a JSON metadata filter is applied by the store
            while True:
                if wanted is None:
                    page = await self.store.history(st, before=before_cp, limit=100)
                else:
                    page = await self.store.search(st, wanted, before=before_cp, limit=100)
                if not page:
                    break
                for cp in page:
                    if left is not None and left <= 0:
                        return
                    if _keep(cp, exact, before_id, filter, self.serde):
                        yield codec.to_tuple(self.serde, cp)
                        if left is not None:
                            left -= 1
                before_cp = page[-1].checkpoint_id

    async def _threads_to_list(
        self, thread_id: str | None, ns: str | None, everything: bool
    ) -> list[str]:
        if everything:
            out: list[str] = []
            after = None
            while page := await self.store.threads(after=after, limit=100):
                out.extend(t.thread_id for t in page)
                after = page[-1].thread_id
            return out
        assert thread_id is not None
        if ns is not None:
            return [codec.store_thread(thread_id, ns)]
        return [thread_id, *await self.store.children(thread_id)]


__all__ = ["AsyncDurableSaver", "Checkpoint"]
