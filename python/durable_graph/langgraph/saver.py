"""`DurableSaver`: LangGraph's checkpointer over any sync store (SPEC §12).

Writes. A saver bound to a run (`for_run(claim, run_id)`) commits under that claim, so a stale
worker's write raises `ClaimLost` and changes nothing, and under ``run_id``, so `latest_of_runs`
and `plan_attempt` see LangGraph's checkpoints as the attempt's. An unbound saver (e.g.
`update_state` from an API) takes and releases a claim per call, so it fails with `ThreadBusy`
while a run holds the thread. A subgraph namespace is a child thread: its writes take the child's
claim for the call and are fenced by the root thread's claim in the same transaction (`commit`
with ``fence``, `put_writes_fenced`, `put_writes_and_commit`).

Under LangGraph's default ``durability="async"`` a bound saver holds each task's writes and lands
them with the step's checkpoint (`put_writes_and_commit`): one durable write per step instead of
one per task plus one per checkpoint. A crash loses at most the step in flight, as LangGraph's
async mode allows; special writes (errors, interrupts) and ``durability="sync"`` write at once.

LangGraph may write from several threads at once (``durability="async"``) and may call
`put_writes` before the `put` of that checkpoint has landed: a per-thread guard serializes the
saver's writes to one LangGraph thread, and writes for a checkpoint not yet stored are held and
written right after its `put`.

The store's ``parent_id`` is the head the saver last wrote (looked up when unknown); LangGraph's
own parent id is kept in the stored state, so forks (`update_state` on an old checkpoint, replay,
`copy_thread`) are ordinary commits.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Any, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    CheckpointMetadata,
    CheckpointTuple,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.base import Checkpoint as LGCheckpoint
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..checkpointer import Checkpointer
from ..errors import NotFound, StaleParent, ValidationError
from ..model import Checkpoint, Claim, ClaimPolicy, Commit, PendingWrite, RetentionPolicy
from . import codec

T = TypeVar("T")

UNBOUND_HOLDER = "langgraph-saver"
"""Holder of the per-call claims an unbound saver takes."""

DEFAULT_RUN_ID = "langgraph"
"""Run id of an unbound write whose metadata names none."""

LANGGRAPH_NEXT = ("langgraph",)
"""`Commit.next` of every checkpoint the saver writes."""

_UNKNOWN = object()


CONFIG_KEY_DURABILITY = "__pregel_durability"
"""Where LangGraph's config says the run's durability (its ``CONFIG_KEY_DURABILITY``)."""


@dataclass(frozen=True, slots=True)
class Held:
    """One put_writes call not yet in the store."""

    checkpoint_id: str
    task_id: str
    writes: list[tuple[str, Any]]
    behind: bool
    """Held by choice (write-behind) rather than because its checkpoint was not stored yet."""


def run_id_of(metadata: dict[str, Any], bound: str | None) -> str:
    if bound is not None:
        return bound
    run_id = metadata.get("run_id")
    if isinstance(run_id, str) and run_id and "\x00" not in run_id:
        return run_id
    return DEFAULT_RUN_ID


class _Base(BaseCheckpointSaver[int]):
    """What the sync and async savers share: configuration, binding and the write plans."""

    def __init__(
        self,
        *,
        serde: SerializerProtocol | None = None,
        claim_policy: ClaimPolicy = ClaimPolicy(),
        bound: tuple[Claim, str] | None = None,
    ) -> None:
        super().__init__(serde=serde or codec.safe_serializer())
        self.claim_policy = claim_policy
        self.bound = bound
        self._heads: dict[str, str | None] = {}
        # Writes not in the store yet, per store thread, in arrival order: those LangGraph sent
        # before their checkpoint's put landed, and (bound, durability "async") those held to
        # land with the next checkpoint (write-behind: one durable write per step).
        self._held: dict[str, list[Held]] = {}
        # Checkpoints whose commit already took their held writes along: a write-behind write
        # for one of them that comes late is written on its own (the last few per thread).
        self._departed: dict[str, deque[str]] = {}
        # Guards _held and _departed only (never held across a store call), so holding a write
        # does not wait for a put in flight.
        self._held_lock = threading.Lock()

    def _take_held(self, st: str) -> list[Held]:
        with self._held_lock:
            return self._held.pop(st, [])

    def _hold_behind(self, st: str, held: Held) -> bool:
        """Hold a write-behind write; False when its checkpoint's ride has already left."""
        with self._held_lock:
            if held.checkpoint_id in self._departed.get(st, ()):
                return False
            self._hold(st, held)
            return True

    def _hold(self, st: str, held: Held) -> None:
        """Keep ``held`` (the caller holds _held_lock, or runs on the saver's event loop)."""
        pending = self._held.setdefault(st, [])
        # A task's writes to a checkpoint are kept once, as the store would (first write wins).
        if not any(
            h.checkpoint_id == held.checkpoint_id and h.task_id == held.task_id for h in pending
        ):
            pending.append(held)

    def _write_behind(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]]) -> bool:
        """Hold these writes for the next put? Bound, durability "async", no special channel."""
        # LangGraph leaves the key out for its default, "async".
        durability = (config.get("configurable") or {}).get(CONFIG_KEY_DURABILITY, "async")
        return (
            self.bound is not None
            and durability == "async"
            and not any(codec.is_special(ch) for ch, _ in writes)
        )

    def _plan_put(
        self, st: str, parent: str | None, new_id: str
    ) -> tuple[list[PendingWrite], list[Held]]:
        """(held writes to land with the commit on ``parent``, held writes to write after it).

        Write-behind writes to the parent ride with the commit. Writes to the new checkpoint
        that arrived before its put are written right after it, write-behind ones stay held for
        the next put. Writes to any other checkpoint stay held: under "async" LangGraph may send
        a later checkpoint's writes before an earlier put has landed.
        """
        fused: list[PendingWrite] = []
        after: list[Held] = []
        keep: list[Held] = []
        with self._held_lock:
            for h in self._held.pop(st, []):
                if h.behind and h.checkpoint_id == parent:
                    fused.extend(self._writes_for(None, h.task_id, h.writes)[0])
                elif h.checkpoint_id == new_id and not h.behind:
                    after.append(h)
                else:
                    keep.append(h)
            if keep:
                self._held[st] = keep
            if parent is not None:
                self._departed.setdefault(st, deque(maxlen=16)).append(parent)
        return fused, after

    def _check_bound(self, thread_id: str) -> None:
        if self.bound is not None and self.bound[0].thread_id != thread_id:
            raise ValidationError(
                "config: thread_id is not the thread of the claim this saver is bound to"
            )

    def _commit_for(
        self,
        config: RunnableConfig,
        checkpoint: LGCheckpoint,
        metadata: CheckpointMetadata,
    ) -> tuple[str, str, Commit]:
        thread_id, ns, lg_parent = codec.config_parts(config)
        self._check_bound(thread_id)
        st = codec.store_thread(thread_id, ns)
        md = codec.encode_metadata(
            self.serde, get_serializable_checkpoint_metadata(config, metadata)
        )
        run_id = run_id_of(md, self.bound[1] if self.bound else None)
        if self.bound is not None:
            md["run_id"] = run_id  # so delete_for_runs and list filters see the attempt's run
        commit = Commit(
            checkpoint_id=checkpoint["id"],
            parent_id=None,
            run_id=run_id,
            state=codec.encode_checkpoint(self.serde, checkpoint, lg_parent),
            metadata=md,
            # Whether the graph finished is LangGraph's to say (see handler.py): never `Finished`.
            next=LANGGRAPH_NEXT,
            parent_thread_id=thread_id if ns else None,
        )
        return thread_id, st, commit

    def _writes_for(
        self,
        existing: Sequence[PendingWrite] | None,
        task_id: str,
        writes: Sequence[tuple[str, Any]],
    ) -> tuple[list[PendingWrite], list[PendingWrite]]:
        """(regular writes, special writes each under a new generation)."""
        regular = [
            PendingWrite(task_id, ch, codec.encode(self.serde, v))
            for ch, v in writes
            if not codec.is_special(ch)
        ]
        special: list[PendingWrite] = []
        seen = list(existing or ())
        for ch, v in writes:
            if codec.is_special(ch):
                gen = codec.next_generation(seen, task_id, ch)
                w = PendingWrite(
                    task_id, codec.special_channel(ch, gen), codec.encode(self.serde, v)
                )
                special.append(w)
                seen.append(w)
        return regular, special

    def _stored_config(self, thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
        }

    def _list_plan(
        self, config: RunnableConfig | None, before: RunnableConfig | None
    ) -> tuple[str | None, str | None, str | None, bool]:
        """(thread id, namespace or None for all, exact checkpoint id, all threads)."""
        before_id = None
        if before is not None:
            before_id = (before.get("configurable") or {}).get("checkpoint_id")
        if config is None:
            return None, None, before_id, True
        conf = config.get("configurable") or {}
        thread_id = conf.get("thread_id")
        if thread_id is None:
            return None, None, before_id, True
        ns = conf.get("checkpoint_ns")
        return str(thread_id), (None if ns is None else str(ns)), before_id, False


def store_filter(filter: dict[str, Any] | None) -> dict[str, object] | None:
    """The filter for `Checkpointer.search`, or None to filter here (none, or not plain JSON)."""
    if filter and codec.is_json(filter):
        return dict(filter)
    return None


def _keep(
    cp: Checkpoint,
    exact: str | None,
    before_id: str | None,
    filter: dict[str, Any] | None,
    serde: SerializerProtocol,
) -> bool:
    if exact is not None and cp.checkpoint_id != exact:
        return False
    if before_id is not None and not cp.checkpoint_id < before_id:
        return False
    if filter:
        return codec.metadata_matches(codec.decode_metadata(serde, cp.metadata), filter)
    return True


class DurableSaver(_Base):
    """A LangGraph `BaseCheckpointSaver` over a sync `Checkpointer` (memory, SQLite, PostgreSQL)."""

    def __init__(
        self,
        store: Checkpointer,
        *,
        serde: SerializerProtocol | None = None,
        claim_policy: ClaimPolicy = ClaimPolicy(),
        bound: tuple[Claim, str] | None = None,
        _guards: weakref.WeakValueDictionary[str, threading.Lock] | None = None,
    ) -> None:
        super().__init__(serde=serde, claim_policy=claim_policy, bound=bound)
        self.store = store
        self._guards: weakref.WeakValueDictionary[str, threading.Lock] = (
            _guards if _guards is not None else weakref.WeakValueDictionary()
        )
        self._guards_lock = threading.Lock()

    def for_run(self, claim: Claim, run_id: str) -> DurableSaver:
        """A saver whose writes are fenced by ``claim`` and committed under ``run_id``."""
        return DurableSaver(
            self.store,
            serde=self.serde,
            claim_policy=self.claim_policy,
            bound=(claim, run_id),
        )

    # --- guards and claims ------------------------------------------------------------------

    def _guard(self, thread_id: str) -> threading.Lock:
        with self._guards_lock:
            lock = self._guards.get(thread_id)
            if lock is None:
                lock = threading.Lock()
                self._guards[thread_id] = lock
            return lock

    def _with_claim(self, thread_id: str, st: str, fn: Callable[[Claim, Claim | None], T]) -> T:
        """Run ``fn(claim of st, fence)`` under the right claims (see the module docstring)."""
        holder = self.bound[1] if self.bound else UNBOUND_HOLDER
        root = (
            self.bound[0] if self.bound else self.store.claim(thread_id, holder, self.claim_policy)
        )
        try:
            if st == thread_id:
                return fn(root, None)
            child = self.store.claim(st, holder, self.claim_policy)
            try:
                return fn(child, root)
            finally:
                self.store.release_claim(child)
        finally:
            if self.bound is None:
                self.store.release_claim(root)

    def _head(self, st: str) -> str | None:
        head = self._heads.get(st, _UNKNOWN)
        if head is _UNKNOWN:
            info = self.store.thread(st)
            head = info.head_id if info else None
        return cast(str | None, head)

    def _commit(self, claim: Claim, st: str, commit: Commit, fence: Claim | None) -> None:
        parent = self._head(st)
        commit = replace(commit, parent_id=parent, fence=fence)
        fused, after = self._plan_put(st, parent, commit.checkpoint_id)
        try:
            if fused and parent is not None:
                self.store.put_writes_and_commit(claim, parent, fused, commit)
            else:
                self.store.commit(claim, commit)
        except (StaleParent, NotFound):
            # The head moved (another writer, a delete): write the held writes on their own
            # (dropped if their checkpoint is gone), then commit on the head as it is now.
            self._heads.pop(st, None)
            if fused and parent is not None:
                with suppress(NotFound):
                    self.store.put_writes(claim, parent, fused)
            self.store.commit(claim, replace(commit, parent_id=self._head(st)))
        self._heads[st] = commit.checkpoint_id
        for h in after:
            self._put_held(claim, st, h, fence)

    def _put_held(self, claim: Claim, st: str, h: Held, fence: Claim | None) -> None:
        with suppress(NotFound):  # its checkpoint is gone: nothing to attach the writes to
            self._put_writes_claimed(claim, st, h.checkpoint_id, h.task_id, h.writes, fence)

    def _put_writes_claimed(
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
            cp = self.store.get(st, checkpoint_id)
            if cp is None:
                raise NotFound("checkpoint not found")
            existing = cp.writes
        regular, special = self._writes_for(existing, task_id, writes)
        for batch in (regular, special):
            if not batch:
                continue
            if fence is None:
                self.store.put_writes(claim, checkpoint_id, batch)
            else:  # a subgraph namespace: fenced by the root thread's claim, atomically
                self.store.put_writes_fenced(claim, checkpoint_id, batch, fence)

    # --- BaseCheckpointSaver: writes --------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: LGCheckpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread_id, st, commit = self._commit_for(config, checkpoint, metadata)
        with self._guard(thread_id):
            self._with_claim(
                thread_id, st, lambda claim, fence: self._commit(claim, st, commit, fence)
            )
        return self._stored_config(thread_id, codec.split_thread(st)[1], checkpoint["id"])

    def put_writes(
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

        def write(claim: Claim, fence: Claim | None) -> None:
            for h in self._take_held(st):  # what is held goes first, in order
                self._put_held_or_keep(claim, st, h, fence)
            self._put_held_or_keep(
                claim, st, Held(checkpoint_id, task_id, items, behind=False), fence
            )

        with self._guard(thread_id):
            self._with_claim(thread_id, st, write)

    def _put_held_or_keep(self, claim: Claim, st: str, h: Held, fence: Claim | None) -> None:
        try:
            self._put_writes_claimed(claim, st, h.checkpoint_id, h.task_id, h.writes, fence)
        except NotFound:
            # LangGraph may write before that checkpoint's put has landed: hold the writes.
            with self._held_lock:
                self._hold(st, replace(h, behind=False))

    def delete_thread(self, thread_id: str) -> None:
        with self._guard(thread_id):
            self.store.delete_thread(thread_id, self.bound[0] if self.bound else None)
            self._forget(thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        if run_ids:
            self.store.delete_runs(list(run_ids))
        self._heads.clear()

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        codec.store_thread(source_thread_id, "")
        codec.store_thread(target_thread_id, "")
        with self._guard(target_thread_id):
            self.store.copy_thread(source_thread_id, target_thread_id)
            self._forget(target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        if strategy not in ("keep_latest", "delete"):
            raise ValidationError(f"strategy: unknown {strategy!r}")
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
                continue
            for st in [thread_id, *self.store.children(thread_id)]:
                self.store.prune(st, RetentionPolicy(keep_last=1))

    def _forget(self, thread_id: str) -> None:
        for st in [k for k in self._heads if codec.split_thread(k)[0] == thread_id]:
            del self._heads[st]

    # --- BaseCheckpointSaver: reads ---------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id, ns, checkpoint_id = codec.config_parts(config)
        cp = self.store.get(codec.store_thread(thread_id, ns), checkpoint_id)
        return None if cp is None else codec.to_tuple(self.serde, cp)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        thread_id, ns, before_id, everything = self._list_plan(config, before)
        exact = None if config is None else (config.get("configurable") or {}).get("checkpoint_id")
        left = limit
        for st in self._threads_to_list(thread_id, ns, everything):
            for cp in self._history(st, filter):
                if left is not None and left <= 0:
                    return
                if _keep(cp, exact, before_id, filter, self.serde):
                    yield codec.to_tuple(self.serde, cp)
                    if left is not None:
                        left -= 1

    def _threads_to_list(
        self, thread_id: str | None, ns: str | None, everything: bool
    ) -> Iterator[str]:
        if everything:
            after = None
            while page := self.store.threads(after=after, limit=100):
                yield from (t.thread_id for t in page)
                after = page[-1].thread_id
            return
        assert thread_id is not None
        if ns is not None:
            yield codec.store_thread(thread_id, ns)
        else:
            yield thread_id
            yield from self.store.children(thread_id)

    def _history(self, st: str, filter: dict[str, Any] | None) -> Iterator[Checkpoint]:
        """The thread's checkpoints newest first; a JSON metadata filter is applied by the store."""
        wanted = store_filter(filter)
        before = None
        while True:
            if wanted is None:
                page = self.store.history(st, before=before, limit=100)
            else:
                page = self.store.search(st, wanted, before=before, limit=100)
            if not page:
                return
            yield from page
            before = page[-1].checkpoint_id

    # --- async API (LangGraph's async graphs and the conformance suite) ---------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        items = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in items:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: LGCheckpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(lambda: self.prune(thread_ids, strategy=strategy))
