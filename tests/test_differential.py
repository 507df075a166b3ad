"""Differential testing: the in-memory, SQLite and PostgreSQL stores run the SAME random sequences
of every public operation of SPEC §4-§5 and must give the same answers.

A hypothesis `RuleBasedStateMachine` drives the three stores in lock step. After every step the
results (or error classes) of the three stores are compared, normalised:

- **time**: all three stores run on clocks that stand still until the machine moves them, from
  the same instant: `ManualClock`s for memory and SQLite, and for PostgreSQL a ``store_now()``
  that reads a one-row table of the schema. The clocks start on 2025-03-29 at 20:00 UTC, a few
  hours before Europe/Berlin moves to summer time, and PostgreSQL's sessions run under
  Europe/Berlin (``PGTZ``), with ttls, ages and clock moves of up to two days: a duration that
  followed the calendar (``interval '1 day'`` is 23 h there) would show (issue 12). Every
  duration the machine uses that produces a timestamp is a whole number of ``UNIT`` (60 s), and
  each store timestamp is normalised to ``(ts - base) / UNIT``. Ages that are only compared
  (retention ``max_age``, ``reclaim(older_than=)``) are ``k * UNIT + UNIT / 2``. Because the
  clocks stand still, entries closed at one instant tie on ``closed_at`` in every store, so
  ``reclaim`` runs with varied batches. Producer timestamps (year 2001) are kept exactly.
- **concurrent steps**: one rule runs a commit and a lease at the same time on PostgreSQL (the
  commit held open on a second connection, the lease in a thread, the clock moved meanwhile)
  and runs memory and SQLite in the order PostgreSQL serialised them: if the lease waited for
  the commit's locks, commit -> clock move -> lease, else lease -> commit -> clock move. A lease
  that read the time before its wait (issue 12) disagrees.
- **tokens and entry ids** are compared by their order of first appearance (a sequence may skip
  values on a rolled-back call; SPEC only promises they increase), and a newly seen token must be
  greater than every token seen before.

Each example starts from empty stores: a new in-memory store, a new SQLite file, and the one
PostgreSQL schema emptied (tables truncated, sequences restarted, clock offset reset).

``DURABLE_GRAPH_DIFF_EXAMPLES`` sets the number of examples (default 200; `make soak`: 2000).
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)
from psycopg import sql

import durable_graph.core.errors
from differential_world import (
    ADVANCES,
    AGES,
    CHANNELS,
    CHECKPOINTS,
    EFFECT_KEYS,
    EVENTS_IN,
    EXAMPLES,
    HOLDERS,
    JSON_VALUES,
    KEYS,
    MAX_AGES,
    OUTCOMES,
    PRODUCER_TIME,
    RUNS,
    SQLSTATE_ERRORS,
    STEPS,
    TASKS,
    TENANTS,
    THREADS,
    TTLS,
    UNKNOWN_ENTRY_ID,
    Handle,
    Outcome,
    PgBackend,
    World,
    retention,
)
from durable_graph import (
    ANY,
    Cancelled,
    Claim,
    ClaimPolicy,
    Commit,
    Completed,
    EventIn,
    Failed,
    Lease,
    Mode,
    PendingWrite,
    QueueEntry,
    Submission,
)
from durable_graph.core.model import JSON, AttemptBegun

# --- the machine -------------------------------------------------------------------------------


class DifferentialMachine(RuleBasedStateMachine):
    world: World

    claims = Bundle("claims")
    leases = Bundle("leases")
    entries = Bundle("entries")

    def __init__(self) -> None:
        super().__init__()
        self.stores, self.norms, self.advancers = self.world.fresh()

    # -- running one operation on every store ---------------------------------------------

    def run(self, name: str, op: Callable[[str, Any], object]) -> dict[str, object]:
        """Run ``op(store_name, store)`` on each store; assert equal normalised outcomes."""
        raw: dict[str, object] = {}
        for store_name, store in self.stores.items():
            try:
                raw[store_name] = op(store_name, store)
            except Exception as exc:  # every store error is compared by class
                raw[store_name] = exc
        return self.compare(name, raw)

    def compare(self, name: str, raw: dict[str, object]) -> dict[str, object]:
        """Assert the stores' results (or exceptions) are equal once normalised."""
        seen: dict[str, Outcome] = {}
        for store_name, value in raw.items():
            if isinstance(value, Exception):
                seen[store_name] = ("error", type(value).__name__)
            else:
                seen[store_name] = ("ok", self.norms[store_name](value))
        for store_name, norm in self.norms.items():
            assert not norm.problems, f"{store_name}: {norm.problems}"
        reference = seen["memory"]
        OUTCOMES[(name, reference[0] if reference[0] == "ok" else str(reference[1]))] += 1
        for store_name, outcome in seen.items():
            assert outcome == reference, (
                f"{name}: {store_name} differs from memory\n"
                f"  memory:     {reference!r}\n  {store_name}: {outcome!r}\n"
                f"  raw memory: {raw['memory']!r}\n  raw {store_name}: {raw[store_name]!r}"
            )
        return raw

    def all_ok(self, raw: dict[str, object], cls: type) -> bool:
        return all(isinstance(v, cls) for v in raw.values())

    def head(self, thread_id: str) -> str | None:
        """The head checkpoint id as the reference store sees it (to aim commits well)."""
        cp = self.stores["memory"].get(thread_id)
        return None if cp is None else str(cp.checkpoint_id)

    # -- setup ----------------------------------------------------------------------------

    @initialize(target=entries)
    def unknown_entry(self) -> Handle:
        return Handle({name: UNKNOWN_ENTRY_ID for name in self.stores})

    # -- clock ----------------------------------------------------------------------------

    @rule(delta=ADVANCES)
    def advance_clock(self, delta: timedelta) -> None:
        for advance in self.advancers:
            advance(delta)

    # -- claims ---------------------------------------------------------------------------

    @rule(
        target=claims, thread_id=st.sampled_from(THREADS), holder=st.sampled_from(HOLDERS), ttl=TTLS
    )
    def claim(self, thread_id: str, holder: str, ttl: timedelta) -> Any:
        policy = ClaimPolicy(ttl=ttl, renew_every=timedelta(seconds=30))
        raw = self.run("claim", lambda _n, s: s.claim(thread_id, holder, policy))
        return self._handle_or_nothing(raw)

    def _handle_or_nothing(self, raw: dict[str, object]) -> Any:
        if all(not isinstance(v, Exception) and v is not None for v in raw.values()):
            return Handle(dict(raw))
        return multiple()

    @rule(claim=claims, retarget=st.sampled_from([None, *THREADS]))
    def renew_claim(self, claim: Handle, retarget: str | None) -> None:
        self.run("renew_claim", lambda n, s: s.renew_claim(self._claim(claim, n, retarget)))

    @rule(claim=claims)
    def release_claim(self, claim: Handle) -> None:
        self.run("release_claim", lambda n, s: s.release_claim(claim.per_store[n]))

    def _commit_as(self, claim: Handle, commit: Commit, store_name: str, store: Any) -> object:
        return store.commit(claim.per_store[store_name], commit)

    def _claim(self, claim: Handle, store_name: str, retarget: str | None = None) -> Any:
        value = claim.per_store[store_name]
        return value if retarget is None else replace(value, thread_id=retarget)

    # -- checkpointer writes --------------------------------------------------------------

    @rule(
        claim=claims,
        checkpoint_id=st.sampled_from(CHECKPOINTS),
        parent=st.sampled_from(["HEAD"] * 6 + [None, *CHECKPOINTS]),
        run_id=st.sampled_from(RUNS),
        state=JSON_VALUES,
        metadata=JSON_VALUES,
        finished=st.booleans(),
        events=st.lists(
            EVENTS_IN,
            max_size=2,
        ),
        created_at=st.sampled_from([None, PRODUCER_TIME]),
        parent_thread_id=st.sampled_from([None, *THREADS]),
        fence=st.none() | claims,
    )
    def commit(
        self,
        claim: Handle,
        checkpoint_id: str,
        parent: str | None,
        run_id: str,
        state: JSON,
        metadata: JSON,
        finished: bool,
        events: list[EventIn],
        created_at: datetime | None,
        parent_thread_id: str | None,
        fence: Handle | None,
    ) -> None:
        thread_id = claim.per_store["memory"].thread_id
        parent_id = self.head(thread_id) if parent == "HEAD" else parent

        def op(n: str, s: Any) -> object:
            return s.commit(
                claim.per_store[n],
                Commit(
                    checkpoint_id=checkpoint_id,
                    parent_id=parent_id,
                    run_id=run_id,
                    state=state,
                    metadata=metadata,
                    next=() if finished else ("node",),
                    events=tuple(events),
                    created_at=created_at,
                    parent_thread_id=parent_thread_id,
                    fence=None if fence is None else fence.per_store[n],
                ),
            )

        self.run("commit", op)

    @rule(
        claim=claims,
        checkpoint_id=st.sampled_from(["HEAD", *CHECKPOINTS]),
        writes=st.lists(
            st.builds(
                PendingWrite,
                task_id=st.sampled_from(TASKS),
                channel=st.sampled_from(CHANNELS),
                value=JSON_VALUES,
            ),
            max_size=3,
        ),
    )
    def put_writes(self, claim: Handle, checkpoint_id: str, writes: list[PendingWrite]) -> None:
        thread_id = claim.per_store["memory"].thread_id
        cp = (self.head(thread_id) or "c1") if checkpoint_id == "HEAD" else checkpoint_id
        self.run("put_writes", lambda n, s: s.put_writes(claim.per_store[n], cp, writes))

    @rule(
        claim=claims,
        events=st.lists(
            EVENTS_IN,
            max_size=3,
        ),
        run_id=st.sampled_from([None, *RUNS]),
    )
    def append_events(self, claim: Handle, events: list[EventIn], run_id: str | None) -> None:
        self.run(
            "append_events", lambda n, s: s.append_events(claim.per_store[n], events, run_id=run_id)
        )

    @rule(
        claim=claims,
        key=st.sampled_from(EFFECT_KEYS),
        value=JSON_VALUES,
        run_id=st.sampled_from([None, *RUNS]),
    )
    def record_effect(self, claim: Handle, key: str, value: object, run_id: str | None) -> None:
        self.run(
            "record_effect",
            lambda n, s: s.record_effect(claim.per_store[n], key, value, run_id=run_id),
        )

    @rule(claim=claims)
    def retract_turn(self, claim: Handle) -> None:
        self.run("retract_turn", lambda n, s: s.retract_turn(claim.per_store[n]))

    @rule(
        thread_id=st.sampled_from(THREADS),
        keep_last=st.sampled_from([None, 1, 2, 3]),
        max_age=st.sampled_from(MAX_AGES),
    )
    def prune(self, thread_id: str, keep_last: int | None, max_age: timedelta | None) -> None:
        policy = retention(keep_last, max_age)
        self.run("prune", lambda _n, s: s.prune(thread_id, policy))

    @rule(
        keep_last=st.sampled_from([None, 1, 2]),
        max_age=st.sampled_from(MAX_AGES),
        batch=st.sampled_from([1, 2, 1000]),
    )
    def prune_all(self, keep_last: int | None, max_age: timedelta | None, batch: int) -> None:
        policy = retention(keep_last, max_age)
        self.run("prune_all", lambda _n, s: s.prune_all(policy, batch=batch))

    @rule(thread_id=st.sampled_from(THREADS), fence=st.none() | claims)
    def delete_thread(self, thread_id: str, fence: Handle | None) -> None:
        self.run(
            "delete_thread",
            lambda n, s: s.delete_thread(
                thread_id, fence=None if fence is None else fence.per_store[n]
            ),
        )

    # -- compound steps: whole turns, so histories and admissions actually build up ---------

    @rule(
        target=claims,
        thread_id=st.sampled_from(THREADS),
        run_id=st.sampled_from(RUNS),
        checkpoint_ids=st.lists(st.sampled_from(CHECKPOINTS), min_size=1, max_size=3),
        finished=st.booleans(),
        release=st.booleans(),
    )
    def run_turn(
        self,
        thread_id: str,
        run_id: str,
        checkpoint_ids: list[str],
        finished: bool,
        release: bool,
    ) -> Any:
        """claim -> commit on the head (1-3 times) -> maybe release: the common path."""
        policy = ClaimPolicy(ttl=timedelta(seconds=120), renew_every=timedelta(seconds=30))
        raw = self.run("claim", lambda _n, s: s.claim(thread_id, run_id, policy))
        if not self.all_ok(raw, Claim):
            return multiple()
        handle = Handle(dict(raw))
        for i, checkpoint_id in enumerate(checkpoint_ids):
            last = i == len(checkpoint_ids) - 1
            commit = Commit(
                checkpoint_id,
                self.head(thread_id),
                run_id,
                {"i": checkpoint_id},
                next=() if finished and last else ("n",),
            )
            self.run("commit", partial(self._commit_as, handle, commit))
        if release:
            self.run("release_claim", lambda n, s: s.release_claim(handle.per_store[n]))
        return handle

    @rule(
        holder=st.sampled_from(HOLDERS),
        tenant=st.sampled_from([ANY, *TENANTS]),
        run_id=st.sampled_from(RUNS),
        checkpoint_id=st.sampled_from(CHECKPOINTS),
        finished=st.booleans(),
        close=st.booleans(),
    )
    def work_entry(
        self,
        holder: str,
        tenant: Any,
        run_id: str,
        checkpoint_id: str,
        finished: bool,
        close: bool,
    ) -> None:
        """SPEC §5 protocol: lease(run_id) -> claim -> entry -> latest_of_runs -> commit -> close."""
        ttl = timedelta(seconds=120)
        raw = self.run(
            "lease", lambda _n, s: s.run_queue.lease(holder, ttl, tenant=tenant, run_id=run_id)
        )
        if not self.all_ok(raw, Lease):
            return
        lease = Handle(dict(raw))
        thread_id = raw["memory"].entry.thread_id  # type: ignore[attr-defined]
        policy = ClaimPolicy(ttl=timedelta(seconds=120), renew_every=timedelta(seconds=30))
        raw = self.run("claim", lambda _n, s: s.claim(thread_id, run_id, policy))
        if not self.all_ok(raw, Claim):
            return
        claim = Handle(dict(raw))
        raw = self.run(
            "entry",
            lambda n, s: s.run_queue.entry(
                lease.per_store[n].entry.entry_id, tenant=lease.per_store[n].entry.tenant
            ),
        )
        entry = raw["memory"]
        run_ids = [a.run_id for a in entry.attempts] if isinstance(entry, QueueEntry) else []
        self.run("latest_of_runs", lambda _n, s: s.latest_of_runs(thread_id, run_ids))
        parent_id = self.head(thread_id)
        self.run(
            "commit",
            lambda n, s: s.commit(
                claim.per_store[n],
                Commit(
                    checkpoint_id, parent_id, run_id, "applied", next=() if finished else ("n",)
                ),
            ),
        )
        self.run("release_claim", lambda n, s: s.release_claim(claim.per_store[n]))
        if close:
            self.run("close", lambda n, s: s.run_queue.close(lease.per_store[n], Completed("done")))

    # -- checkpointer reads (one rule, so reads do not crowd out writes) -----------------

    @rule(
        read=st.sampled_from(
            [
                "get",
                "history",
                "latest_of_runs",
                "thread",
                "threads",
                "children",
                "events_after",
                "await_events_after",
                "subscribe",
                "get_effect",
            ]
        ),
        thread_id=st.sampled_from(THREADS),
        checkpoint_id=st.sampled_from([None, *CHECKPOINTS]),
        limit=st.sampled_from([1, 2, 100]),
        run_ids=st.lists(st.sampled_from(RUNS), max_size=3),
        after=st.sampled_from([None, *THREADS]),
        after_seq=st.sampled_from([0, 1, 3, 6]),
        key=st.sampled_from(EFFECT_KEYS),
    )
    def read(
        self,
        read: str,
        thread_id: str,
        checkpoint_id: str | None,
        limit: int,
        run_ids: list[str],
        after: str | None,
        after_seq: int,
        key: str,
    ) -> None:
        ops: dict[str, Callable[[str, Any], object]] = {
            "get": lambda _n, s: s.get(thread_id, checkpoint_id),
            "history": lambda _n, s: s.history(thread_id, before=checkpoint_id, limit=limit),
            "latest_of_runs": lambda _n, s: s.latest_of_runs(thread_id, run_ids),
            "thread": lambda _n, s: s.thread(thread_id),
            "threads": lambda _n, s: s.threads(after=after, limit=limit),
            "children": lambda _n, s: s.children(thread_id),
            "events_after": lambda _n, s: s.events_after(thread_id, after_seq, limit=limit),
            "await_events_after": lambda _n, s: s.await_events_after(
                thread_id, after_seq, timedelta(0)
            ),
            "subscribe": self._subscribe_op(thread_id, after_seq, limit),
            "get_effect": lambda _n, s: s.get_effect(thread_id, key),
        }
        self.run(read, ops[read])

    def _subscribe_op(
        self, thread_id: str, after_seq: int, limit: int
    ) -> Callable[[str, Any], object]:
        # Take only events that exist (the iterator waits for more): as many as memory has.
        available = len(self.stores["memory"].events_after(thread_id, after_seq, limit=limit))

        def op(_n: str, s: Any) -> object:
            iterator: Iterator[Any] = s.subscribe(thread_id, after_seq)
            try:
                return list(itertools.islice(iterator, available))
            finally:
                close = getattr(iterator, "close", None)
                if close is not None:
                    close()

        return op

    # -- run queue ------------------------------------------------------------------------

    @rule(
        target=entries,
        thread_id=st.sampled_from(THREADS),
        value=JSON_VALUES,
        tenant=st.sampled_from(TENANTS),
        key=st.sampled_from(KEYS),
        mode=st.sampled_from(list(Mode)),
        max_attempts=st.sampled_from([1, 2, 3]),
    )
    def submit(
        self,
        thread_id: str,
        value: JSON,
        tenant: str | None,
        key: str | None,
        mode: Mode,
        max_attempts: int,
    ) -> Any:
        submission = Submission(
            thread_id, value, tenant=tenant, key=key, mode=mode, max_attempts=max_attempts
        )
        raw = self.run("submit", lambda _n, s: s.run_queue.submit(submission))
        if all(not isinstance(v, Exception) for v in raw.values()):
            return Handle({n: v.entry_id for n, v in raw.items()})  # type: ignore[attr-defined]
        return self._handle_or_nothing(raw)

    @rule(
        target=leases,
        holder=st.sampled_from(HOLDERS),
        ttl=TTLS,
        tenant=st.sampled_from([ANY, ANY, *TENANTS]),
        run_id=st.sampled_from([None, *RUNS]),
    )
    def lease(self, holder: str, ttl: timedelta, tenant: Any, run_id: str | None) -> Any:
        raw = self.run(
            "lease", lambda _n, s: s.run_queue.lease(holder, ttl, tenant=tenant, run_id=run_id)
        )
        return self._handle_or_nothing(raw)

    @rule(lease=leases, ttl=st.none() | TTLS)
    def renew(self, lease: Handle, ttl: timedelta | None) -> None:
        self.run("renew", lambda n, s: s.run_queue.renew(lease.per_store[n], ttl))

    @rule(lease=leases)
    def release(self, lease: Handle) -> None:
        self.run("release", lambda n, s: s.run_queue.release(lease.per_store[n]))

    @rule(lease=leases, run_id=st.sampled_from(RUNS))
    def record_attempt(self, lease: Handle, run_id: str) -> None:
        self.run(
            "record_attempt", lambda n, s: s.run_queue.record_attempt(lease.per_store[n], run_id)
        )

    @rule(
        lease=leases,
        outcome=st.sampled_from(
            [Completed(None), Completed({"out": [1]}), Failed("boom"), Cancelled("requested")]
        ),
    )
    def close(self, lease: Handle, outcome: Any) -> None:
        self.run("close", lambda n, s: s.run_queue.close(lease.per_store[n], outcome))

    @rule(
        target=entries,
        entry=entries,
        tenant=st.sampled_from(TENANTS),
        again=st.booleans(),
    )
    def retry(self, entry: Handle, tenant: str | None, again: bool) -> Any:
        raw = self.run(
            "retry", lambda n, s: s.run_queue.retry(entry.per_store[n], tenant=tenant, again=again)
        )
        if all(not isinstance(v, Exception) for v in raw.values()):
            return Handle({n: v.entry_id for n, v in raw.items()})  # type: ignore[attr-defined]
        return multiple()

    @rule(
        target=leases,
        holder=st.sampled_from(HOLDERS),
        tenant=st.sampled_from([ANY, ANY, *TENANTS]),
        run_id=st.sampled_from(RUNS),
        checkpoint_id=st.none() | st.sampled_from(CHECKPOINTS),
        finished=st.booleans(),
        outcome=st.sampled_from([None, Failed("boom"), Completed("done")]),
    )
    def begin_attempt(
        self,
        holder: str,
        tenant: Any,
        run_id: str,
        checkpoint_id: str | None,
        finished: bool,
        outcome: Any,
    ) -> Any:
        """SPEC §11 with §19.3: begin (a retry planned, in each store, with its retry chain's
        runs) -> maybe a commit on the head under its claim -> maybe finish_attempt, so retry
        chains of admitted and never-admitted entries build up."""
        ttl = timedelta(seconds=120)
        policy = ClaimPolicy(ttl=timedelta(seconds=120), renew_every=timedelta(seconds=30))
        raw = self.run(
            "begin_attempt",
            lambda _n, s: s.begin_attempt(
                holder, ttl, run_id=run_id, claim_policy=policy, tenant=tenant
            ),
        )
        if not self.all_ok(raw, AttemptBegun):
            return multiple()
        begun: dict[str, AttemptBegun] = raw  # type: ignore[assignment]
        lease = Handle({n: b.lease for n, b in begun.items()})
        if begun["memory"].claim is None:
            return lease
        claim = Handle({n: b.claim for n, b in begun.items()})
        if checkpoint_id is not None:
            thread_id = begun["memory"].entry.thread_id
            commit = Commit(
                checkpoint_id,
                self.head(thread_id),
                run_id,
                {"i": checkpoint_id},
                next=() if finished else ("n",),
            )
            self.run("commit", partial(self._commit_as, claim, commit))
        if outcome is not None:
            self.run(
                "finish_attempt",
                lambda n, s: s.finish_attempt(lease.per_store[n], outcome, claim.per_store[n]),
            )
        return lease

    @rule(
        thread_id=st.sampled_from(THREADS),
        run_ids=st.lists(st.sampled_from(RUNS), min_size=2, max_size=3, unique=True),
        checkpoint_id=st.none() | st.sampled_from(CHECKPOINTS),
        finished=st.booleans(),
    )
    def retried_run(
        self, thread_id: str, run_ids: list[str], checkpoint_id: str | None, finished: bool
    ) -> None:
        """SPEC §19.3: submit -> begin (its first run maybe commits) -> finish Failed -> retry
        -> begin ..., so each store plans retries of admitted and never-admitted chains."""
        self.run("submit", lambda _n, s: s.run_queue.submit(Submission(thread_id, "go")))
        for i, run_id in enumerate(run_ids):
            first = i == 0 and checkpoint_id is not None
            if not self._fail_and_retry(run_id, checkpoint_id if first else None, finished):
                return

    def _fail_and_retry(self, run_id: str, checkpoint_id: str | None, finished: bool) -> bool:
        """begin as ``run_id`` -> maybe commit ``checkpoint_id`` -> finish Failed -> retry;
        False when the begin took no claim."""
        ttl = timedelta(seconds=120)
        raw = self.run("begin_attempt", lambda _n, s: s.begin_attempt("h1", ttl, run_id=run_id))
        if not self.all_ok(raw, AttemptBegun):
            return False
        begun: dict[str, AttemptBegun] = raw  # type: ignore[assignment]
        if begun["memory"].claim is None:
            return False
        if checkpoint_id is not None:
            commit = Commit(
                checkpoint_id,
                self.head(begun["memory"].entry.thread_id),
                run_id,
                {"i": checkpoint_id},
                next=() if finished else ("n",),
            )
            claim = Handle({n: b.claim for n, b in begun.items()})
            self.run("commit", partial(self._commit_as, claim, commit))
        self.run(
            "finish_attempt",
            lambda n, s: s.finish_attempt(begun[n].lease, Failed("boom"), begun[n].claim),
        )
        self.run(
            "retry",
            lambda n, s: s.run_queue.retry(begun[n].entry.entry_id, tenant=begun[n].entry.tenant),
        )
        return True

    @rule(entry=entries, tenant=st.sampled_from(TENANTS))
    def cancel(self, entry: Handle, tenant: str | None) -> None:
        self.run("cancel", lambda n, s: s.run_queue.cancel(entry.per_store[n], tenant=tenant))

    @rule(
        read=st.sampled_from(["entry", "open_entries", "await_closed"]),
        entry=entries,
        tenant=st.sampled_from(TENANTS),
        tenant_filter=st.sampled_from([ANY, *TENANTS]),
        thread_id=st.sampled_from([None, *THREADS]),
    )
    def queue_read(
        self,
        read: str,
        entry: Handle,
        tenant: str | None,
        tenant_filter: Any,
        thread_id: str | None,
    ) -> None:
        ops: dict[str, Callable[[str, Any], object]] = {
            "entry": lambda n, s: s.run_queue.entry(entry.per_store[n], tenant=tenant),
            "open_entries": lambda _n, s: s.run_queue.open_entries(
                tenant=tenant_filter, thread_id=thread_id
            ),
            "await_closed": lambda n, s: s.run_queue.await_closed(
                entry.per_store[n], timedelta(0), tenant=tenant
            ),
        }
        self.run(read, ops[read])

    @rule(older_than=AGES, batch=st.sampled_from([1, 2, 3, 1000]))
    def reclaim(self, older_than: timedelta, batch: int) -> None:
        # Every clock stands still, so entries closed at one instant tie in every store.
        self.run("reclaim", lambda _n, s: s.run_queue.reclaim(older_than, batch=batch))

    # -- a concurrent step: a lease meets a commit in flight on PostgreSQL ------------------

    @rule(
        claim=claims,
        checkpoint_id=st.sampled_from(CHECKPOINTS),
        run_id=st.sampled_from(RUNS),
        holder=st.sampled_from(HOLDERS),
        ttl=TTLS,
        lease_run_id=st.sampled_from(RUNS),
        delta=ADVANCES,
    )
    def lease_meets_commit(
        self,
        claim: Handle,
        checkpoint_id: str,
        run_id: str,
        holder: str,
        ttl: timedelta,
        lease_run_id: str | None,
        delta: timedelta,
    ) -> None:
        """A commit holds its locks on a second connection while a lease runs in a thread and
        the clock moves; memory and SQLite replay the order PostgreSQL serialised."""
        thread_id = claim.per_store["memory"].thread_id
        # An entry of tenant "tc" (only this rule uses it) on the thread, for the lease to meet:
        # a lease recording an attempt shares the thread row the commit holds.
        job = Submission(thread_id, {"job": run_id}, tenant="tc")
        self.run("submit", lambda _n, s: s.run_queue.submit(job))
        commit = Commit(
            checkpoint_id, self.head(thread_id), run_id, {"c": checkpoint_id}, next=("n",)
        )
        pg = self.world.pg
        pg_claim = claim.per_store["postgres"]
        commit_error: str | None = None
        try:
            pg.raw.execute(
                "SELECT * FROM dg_commit_v1(%s, %s, %s, %s, %s, %s, 'null', %s,"
                " NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
                (
                    thread_id,
                    pg_claim.token,
                    checkpoint_id,
                    commit.parent_id,
                    run_id,
                    '{"c":"' + checkpoint_id + '"}',
                    ["n"],
                ),
            )
        except psycopg.Error as exc:  # the transaction keeps its locks until rolled back
            commit_error = SQLSTATE_ERRORS.get(exc.sqlstate or "", type(exc).__name__)
        result: dict[str, object] = {}

        def lease() -> None:
            try:
                result["postgres"] = self.stores["postgres"].run_queue.lease(
                    holder, ttl, tenant="tc", run_id=lease_run_id
                )
            except Exception as exc:
                result["postgres"] = exc

        worker = threading.Thread(target=lease, daemon=True)
        worker.start()
        deadline = time.monotonic() + 5
        waited = False
        while worker.is_alive() and time.monotonic() < deadline:
            if pg.leases_waiting():
                waited = True
                break
            time.sleep(0.005)
        if waited:
            pg.advance(delta)  # the lease is waiting: its time must be read after this
        if commit_error is None:
            pg.raw.commit()
        else:
            pg.raw.rollback()
        worker.join(10)
        assert not worker.is_alive(), "the lease never finished"
        if not waited:
            pg.advance(delta)
        committed: dict[str, object] = {
            "postgres": durable_graph.core.errors.GraphError(commit_error) if commit_error else None
        }
        for name in ("memory", "sqlite"):
            store, advance = self.stores[name], self.advancers[list(self.stores).index(name)]
            take = partial(store.run_queue.lease, holder, ttl, tenant="tc", run_id=lease_run_id)
            if not waited:
                result[name] = self._attempt(take)
            try:
                store.commit(claim.per_store[name], commit)
                committed[name] = None
            except Exception as exc:
                committed[name] = durable_graph.core.errors.GraphError(type(exc).__name__)
            advance(delta)
            if waited:
                result[name] = self._attempt(take)
        OUTCOMES[("lease_meets_commit", "waited" if waited else "not waited")] += 1
        outcomes = {n: str(e) if e else "ok" for n, e in committed.items()}
        assert len(set(outcomes.values())) == 1, f"concurrent commit: {outcomes}"
        leased = self.compare("lease (concurrent)", {n: result[n] for n in self.stores})
        if self.all_ok(leased, Lease):
            # Closed, so that "tc" entries do not pile up ahead of the next step's.
            self.run("close", lambda n, s: s.run_queue.close(leased[n], Completed(None)))
        self.run("get (after concurrent commit)", lambda _n, s: s.get(thread_id))

    @staticmethod
    def _attempt(fn: Callable[[], object]) -> object:
        try:
            return fn()
        except Exception as exc:
            return exc

    # -- after every step -----------------------------------------------------------------

    @invariant()
    def same_threads_and_open_entries(self) -> None:
        self.run("threads()", lambda _n, s: s.threads())
        self.run("open_entries(ANY)", lambda _n, s: s.run_queue.open_entries(tenant=ANY))


# --- the test ----------------------------------------------------------------------------------


@pytest.fixture
def world(tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    schema = f"d_{uuid.uuid4().hex[:16]}"
    # libpq starts every session of the store (and the clock's) under Europe/Berlin.
    monkeypatch.setenv("PGTZ", "Europe/Berlin")
    pg = PgBackend(pg_dsn, schema)
    w = World(tmp_path, pg)
    try:
        yield w
    finally:
        w.close()
        pg.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_memory_sqlite_and_postgres_answer_every_operation_sequence_alike(world: World) -> None:
    DifferentialMachine.world = world
    run_state_machine_as_test(
        DifferentialMachine,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            print_blob=True,
        ),
    )
    summary = ", ".join(f"{op}:{kind}={n}" for (op, kind), n in sorted(OUTCOMES.items()))
    print(f"differential: examples={EXAMPLES} outcomes: {summary}")
