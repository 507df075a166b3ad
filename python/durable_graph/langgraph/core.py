"""The LangGraph savers' rules, written once for the sync and the async store (SPEC §12).

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


Each operation is a plan (see `plan`), run by `DurableSaver` on a sync store and by
`AsyncDurableSaver` on an async one; LangGraph's methods (``put`` and ``aput``, ...) are written
out in `durable_graph.langgraph.generated` (`SaverApi`, generated from the plans here by
``tools/generate_stores.py``), each running its plan with the saver's runner.
"""

from __future__ import annotations

import functools
import random
import threading
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Any, Generic, Self, TypeVar

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

from durable_graph.core.errors import NotFound, StaleParent, ValidationError
from durable_graph.core.model import (
    Checkpoint,
    Claim,
    ClaimPolicy,
    Commit,
    EventIn,
    PendingWrite,
    RetentionPolicy,
)
from durable_graph.core.ops import StoreOp, store_op
from durable_graph.langgraph import allowlist, codec
from durable_graph.langgraph.plan import Guarded, Plan

# Graphs compiled from here on hand their schema types to their saver (see `allowlist`).
allowlist.enable()

R = TypeVar("R")
StoreT = TypeVar("StoreT")

UNBOUND_HOLDER = "langgraph-saver"
"""Holder of the per-call claims an unbound saver takes."""

DEFAULT_RUN_ID = "langgraph"
"""Run id of an unbound write whose metadata names none."""

LANGGRAPH_NEXT = ("langgraph",)
"""`Commit.next` of every checkpoint the saver writes."""

CONFIG_KEY_DURABILITY = "__pregel_durability"
"""Where LangGraph's config says the run's durability (its ``CONFIG_KEY_DURABILITY``)."""

PAGE = 100
"""Threads or checkpoints read per store call while listing."""

DELTA_METADATA_KEYS = frozenset({"counters_since_delta_snapshot", "delta_writes_versioned"})
"""Checkpoint metadata keys that show a thread uses a DeltaChannel (as PostgresSaver reads it)."""


@dataclass(frozen=True, slots=True)
class Held:
    """One put_writes call not yet in the store."""

    checkpoint_id: str
    task_id: str
    writes: list[tuple[str, Any]]
    behind: bool
    """Held by choice (write-behind) rather than because its checkpoint was not stored yet."""
    task_path: str = ""
    """LangGraph's path of the task (stored: reads order writes by LangGraph's writes_sort_key)."""


def run_id_of(metadata: dict[str, Any], bound: str | None) -> str:
    if bound is not None:
        return bound
    run_id = metadata.get("run_id")
    if isinstance(run_id, str) and run_id and "\x00" not in run_id:
        return run_id
    return DEFAULT_RUN_ID


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


class SaverCore(BaseCheckpointSaver[int], Generic[StoreT]):
    """What the sync and async savers share: configuration, binding and every operation's plan.

    A saver names its kind of lock (`_lock_kind`) and provides the runners for the API it offers: `_run`
    and `_iterate` (sync API), `_arun` and `_aiterate` (async API); the others raise
    NotImplementedError.
    """

    def __init__(
        self,
        store: StoreT,
        *,
        serde: SerializerProtocol | None = None,
        claim_policy: ClaimPolicy = ClaimPolicy(),
        bound: tuple[Claim, str] | None = None,
        events_for: Callable[[str], list[EventIn]] | None = None,
    ) -> None:
        super().__init__(serde=serde or codec.safe_serializer())
        self.store = store
        self.claim_policy = claim_policy
        self.bound = bound
        # A bound saver's stream (langgraph.streaming): the events that commit with a root
        # checkpoint, by its id.
        self._events_for = events_for
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
        # The per-thread guards (a lock of the saver's kind), each kept while in use.
        self._guards: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
        self._guards_lock = threading.Lock()  # LangGraph may look guards up from several threads

    _lock_kind: Callable[[], Any]
    """The guards' lock: `threading.Lock` for a sync store, `asyncio.Lock` for an async one."""

    def _guard(self, thread_id: str) -> Any:
        """The lock that serializes this saver's writes to one LangGraph thread."""
        with self._guards_lock:
            lock = self._guards.get(thread_id)
            if lock is None:
                lock = self._lock_kind()
                self._guards[thread_id] = lock
            return lock

    def for_run(
        self,
        claim: Claim,
        run_id: str,
        *,
        events_for: Callable[[str], list[EventIn]] | None = None,
    ) -> Self:
        """A saver whose writes are fenced by ``claim`` and committed under ``run_id``;
        ``events_for(checkpoint_id)`` gives the events each root checkpoint commits with."""
        bound = type(self)(
            self.store,
            serde=self.serde,
            claim_policy=self.claim_policy,
            bound=(claim, run_id),
            events_for=events_for,
        )
        bound._inherit(self)
        return bound

    def _inherit(self, parent: Self) -> None:
        """What a bound saver takes over from the saver it was bound from (`for_run`), beyond
        its configuration: nothing here; the async saver's event loop."""

    def get_next_version(self, current: Any, channel: None) -> Any:
        """The next channel version: an int after an int (or none), as LangGraph's base saver
        does; after a string, a string in LangGraph's own savers' format (``InMemorySaver``,
        ``SqliteSaver``, ``PostgresSaver``: a zero-padded counter, a dot, a random fraction), so
        a thread they wrote (or one imported from them) continues with versions that compare
        above its stored ones."""
        if isinstance(current, str):
            return f"{int(current.split('.')[0]) + 1:032}.{random.random():016}"
        return super().get_next_version(current, channel)

    # --- runners (per kind of store) --------------------------------------------------------

    def _run(self, plan: Plan[R]) -> R:
        raise NotImplementedError

    async def _arun(self, plan: Plan[R]) -> R:
        raise NotImplementedError

    def _iterate(self, plan: Plan[None]) -> Iterator[CheckpointTuple]:
        raise NotImplementedError

    def _aiterate(self, plan: Plan[None]) -> AsyncIterator[CheckpointTuple]:
        raise NotImplementedError

    # --- held writes ------------------------------------------------------------------------

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
        """Keep ``held`` (the caller holds _held_lock)."""
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
                    fused.extend(self._writes_for(None, h.task_id, h.writes, h.task_path)[0])
                elif h.checkpoint_id == new_id and not h.behind:
                    after.append(h)
                else:
                    keep.append(h)
            if keep:
                self._held[st] = keep
            if parent is not None:
                self._departed.setdefault(st, deque(maxlen=16)).append(parent)
        return fused, after

    # --- what a write is made of ------------------------------------------------------------

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
    ) -> tuple[str, str, Callable[..., Commit]]:
        """(thread id, store thread, the `Commit` given its ``parent_id`` and ``fence``)."""
        thread_id, ns, lg_parent = codec.config_parts(config)
        self._check_bound(thread_id)
        st = codec.store_thread(thread_id, ns)
        md = codec.encode_metadata(
            self.serde, get_serializable_checkpoint_metadata(config, metadata)
        )
        run_id = run_id_of(md, self.bound[1] if self.bound else None)
        if self.bound is not None:
            md["run_id"] = run_id  # so delete_for_runs and list filters see the attempt's run
        state = codec.encode_checkpoint(self.serde, checkpoint, lg_parent)
        # Made once its parent is known (under the claim): no copy per put.
        commit = functools.partial(
            Commit,
            checkpoint_id=checkpoint["id"],
            run_id=run_id,
            metadata=md,
            # Whether the graph finished is LangGraph's to say (see handler.py): never `Finished`.
            next=LANGGRAPH_NEXT,
            parent_thread_id=thread_id if ns else None,
            events=(
                tuple(self._events_for(checkpoint["id"]))
                if self._events_for is not None and not ns
                else ()
            ),
        )

        def make(parent_id: str | None, fence: Claim | None) -> Commit:
            # Whether it had a store parent: one that prune removes reports none (codec.to_tuple).
            state[codec.STORE_PARENT_KEY] = parent_id is not None
            return commit(parent_id=parent_id, fence=fence, state=state)

        return thread_id, st, make

    def _writes_for(
        self,
        existing: Sequence[PendingWrite] | None,
        task_id: str,
        writes: Sequence[tuple[str, Any]],
        task_path: str = "",
    ) -> tuple[list[PendingWrite], list[PendingWrite]]:
        """(regular writes, special writes each under a new generation)."""
        regular = [
            PendingWrite(task_id, ch, codec.encode(self.serde, v), task_path)
            for ch, v in writes
            if not codec.is_special(ch)
        ]
        special: list[PendingWrite] = []
        seen = list(existing or ())
        for ch, v in writes:
            if codec.is_special(ch):
                gen = codec.next_generation(seen, task_id, ch)
                w = PendingWrite(
                    task_id, codec.special_channel(ch, gen), codec.encode(self.serde, v), task_path
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

    # --- steps under claims -----------------------------------------------------------------

    def _with_claim(
        self, thread_id: str, st: str, steps: Callable[[Claim, Claim | None], Plan[R]]
    ) -> Plan[R]:
        """Run ``steps(claim of st, fence)`` under the right claims (see the module docstring)."""
        holder = self.bound[1] if self.bound else UNBOUND_HOLDER
        if self.bound is not None:
            root = self.bound[0]
        else:
            root = yield store_op("claim", thread_id, holder, self.claim_policy)
        try:
            if st == thread_id:
                return (yield from steps(root, None))
            child = yield store_op("claim", st, holder, self.claim_policy)
            try:
                return (yield from steps(child, root))
            finally:
                yield store_op("release_claim", child)
        finally:
            if self.bound is None:
                yield store_op("release_claim", root)

    def _read_head(self, st: str) -> Plan[str | None]:
        info = yield store_op("thread", st)
        head: str | None = info.head_id if info else None
        return head

    def _commit(
        self, claim: Claim, st: str, make: Callable[..., Commit], fence: Claim | None
    ) -> Plan[None]:
        # The head this saver last wrote, read from the store when unknown.
        parent = self._heads[st] if st in self._heads else (yield from self._read_head(st))
        commit = make(parent_id=parent, fence=fence)
        fused, after = self._plan_put(st, parent, commit.checkpoint_id)
        try:
            if fused and parent is not None:
                yield store_op("put_writes_and_commit", claim, parent, fused, commit)
            else:
                yield store_op("commit", claim, commit)
        except (StaleParent, NotFound):
            # The head moved (another writer, a delete): write the held writes on their own
            # (dropped if their checkpoint is gone), then commit on the head as it is now.
            self._heads.pop(st, None)
            if fused and parent is not None:
                with suppress(NotFound):
                    yield store_op("put_writes", claim, parent, fused)
            head = yield from self._read_head(st)
            yield store_op("commit", claim, make(parent_id=head, fence=fence))
        self._heads[st] = commit.checkpoint_id
        for h in after:
            with suppress(NotFound):  # its checkpoint is gone: nothing to attach the writes to
                yield from self._put_writes_claimed(claim, st, h, fence)

    def _put_writes_claimed(
        self, claim: Claim, st: str, h: Held, fence: Claim | None
    ) -> Plan[None]:
        existing = None
        if any(codec.is_special(ch) for ch, _ in h.writes):
            cp = yield store_op("get", st, h.checkpoint_id)
            if cp is None:
                raise NotFound("checkpoint not found")
            existing = cp.writes
        regular, special = self._writes_for(existing, h.task_id, h.writes, h.task_path)
        for batch in (regular, special):
            if not batch:
                continue
            if fence is None:
                yield store_op("put_writes", claim, h.checkpoint_id, batch)
            else:  # a subgraph namespace: fenced by the root thread's claim, atomically
                yield store_op("put_writes_fenced", claim, h.checkpoint_id, batch, fence)

    def _put_held_or_keep(self, claim: Claim, st: str, h: Held, fence: Claim | None) -> Plan[None]:
        try:
            yield from self._put_writes_claimed(claim, st, h, fence)
        except NotFound:
            # LangGraph may write before that checkpoint's put has landed: hold the writes.
            with self._held_lock:
                self._hold(st, replace(h, behind=False))

    def _then_forget(self, call: StoreOp, thread_id: str) -> Plan[None]:
        """``call``, then forget the heads kept for ``thread_id`` (deleted or replaced)."""
        yield call
        for st in [k for k in self._heads if codec.split_thread(k)[0] == thread_id]:
            del self._heads[st]

    # --- LangGraph's operations, each a plan ------------------------------------------------

    def _put(
        self,
        config: RunnableConfig,
        checkpoint: LGCheckpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Plan[RunnableConfig]:
        thread_id, st, commit = self._commit_for(config, checkpoint, metadata)
        yield Guarded(
            thread_id,
            self._with_claim(
                thread_id, st, lambda claim, fence: self._commit(claim, st, commit, fence)
            ),
        )
        return self._stored_config(thread_id, codec.split_thread(st)[1], checkpoint["id"])

    def _put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> Plan[None]:
        thread_id, ns, checkpoint_id = codec.config_parts(config)
        self._check_bound(thread_id)
        if checkpoint_id is None:
            raise ValidationError("config: configurable.checkpoint_id is required for put_writes")
        st = codec.store_thread(thread_id, ns)
        items = list(writes)
        if not isinstance(task_path, str):
            raise ValidationError("task_path: must be a str")
        if self._write_behind(config, items) and self._hold_behind(
            st, Held(checkpoint_id, task_id, items, behind=True, task_path=task_path)
        ):
            return

        def write(claim: Claim, fence: Claim | None) -> Plan[None]:
            for h in self._take_held(st):  # what is held goes first, in order
                yield from self._put_held_or_keep(claim, st, h, fence)
            yield from self._put_held_or_keep(
                claim, st, Held(checkpoint_id, task_id, items, False, task_path), fence
            )

        yield Guarded(thread_id, self._with_claim(thread_id, st, write))

    def _delete_thread(self, thread_id: str) -> Plan[None]:
        claim = self.bound[0] if self.bound else None
        yield Guarded(
            thread_id, self._then_forget(store_op("delete_thread", thread_id, claim), thread_id)
        )

    def _delete_for_runs(self, run_ids: Sequence[str]) -> Plan[None]:
        if run_ids:
            yield store_op("delete_runs", list(run_ids))
        self._heads.clear()

    def _copy_thread(self, source_thread_id: str, target_thread_id: str) -> Plan[None]:
        codec.store_thread(source_thread_id, "")
        codec.store_thread(target_thread_id, "")
        copy = store_op("copy_thread", source_thread_id, target_thread_id)
        yield Guarded(target_thread_id, self._then_forget(copy, target_thread_id))

    def _prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> Plan[None]:
        """LangGraph's ``prune``, as ``PostgresSaver`` 3.2 does it.

        ``"delete"`` deletes the threads. ``"keep_latest"`` keeps the latest checkpoint of each
        namespace (with its pending writes; it is left with no parent), and deletes a finished
        subgraph call's namespace (``name:task_id``) that started from a root checkpoint other
        than the kept one; a ``checkpointer=True`` subgraph's namespace keeps its latest. It
        refuses (`NotImplementedError`, nothing pruned) a batch in which a thread uses a
        ``DeltaChannel``: such a state is rebuilt from older checkpoints' writes, which a prune
        to one checkpoint would lose.
        """
        if isinstance(thread_ids, str):
            raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
        if strategy not in ("keep_latest", "delete"):
            raise ValidationError(f"strategy: unknown {strategy!r}")
        ids = [str(t) for t in thread_ids]
        if strategy == "delete":
            for thread_id in ids:
                yield from self._delete_thread(thread_id)
            return
        namespaces: dict[str, list[str]] = {}
        for thread_id in ids:
            codec.store_thread(thread_id, "")
            namespaces[thread_id] = [thread_id, *(yield store_op("children", thread_id))]
        delta = []
        for thread_id in ids:
            if (yield from self._uses_delta(namespaces[thread_id])):
                delta.append(thread_id)
        if delta:
            raise NotImplementedError(
                "keep_latest can't prune threads that use a DeltaChannel (their state is "
                f"rebuilt from older checkpoints' delta writes): {', '.join(sorted(delta))}"
            )
        for thread_id in ids:
            # Which namespaces are finished calls is read before anything of the thread goes.
            root = yield store_op("get", thread_id, None)
            calls = set()
            for st in namespaces[thread_id][1:]:
                if (yield from self._finished_call(st, thread_id, root)):
                    calls.add(st)
            for st in namespaces[thread_id]:
                if st in calls:
                    yield from self._forget_after(store_op("delete_thread", st, None), st)
                else:
                    yield store_op("prune", st, RetentionPolicy(keep_last=1))

    def _uses_delta(self, store_threads: Sequence[str]) -> Plan[bool]:
        """Whether a checkpoint of these threads counts DeltaChannel updates (LangGraph's
        ``counters_since_delta_snapshot`` / LangGraph.js's ``delta_writes_versioned``)."""
        for st in store_threads:
            older = None
            while page := (yield store_op("history", st, before=older, limit=PAGE)):
                for cp in page:
                    md = cp.metadata if isinstance(cp.metadata, dict) else {}
                    typed = md.get(codec.TYPED_KEY)
                    keys = set(md) | (set(typed) if isinstance(typed, dict) else set())
                    if keys & DELTA_METADATA_KEYS:
                        return True
                older = page[-1].checkpoint_id
        return False

    def _finished_call(self, st: str, thread_id: str, root: Checkpoint | None) -> Plan[bool]:
        """Is ``st`` a subgraph call's namespace that started from a saved root checkpoint
        other than the root's latest (``root``)? Such a call is over: prune drops it."""
        if ":" not in codec.split_thread(st)[1]:
            return False  # a checkpointer=True subgraph: its state outlives each call
        head = yield store_op("get", st, None)
        if head is None:
            return False
        md = codec.decode_metadata(self.serde, head.metadata)
        parents = md.get("parents")
        started = parents.get("") if isinstance(parents, dict) else None
        if not isinstance(started, str) or (root is not None and started == root.checkpoint_id):
            return False
        # Only once that root checkpoint is saved: a run may save the call first.
        saved = yield store_op("get", thread_id, started)
        return saved is not None

    def _forget_after(self, call: StoreOp, st: str) -> Plan[None]:
        yield call
        self._heads.pop(st, None)

    def _get_tuple(self, config: RunnableConfig) -> Plan[CheckpointTuple | None]:
        thread_id, ns, checkpoint_id = codec.config_parts(config)
        cp = yield store_op("get", codec.store_thread(thread_id, ns), checkpoint_id)
        return None if cp is None else codec.to_tuple(self.serde, cp)

    def _list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Plan[None]:
        thread_id, ns, before_id = self._list_plan(config, before)
        exact = None if config is None else (config.get("configurable") or {}).get("checkpoint_id")
        wanted = store_filter(filter)  # a JSON metadata filter is applied by the store
        left = limit
        after = None
        while threads := (yield from self._threads_to_list(thread_id, ns, after)):
            for st in threads:
                older = None
                while page := (yield self._history_call(st, wanted, older)):
                    for cp in page:
                        if left is not None and left <= 0:
                            return
                        if _keep(cp, exact, before_id, filter, self.serde):
                            yield codec.to_tuple(self.serde, cp)
                            if left is not None:
                                left -= 1
                    older = page[-1].checkpoint_id
            after = threads[-1]

    # --- listing ----------------------------------------------------------------------------

    def _list_plan(
        self, config: RunnableConfig | None, before: RunnableConfig | None
    ) -> tuple[str | None, str | None, str | None]:
        """(thread id or None for all, namespace or None for all, id to list before)."""
        before_id = None
        if before is not None:
            before_id = (before.get("configurable") or {}).get("checkpoint_id")
        conf = (config or {}).get("configurable") or {}
        thread_id = conf.get("thread_id")
        if thread_id is None:
            return None, None, before_id
        ns = conf.get("checkpoint_ns")
        return str(thread_id), (None if ns is None else str(ns)), before_id

    def _threads_to_list(
        self, thread_id: str | None, ns: str | None, after: str | None
    ) -> Plan[Sequence[str]]:
        """The store threads to list after ``after`` (None: the first ones); empty at the end."""
        if thread_id is None:  # every thread, a page at a time
            page = yield store_op("threads", after=after, limit=PAGE)
            return [t.thread_id for t in page]
        if after is not None:  # one thread, or one with its namespaces: all in the first batch
            return []
        if ns is not None:
            return [codec.store_thread(thread_id, ns)]
        return [thread_id, *(yield store_op("children", thread_id))]

    def _history_call(
        self, st: str, wanted: dict[str, object] | None, before: str | None
    ) -> StoreOp:
        """The call for the page of ``st``'s checkpoints before ``before``, newest first."""
        if wanted is None:
            return store_op("history", st, before=before, limit=PAGE)
        return store_op("search", st, wanted, before=before, limit=PAGE)
