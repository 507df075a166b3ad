"""What the LangGraph savers share (SPEC §12): configuration, binding to a run, and how a
LangGraph write becomes the store's. No store call is made here: the calls are in
`AsyncDurableSaver` (``async_saver.py``, written by hand) and `DurableSaver` (``generated.py``,
the same code made sync by ``tools/generate_stores.py``).

Writes. A saver bound to a run (`for_run(claim, run_id)`) commits under that claim, so a stale
worker's write raises `ClaimLost` and changes nothing, and under ``run_id``, so `latest_of_runs`
and `plan_attempt` see LangGraph's checkpoints as the attempt's. An unbound saver (e.g.
`update_state` from an API) takes and releases a claim per call, so it fails with `ThreadBusy`
while a run holds the thread. A subgraph namespace is a child thread: its writes take the child's
claim for the call and are fenced by the root thread's claim in the same transaction (`commit`
with ``fence``, `put_writes_fenced`, `put_writes_and_commit`).

The store's ``parent_id`` is the head the saver last wrote (read from the store when unknown);
LangGraph's own parent id is kept in the stored state, so forks (`update_state` on an old
checkpoint, replay, `copy_thread`) are ordinary commits.

Held writes, the two kinds that remain and why (D71):

- *Write-behind.* Under LangGraph's default ``durability="async"`` a bound saver holds each task's
  writes and lands them with the step's next checkpoint (`put_writes_and_commit`): one durable
  write per step instead of one per task plus one per checkpoint — the graph benchmark's cycle
  (``tests/bench/graph.py``) and D71 rest on it. A crash loses at most the step in flight, as
  LangGraph's async mode allows; special writes (errors, interrupts) and ``durability="sync"``
  write at once, taking what is held along first.
- *Early writes.* Under ``durability="async"`` LangGraph runs its `put` and `put_writes` calls in
  the background, so a task's writes may arrive before the `put` of their checkpoint has landed
  (the store says `NotFound`): they are held and written right after that `put`.

A per-thread guard (an `asyncio.Lock` or a `threading.Lock`) serializes the saver's writes to one
LangGraph thread, so the heads and the held writes are only touched under it.
"""

from __future__ import annotations

import copy
import random
import threading
import weakref
from collections import deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, Self, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    CheckpointMetadata,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.base import Checkpoint as LGCheckpoint
from langgraph.checkpoint.serde.base import SerializerProtocol

from durable_graph.core.errors import ValidationError
from durable_graph.core.model import Checkpoint, Claim, ClaimPolicy, Commit, EventIn, PendingWrite
from durable_graph.langgraph import allowlist, codec
from durable_graph.langgraph.encryption import SealingSerializer

# Graphs compiled from here on hand their schema types to their saver (see `allowlist`).
allowlist.enable()

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
    """One `put_writes` call not in the store yet."""

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


def on_parent(commit: Commit, parent_id: str | None, fence: Claim | None) -> Commit:
    """``commit`` made on the store parent ``parent_id``, fenced by ``fence`` (or not)."""
    state = cast(dict[str, Any], commit.state)
    # Whether it had a store parent: one that prune removes reports none (codec.to_tuple).
    state = {**state, codec.STORE_PARENT_KEY: parent_id is not None}
    return replace(commit, parent_id=parent_id, fence=fence, state=state)


def stored_config(store_thread: str, checkpoint_id: str) -> RunnableConfig:
    thread_id, ns = codec.split_thread(store_thread)
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


# --- listing ----------------------------------------------------------------------------------


def list_scope(
    config: RunnableConfig | None, before: RunnableConfig | None
) -> tuple[str | None, str | None, str | None, str | None]:
    """(thread id or None for all, namespace or None for all, the one checkpoint id to list or
    None, the id to list before or None)."""
    before_id = None if before is None else (before.get("configurable") or {}).get("checkpoint_id")
    conf = (config or {}).get("configurable") or {}
    thread_id = conf.get("thread_id")
    if thread_id is None:
        return None, None, conf.get("checkpoint_id"), before_id
    ns = conf.get("checkpoint_ns")
    return str(thread_id), (None if ns is None else str(ns)), conf.get("checkpoint_id"), before_id


def store_filter(
    filter: dict[str, Any] | None, serde: SerializerProtocol
) -> dict[str, object] | None:
    """The filter for `Checkpointer.search`, or None to filter here (none, not plain JSON, or
    metadata the store holds encrypted)."""
    sealed = isinstance(serde, SealingSerializer) and serde.seals_json
    if filter and codec.is_json(filter) and not sealed:
        return dict(filter)
    return None


def listed(
    cp: Checkpoint,
    exact: str | None,
    before_id: str | None,
    filter: dict[str, Any] | None,
    serde: SerializerProtocol,
) -> bool:
    """Whether ``list`` hands ``cp`` out (the store may have applied ``filter`` already)."""
    if exact is not None and cp.checkpoint_id != exact:
        return False
    if before_id is not None and not cp.checkpoint_id < before_id:
        return False
    if filter:
        return codec.metadata_matches(codec.decode_metadata(serde, cp.metadata), filter)
    return True


# --- prune ------------------------------------------------------------------------------------


def counts_deltas(cp: Checkpoint) -> bool:
    """Whether the checkpoint counts DeltaChannel updates (LangGraph's
    ``counters_since_delta_snapshot`` / LangGraph.js's ``delta_writes_versioned``)."""
    md = cp.metadata if isinstance(cp.metadata, dict) else {}
    typed = md.get(codec.TYPED_KEY)
    keys = set(md) | (set(typed) if isinstance(typed, dict) else set())
    return bool(keys & DELTA_METADATA_KEYS)


def check_prune(thread_ids: Sequence[str], strategy: str) -> list[str]:
    if isinstance(thread_ids, str):
        raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
    if strategy not in ("keep_latest", "delete"):
        raise ValidationError(f"strategy: unknown {strategy!r}")
    ids = [str(t) for t in thread_ids]
    for thread_id in ids:
        codec.store_thread(thread_id, "")
    return ids


def refuse_deltas(delta: Sequence[str]) -> None:
    if delta:
        raise NotImplementedError(
            "keep_latest can't prune threads that use a DeltaChannel (their state is "
            f"rebuilt from older checkpoints' delta writes): {', '.join(sorted(delta))}"
        )


class SaverCore(BaseCheckpointSaver[int], Generic[StoreT]):
    """The savers' configuration, their binding to a run, and what a write is made of."""

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
        # Per store thread, under its LangGraph thread's guard: the head this saver last wrote,
        # the writes not in the store yet (in arrival order), and the last checkpoints whose
        # commit took their write-behind writes along (a write for one that comes late is
        # written on its own: its ride has left).
        self._heads: dict[str, str | None] = {}
        self._held: dict[str, list[Held]] = {}
        self._departed: dict[str, deque[str]] = {}
        # The per-thread guards, each kept while in use.
        self._guards: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
        self._guards_lock = threading.Lock()  # LangGraph may look guards up from several threads

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

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> Self:
        """A shallow clone whose serializer also loads ``extra_allowlist`` (a compiled graph's
        types, `allowlist`); LangGraph's own would drop `encryption`'s serializer for its
        plain ``EncryptedSerializer``, so that one is derived here."""
        if not isinstance(self.serde, SealingSerializer):
            return cast(Self, super().with_allowlist(extra_allowlist))
        clone = copy.copy(self)
        clone.serde = self.serde.with_msgpack_allowlist(extra_allowlist)
        return clone

    def _inherit(self, parent: Self) -> None:
        """What a bound saver takes over from the saver it was bound from, beyond its
        configuration: nothing here; the async saver's event loop."""

    def get_next_version(self, current: Any, channel: None) -> Any:
        """The next channel version: an int after an int (or none), as LangGraph's base saver
        does; after a string, a string in LangGraph's own savers' format (``InMemorySaver``,
        ``SqliteSaver``, ``PostgresSaver``: a zero-padded counter, a dot, a random fraction), so
        a thread they wrote (or one imported from them) continues with versions that compare
        above its stored ones."""
        if isinstance(current, str):
            return f"{int(current.split('.')[0]) + 1:032}.{random.random():016}"
        return super().get_next_version(current, channel)

    # --- what a write is made of ------------------------------------------------------------

    def _check_bound(self, thread_id: str) -> None:
        if self.bound is not None and self.bound[0].thread_id != thread_id:
            raise ValidationError(
                "config: thread_id is not the thread of the claim this saver is bound to"
            )

    def _commit_of(
        self, config: RunnableConfig, checkpoint: LGCheckpoint, metadata: CheckpointMetadata
    ) -> tuple[str, str, Commit]:
        """(LangGraph thread, store thread, the `Commit` on no parent yet: see `on_parent`)."""
        thread_id, ns, lg_parent = codec.config_parts(config)
        self._check_bound(thread_id)
        st = codec.store_thread(thread_id, ns)
        md = codec.encode_metadata(
            self.serde, get_serializable_checkpoint_metadata(config, metadata)
        )
        run_id = run_id_of(md, self.bound[1] if self.bound else None)
        if self.bound is not None:
            md["run_id"] = run_id  # so delete_for_runs and list filters see the attempt's run
        events: tuple[EventIn, ...] = ()
        if self._events_for is not None and not ns:
            events = tuple(self._events_for(checkpoint["id"]))
        commit = Commit(
            checkpoint_id=checkpoint["id"],
            parent_id=None,
            run_id=run_id,
            state=codec.encode_checkpoint(self.serde, checkpoint, lg_parent),
            metadata=md,
            # Whether the graph finished is LangGraph's to say (see handler.py): never `Finished`.
            next=LANGGRAPH_NEXT,
            events=events,
            parent_thread_id=thread_id if ns else None,
        )
        return thread_id, st, commit

    def _held_of(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> tuple[str, str, Held]:
        """(LangGraph thread, store thread, the `put_writes` call as a `Held`)."""
        thread_id, ns, checkpoint_id = codec.config_parts(config)
        self._check_bound(thread_id)
        if checkpoint_id is None:
            raise ValidationError("config: configurable.checkpoint_id is required for put_writes")
        if not isinstance(task_path, str):
            raise ValidationError("task_path: must be a str")
        st = codec.store_thread(thread_id, ns)
        items = list(writes)
        # Write-behind: bound, durability "async" (LangGraph leaves the key out for its
        # default), no special channel.
        durability = (config.get("configurable") or {}).get(CONFIG_KEY_DURABILITY, "async")
        behind = (
            self.bound is not None
            and durability == "async"
            and not any(codec.is_special(ch) for ch, _ in items)
        )
        return thread_id, st, Held(checkpoint_id, task_id, items, behind, task_path)

    def _pending(
        self, held: Held, existing: Sequence[PendingWrite] = ()
    ) -> tuple[list[PendingWrite], list[PendingWrite]]:
        """(regular writes, special writes each under a new generation after ``existing``)."""
        regular: list[PendingWrite] = []
        special: list[PendingWrite] = []
        seen = list(existing)
        for ch, v in held.writes:
            if not codec.is_special(ch):
                regular.append(
                    PendingWrite(held.task_id, ch, codec.encode(self.serde, v), held.task_path)
                )
                continue
            gen = codec.next_generation(seen, held.task_id, ch)
            w = PendingWrite(
                held.task_id,
                codec.special_channel(ch, gen),
                codec.encode(self.serde, v),
                held.task_path,
            )
            special.append(w)
            seen.append(w)
        return regular, special

    # --- held writes (under the thread's guard) ---------------------------------------------

    def _hold(self, st: str, held: Held) -> None:
        pending = self._held.setdefault(st, [])
        # A task's writes to a checkpoint are kept once, as the store would (first write wins).
        if not any(
            h.checkpoint_id == held.checkpoint_id and h.task_id == held.task_id for h in pending
        ):
            pending.append(held)

    def _held_for_put(
        self, st: str, parent: str | None, new_id: str
    ) -> tuple[list[PendingWrite], list[Held]]:
        """(the write-behind writes to ``parent`` that land with the commit, the early writes to
        ``new_id`` to write right after it); the others stay held: under "async" LangGraph may
        send a later checkpoint's writes before an earlier put has landed."""
        fused: list[PendingWrite] = []
        after: list[Held] = []
        keep: list[Held] = []
        for h in self._held.pop(st, []):
            if h.behind and h.checkpoint_id == parent:
                fused.extend(self._pending(h)[0])
            elif h.checkpoint_id == new_id and not h.behind:
                after.append(h)
            else:
                keep.append(h)
        if keep:
            self._held[st] = keep
        if parent is not None:
            self._departed.setdefault(st, deque(maxlen=16)).append(parent)
        return fused, after

    def _forget(self, thread_id: str) -> None:
        """Forget the heads kept for ``thread_id`` and its namespaces (deleted or replaced)."""
        for st in [k for k in self._heads if codec.split_thread(k)[0] == thread_id]:
            del self._heads[st]


__all__ = ["LANGGRAPH_NEXT", "Held", "SaverCore"]
