"""What every Checkpointer concern module shares: constants, helpers and the fixtures."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import RunOfDeletedThread, ThreadBusy, ValidationError
from durable_graph.core.model import (
    Checkpoint,
    Claim,
    Commit,
    Event,
    EventIn,
    Lease,
    PendingWrite,
    Started,
    Submission,
    ThreadInfo,
    WatchPolicy,
)
from durable_graph.testkit.fixtures import StoreFixtures
from durable_graph.testkit.harness import ClockControl

T = "thread-1"
"""The thread most tests work on."""

SLACK = timedelta(seconds=10)
"""How much real time a test may take between two store-clock readings (PostgreSQL's clock runs)."""

FAST = WatchPolicy(poll_interval=timedelta(milliseconds=20))
HOUR = timedelta(hours=1)


# --- helpers -------------------------------------------------------------------------------

_AUTO: Any = object()
"""`_commit`'s default state: ``{"at": checkpoint_id}`` (None is a state worth testing)."""


def _commit(
    store: Checkpointer,
    claim: Claim,
    checkpoint_id: str,
    parent_id: str | None,
    run_id: str = "run-1",
    state: Any = _AUTO,
    **fields: Any,
) -> Checkpoint:
    return store.commit(
        claim,
        Commit(
            checkpoint_id=checkpoint_id,
            parent_id=parent_id,
            run_id=run_id,
            state={"at": checkpoint_id} if state is _AUTO else state,
            **fields,
        ),
    )


def _chain(
    store: Checkpointer,
    claim: Claim,
    ids: Sequence[str],
    run_id: str = "run-1",
    parent_id: str | None = None,
) -> list[Checkpoint]:
    """Commit ``ids`` one after another, each on the previous one."""
    out = []
    for checkpoint_id in ids:
        out.append(_commit(store, claim, checkpoint_id, parent_id, run_id))
        parent_id = checkpoint_id
    return out


def _new_thread(
    store: Checkpointer, thread_id: str = T, ids: Sequence[str] = ("c1",), **fields: Any
) -> Claim:
    """Claim ``thread_id`` and commit ``ids`` on it; return the (still current) claim."""
    claim = store.claim(thread_id, "worker")
    parent: str | None = None
    for checkpoint_id in ids:
        _commit(store, claim, checkpoint_id, parent, **fields)
        parent = checkpoint_id
    return claim


def _attempt(store: Checkpointer, thread_id: str, run_id: str) -> Lease:
    """Submit a run for ``thread_id``, lease it and record ``run_id`` as its first attempt."""
    queue = store.run_queue
    ticket = queue.submit(Submission(thread_id=thread_id, input={"q": thread_id}))
    lease = queue.lease("queue-worker", timedelta(minutes=5))
    assert lease is not None and lease.entry.entry_id == ticket.entry_id
    assert queue.record_attempt(lease, run_id) == Started(1)
    return lease


def _snapshot(store: Checkpointer, thread_id: str = T) -> tuple[object, ...]:
    """Everything a test can read about one thread (to show a refused call changed nothing)."""
    return (
        store.thread(thread_id),
        store.history(thread_id),
        store.events_after(thread_id, 0),
        store.get_effect(thread_id, "k"),
        store.threads(),
        store.children(thread_id),
    )


def _kinds(events: Sequence[Event]) -> list[str]:
    return [e.kind for e in events]


def _same_json(a: object, b: object) -> bool:
    """Equal as JSON values, telling apart 1 / 1.0 / True and 0.0 / -0.0 (key order aside)."""
    return a == b and json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _deep(depth: int) -> Any:
    """``depth`` nested lists around 0 (depth 0 is the scalar itself, SPEC §8 rule 5)."""
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def _grow(value: Any, key: str) -> None:
    """Mutate a returned JSON object in place (to show the store kept its own copy)."""
    value[key].append(99)


def _within(delta: timedelta, expected: timedelta) -> bool:
    """``delta`` is ``expected`` plus at most `SLACK` of real time."""
    return expected <= delta <= expected + SLACK


def _run_threads(n: int, target: Callable[[int], object]) -> list[object]:
    """Run ``target(i)`` in ``n`` threads released together; each result or raised exception."""
    barrier = threading.Barrier(n)
    results: list[object] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = target(i)
        except BaseException as exc:  # collected and asserted on by the test
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


class CheckpointerFixtures(StoreFixtures):
    """The fixtures every concern module uses; a backend overrides ``harness``."""

    @pytest.fixture
    def seeded(self, store: Checkpointer) -> Claim:
        """Thread T with checkpoint c1 (two events), a write and effect "k"; its current claim."""
        claim = store.claim(T, "worker")
        _commit(store, claim, "c1", None, events=(EventIn("e", 1),))
        store.put_writes(claim, "c1", [PendingWrite("t", "ch", 1)])
        store.record_effect(claim, "k", {"v": 1})
        return claim


# --- arrange and assert steps many tests share -----------------------------------------------

PAST_TTL = timedelta(seconds=31)
"""Just past the default claim ttl (30 s): a claim older than this has expired."""


def _info(store: Checkpointer, thread_id: str = T) -> ThreadInfo:
    """The ThreadInfo of ``thread_id``, which must exist."""
    info = store.thread(thread_id)
    assert info is not None
    return info


def _claim_fields(store: Checkpointer, thread_id: str = T) -> tuple[str | None, datetime | None]:
    """The claim ThreadInfo shows for ``thread_id`` (rule 9): its holder and expiry."""
    info = _info(store, thread_id)
    return info.claim_holder, info.claim_expires_at


def _head(store: Checkpointer, thread_id: str = T, checkpoint_id: str | None = None) -> Checkpoint:
    """``store.get(thread_id, checkpoint_id)``, which must find a checkpoint."""
    checkpoint = store.get(thread_id, checkpoint_id)
    assert checkpoint is not None
    return checkpoint


def _released_claim(store: Checkpointer, thread_id: str = T, ids: Sequence[str] = ()) -> Claim:
    """Claim ``thread_id``, commit ``ids`` on it and release it: a claim every call refuses."""
    claim = _new_thread(store, thread_id, ids)
    store.release_claim(claim)
    return claim


def _expired_claim(store: Checkpointer, clock: ClockControl, thread_id: str = T) -> Claim:
    """A default-ttl claim on ``thread_id`` whose ttl has run out, still the current claim."""
    claim = store.claim(thread_id, "holder-a")
    clock.advance(PAST_TTL)
    return claim


def _superseded_claim(
    store: Checkpointer, clock: ClockControl, thread_id: str = T
) -> tuple[Claim, Claim]:
    """An expired claim on ``thread_id`` and the newer claim that took the thread from it."""
    old = _expired_claim(store, clock, thread_id)
    return old, store.claim(thread_id, "holder-b")


def _assert_busy(store: Checkpointer, holder: str = "holder-b") -> None:
    """``holder`` cannot claim T: a live or current claim holds it (ThreadBusy)."""
    with pytest.raises(ThreadBusy):
        store.claim(T, holder)


def _first_commit_an_hour_ago(store: Checkpointer, clock: ClockControl) -> tuple[Claim, Checkpoint]:
    """Claim T, commit c1, then move the store clock on by `HOUR`; the claim and c1."""
    claim = store.claim(T, "h")
    first = _commit(store, claim, "c1", None)
    clock.advance(HOUR)
    return claim, first


def _fenced_child(store: Checkpointer, root: str) -> tuple[Claim, Claim]:
    """Thread ``root`` (checkpoint r1) and its subgraph thread ``root/ns`` (checkpoint k1),
    committed under ``root``'s claim as fence; both claims, still current."""
    fence = _new_thread(store, root, ids=("r1",))
    child = store.claim(f"{root}/ns", "h")
    _commit(store, child, "k1", None, parent_thread_id=root, fence=fence)
    return fence, child


def _assert_run_refused(store: Checkpointer, run_id: str) -> None:
    """A fresh claim on T cannot commit for ``run_id``: its thread was deleted under it."""
    claim = store.claim(T, run_id)
    with pytest.raises(RunOfDeletedThread):
        _commit(store, claim, "c1", None, run_id)


def _refused_naming(store: Checkpointer, name: str, call: Callable[[], object]) -> None:
    """``call()`` raises a ValidationError naming ``name`` and changes nothing on T."""
    before = _snapshot(store)
    with pytest.raises(ValidationError) as raised:
        call()
    assert name in str(raised.value)
    assert _snapshot(store) == before


def _await_while(
    store: Checkpointer, after: int, action: Callable[[], object], thread_id: str = T
) -> list[Event]:
    """``await_events_after(thread_id, after)`` while another thread runs ``action`` 0.2 s in."""
    timer = threading.Timer(0.2, action)
    timer.start()
    try:
        return store.await_events_after(thread_id, after, timedelta(seconds=20), FAST)
    finally:
        timer.join()
