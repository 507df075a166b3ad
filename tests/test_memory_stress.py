"""Many threads running the worker protocol of SPEC §5 on one in-memory store, while time runs fast.

16 workers lease, record an attempt, claim the thread, read the entry after the claim, plan with
`plan_attempt`, commit and close; some stall past their ttls so leases and claims expire and other
workers take over. Submitters, a canceller and a deleter run beside them. A sampler checks the
store's invariants inside its lock. At the end every entry is closed exactly once and no entry's
input was applied by two attempts.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import timedelta

from durable_graph import (
    Cancelled,
    ClaimLost,
    ClaimPolicy,
    Commit,
    Completed,
    EntryClosed,
    EventIn,
    Exhausted,
    Failed,
    Finished,
    Fresh,
    Interrupted,
    LeaseLost,
    Mode,
    NotFound,
    Resume,
    RunOfDeletedThread,
    StaleParent,
    Started,
    Submission,
    ThreadBusy,
    ThreadDeleted,
    plan_attempt,
)
from durable_graph.core.validation import from_posix
from durable_graph.embedded.rows import EntryRow
from durable_graph.memory.store import InMemoryCheckpointer, MemoryStorage
from durable_graph.testkit import ManualClock

WORKERS = 16
RUN_SECONDS = 4.0
DRAIN_SECONDS = 20.0
THREADS = [f"thread-{i}" for i in range(6)]
LEASE_TTL = timedelta(milliseconds=400)
CLAIM_POLICY = ClaimPolicy(ttl=timedelta(milliseconds=400), renew_every=timedelta(milliseconds=100))
CLOCK_STEP = timedelta(milliseconds=20)
"""Store time added every ~2 ms of real time: the store clock runs about ten times faster."""
STALL_SECONDS = 0.08
"""A stalled worker sleeps past its lease and claim ttls (in store time)."""


@dataclass
class Record:
    """What the test threads saw; appended under ``lock``."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    submitted: list[int] = field(default_factory=list)
    closes: Counter[int] = field(default_factory=Counter)
    applied_by: defaultdict[int, set[str]] = field(default_factory=lambda: defaultdict(set))
    tokens: list[int] = field(default_factory=list)
    leases_of_entry: Counter[int] = field(default_factory=Counter)
    deleted_threads: set[str] = field(default_factory=set)
    errors: list[BaseException] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    samples: int = 0


def _worker(store: InMemoryCheckpointer, rec: Record, stop: threading.Event, seed: int) -> None:
    rnd = random.Random(seed)
    q = store.run_queue
    holder = f"worker-{seed}"
    while not stop.is_set():
        run_id = f"run-{uuid.uuid4().hex}"
        lease = q.lease(holder, LEASE_TTL, run_id=run_id)
        if lease is None:
            time.sleep(0.002)
            continue
        entry_id = lease.entry.entry_id
        thread_id = lease.entry.thread_id
        with rec.lock:
            rec.tokens.append(lease.token)
            rec.leases_of_entry[entry_id] += 1
        try:
            attempt = lease.attempt
            if isinstance(attempt, ThreadDeleted):
                continue  # the store closed the entry
            if isinstance(attempt, Exhausted):
                q.close(lease, Failed("exhausted"))
                with rec.lock:
                    rec.closes[entry_id] += 1
                continue
            assert isinstance(attempt, Started), attempt
            if rnd.random() < 0.1:
                # Stall between lease and claim: another worker may lease, attempt and apply
                # meanwhile, which only the entry read after the claim reveals.
                time.sleep(STALL_SECONDS)
            try:
                claim = store.claim(thread_id, run_id, CLAIM_POLICY)
            except ThreadBusy:
                q.release(lease)
                continue
            with rec.lock:
                rec.tokens.append(claim.token)
            # SPEC §5: the entry is read after the claim is held, never from the lease.
            entry = q.entry(entry_id)
            if entry is None or entry.closed:
                store.release_claim(claim)
                continue
            latest = store.latest_of_runs(thread_id, [a.run_id for a in entry.attempts])
            plan = plan_attempt(entry, latest)
            if rnd.random() < 0.1:
                time.sleep(STALL_SECONDS)  # lease and claim expire; others may take over
            if isinstance(plan, Fresh | Resume):
                head = store.get(thread_id)
                parent = None if head is None else head.checkpoint_id
                finish = isinstance(plan, Resume) or rnd.random() < 0.6
                meta = {"applied_input_of": entry_id} if isinstance(plan, Fresh) else {}
                cp = store.commit(
                    claim,
                    Commit(
                        checkpoint_id=f"cp-{uuid.uuid4().hex}",
                        parent_id=parent,
                        run_id=run_id,
                        state={"entry": entry_id},
                        metadata=meta,
                        next=() if finish else ("more",),
                        events=(EventIn("step", {"entry": entry_id}),),
                    ),
                )
                if isinstance(plan, Fresh):
                    with rec.lock:
                        rec.applied_by[entry_id].add(run_id)
                if rnd.random() < 0.3:
                    store.append_events(claim, [EventIn("note")], run_id=run_id)
                if rnd.random() < 0.2:
                    q.renew(lease)
                    store.renew_claim(claim)
                if not finish:
                    if rnd.random() < 0.3:
                        continue  # crash after the first step: a later attempt resumes
                    store.commit(
                        claim,
                        Commit(
                            checkpoint_id=f"cp-{uuid.uuid4().hex}",
                            parent_id=cp.checkpoint_id,
                            run_id=run_id,
                            state={"entry": entry_id, "done": True},
                        ),
                    )
            else:
                assert isinstance(plan, Finished)
            store.release_claim(claim)
            q.close(lease, Completed({"by": run_id}))
            with rec.lock:
                rec.closes[entry_id] += 1
        except (ClaimLost, LeaseLost, EntryClosed, RunOfDeletedThread):
            pass  # another worker took over, the entry was cancelled, or the thread deleted
        except StaleParent as err:  # pragma: no cover - would break the claim's exclusivity
            with rec.lock:
                rec.errors.append(err)
        except BaseException as err:  # pragma: no cover - reported by the test
            with rec.lock:
                rec.errors.append(err)
            return


def _submitter(store: InMemoryCheckpointer, rec: Record, stop: threading.Event, seed: int) -> None:
    rnd = random.Random(seed)
    q = store.run_queue
    while not stop.is_set():
        mode = rnd.choices([Mode.ENQUEUE, Mode.INTERRUPT, Mode.REJECT], [6, 2, 1])[0]
        try:
            ticket = q.submit(Submission(rnd.choice(THREADS), {"n": rnd.random()}, mode=mode))
        except ThreadBusy:
            continue
        with rec.lock:
            rec.submitted.append(ticket.entry_id)
        time.sleep(rnd.uniform(0.002, 0.01))


def _disturber(store: InMemoryCheckpointer, rec: Record, stop: threading.Event) -> None:
    """Cancels a random open entry now and then, and deletes a thread rarely."""
    rnd = random.Random(99)
    q = store.run_queue
    while not stop.wait(0.05):
        if rnd.random() < 0.5:
            entries = q.open_entries()
            if entries:
                victim = rnd.choice(entries)
                try:
                    q.cancel(victim.entry_id)
                except (EntryClosed, NotFound):
                    continue
                with rec.lock:
                    rec.closes[victim.entry_id] += 1
        if rnd.random() < 0.1:
            thread_id = rnd.choice(THREADS)
            store.delete_thread(thread_id)
            with rec.lock:
                rec.deleted_threads.add(thread_id)


def _first(entries: list[EntryRow]) -> EntryRow | None:
    return entries[0] if entries else None


def _sampler(store: InMemoryCheckpointer, rec: Record, stop: threading.Event) -> None:
    """Checks inside the store lock: at most one live lease per thread; tokens never go back;
    each thread's kept head is the first of its open entries in queue order."""
    storage = store._storage
    assert isinstance(storage, MemoryStorage)
    state = storage._state
    last_claim: dict[str, int] = {}
    last_lease: dict[str, int] = {}
    while not stop.wait(0.001):
        with state.lock:
            now = from_posix(state.clock())
            live: Counter[str] = Counter(
                e.thread_id
                for e in state.entries.values()
                if e.lease_expires_at is not None and now < e.lease_expires_at
            )
            leases = {
                e.thread_id: e.lease_token
                for e in sorted(state.entries.values(), key=lambda e: e.lease_token or 0)
                if e.lease_token is not None
            }
            claims = {t: c.token for t, c in state.claims.items()}
            stale_heads = [t for t, q in state.queues.items() if q.head is not _first(q.in_order())]
        bad = [f"{t} has {n} live leases" for t, n in live.items() if n > 1]
        bad += [f"the kept head of {t} is not its first open entry" for t in stale_heads]
        for t, token in leases.items():
            if token < last_lease.get(t, 0):
                bad.append(f"lease token of {t} went back to {token}")
            last_lease[t] = token
        for t, token in claims.items():
            if token < last_claim.get(t, 0):
                bad.append(f"claim token of {t} went back to {token}")
            last_claim[t] = token
        with rec.lock:
            rec.samples += 1
            rec.violations.extend(bad)


def _ticker(clock: ManualClock, stop: threading.Event) -> None:
    while not stop.wait(0.002):
        clock.advance(CLOCK_STEP)


def test_many_workers_apply_each_input_at_most_once_and_close_each_entry_once() -> None:
    clock = ManualClock()
    store = InMemoryCheckpointer(clock=clock)
    rec = Record()
    stop_submitting = threading.Event()
    stop_working = threading.Event()
    stop_watching = threading.Event()
    threads = [
        threading.Thread(target=_worker, args=(store, rec, stop_working, i)) for i in range(WORKERS)
    ]
    submitters = [
        threading.Thread(target=_submitter, args=(store, rec, stop_submitting, 1000 + i))
        for i in range(2)
    ]
    submitters.append(threading.Thread(target=_disturber, args=(store, rec, stop_submitting)))
    watchers = [
        threading.Thread(target=_sampler, args=(store, rec, stop_watching)),
        threading.Thread(target=_ticker, args=(clock, stop_watching)),
    ]
    for t in watchers + threads + submitters:
        t.start()
    try:
        time.sleep(RUN_SECONDS)
        stop_submitting.set()
        for t in submitters:
            t.join()
        # Drain: the workers close everything still open.
        deadline = time.monotonic() + DRAIN_SECONDS
        while store.run_queue.open_entries(tenant=None) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop_working.set()
        for t in threads:
            t.join()
        stop_watching.set()
        for t in watchers:
            t.join()

    q = store.run_queue
    assert rec.errors == []
    assert rec.violations == []
    assert rec.samples > 100
    assert q.open_entries(tenant=None) == []

    # Every entry closed exactly once: by its worker, a cancel, an interrupt or a delete.
    assert len(rec.submitted) == len(set(rec.submitted)) > 50
    for entry_id in rec.submitted:
        entry = q.entry(entry_id)
        assert entry is not None and entry.closed, entry_id
        by_store = isinstance(entry.outcome, Interrupted) or entry.outcome == Cancelled(
            "thread_deleted"
        )
        assert rec.closes[entry_id] + int(by_store) == 1, (entry_id, entry.outcome)

    # At most once: no entry's input was applied by two attempts.
    applied = {e: runs for e, runs in rec.applied_by.items() if runs}
    assert applied, "no input was ever applied"
    assert all(len(runs) == 1 for runs in applied.values()), applied

    # Takeovers happened: some entries were leased more than once.
    assert any(n > 1 for n in rec.leases_of_entry.values())

    # One counter for claims and leases: every token issued once.
    assert len(rec.tokens) == len(set(rec.tokens))

    # Event numbers are contiguous up to each thread's last seq (from 1 unless deleted).
    for thread_id in THREADS:
        info = store.thread(thread_id)
        if info is None:
            continue
        seqs = [e.seq for e in store.events_after(thread_id, 0, limit=1_000_000)]
        assert seqs == list(range(seqs[0], info.last_seq + 1))
        if thread_id not in rec.deleted_threads:
            assert seqs[0] == 1
    store.close()
