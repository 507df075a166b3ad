"""The measuring harness shared by every benchmark family.

A *workload* is a class with ``setup()``, ``op()`` and ``close()`` (or their ``async``
versions). ``op()`` performs one cycle and may return a breakdown ``{call name: ns}``; keys that
start with ``_`` are *excluded* work (done inside the cycle but not part of what is measured,
e.g. the submit that feeds a worker cycle): their time is subtracted from the cycle's latency
and from the busy time used for its rate.

`measure_interleaved` runs each workload as ``concurrency`` workers, each in its **own process
with its own connection** (``spawn`` start method, nothing shared with the parent), and measures
the workloads of one comparison in alternating rounds (the machine is shared and noisy: every
system sees the same noise). In a round each worker warms up, the workers line up on a barrier,
then each runs cycles back to back for the round's seconds. Throughput is ``concurrency x
cycles / busy seconds`` over all workers and rounds (busy = measured time, excluded work
removed); latencies are pooled over
all workers and rounds.

Every round is also watched for **foreign CPU**: the cores the machine spent on anything but the
benchmark's own process tree (its clients, pgbench) and its PostgreSQL server (`ForeignCpu`,
read from ``/proc``). On a shared machine a ratio taken beside more than `FOREIGN_LIMIT` core of
other work is not comparable: the other work slows whichever system it happens to overlap.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import multiprocessing as mp
import os
import statistics
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

PAYLOAD_BYTES = 1024

# ~1 KB of agent state: a short chat transcript, the same for every checkpointer measured.
STATE: dict[str, Any] = {
    "messages": [
        {"role": "user", "content": "Summarise the quarterly report in three bullet points."},
        {
            "role": "assistant",
            "content": (
                "Revenue grew 12% on the back of the new subscription tier; costs were flat "
                "apart from a one-off migration charge; the outlook was raised for the year."
            ),
        },
        {"role": "user", "content": "Now draft an email to the team with those points."},
        {"role": "assistant", "content": "x" * 560},
    ],
    "step": 3,
}

# A small job payload, the same for every queue measured.
JOB_INPUT: dict[str, Any] = {"prompt": "Summarise the quarterly report.", "user": "u-1234"}


FOREIGN_LIMIT = 0.2
"""Cores of other work beside which a figure is not comparable (issue 38)."""


def ns() -> int:
    return time.perf_counter_ns()


async def settled(value: Any) -> Any:
    """``value`` awaited if a workload's method returned an awaitable (async workloads), else
    as is: one loop can drive sync and async workloads alike."""
    return await value if inspect.isawaitable(value) else value


@dataclass
class Sample:
    """What one worker process measured."""

    cycles: int
    busy_ns: int
    latencies_ns: list[int]
    parts: dict[str, list[int]]
    retries: int = 0


@dataclass
class Result:
    """One row of the results: a system doing one cycle at one concurrency."""

    family: str
    system: str
    cycle: str
    concurrency: int
    ops_per_s: float
    p50_ms: float
    p99_ms: float
    cycles: int
    parts: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    """call -> (p50 ms, p99 ms, mean ms)."""
    note: str = ""
    skipped: str = ""
    foreign_cores: float | None = None
    """CPU (cores) the machine spent on other work while this row was measured; None: not
    measured."""
    rounds: list[Round] = field(default_factory=list)
    """Each alternating round's figures (`measure_interleaved`); empty when not interleaved."""
    server_ms_per_op: float | None = None
    """The server's CPU milliseconds per operation over the rounds (/proc), None: not read."""

    @property
    def comparable(self) -> bool:
        """False when the row was measured beside more than `FOREIGN_LIMIT` core of other work."""
        return self.foreign_cores is None or self.foreign_cores <= FOREIGN_LIMIT

    @property
    def mean_ms(self) -> float:
        return 1000.0 * self.concurrency / self.ops_per_s if self.ops_per_s else 0.0


def ratio_cell(ours: Result, other: Result, digits: int = 2, suffix: str = "x") -> str:
    """``ours / other`` for a table, marked "not comparable" when either side was measured
    beside more than `FOREIGN_LIMIT` core of foreign CPU."""
    if not ours.ops_per_s or not other.ops_per_s:
        return "n/a"
    text = f"{ours.ops_per_s / other.ops_per_s:.{digits}f}{suffix}"
    if ours.comparable and other.comparable:
        return text
    foreign = max(r.foreign_cores or 0.0 for r in (ours, other))
    return f"{text} (not comparable: {foreign:.2f} core foreign)"


def foreign_cell(result: Result) -> str:
    """The foreign CPU of a row, in cores ("—" when not measured)."""
    if result.foreign_cores is None:
        return "—"
    return f"{result.foreign_cores:.2f}" + ("" if result.comparable else " (not comparable)")


def percentile(values: list[int] | list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return float(ordered[index])


def summarize(
    family: str,
    system: str,
    cycle: str,
    concurrency: int,
    samples: list[Sample],
    note: str = "",
    foreign_cores: float | None = None,
) -> Result:
    latencies = [v for s in samples for v in s.latencies_ns]
    busy = sum(s.busy_ns for s in samples)
    rate = concurrency * sum(s.cycles for s in samples) / (busy / 1e9) if busy else 0.0
    parts: dict[str, tuple[float, float, float]] = {}
    names: list[str] = []
    for s in samples:
        for name in s.parts:
            if name not in names:
                names.append(name)
    for name in names:
        values = [v for s in samples for v in s.parts.get(name, [])]
        parts[name] = (
            percentile(values, 0.5) / 1e6,
            percentile(values, 0.99) / 1e6,
            statistics.fmean(values) / 1e6 if values else 0.0,
        )
    retries = sum(s.retries for s in samples)
    if retries:
        note = (note + "; " if note else "") + f"{retries} empty fetches retried"
    return Result(
        family=family,
        system=system,
        cycle=cycle,
        concurrency=concurrency,
        ops_per_s=rate,
        p50_ms=percentile(latencies, 0.5) / 1e6,
        p99_ms=percentile(latencies, 0.99) / 1e6,
        cycles=len(latencies),
        parts=parts,
        note=note,
        foreign_cores=foreign_cores,
    )


# --- foreign CPU, from /proc ---------------------------------------------------------------


def process_tree(pid: int) -> list[int]:
    """``pid`` and its live descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    # pid (comm) state ppid ...: comm may hold spaces, so split after its ')'
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(children.get(p, []))
    return found


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds of ``pids``, their ended children's included (a pgbench run or a backend
    that ends within a round is counted in its parent's ``cutime``)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
        except (OSError, IndexError, ValueError):
            pass
    return total / ticks


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (not idle, not waiting on I/O)."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:9]]
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


def postmaster_pid(dsn: str) -> int | None:
    """The PostgreSQL server's main process when it runs on this machine: the parent of this
    connection's backend, read while the backend lives (None when it is not a local postgres)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        try:
            with open(f"/proc/{row[0]}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{parent}/comm") as f:
                local = f.read().strip() in ("postgres", "postmaster")
        except (OSError, IndexError, ValueError):
            return None
    return parent if local else None


class ForeignCpu:
    """The cores the machine spends on anything but the trees of ``roots`` (the benchmark's own
    process and its PostgreSQL server) between `start` and `stop`; the trees are read again at
    the end, so that processes started meanwhile (clients, pgbench, backends) count as own."""

    def __init__(self, roots: list[int]) -> None:
        self.roots = roots
        self._busy = self._own = self._started = 0.0

    def _own_seconds(self) -> float:
        return cpu_seconds([p for root in self.roots for p in process_tree(root)])

    def start(self) -> None:
        self._busy, self._own, self._started = busy_seconds(), self._own_seconds(), time.monotonic()

    def stop(self) -> tuple[float, float]:
        """(foreign CPU seconds, wall seconds) since `start`."""
        wall = time.monotonic() - self._started
        foreign = busy_seconds() - self._busy - (self._own_seconds() - self._own)
        return max(0.0, foreign), wall


def _load(ref: str) -> Callable[..., Any]:
    module, _, name = ref.partition(":")
    factory: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return factory


def _record(sample: Sample, started: int, parts: Mapping[str, int] | None) -> None:
    total = ns() - started
    excluded = 0
    if parts:
        for name, value in parts.items():
            if name.startswith("_"):
                excluded += value
            else:
                sample.parts.setdefault(name, []).append(value)
    sample.latencies_ns.append(total - excluded)
    sample.busy_ns += total - excluded
    sample.cycles += 1


def _measure_sync(work: Any, warmup: float, duration: float, barrier: Any) -> Sample:
    end = time.monotonic() + warmup
    while time.monotonic() < end:
        work.op()
    barrier.wait()
    work.retries = 0
    sample = Sample(0, 0, [], {})
    end = time.monotonic() + duration
    while time.monotonic() < end:
        started = ns()
        parts = work.op()
        _record(sample, started, parts)
    sample.retries = int(getattr(work, "retries", 0))
    return sample


async def _measure_async(work: Any, warmup: float, duration: float, barrier: Any) -> Sample:
    end = time.monotonic() + warmup
    while time.monotonic() < end:
        await work.op()
    barrier.wait()
    work.retries = 0
    sample = Sample(0, 0, [], {})
    end = time.monotonic() + duration
    while time.monotonic() < end:
        started = ns()
        parts = await work.op()
        _record(sample, started, parts)
    sample.retries = int(getattr(work, "retries", 0))
    return sample


async def _serve_async(work: Any, commands: Any, out: Any, index: int, barrier: Any) -> None:
    await work.setup()
    out.put((index, "ready", None))
    loop = asyncio.get_running_loop()
    try:
        while True:
            command = await loop.run_in_executor(None, commands.get)
            if command is None:
                return
            warmup, duration = command
            out.put((index, await _measure_async(work, warmup, duration, barrier), None))
    finally:
        await work.close()


def _serve_sync(work: Any, commands: Any, out: Any, index: int, barrier: Any) -> None:
    work.setup()
    out.put((index, "ready", None))
    try:
        while True:
            command = commands.get()
            if command is None:
                return
            warmup, duration = command
            out.put((index, _measure_sync(work, warmup, duration, barrier), None))
    finally:
        work.close()


def _child(
    ref: str, params: dict[str, Any], index: int, barrier: Any, commands: Any, out: Any
) -> None:
    """A worker process: set the workload up, then measure once per command until None."""
    try:
        work = _load(ref)(params, index)
        if inspect.iscoroutinefunction(work.op):
            asyncio.run(_serve_async(work, commands, out, index, barrier))
        else:
            _serve_sync(work, commands, out, index, barrier)
    except BaseException:
        with contextlib.suppress(Exception):
            barrier.abort()
        out.put((index, None, traceback.format_exc()))


class Group:
    """``concurrency`` live worker processes of one workload, measured in rounds.

    Every process is spawned and set up once (its own connection); each `round` lines them up
    on a barrier after a warm-up and measures ``duration`` seconds. Several groups measured in
    alternating rounds see the same (shared, noisy) machine, which is what makes ratios fair.
    """

    def __init__(self, ref: str, params: dict[str, Any], concurrency: int) -> None:
        ctx = mp.get_context("spawn")
        self.ref = ref
        self.concurrency = concurrency
        self.barrier = ctx.Barrier(concurrency)
        self.out: Any = ctx.Queue()
        self.commands: list[Any] = [ctx.Queue() for _ in range(concurrency)]
        self.procs = [
            ctx.Process(
                target=_child,
                args=(ref, params, i, self.barrier, self.commands[i], self.out),
                name=f"bench-{i}",
                daemon=True,
            )
            for i in range(concurrency)
        ]
        for p in self.procs:
            p.start()

    def _collect(self, timeout: float) -> list[Any]:
        got: list[Any] = []
        errors: list[str] = []
        deadline = time.monotonic() + timeout
        for _ in self.procs:
            _, value, error = self.out.get(timeout=max(1.0, deadline - time.monotonic()))
            if error is not None:
                errors.append(error)
            else:
                got.append(value)
        if errors:
            raise RuntimeError(f"{self.ref} failed:\n" + "\n".join(errors))
        return got

    def wait_ready(self, timeout: float = 120.0) -> None:
        self._collect(timeout)

    def round(self, warmup: float, duration: float, timeout: float = 120.0) -> list[Sample]:
        for q in self.commands:
            q.put((warmup, duration))
        samples: list[Sample] = self._collect(timeout + warmup + duration)
        return samples

    def stop(self) -> None:
        for q in self.commands:
            with contextlib.suppress(Exception):
                q.put(None)
        for p in self.procs:
            p.join(timeout=15)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)


@dataclass
class Round:
    """One workload's figures in one round of `measure_interleaved`."""

    ops_per_s: float
    server_cpu_s: float | None
    """CPU seconds of the PostgreSQL server's process tree (postmaster, backends, WAL writer,
    checkpointer) during the round, from /proc; None when the server is not local."""
    ops: int

    @property
    def server_ms_per_op(self) -> float | None:
        if self.server_cpu_s is None or not self.ops:
            return None
        return 1000.0 * self.server_cpu_s / self.ops


@dataclass
class Measured:
    """One workload's samples pooled over its rounds, each round's figures, and the foreign CPU
    beside them."""

    samples: list[Sample]
    foreign_cores: float
    rounds: list[Round] = field(default_factory=list)

    @property
    def server_ms_per_op(self) -> float | None:
        """The server's CPU per operation over every round (sum of CPU ÷ sum of operations)."""
        if not self.rounds or any(r.server_cpu_s is None for r in self.rounds):
            return None
        ops = sum(r.ops for r in self.rounds)
        return 1000.0 * sum(r.server_cpu_s or 0.0 for r in self.rounds) / ops if ops else None


def _round_rate(samples: list[Sample], concurrency: int) -> tuple[float, int]:
    """(ops/s, ops) of one round's samples, as `summarize` computes the pooled rate."""
    busy = sum(s.busy_ns for s in samples)
    ops = sum(s.cycles for s in samples)
    return (concurrency * ops / (busy / 1e9) if busy else 0.0), ops


def round_ratios(ours: list[Round], other: list[Round]) -> tuple[float, float, float] | None:
    """(median, min, max) of ``ours[i].ops_per_s / other[i].ops_per_s`` over the rounds both
    measured: stacks measured in the same round saw the same machine, so a round's ratio is
    fair even when the machine's speed drifts between rounds (SPEC §26, issue 49)."""
    ratios = [a.ops_per_s / b.ops_per_s for a, b in zip(ours, other, strict=False) if b.ops_per_s]
    if not ratios:
        return None
    return statistics.median(ratios), min(ratios), max(ratios)


def _server_cpu(server_pid: int | None) -> float | None:
    """CPU seconds of the server's process tree so far (its ended backends in the postmaster's
    ``cutime``); None without a local server. A round's window holds its warm-up as well, so
    the caller counts the measured seconds' share of it."""
    return None if server_pid is None else cpu_seconds(process_tree(server_pid))


def measure_interleaved(
    workloads: list[tuple[str, dict[str, Any]]],
    concurrency: int,
    *,
    rounds: int,
    warmup: float,
    duration: float,
    server_pid: int | None = None,
) -> list[Measured]:
    """Measure each workload ("module:Class", params) for ``duration`` seconds in total, split in
    ``rounds`` rounds alternating between the workloads; the pooled samples of each, with the
    foreign CPU of its rounds (own: this process's tree and ``server_pid``'s, the server's).
    ``"pgbench:<script>"`` (params ``dsn``) runs pgbench's script in the same rounds."""
    groups: list[Any] = []
    watch = ForeignCpu([os.getpid()] + ([server_pid] if server_pid else []))
    try:
        for ref, params in workloads:
            if ref.startswith("pgbench:"):
                from .pgbench import PgbenchGroup

                groups.append(PgbenchGroup(params["dsn"], ref.split(":", 1)[1], concurrency))
            else:
                groups.append(Group(ref, params, concurrency))
        for group in groups:
            group.wait_ready()
        pooled: list[list[Sample]] = [[] for _ in workloads]
        per_round: list[list[Round]] = [[] for _ in workloads]
        foreign = [0.0 for _ in workloads]
        wall = [0.0 for _ in workloads]
        for r in range(rounds):
            order = list(range(len(groups)))
            if r % 2:
                order.reverse()
            for i in order:
                watch.start()
                before = _server_cpu(server_pid)
                samples = groups[i].round(warmup if r == 0 else warmup / 3, duration / rounds)
                after = _server_cpu(server_pid)
                spent, seconds = watch.stop()
                pooled[i].extend(samples)
                rate, ops = _round_rate(samples, concurrency)
                server = None
                if before is not None and after is not None and seconds:
                    # The window holds the warm-up too; the measured share of it is counted.
                    server = (after - before) * min(1.0, duration / rounds / seconds)
                per_round[i].append(Round(rate, server, ops))
                foreign[i] += spent
                wall[i] += seconds
        return [
            Measured(samples, spent / seconds if seconds else 0.0, figures)
            for samples, spent, seconds, figures in zip(
                pooled, foreign, wall, per_round, strict=True
            )
        ]
    finally:
        for group in groups:
            group.stop()
