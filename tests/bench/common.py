"""The measuring harness shared by every benchmark family.

A *workload* is a class with ``setup()``, ``op()`` and ``close()`` (or their ``async``
versions). ``op()`` performs one cycle and may return a breakdown ``{call name: ns}``; keys that
start with ``_`` are *excluded* work (done inside the cycle but not part of what is measured,
e.g. the submit that feeds a worker cycle): their time is subtracted from the cycle's latency
and from the busy time used for its rate.

`measure` runs ``concurrency`` workers, each in its **own process with its own connection**
(``spawn`` start method, so nothing is shared with the parent), warms each up, lines them up on
a barrier, then lets each run cycles back to back for ``duration`` seconds. Throughput is
``sum over workers of cycles / busy seconds`` (busy = measured time, excluded work removed);
latencies are pooled over all workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import multiprocessing as mp
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


def ns() -> int:
    return time.perf_counter_ns()


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

    @property
    def mean_ms(self) -> float:
        return 1000.0 * self.concurrency / self.ops_per_s if self.ops_per_s else 0.0


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
) -> Result:
    latencies = [v for s in samples for v in s.latencies_ns]
    rate = sum(s.cycles / (s.busy_ns / 1e9) for s in samples if s.busy_ns)
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
    )


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


def _run_sync(work: Any, warmup: float, duration: float, barrier: Any) -> Sample:
    work.setup()
    try:
        end = time.monotonic() + warmup
        while time.monotonic() < end:
            work.op()
        barrier.wait()
        sample = Sample(0, 0, [], {})
        end = time.monotonic() + duration
        while time.monotonic() < end:
            started = ns()
            parts = work.op()
            _record(sample, started, parts)
        sample.retries = int(getattr(work, "retries", 0))
        return sample
    finally:
        work.close()


async def _run_async(work: Any, warmup: float, duration: float, barrier: Any) -> Sample:
    await work.setup()
    try:
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
    finally:
        await work.close()


def _child(
    ref: str,
    params: dict[str, Any],
    index: int,
    warmup: float,
    duration: float,
    barrier: Any,
    out: Any,
) -> None:
    try:
        work = _load(ref)(params, index)
        if inspect.iscoroutinefunction(work.op):
            sample = asyncio.run(_run_async(work, warmup, duration, barrier))
        else:
            sample = _run_sync(work, warmup, duration, barrier)
        out.put((index, sample, None))
    except BaseException:
        with contextlib.suppress(Exception):
            barrier.abort()
        out.put((index, None, traceback.format_exc()))


def measure(
    ref: str,
    params: dict[str, Any],
    concurrency: int,
    *,
    warmup: float,
    duration: float,
    timeout: float = 120.0,
) -> list[Sample]:
    """Run workload ``ref`` ("module:Class") in ``concurrency`` processes; their samples."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(concurrency)
    out = ctx.Queue()
    procs = [
        ctx.Process(
            target=_child,
            args=(ref, params, i, warmup, duration, barrier, out),
            name=f"bench-{i}",
            daemon=True,
        )
        for i in range(concurrency)
    ]
    for p in procs:
        p.start()
    samples: list[Sample] = []
    errors: list[str] = []
    deadline = time.monotonic() + timeout + warmup + duration
    try:
        for _ in procs:
            remaining = max(1.0, deadline - time.monotonic())
            _, sample, error = out.get(timeout=remaining)
            if error is not None:
                errors.append(error)
            else:
                samples.append(sample)
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
    if errors:
        raise RuntimeError(f"{ref} failed:\n" + "\n".join(errors))
    return samples
