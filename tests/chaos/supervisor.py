"""The chaos supervisor: submits entries, runs worker processes (`tests/chaos/worker.py`), SIGKILLs
and restarts them, restarts PostgreSQL, partitions one worker in a network namespace, cancels
entries and deletes threads -- then checks the store and the logs against SPEC §4-§5.

Checks (each failure is one violation):

1. every acknowledged submit has a kept entry, and it is closed with a valid outcome;
2. no entry was closed by two acknowledged calls (worker closes, supervisor cancels);
3. an input is applied at most once: per entry, at most one accepted commit with
   ``metadata.applied`` (from the final histories and from the workers' logs);
4. no commit was accepted from a fenced claim: per thread, the claim tokens of accepted commits
   never decrease in ``seq`` order, and no claim of a higher token on the thread had returned
   before the commit was stamped (``committed_at``: same host clock);
5. no commit was accepted from an attempt of a delete-marked entry after the delete (seq above
   the thread's last seq at the delete, read while the supervisor held the thread's claim), and
   every delete-marked entry was open on its thread at a delete;
6. tokens only increased: every token is issued once, and a call that started after another
   returned got a greater token.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from durable_graph import (
    ANY,
    Cancelled,
    ClaimPolicy,
    Completed,
    EntryClosed,
    Failed,
    Interrupted,
    Mode,
    NotFound,
    ProcessingError,
    StoreError,
    Submission,
    ThreadBusy,
)

WORKER = Path(__file__).with_name("worker.py")
T = TypeVar("T")


@dataclass
class ChaosPlan:
    backend: str
    entries: int
    threads: int
    workers: int = 4
    kill_every: tuple[float, float] = (0.5, 1.5)
    pg_restarts: tuple[float, ...] = ()
    """Progress fractions (closed / entries) at which PostgreSQL is restarted (immediate)."""
    partition_at: float | None = None
    partition_seconds: float = 4.5
    deletes: int = 3
    cancel_fraction: float = 0.02
    interrupt_fraction: float = 0.05
    deadline_seconds: float = 60.0
    seed: int = 0


@dataclass
class Env:
    """How to reach the store: a sqlite path, or a dsn + schema (+ the server handle)."""

    open_store: Callable[[], Any]
    worker_cfg: dict[str, Any]
    restart_server: Callable[[], None] | None = None
    netns: Any = None
    netns_worker_cfg: dict[str, Any] | None = None
    tokens_per_thread: bool = False
    """Tokens and entry ids checked to increase per thread (a partitioned store, SPEC §16.2)
    instead of store-wide."""


@dataclass
class Result:
    backend: str
    entries: int
    threads: int
    kills: int = 0
    restarts: int = 0
    partitions: int = 0
    deletes: int = 0
    cancels: int = 0
    violations: list[str] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)
    commits: int = 0
    refused_commits: int = 0

    def line(self) -> str:
        return (
            f"chaos: backend={self.backend} entries={self.entries} threads={self.threads} "
            f"kills={self.kills} restarts={self.restarts} partitions={self.partitions} "
            f"violations={len(self.violations)}"
        )


def retry(call: Callable[[], T], seconds: float = 60.0) -> T:
    """Retry a supervisor call through server restarts (ProcessingError)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except ProcessingError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class Supervisor:
    def __init__(self, plan: ChaosPlan, env: Env, workdir: Path) -> None:
        self.plan = plan
        self.env = env
        self.dir = workdir
        self.rng = random.Random(plan.seed)
        self.result = Result(plan.backend, plan.entries, plan.threads)
        self.stop_file = workdir / "stop"
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.incarnation = Counter[int]()
        self.tickets: dict[int, str | None] = {}  # entry id -> tenant
        self.submissions: list[Submission] = []
        self.cancelled: list[int] = []
        self.deletes: list[dict[str, Any]] = []
        self.sup_tokens: list[dict[str, Any]] = []
        self.thread_ids = [f"chaos-{i}" for i in range(plan.threads)]

    # -- workers ------------------------------------------------------------------------------

    def spawn(self, slot: int) -> None:
        self.incarnation[slot] += 1
        wid = f"w{slot}-{self.incarnation[slot]}"
        in_ns = slot == 0 and self.env.netns is not None
        cfg = dict(self.env.netns_worker_cfg if in_ns else self.env.worker_cfg)  # type: ignore[arg-type]
        cfg.update(
            worker=wid,
            log=str(self.dir / f"{wid}.log"),
            stop=str(self.stop_file),
            seed=self.rng.randrange(2**32),
        )
        argv = [sys.executable, str(WORKER), json.dumps(cfg)]
        if in_ns:
            argv = self.env.netns.command(argv)
        err = open(self.dir / f"{wid}.stderr", "wb")  # noqa: SIM115
        self.procs[slot] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)

    def kill_one(self) -> None:
        slot = self.rng.randrange(self.plan.workers)
        proc = self.procs[slot]
        if proc.poll() is None:
            # Under `ip netns exec` the python process is the direct child (exec), so the pid
            # is the worker's own.
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            self.result.kills += 1
        self.spawn(slot)

    # -- supervisor actions ---------------------------------------------------------------------

    def submit_one(self, store: Any, n: int) -> None:
        thread_id = self.rng.choice(self.thread_ids)
        tenant = self.rng.choice([None, "ta"])
        mode = Mode.INTERRUPT if self.rng.random() < self.plan.interrupt_fraction else Mode.ENQUEUE
        submission = Submission(
            thread_id, {"n": n}, tenant=tenant, key=f"s-{n}", mode=mode, max_attempts=10
        )
        ticket = retry(lambda: store.run_queue.submit(submission))
        if ticket.existing and ticket.entry_id not in self.tickets:
            # A retried submit that the store had already taken: the same ticket, acknowledged.
            pass
        self.tickets[ticket.entry_id] = tenant
        self.submissions.append(submission)
        if self.rng.random() < 0.05:  # an identical resubmission must get the same ticket
            again = retry(lambda: store.run_queue.submit(submission))
            if again.entry_id != ticket.entry_id or not again.existing:
                self.result.violations.append(
                    f"resubmitting key s-{n} gave {again}, first ticket {ticket}"
                )

    def cancel_one(self, store: Any) -> None:
        open_entries = retry(lambda: store.run_queue.open_entries(tenant=ANY))
        if not open_entries:
            return
        entry = self.rng.choice(open_entries)
        try:
            store.run_queue.cancel(entry.entry_id, tenant=entry.tenant)
        except (EntryClosed, ProcessingError):
            return
        self.cancelled.append(entry.entry_id)
        self.result.cancels += 1

    def delete_one(self, store: Any) -> None:
        thread_id = self.rng.choice(self.thread_ids)
        policy = ClaimPolicy(ttl=timedelta(seconds=10), renew_every=timedelta(seconds=1))
        deadline = time.monotonic() + 4.0
        while True:
            try:
                t0 = time.time()
                claim = store.claim(thread_id, "supervisor", policy)
                self.sup_tokens.append(
                    {"token": claim.token, "t0": t0, "t1": time.time(), "thread_id": thread_id}
                )
                break
            except (ThreadBusy, ProcessingError):
                if time.monotonic() > deadline:
                    return
                time.sleep(0.05)
        try:
            info = store.thread(thread_id)
            if info is None:
                store.release_claim(claim)
                return
            # Holding the thread's claim: nobody else can commit or append, so last_seq is fixed.
            open_ids = [e.entry_id for e in store.run_queue.open_entries(ANY, thread_id=thread_id)]
            store.delete_thread(thread_id, fence=claim)
        except ProcessingError:
            return  # unknown whether it happened: no record (marks are checked against records)
        self.deletes.append({"thread_id": thread_id, "seq": info.last_seq, "open": open_ids})
        self.result.deletes += 1

    # -- the run ----------------------------------------------------------------------------------

    def run(self) -> Result:
        plan = self.plan
        store = retry(self.env.open_store)
        started = time.monotonic()
        for slot in range(plan.workers):
            self.spawn(slot)
        submitted = 0
        next_kill = time.monotonic() + self.rng.uniform(*plan.kill_every)
        restarts = list(plan.pg_restarts)
        delete_points = sorted(self.rng.uniform(0.1, 0.9) for _ in range(plan.deletes))
        partition_at = plan.partition_at if self.env.netns is not None else None
        healed_at: float | None = None
        try:
            while True:
                now = time.monotonic()
                if now - started > plan.deadline_seconds:
                    break
                open_count = len(retry(lambda: store.run_queue.open_entries(tenant=ANY)))
                closed = submitted - open_count
                progress = closed / plan.entries
                while submitted < plan.entries and open_count < max(20, 4 * plan.workers):
                    self.submit_one(store, submitted)
                    submitted += 1
                    open_count += 1
                if submitted >= plan.entries and open_count == 0:
                    break
                if now >= next_kill:
                    self.kill_one()
                    next_kill = now + self.rng.uniform(*plan.kill_every)
                if restarts and progress >= restarts[0] and self.env.restart_server is not None:
                    restarts.pop(0)
                    self.env.restart_server()
                    self.result.restarts += 1
                if partition_at is not None and progress >= partition_at:
                    partition_at = None
                    self.env.netns.cut()
                    healed_at = now + plan.partition_seconds
                    self.result.partitions += 1
                if healed_at is not None and now >= healed_at:
                    self.env.netns.heal()
                    healed_at = None
                if delete_points and progress >= delete_points[0]:
                    delete_points.pop(0)
                    self.delete_one(store)
                if self.rng.random() < plan.cancel_fraction:
                    self.cancel_one(store)
                time.sleep(0.05)
        finally:
            if healed_at is not None:
                self.env.netns.heal()
            self.stop_file.write_text("stop")
            for proc in self.procs.values():
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait()
        if submitted < plan.entries:
            self.result.violations.append(
                f"only {submitted} of {plan.entries} entries submitted by the deadline"
            )
        self.verify(store)
        store.close()
        return self.result

    # -- verification -----------------------------------------------------------------------------

    def read_logs(self) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        for path in sorted(self.dir.glob("w*.log")):
            for line in path.read_text(encoding="utf-8").splitlines():
                with contextlib.suppress(json.JSONDecodeError):  # a line cut by SIGKILL
                    records.append(json.loads(line))
        return records

    def verify(self, store: Any) -> None:
        v = self.result.violations
        logs = self.read_logs()
        by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for rec in logs:
            by_kind[rec["kind"]].append(rec)

        # 1. acknowledged submits: kept, closed, valid outcome.
        entries = {}
        for entry_id, tenant in self.tickets.items():
            entry = retry(partial(store.run_queue.entry, entry_id, tenant=tenant))
            if entry is None:
                v.append(f"acknowledged entry {entry_id} is lost")
                continue
            entries[entry_id] = entry
            outcome = entry.outcome
            self.result.outcomes[type(outcome).__name__] += 1
            if outcome is None:
                v.append(f"entry {entry_id} is still open at the end")
            elif isinstance(outcome, Cancelled):
                if outcome.reason not in ("thread_deleted", "requested"):
                    v.append(f"entry {entry_id}: bad cancel reason {outcome.reason!r}")
                if outcome.reason == "thread_deleted" and not entry.thread_deleted:
                    v.append(f"entry {entry_id}: cancelled thread_deleted but not marked")
            elif isinstance(outcome, Interrupted):
                if outcome.by not in self.tickets or outcome.by <= entry_id:
                    v.append(f"entry {entry_id}: interrupted by unknown/older entry {outcome.by}")
                if entry.attempts:
                    v.append(f"entry {entry_id}: interrupted after recording an attempt")
            elif not isinstance(outcome, (Completed, Failed)):
                v.append(f"entry {entry_id}: invalid outcome {outcome!r}")
            if entry.closed and (entry.lease_holder is not None or entry.closed_at is None):
                v.append(f"entry {entry_id}: closed but leased or without closed_at")

        # 2. closed by at most one acknowledged call.
        closes = Counter(r["entry_id"] for r in by_kind["close"])
        closes.update(self.cancelled)
        for entry_id, n in closes.items():
            if n > 1:
                v.append(f"entry {entry_id} closed by {n} acknowledged calls")
            entry = entries.get(entry_id)
            if (
                entry is not None
                and entry_id in self.cancelled
                and entry.outcome != Cancelled("requested")
            ):
                v.append(f"entry {entry_id}: acknowledged cancel but outcome {entry.outcome}")

        # accepted commits: the final histories plus the logs (which also cover deleted threads).
        accepted: dict[str, dict[str, Any]] = {}
        for thread_id in self.thread_ids:
            for cp in retry(partial(store.history, thread_id, limit=100_000)):
                meta = cp.metadata if isinstance(cp.metadata, dict) else {}
                accepted[cp.checkpoint_id] = {
                    "thread_id": thread_id,
                    "entry_id": meta.get("entry_id"),
                    "applied": meta.get("applied"),
                    "token": meta.get("token"),
                    "seq": cp.seq,
                    "run_id": cp.run_id,
                    "committed_at": cp.committed_at.timestamp(),
                    "in_history": True,
                }
        for rec in by_kind["commit"]:
            accepted.setdefault(rec["checkpoint_id"], {**rec, "in_history": False})
        self.result.commits = len(accepted)
        self.result.refused_commits = len(by_kind["commit_refused"])

        # 3. at most once.
        applied = Counter(c["entry_id"] for c in accepted.values() if c["applied"] is True)
        for entry_id, n in applied.items():
            if n > 1:
                v.append(f"entry {entry_id}: input applied {n} times")
        deleted_threads = {d["thread_id"] for d in self.deletes}
        for entry_id, entry in entries.items():
            if (
                isinstance(entry.outcome, Completed)
                and entry.thread_id not in deleted_threads
                and applied[entry_id] != 1
            ):
                v.append(f"entry {entry_id}: Completed but applied {applied[entry_id]} times")

        # 4. fencing.
        per_thread: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for c in accepted.values():
            per_thread[c["thread_id"]].append(c)
        claims_by_thread: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for rec in by_kind["claim"]:
            claims_by_thread[rec["thread_id"]].append(rec)
        for thread_id, commits in per_thread.items():
            commits.sort(key=lambda c: c["seq"])
            for a, b in itertools.pairwise(commits):
                if b["token"] < a["token"]:
                    v.append(
                        f"{thread_id}: commit seq {b['seq']} token {b['token']} accepted after "
                        f"seq {a['seq']} token {a['token']} (fenced claim)"
                    )
            for c in commits:
                for cl in claims_by_thread[thread_id]:
                    if cl["token"] > c["token"] and cl["t1"] + 0.001 < c["committed_at"]:
                        v.append(
                            f"{thread_id}: commit with token {c['token']} stamped "
                            f"{c['committed_at']:.6f} after claim {cl['token']} returned "
                            f"{cl['t1']:.6f}"
                        )
                        break

        # 5. deletes.
        attempts_of = {e.entry_id: {a.run_id for a in e.attempts} for e in entries.values()}
        marked_at: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for d in self.deletes:
            for entry_id in d["open"]:
                marked_at[entry_id].append(d)
        for entry_id, entry in entries.items():
            if not entry.thread_deleted:
                continue
            if entry_id not in marked_at:
                v.append(f"entry {entry_id} is delete-marked but was open at no delete")
                continue
            first = marked_at[entry_id][0]
            for c in accepted.values():
                if (
                    c["thread_id"] == entry.thread_id
                    and c["run_id"] in attempts_of[entry_id]
                    and c["seq"] > first["seq"]
                ):
                    v.append(
                        f"entry {entry_id}: commit seq {c['seq']} of its run {c['run_id']} "
                        f"accepted after the delete at seq {first['seq']}"
                    )

        # 6. tokens only increase: store-wide, or per thread on a partitioned store (SPEC §16.2:
        # tokens are unique store-wide and increase per thread).
        issued = [
            {"token": r["token"], "t0": r["t0"], "t1": r["t1"], "thread_id": r.get("thread_id")}
            for r in by_kind["lease"] + by_kind["claim"]
        ] + self.sup_tokens
        tokens = Counter(i["token"] for i in issued)
        for token, n in tokens.items():
            if n > 1:
                v.append(f"token {token} issued {n} times")
        groups: dict[Any, list[dict[str, Any]]] = defaultdict(list)
        for i in issued:
            groups[i["thread_id"] if self.env.tokens_per_thread else None].append(i)
        for group in groups.values():
            by_end = sorted(group, key=lambda i: i["t1"])
            k = 0
            highest = 0
            for call in sorted(group, key=lambda i: i["t0"]):
                while k < len(by_end) and by_end[k]["t1"] < call["t0"]:
                    highest = max(highest, by_end[k]["token"])
                    k += 1
                if call["token"] <= highest:
                    v.append(
                        f"token {call['token']} issued after token {highest} had been returned"
                    )

        # every acknowledged lease of an entry got a greater token than the one before.
        leases_by_entry: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for r in by_kind["lease"]:
            leases_by_entry[r["entry_id"]].append(r)
        for entry_id, leases in leases_by_entry.items():
            leases.sort(key=lambda r: r["t0"])
            for a, b in itertools.pairwise(leases):
                if b["t0"] > a["t1"] and b["token"] <= a["token"]:
                    v.append(
                        f"entry {entry_id}: lease token went from {a['token']} to {b['token']}"
                    )

        # NotFound / StoreError are imported for type completeness of worker logs.
        _ = (NotFound, StoreError)
