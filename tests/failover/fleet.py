"""A fleet riding through a failover: 8 worker "machines" (each in its own network namespace) and
2 producers on a primary with a synchronous standby; mid-run the primary is killed (SIGKILL, all
its processes), the standby promoted, and one machine is cut off for longer than a lease ttl.

It reuses the chaos supervisor (`tests/chaos/supervisor.py`) for the workers, the worker kills
and the SPEC §4-§5 checks, and adds what a failover must also keep:

- every acknowledged commit is in its thread's final history, every acknowledged close left the
  outcome it wrote (nothing acknowledged is lost; the chaos checks cover acknowledged submits);
- entry ids strictly increase: a submit that started after another returned got a greater id
  (the token check of the chaos supervisor does the same for claims and leases, across the
  failover and so across the promoted standby's sequence);
- every store call that failed did so within ``connection_timeout + call_timeout`` (+ slack for
  the rollback), with `ProcessingError`;
- every worker machine made an acknowledged close after the promotion, with no restart by the
  supervisor in between (the workers recover by themselves).

Throughput is measured from the workers' close records: before the kill, during the outage and
recovery (kill .. kill + `RECOVERY_WINDOW`), and after.
"""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from chaos.supervisor import WORKER, ChaosPlan, Env, Supervisor
from durable_graph import ANY, Mode, ProcessingError, Submission

RECOVERY_WINDOW = 10.0
"""Seconds after the kill counted as "during" the failover in the throughput figures."""


@dataclass
class FleetPlan:
    seconds: float
    """How long producers submit; then the fleet drains the queue."""
    threads: int
    workers: int = 8
    producers: int = 2
    failover_at: float = 0.5
    """Fraction of ``seconds`` at which the primary is killed."""
    failover_delay: float = 2.0
    """Seconds between the kill and the promotion (failure detection by an operator/tool)."""
    partition_at: float = 0.25
    partition_seconds: float = 5.0
    """Longer than the workers' lease and claim ttl (1.5 s): others must take over its work."""
    kill_every: tuple[float, float] = (6.0, 12.0)
    backlog: int = 48
    """Producers keep about this many entries open, so the workers never idle."""
    cancel_every: float = 5.0
    drain_seconds: float = 90.0
    call_bound: float = 3.0
    """``connection_timeout + call_timeout`` of the workers and producers (SPEC §6)."""
    seed: int = 0


@dataclass
class FleetEnv:
    env: Env
    kill_primary: Any
    promote: Any
    netns: list[Any] = field(default_factory=list)
    """One namespace per worker slot (empty: no namespaces here, no partition)."""
    slot_cfgs: list[dict[str, Any]] = field(default_factory=list)
    open_producer_store: Any = None


@dataclass
class Figures:
    before: float = 0.0
    during: float = 0.0
    after: float = 0.0
    outage: float = 0.0
    """Kill -> first successful store call of any worker or producer."""
    recovery: float = 0.0
    """Kill -> first acknowledged close."""
    slowest_failed_call: float = 0.0
    failed_calls: int = 0
    closes: int = 0
    token_jump: tuple[int, int] = (0, 0)
    """Highest token returned before the kill, lowest issued after the promotion."""
    entry_id_jump: tuple[int, int] = (0, 0)

    def line(self) -> str:
        return (
            f"jobs/s before={self.before:.1f} during={self.during:.1f} after={self.after:.1f} "
            f"outage={self.outage:.2f}s recovery={self.recovery:.2f}s "
            f"failed_calls={self.failed_calls} slowest_failed_call={self.slowest_failed_call:.2f}s "
            f"closes={self.closes} tokens {self.token_jump[0]}->{self.token_jump[1]} "
            f"entry ids {self.entry_id_jump[0]}->{self.entry_id_jump[1]}"
        )


class Fleet(Supervisor):
    def __init__(self, plan: FleetPlan, fenv: FleetEnv, workdir: Any) -> None:
        super().__init__(
            ChaosPlan(
                backend="postgres-failover",
                entries=0,
                threads=plan.threads,
                workers=plan.workers,
                kill_every=plan.kill_every,
                seed=plan.seed,
            ),
            fenv.env,
            workdir,
        )
        self.fplan = plan
        self.fenv = fenv
        self.lock = threading.Lock()
        self.submit_times: list[dict[str, Any]] = []
        self.producer_failures: list[float] = []
        self.producer_ok: list[float] = []
        self.marks: dict[str, float] = {}
        self.figures = Figures()
        self.thread_ids = [f"fleet-{i}" for i in range(plan.threads)]
        self.stop_producing = threading.Event()

    # -- workers: every slot a machine of its own -------------------------------------------

    def spawn(self, slot: int) -> None:
        if not self.fenv.netns:
            super().spawn(slot)
            return
        self.incarnation[slot] += 1
        wid = f"w{slot}-{self.incarnation[slot]}"
        cfg = dict(self.fenv.slot_cfgs[slot])
        cfg.update(
            worker=wid,
            log=str(self.dir / f"{wid}.log"),
            stop=str(self.stop_file),
            seed=self.rng.randrange(2**32),
        )
        argv = self.fenv.netns[slot].command([sys.executable, str(WORKER), json.dumps(cfg)])
        err = open(self.dir / f"{wid}.stderr", "wb")  # noqa: SIM115
        self.procs[slot] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)

    # -- producers ----------------------------------------------------------------------------

    def call(self, fn: Any) -> Any:
        """A producer's call, retried through the outage; each failure timed."""
        deadline = time.monotonic() + 120.0
        while True:
            started = time.monotonic()
            try:
                result = fn()
            except ProcessingError:
                with self.lock:
                    self.producer_failures.append(time.monotonic() - started)
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
                continue
            with self.lock:
                self.producer_ok.append(time.time())
            return result

    def produce(self, index: int) -> None:
        try:
            self._produce(index)
        except Exception as exc:  # a producer that gives up fails the run, it does not hide
            with self.lock:
                self.result.violations.append(f"producer {index} stopped: {exc!r}")

    def _produce(self, index: int) -> None:
        rng = random.Random(self.fplan.seed * 1000 + index)
        store = self.call(self.fenv.open_producer_store)
        n = itertools.count()
        try:
            while not self.stop_producing.is_set():
                backlog = len(self.call(lambda: store.run_queue.open_entries(tenant=ANY)))
                for _ in range(max(0, self.fplan.backlog // self.fplan.producers - backlog // 2)):
                    if self.stop_producing.is_set():
                        break
                    self.submit(store, rng, f"p{index}-{next(n)}")
                time.sleep(0.05)
        finally:
            store.close()

    def submit(self, store: Any, rng: random.Random, key: str) -> None:
        thread_id = rng.choice(self.thread_ids)
        tenant = rng.choice([None, "ta"])
        mode = Mode.INTERRUPT if rng.random() < 0.03 else Mode.ENQUEUE
        submission = Submission(
            thread_id, {"key": key}, tenant=tenant, key=key, mode=mode, max_attempts=10
        )
        # t0 is the first try's start: the id check then only compares with submits answered
        # before any try began, which holds whichever try the store took.
        t0 = time.time()
        ticket = self.call(lambda: store.run_queue.submit(submission))
        t1 = time.time()
        with self.lock:
            self.tickets[ticket.entry_id] = tenant
            self.submissions.append(submission)
            self.submit_times.append(
                {
                    "entry_id": ticket.entry_id,
                    "t0": t0,
                    "t1": t1,
                    "existing": ticket.existing,
                    "thread_id": thread_id,
                }
            )

    # -- the run ------------------------------------------------------------------------------

    def run_fleet(self) -> tuple[Any, Figures]:
        plan = self.fplan
        store = self.call(self.env.open_store)
        for slot in range(plan.workers):
            self.spawn(slot)
        producers = [
            threading.Thread(target=self.produce, args=(i,), name=f"producer-{i}", daemon=True)
            for i in range(plan.producers)
        ]
        failover = threading.Thread(target=self.failover, name="failover", daemon=True)
        started = time.time()
        self.marks["start"] = started
        for p in producers:
            p.start()
        next_kill = time.monotonic() + self.rng.uniform(*plan.kill_every)
        next_cancel = time.monotonic() + plan.cancel_every
        failover_at = started + plan.failover_at * plan.seconds
        partition_at = started + plan.partition_at * plan.seconds if self.fenv.netns else None
        healed_at: float | None = None
        next_look = 0.0
        recovering = False  # no worker kills from the kill of the primary until all recovered
        try:
            while time.time() - started < plan.seconds:
                now = time.time()
                if failover.ident is None and now >= failover_at:
                    failover.start()
                    recovering = True
                if recovering and "promote" in self.marks and now >= next_look:
                    next_look = now + 1.0
                    recovering = not self.all_recovered()
                if partition_at is not None and now >= partition_at:
                    partition_at = None
                    self.fenv.netns[0].cut()
                    self.marks["cut"] = time.time()
                    healed_at = now + plan.partition_seconds
                    self.result.partitions += 1
                if healed_at is not None and now >= healed_at:
                    self.fenv.netns[0].heal()
                    self.marks["heal"] = time.time()
                    healed_at = None
                if time.monotonic() >= next_kill:
                    next_kill = time.monotonic() + self.rng.uniform(*plan.kill_every)
                    if not recovering:
                        self.kill_one()
                # Not between kill and promotion: the supervisor's own retried reads would wait.
                if time.monotonic() >= next_cancel and ("kill" in self.marks) <= (
                    "promote" in self.marks
                ):
                    next_cancel = time.monotonic() + plan.cancel_every
                    self.cancel_one(store)
                time.sleep(0.05)
            self.stop_producing.set()
            self.marks["stop"] = time.time()
            if failover.ident is not None:
                failover.join()
            for p in producers:
                p.join(timeout=150)
            drain_until = time.monotonic() + plan.drain_seconds
            while time.monotonic() < drain_until:
                if not self.call(lambda: store.run_queue.open_entries(tenant=ANY)):
                    break
                time.sleep(0.2)
        finally:
            self.stop_producing.set()
            if healed_at is not None:
                self.fenv.netns[0].heal()
            self.stop_file.write_text("stop")
            for proc in self.procs.values():
                try:
                    proc.wait(timeout=15)
                except Exception:
                    proc.kill()
                    proc.wait()
        self.result.entries = len(self.tickets)
        self.verify(store)
        self.verify_failover(store)
        store.close()
        return self.result, self.figures

    def failover(self) -> None:
        """Its own thread, so that no retried call of the supervisor delays the promotion."""
        try:
            self.fenv.kill_primary()
            self.marks["kill"] = time.time()
            time.sleep(self.fplan.failover_delay)
            self.fenv.promote()
            self.marks["promote"] = time.time()
        except Exception as exc:
            with self.lock:
                self.result.violations.append(f"the failover itself failed: {exc!r}")

    def all_recovered(self) -> bool:
        """Every machine closed an entry since the promotion."""
        promoted = self.marks["promote"]
        closed_by = {
            r["worker"].split("-")[0]
            for r in self.read_logs()
            if r["kind"] == "close" and r["t"] > promoted
        }
        return len(closed_by) >= self.fplan.workers

    # -- the failover checks --------------------------------------------------------------------

    def verify_failover(self, store: Any) -> None:
        v = self.result.violations
        logs = self.read_logs()
        kinds: dict[str, list[dict[str, Any]]] = {}
        for rec in logs:
            kinds.setdefault(rec["kind"], []).append(rec)

        # acknowledged commits are in the final histories (no deletes in a fleet run).
        in_history: set[str] = set()
        for thread_id in self.thread_ids:
            for cp in self.call(lambda t=thread_id: store.history(t, limit=100_000)):
                in_history.add(cp.checkpoint_id)
        for rec in kinds.get("commit", []):
            if rec["checkpoint_id"] not in in_history:
                v.append(
                    f"acknowledged commit {rec['checkpoint_id']} (entry {rec['entry_id']}, "
                    f"t={rec['t']:.3f}) is lost"
                )
        # acknowledged closes left their outcome.
        for rec in kinds.get("close", []):
            entry = self.call(
                lambda r=rec: store.run_queue.entry(
                    r["entry_id"], tenant=self.tickets[r["entry_id"]]
                )
            )
            if entry is None or type(entry.outcome).__name__ != rec["outcome"]:
                outcome = None if entry is None else entry.outcome
                v.append(f"acknowledged close of entry {rec['entry_id']} lost: now {outcome!r}")

        # entry ids strictly increase across the failover (per thread on a partitioned store,
        # SPEC §16.2: unique store-wide, increasing per thread).
        fresh = [s for s in self.submit_times if not s["existing"]]
        ids = Counter(s["entry_id"] for s in fresh)
        for entry_id, n in ids.items():
            if n > 1:
                v.append(f"entry id {entry_id} issued to {n} new submissions")
        groups: dict[Any, list[dict[str, Any]]] = defaultdict(list)
        for s in fresh:
            groups[s["thread_id"] if self.env.tokens_per_thread else None].append(s)
        for group in groups.values():
            by_end = sorted(group, key=lambda s: s["t1"])
            k, highest = 0, 0
            for s in sorted(group, key=lambda s: s["t0"]):
                while k < len(by_end) and by_end[k]["t1"] < s["t0"]:
                    highest = max(highest, by_end[k]["entry_id"])
                    k += 1
                if s["entry_id"] <= highest:
                    v.append(
                        f"entry id {s['entry_id']} issued after id {highest} had been returned"
                    )

        # failed calls stayed within the documented bound (+0.5 s for the rollback, scheduling).
        failed = [r["seconds"] for r in kinds.get("call_failed", [])] + self.producer_failures
        bound = self.fplan.call_bound + 0.5
        for seconds in failed:
            if seconds > bound:
                v.append(f"a failed call took {seconds:.2f}s, over the {bound:.1f}s bound")

        # every machine closed an entry after the promotion, on its own.
        if "promote" not in self.marks:
            v.append("the run ended before the failover")
        else:
            after = {
                r["worker"].split("-")[0]
                for r in kinds.get("close", [])
                if r["t"] > self.marks["promote"]
            }
            for slot in range(self.fplan.workers):
                if f"w{slot}" not in after:
                    v.append(f"worker machine {slot} closed nothing after the promotion")

        self.figures = self.measure(kinds, failed)

    def measure(self, kinds: dict[str, list[dict[str, Any]]], failed: list[float]) -> Figures:
        closes = sorted(r["t"] for r in kinds.get("close", []))
        m = self.marks
        fig = Figures(closes=len(closes), failed_calls=len(failed))
        fig.slowest_failed_call = max(failed, default=0.0)

        def rate(a: float, b: float) -> float:
            return sum(1 for t in closes if a <= t < b) / (b - a) if b > a else 0.0

        if "kill" in m:
            kill = m["kill"]
            fig.before = rate(m["start"] + 3.0, kill)
            fig.during = rate(kill, kill + RECOVERY_WINDOW)
            fig.after = rate(kill + RECOVERY_WINDOW, m["stop"])
            first_close = next((t for t in closes if t > kill), None)
            fig.recovery = (first_close - kill) if first_close is not None else float("inf")
            ok_calls = [
                r["t"]
                for r in kinds.get("lease", []) + kinds.get("close", []) + kinds.get("claim", [])
            ] + self.producer_ok
            first_ok = min((t for t in ok_calls if t > kill), default=None)
            fig.outage = (first_ok - kill) if first_ok is not None else float("inf")
            promote = m.get("promote", kill)
            tokens = kinds.get("lease", []) + kinds.get("claim", [])
            fig.token_jump = (
                max((r["token"] for r in tokens if r["t1"] < kill), default=0),
                min((r["token"] for r in tokens if r["t0"] > promote), default=0),
            )
            fig.entry_id_jump = (
                max((s["entry_id"] for s in self.submit_times if s["t1"] < kill), default=0),
                min((s["entry_id"] for s in self.submit_times if s["t0"] > promote), default=0),
            )
        return fig
