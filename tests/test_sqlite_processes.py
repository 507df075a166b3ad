"""Four real processes share one SQLite file and run the SPEC §5 worker protocol against each
other, with stalls, abandoned attempts, INTERRUPT / REJECT submissions, cancels and deletes, for
``DURABLE_GRAPH_SQLITE_SOAK_SECONDS`` (default 20). Each process logs what the store
acknowledged; afterwards the logs and the file are checked for:

- two live leases on one thread at once (each lease's window, from the store clock: taken at
  ``expires_at - ttl``, ending at its last known expiry, or earlier when its entry closed);
- an acknowledged submission without an entry, or an entry closed by two acknowledged calls;
- gaps or reuse in a thread's event numbers;
- an input applied by more than one attempt.

Run with ``-s`` to see the summary line (operations, processes, violations).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import time
import traceback
import uuid
from collections import Counter, defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

from durable_graph import (
    ANY,
    ClaimPolicy,
    Commit,
    Completed,
    EventIn,
    Exhausted,
    Failed,
    Finished,
    Fresh,
    Mode,
    ProcessingError,
    Resume,
    Started,
    StoreError,
    Submission,
    ThreadDeleted,
    plan_attempt,
)
from durable_graph.core.validation import to_micros
from durable_graph.sqlite import SqliteCheckpointer, SqliteConfig

PROCESSES = 4
THREADS = [f"thread-{i}" for i in range(8)]
TENANTS = [None, "acme"]
LEASE_TTL = timedelta(milliseconds=800)
CLAIM_POLICY = ClaimPolicy(ttl=timedelta(milliseconds=1200), renew_every=timedelta(seconds=1))
STALL_SECONDS = (0.9, 1.6)
"""Longer than the lease ttl: another worker may take the entry while this one sleeps."""


def _soak_seconds() -> float:
    return float(os.environ.get("DURABLE_GRAPH_SQLITE_SOAK_SECONDS", "20"))


# --- one process ---------------------------------------------------------------------------


class _Log:
    """What the store acknowledged to this process (all times are store-clock microseconds)."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.ops = 0
        self.refused: Counter[str] = Counter()
        self.processing_errors = 0
        self.tickets: list[dict[str, Any]] = []
        self.leases: dict[int, dict[str, Any]] = {}
        self.closes: list[dict[str, Any]] = []
        self.applied: list[dict[str, Any]] = []
        self.seqs: list[tuple[str, int]] = []
        self.deletes = 0

    def lease(self, lease: Any) -> dict[str, Any]:
        record = {
            "token": lease.token,
            "entry_id": lease.entry.entry_id,
            "thread_id": lease.entry.thread_id,
            "holder": lease.holder,
            "start": to_micros(lease.expires_at - lease.ttl),
            "end": to_micros(lease.expires_at),
        }
        self.leases[lease.token] = record
        return record

    def closed(self, entry: Any, by: str, token: int | None = None) -> None:
        assert entry.closed_at is not None
        self.closes.append(
            {"entry_id": entry.entry_id, "closed_at": to_micros(entry.closed_at), "by": by}
        )
        if token is not None and token in self.leases:
            record = self.leases[token]
            record["end"] = min(record["end"], to_micros(entry.closed_at))

    def dump(self, path: Path) -> None:
        path.write_text(
            json.dumps(
                {
                    "ops": self.ops,
                    "refused": dict(self.refused),
                    "processing_errors": self.processing_errors,
                    "tickets": self.tickets,
                    "leases": list(self.leases.values()),
                    "closes": self.closes,
                    "applied": self.applied,
                    "seqs": self.seqs,
                    "deletes": self.deletes,
                }
            )
        )


def _worker_main(index: int, db_path: str, out_dir: str, seconds: float) -> None:
    """One process: submit, delete, cancel, and run the worker protocol, until time is up."""
    rng = random.Random(index * 7919 + 1)
    log = _Log(index)
    store = SqliteCheckpointer.open(db_path, SqliteConfig(busy_timeout=timedelta(seconds=10)))
    deadline = time.monotonic() + seconds
    submitted = 0
    try:
        while time.monotonic() < deadline:
            log.ops += 1
            roll = rng.random()
            try:
                if roll < 0.30:
                    submitted += 1
                    _submit(store, log, rng, f"p{index}-{submitted}")
                elif roll < 0.31:
                    store.delete_thread(rng.choice(THREADS))
                    log.deletes += 1
                elif roll < 0.33 and log.tickets:
                    ticket = rng.choice(log.tickets)
                    log.closed(
                        store.run_queue.cancel(ticket["entry_id"], ticket["tenant"]), "cancel"
                    )
                else:
                    _work(store, log, rng, f"p{index}")
            except ProcessingError:
                log.processing_errors += 1
            except StoreError as exc:
                log.refused[type(exc).__name__] += 1
    finally:
        store.close()
        log.dump(Path(out_dir) / f"worker-{index}.json")


def _submit(store: SqliteCheckpointer, log: _Log, rng: random.Random, key: str) -> None:
    mode = rng.choices([Mode.ENQUEUE, Mode.INTERRUPT, Mode.REJECT], [8, 1, 1])[0]
    submission = Submission(
        thread_id=rng.choice(THREADS),
        input={"key": key, "text": "héllo 😀"},
        tenant=rng.choice(TENANTS),
        key=key,
        mode=mode,
        max_attempts=3,
    )
    ticket = store.run_queue.submit(submission)
    log.tickets.append(
        {"entry_id": ticket.entry_id, "tenant": submission.tenant, "key": key, "retry": False}
    )
    if rng.random() < 0.1:  # an identical retry gets the same ticket (SPEC §5)
        again = store.run_queue.submit(submission)
        log.ops += 1
        log.tickets.append(
            {
                "entry_id": again.entry_id,
                "tenant": submission.tenant,
                "key": key,
                "retry": True,
                "existing": again.existing,
            }
        )


def _work(store: SqliteCheckpointer, log: _Log, rng: random.Random, holder: str) -> None:
    """SPEC §5: lease -> record_attempt -> claim -> entry -> latest_of_runs -> plan -> commit."""
    queue = store.run_queue
    run_id = uuid.uuid4().hex
    lease = queue.lease(holder, LEASE_TTL, tenant=ANY, run_id=run_id)
    if lease is None:
        time.sleep(0.005)
        return
    record = log.lease(lease)
    thread_id, entry_id = lease.entry.thread_id, lease.entry.entry_id
    if isinstance(lease.attempt, ThreadDeleted):
        log.closed(lease.entry, "thread_deleted", lease.token)
        return
    if isinstance(lease.attempt, Exhausted):
        log.ops += 1
        log.closed(queue.close(lease, Failed("attempts exhausted")), "close", lease.token)
        return
    assert isinstance(lease.attempt, Started), lease.attempt
    behaviour = rng.choices(["normal", "stall", "abandon", "crash_mid_run"], [80, 8, 4, 8])[0]
    if behaviour == "abandon":
        return  # the lease expires; another attempt will take the entry
    if behaviour == "stall":
        time.sleep(rng.uniform(*STALL_SECONDS))
    log.ops += 1
    claim = store.claim(thread_id, run_id, CLAIM_POLICY)
    if rng.random() < 0.3:
        log.ops += 1
        lease = queue.renew(lease)
        record["end"] = max(record["end"], to_micros(lease.expires_at))
    log.ops += 3
    entry = queue.entry(entry_id, lease.entry.tenant)  # read after the claim is held
    assert entry is not None
    latest = store.latest_of_runs(thread_id, [a.run_id for a in entry.attempts])
    plan = plan_attempt(entry, latest)
    if isinstance(plan, Fresh):
        head = store.get(thread_id)
        step1 = store.commit(
            claim,
            Commit(
                checkpoint_id=uuid.uuid4().hex,
                parent_id=None if head is None else head.checkpoint_id,
                run_id=run_id,
                state={"applied": entry_id},
                next=("step2",),
                events=(EventIn("applied", {"entry_id": entry_id}),),
            ),
        )
        log.applied.append({"entry_id": entry_id, "thread_id": thread_id, "run_id": run_id})
        log.seqs.extend((thread_id, s) for s in (step1.seq - 1, step1.seq))
        if behaviour == "crash_mid_run":
            return  # the claim and lease expire; the next attempt resumes at step 2
        parent: str | None = step1.checkpoint_id
    elif isinstance(plan, Resume):
        head = store.get(thread_id)
        log.ops += 1
        parent = None if head is None else head.checkpoint_id
    else:
        assert isinstance(plan, Finished)
        parent = None
    if parent is not None:
        log.ops += 1
        step2 = store.commit(
            claim,
            Commit(
                checkpoint_id=uuid.uuid4().hex,
                parent_id=parent,
                run_id=run_id,
                state={"finished": entry_id},
                next=(),
            ),
        )
        log.seqs.append((thread_id, step2.seq))
    log.ops += 2
    log.closed(queue.close(lease, Completed({"entry_id": entry_id})), "close", lease.token)
    store.release_claim(claim)


def _worker_entry(index: int, db_path: str, out_dir: str, seconds: float) -> None:
    try:
        _worker_main(index, db_path, out_dir, seconds)
    except BaseException:
        Path(out_dir, f"worker-{index}.error").write_text(traceback.format_exc())
        raise


# --- the test ------------------------------------------------------------------------------


def _overlaps(leases: list[dict[str, Any]]) -> list[str]:
    """Two lease windows of one thread that overlap (D1: live while now < expires_at)."""
    found = []
    by_thread: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for lease in leases:
        by_thread[lease["thread_id"]].append(lease)
    for thread_id, windows in by_thread.items():
        windows.sort(key=lambda w: (w["start"], w["token"]))
        latest: dict[str, Any] | None = None
        for window in windows:
            if latest is not None and window["start"] < latest["end"]:
                found.append(
                    f"{thread_id}: lease {window['token']} ({window['holder']}) taken at "
                    f"{window['start']} while lease {latest['token']} ({latest['holder']}) "
                    f"was live until {latest['end']}"
                )
            if latest is None or window["end"] > latest["end"]:
                latest = window
    return found


def _entry_of_any_tenant(queue: Any, lease: dict[str, Any]) -> Any:
    for tenant in TENANTS:
        entry = queue.entry(lease["entry_id"], tenant)
        if entry is not None:
            return entry
    return None


def test_four_processes_share_one_file_without_violations(tmp_path: Path) -> None:
    seconds = _soak_seconds()
    db_path = tmp_path / "soak.db"
    SqliteCheckpointer.open(db_path).close()  # create the schema once
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_worker_entry, args=(i, str(db_path), str(tmp_path), seconds))
        for i in range(PROCESSES)
    ]
    started = time.monotonic()
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=seconds + 120)
    for i, p in enumerate(procs):
        if p.is_alive():
            p.kill()
            p.join()
        error = tmp_path / f"worker-{i}.error"
        assert not error.exists(), error.read_text()
        assert p.exitcode == 0, f"worker {i} exited with {p.exitcode}"
    elapsed = time.monotonic() - started
    logs = [json.loads((tmp_path / f"worker-{i}.json").read_text()) for i in range(PROCESSES)]

    violations: list[str] = []
    leases = [lease for log in logs for lease in log["leases"]]
    with SqliteCheckpointer.open(db_path) as store:
        queue = store.run_queue
        # The final entries: a lease also ends when its entry was closed by anyone.
        entries: dict[int, Any] = {}
        for log in logs:
            for ticket in log["tickets"]:
                entry = queue.entry(ticket["entry_id"], ticket["tenant"])
                if entry is None:
                    violations.append(f"acknowledged submission {ticket} has no entry")
                    continue
                entries[entry.entry_id] = entry
                submitted: dict[str, Any] = entry.input  # type: ignore[assignment]
                if submitted["key"] != ticket["key"]:
                    violations.append(f"ticket {ticket} names the entry of {submitted['key']}")
                if ticket["retry"] and not ticket["existing"]:
                    violations.append(f"identical retry {ticket} was not deduplicated")
        for lease in leases:
            entry = entries.get(lease["entry_id"]) or _entry_of_any_tenant(queue, lease)
            if entry is not None and entry.closed_at is not None:
                lease["end"] = min(lease["end"], to_micros(entry.closed_at))
        violations += _overlaps(leases)

        # No entry closed twice: one acknowledged close at most, and it is the final one.
        closes = [c for log in logs for c in log["closes"]]
        for entry_id, count in Counter(c["entry_id"] for c in closes).items():
            if count > 1:
                violations.append(f"entry {entry_id} was closed {count} times")
        for close in closes:
            entry = entries.get(close["entry_id"])
            if entry is not None and to_micros(entry.closed_at) != close["closed_at"]:
                violations.append(f"entry {close['entry_id']} closed again after {close}")

        # Event numbers: contiguous per thread, and never handed out twice.
        numbers = Counter((t, seq) for log in logs for t, seq in log["seqs"])
        violations += [
            f"event number {seq} of {t} was acknowledged {n} times"
            for (t, seq), n in numbers.items()
            if n > 1
        ]
        for thread_id in THREADS:
            info = store.thread(thread_id)
            events = store.events_after(thread_id, 0, limit=1_000_000)
            seqs = [e.seq for e in events]
            if info is None:
                if seqs:
                    violations.append(f"{thread_id}: deleted but has events")
                continue
            if not seqs or seqs != list(range(seqs[0], seqs[-1] + 1)) or seqs[-1] != info.last_seq:
                violations.append(f"{thread_id}: event numbers are not contiguous")
            applied = Counter(
                json.dumps(e.payload, sort_keys=True) for e in events if e.kind == "applied"
            )
            violations += [
                f"{thread_id}: {e} applied {n} times in the log"
                for e, n in applied.items()
                if n > 1
            ]

        # At most once: every input applied by one attempt at most.
        applied_acks = Counter(a["entry_id"] for log in logs for a in log["applied"])
        violations += [
            f"entry {e} applied by {n} attempts" for e, n in applied_acks.items() if n > 1
        ]

    ops = sum(log["ops"] for log in logs)
    completed = sum(1 for log in logs for c in log["closes"] if c["by"] == "close")
    refused = sum((Counter(log["refused"]) for log in logs), Counter())
    print(
        f"\nsqlite soak: {ops} operations in {elapsed:.1f} s by {PROCESSES} processes, "
        f"{len(violations)} violations; {len(entries)} entries, {len(leases)} leases, "
        f"{completed} closed by workers, {sum(applied_acks.values())} inputs applied, "
        f"{sum(log['deletes'] for log in logs)} deletes, "
        f"{sum(log['processing_errors'] for log in logs)} processing errors, "
        f"refused {dict(refused)}"
    )
    assert violations == [], "\n".join(violations[:50])
    assert completed > 0 and applied_acks, "the soak did no work"


def test_overlap_check_finds_two_live_leases_on_one_thread() -> None:
    def window(token: int, thread_id: str, start: int, end: int) -> dict[str, Any]:
        return {"token": token, "thread_id": thread_id, "holder": "w", "start": start, "end": end}

    assert _overlaps([window(1, "t", 0, 10), window(2, "t", 10, 20), window(3, "u", 5, 8)]) == []
    found = _overlaps([window(1, "t", 0, 30), window(2, "t", 10, 20), window(3, "t", 25, 40)])
    assert len(found) == 2 and "lease 2" in found[0] and "lease 3" in found[1]


def _open_and_close(path: str, start: Any, outcomes: Any) -> None:
    start.wait()
    try:
        SqliteCheckpointer.open(path).close()
        outcomes.put("opened")
    except Exception as exc:  # reported to the test, which names it
        outcomes.put(repr(exc))


def test_processes_opening_a_new_file_together_all_open_it(tmp_path: Path) -> None:
    # SQLite answers SQLITE_BUSY at once (no busy handler) when two connections race to switch a
    # new file to WAL; a worker and a `submit` started together on a new file met it (CI, D265).
    ctx = multiprocessing.get_context("spawn")
    for round_ in range(20):
        path = str(tmp_path / f"store-{round_}.db")
        start, outcomes = ctx.Barrier(3), ctx.Queue()
        openers = [ctx.Process(target=_open_and_close, args=(path, start, outcomes)) for _ in "abc"]
        for p in openers:
            p.start()
        for p in openers:
            p.join(60)
        assert [outcomes.get(timeout=5) for _ in openers] == ["opened"] * 3, f"round {round_}"
