"""The demo: a small three-step graph run by three worker processes, one of them killed mid-run.

`graph` is a worker handler (``durable-graph worker --app durable_graph.cli.demo:graph``): each run
goes ``plan`` (applies the entry's input: the checkpoint is marked ``{"applied": entry_id}``) →
``act`` (calls a "tool" through `RunContext.record_effect`, so a resumed attempt reuses the
recorded result) → ``summarize`` (the final checkpoint, ``next=()``). Every step commits a
checkpoint; a later attempt resumes from the step after the last one committed.

`run` drives the scenario that ``durable-graph demo`` prints: submit runs to several threads
(an INTERRUPT, and a keyed submit retried to the same ticket), start worker processes, SIGKILL
one while it is between steps, wait for every entry to close, and check that each entry's input
was applied exactly once (completed: one ``applied`` checkpoint; interrupted: none).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, TextIO

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.model import (
    ANY,
    JSON,
    Checkpoint,
    Completed,
    Event,
    EventIn,
    Interrupted,
    Mode,
    QueueEntry,
    Resume,
    Submission,
)
from durable_graph.worker.sync import RunContext

STEPS = ("plan", "act", "summarize")
STEP_DELAY_ENV = "DURABLE_GRAPH_DEMO_STEP_DELAY"
DEFAULT_STEP_DELAY = 0.4


# --- the graph ------------------------------------------------------------------------------


def _tool(request: str) -> dict[str, Any]:
    """A stand-in for a side-effecting call (an API, a payment): its result is recorded once."""
    return {
        "confirmation": uuid.uuid4().hex[:8],
        "words": len(request.split()),
        "digest": hashlib.sha256(request.encode()).hexdigest()[:12],
    }


def graph(ctx: RunContext) -> JSON:
    """Run ``plan → act → summarize`` for one queue entry, resuming after the last commit."""
    delay = float(os.environ.get(STEP_DELAY_ENV, DEFAULT_STEP_DELAY))
    entry_id = ctx.entry.entry_id
    plan = ctx.plan
    state: dict[str, Any]
    if isinstance(plan, Resume):
        state = dict(plan.checkpoint.state)  # type: ignore[arg-type]
        node = plan.checkpoint.next[0]
    else:
        previous = ctx.head.state if ctx.head is not None else None
        state = dict(previous) if isinstance(previous, dict) else {"turns": []}
        node = STEPS[0]
    request = str((ctx.input or {}).get("ask", "")) if isinstance(ctx.input, dict) else ""

    def events(step: str) -> list[EventIn]:
        return [EventIn("step", {"node": step, "entry": entry_id})]

    while True:
        time.sleep(delay)
        ctx.check()
        if node == "plan":
            turn = {"entry": entry_id, "ask": request, "plan": ["look up", "act", "reply"]}
            state = {**state, "turns": [*state.get("turns", []), turn]}
            ctx.commit(
                state,
                next=["act"],
                metadata={"step": "plan", "entry": entry_id, "applied": entry_id},
                events=events("plan"),
            )
            node = "act"
        elif node == "act":
            result = ctx.record_effect(f"act/{entry_id}", lambda: _tool(request))
            turns = [dict(t) for t in state["turns"]]
            turns[-1]["result"] = result
            state = {**state, "turns": turns}
            ctx.commit(
                state,
                next=["summarize"],
                metadata={"step": "act", "entry": entry_id},
                events=events("act"),
            )
            node = "summarize"
        else:
            turns = [dict(t) for t in state["turns"]]
            result = turns[-1].get("result") or {}
            summary = f"done: {request!r} (confirmation {result.get('confirmation')})"
            turns[-1]["summary"] = summary
            state = {**state, "turns": turns}
            ctx.commit(
                state,
                next=(),
                metadata={"step": "summarize", "entry": entry_id},
                events=events("summarize"),
            )
            return {"summary": summary, "confirmation": result.get("confirmation")}


# --- the scenario ---------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerLauncher:
    """How to start a ``durable-graph worker`` against the demo's store."""

    argv: Sequence[str]
    """The command up to and including ``worker`` (store options included)."""
    env: Mapping[str, str] = field(default_factory=dict)
    metrics_port: int | None = None
    """When set, worker ``i`` (from 1) serves Prometheus metrics on ``metrics_port + i - 1``."""


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path


class _Printer:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._n = 0

    def section(self, title: str) -> None:
        self._n += 1
        text = f"{self._n}. {title}"
        print(f"\n{text}\n{'-' * len(text)}", file=self.out, flush=True)

    def line(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        cells = [[str(c) for c in row] for row in rows]
        widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        print("  " + fmt.format(*headers).rstrip(), file=self.out)
        for row in cells:
            print("  " + fmt.format(*row).rstrip(), file=self.out)
        self.out.flush()


def _outcome_text(entry: QueueEntry) -> str:
    outcome = entry.outcome
    if outcome is None:
        return "open"
    if isinstance(outcome, Completed):
        return "completed"
    if isinstance(outcome, Interrupted):
        return f"interrupted by {outcome.by}"
    return f"{type(outcome).__name__.lower()}: {getattr(outcome, 'error', getattr(outcome, 'reason', ''))}"


def _event_text(event: Event) -> str:
    payload = event.payload
    if event.kind == "store.checkpoint" and isinstance(payload, dict):
        return f"checkpoint {_short(str(payload.get('checkpoint_id')))}"
    return json.dumps(payload, ensure_ascii=False)[:60]


def _short(value: str | None) -> str:
    return "-" if value is None else value[:8]


def _all_history(store: Checkpointer, thread_id: str) -> list[Checkpoint]:
    """The thread's whole history, oldest first."""
    newest_first: list[Checkpoint] = []
    before: str | None = None
    while True:
        page = store.history(thread_id, before=before, limit=100)
        newest_first.extend(page)
        if len(page) < 100:
            return list(reversed(newest_first))
        before = page[-1].checkpoint_id


def _applied_to(checkpoint: Checkpoint) -> int | None:
    meta = checkpoint.metadata
    value = meta.get("applied") if isinstance(meta, dict) else None
    return value if isinstance(value, int) else None


def run(
    store: Checkpointer,
    launcher: WorkerLauncher,
    *,
    store_label: str,
    workers: int = 3,
    out: TextIO = sys.stdout,
    progress: Callable[[str], None] = lambda _: None,
    timeout: float = 50.0,
) -> dict[str, Any]:
    """Run the scenario on ``store``; returns a summary whose ``"ok"`` says it verified."""
    p = _Printer(out)
    queue = store.run_queue
    started = time.monotonic()
    tag = ""
    if store.threads(limit=1) or queue.open_entries(tenant=ANY):
        tag = "-" + uuid.uuid4().hex[:4]  # a used store: keep this demo's threads apart

    p.section(f"Store: {store_label}")
    fresh = (
        "A fresh store" if not tag else f"A store used before (this demo's threads end in {tag})"
    )
    p.line(f"{fresh}; the worker processes open the same one.")

    p.section("Submitting runs")
    submitted: list[tuple[int, str, str, str, str]] = []

    def submit(thread: str, ask: str, mode: Mode = Mode.ENQUEUE, key: str | None = None) -> int:
        ticket = queue.submit(
            Submission(
                thread + tag, {"ask": ask}, key=None if key is None else key + tag, mode=mode
            )
        )
        note = "existing ticket" if ticket.existing else "new"
        submitted.append(
            (ticket.entry_id, thread + tag, mode.value, "-" if key is None else key + tag, note)
        )
        return ticket.entry_id

    submit("alice", "refund order 17")
    submit("alice", "and send the receipt by email")
    first = submit("bob", "book a table for two", key="table-42")
    again = submit("bob", "book a table for two", key="table-42")  # a client retry
    submit("carol", "draft the quarterly report")
    submit("carol", "stop: summarize the incident first", Mode.INTERRUPT)
    submit("carol", "stop again: page the on-call engineer", Mode.INTERRUPT)
    submit("dave", "translate the welcome page")
    submit("erin", "reconcile the March invoices")
    p.table(["ENTRY", "THREAD", "MODE", "KEY", "TICKET"], submitted)
    p.line()
    p.line(
        f"The keyed submit retried by a client got the same ticket: entry {first}, then entry "
        f"{again} with existing=True (nothing new was queued)."
    )
    entry_ids = sorted({row[0] for row in submitted})
    for entry_id in entry_ids:
        entry = queue.entry(entry_id)
        if entry is not None and isinstance(entry.outcome, Interrupted):
            p.line(
                f"Entry {entry_id} (INTERRUPT, not started) was closed by INTERRUPT entry "
                f"{entry.outcome.by}, which runs on {entry.thread_id} before the queued ENQUEUE entry."
            )

    p.section(f"Starting {workers} worker processes")
    logdir = Path(tempfile.mkdtemp(prefix="durable-graph-demo-"))
    env = {
        **os.environ,
        **launcher.env,
        STEP_DELAY_ENV: os.environ.get(STEP_DELAY_ENV, str(DEFAULT_STEP_DELAY)),
    }
    procs: dict[str, _Proc] = {}
    for i in range(1, workers + 1):
        name = f"demo-worker-{i}"
        log_path = logdir / f"{name}.log"
        argv = [
            *launcher.argv,
            "--app",
            "durable_graph.cli.demo:graph",
            "--holder",
            name,
            "--lease-ttl",
            "2s",
            "--claim-ttl",
            "2s",
            "--claim-renew",
            "500ms",
            "--poll-interval",
            "200ms",
            "--shutdown-deadline",
            "5s",
        ]
        if launcher.metrics_port is not None:
            port = launcher.metrics_port + i - 1
            argv += ["--metrics-port", str(port), "--metrics-sample-interval", "500ms"]
        with log_path.open("wb") as log_file:
            popen = subprocess.Popen(argv, env=env, stdout=log_file, stderr=subprocess.STDOUT)
        procs[name] = _Proc(name, popen, log_path)
        p.line(f"  {name}  pid {popen.pid}  log {log_path}")
        if launcher.metrics_port is not None:
            p.line(f"  {' ' * len(name)}  metrics http://127.0.0.1:{port}/metrics")

    killed: tuple[str, int, str, str] | None = None
    try:
        gone = _await_workers_up(store, procs, deadline=time.monotonic() + 30, progress=progress)
        for name, why in gone.items():
            p.line(f"  {name} exited before it started ({why})")
        p.section("Crashing a worker mid-run")
        if len(procs) - len(gone) < 2:
            p.line("  (fewer than two workers are up: nothing killed, the runs need the one left)")
        else:
            killed = _kill_one_mid_run(
                store, procs, entry_ids, deadline=time.monotonic() + 20, progress=progress
            )
            if killed is None:
                p.line("  (no run was caught between steps; nothing killed)")
        if killed is not None:
            name, entry_id, thread_id, step = killed
            p.line(
                f"  SIGKILL {name} (pid {procs[name].popen.pid}) while it ran entry {entry_id} "
                f"on {thread_id}, after step {step!r}."
            )
            p.line(
                "  Its lease and claim expire (2s); another worker resumes the run from that step."
            )

        p.section("Waiting for every run to close")
        waiting = time.monotonic()
        entries = _await_all(store, entry_ids, waiting + timeout, progress, procs)
        progress("")
        still_open = [e for e in entries if not e.closed]
        if still_open:
            p.line(
                f"  {len(still_open)} entries still open after {time.monotonic() - waiting:.0f}s"
                + ("" if _any_running(procs) else " (no worker is left)")
                + ": "
                + ", ".join(str(e.entry_id) for e in still_open)
            )
        else:
            p.line(f"  All {len(entries)} entries closed after {time.monotonic() - started:.1f}s.")
    finally:
        _stop_workers(procs)
    p.line(
        "  Workers stopped (SIGTERM; graceful): "
        + ", ".join(f"{name} exit {proc.popen.returncode}" for name, proc in procs.items())
    )

    p.section("Exactly once: the input of every entry applied once")
    rows = []
    ok = not still_open and not gone
    histories = {tid: _all_history(store, tid) for tid in sorted({e.thread_id for e in entries})}
    checked = []
    for entry in entries:
        applied = sum(1 for cp in histories[entry.thread_id] if _applied_to(cp) == entry.entry_id)
        expected = 1 if isinstance(entry.outcome, Completed) else 0
        good = applied == expected and entry.outcome is not None
        ok = ok and good
        resumed = len(entry.attempts) > 1
        rows.append(
            (
                entry.entry_id,
                entry.thread_id,
                _outcome_text(entry),
                len(entry.attempts),
                applied,
                "yes" if resumed else "-",
                "ok" if good else "WRONG",
            )
        )
        checked.append(
            {
                "entry_id": entry.entry_id,
                "thread_id": entry.thread_id,
                "outcome": _outcome_text(entry),
                "attempts": len(entry.attempts),
                "applied": applied,
            }
        )
    p.table(["ENTRY", "THREAD", "OUTCOME", "ATTEMPTS", "APPLIED", "RETRIED", "CHECK"], rows)
    runs = sum(1 for e in entries if isinstance(e.outcome, Completed))
    p.line()
    if ok:
        p.line(f"OK: all {runs} runs completed exactly once; interrupted entries never ran.")
    elif gone:
        p.line(
            f'FAILED: {", ".join(gone)} did not start (see "Starting {workers} worker processes").'
        )
    else:
        p.line("FAILED: some entry was not applied exactly once (see CHECK above).")

    p.section("Thread histories and events")
    for thread_id, history in histories.items():
        p.line(f"{thread_id}:")
        p.table(
            ["SEQ", "CHECKPOINT", "RUN", "ENTRY", "STEP", "NEXT"],
            [
                (
                    cp.seq,
                    _short(cp.checkpoint_id),
                    _short(cp.run_id),
                    (cp.metadata or {}).get("entry", "-") if isinstance(cp.metadata, dict) else "-",
                    (cp.metadata or {}).get("step", "-") if isinstance(cp.metadata, dict) else "-",
                    ",".join(cp.next) or "(end)",
                )
                for cp in history
            ],
        )
        events = store.events_after(thread_id, 0)
        p.line(f"  events ({len(events)}):")
        p.table(
            ["SEQ", "KIND", "RUN", "PAYLOAD"],
            [
                (
                    ev.seq,
                    ev.kind,
                    _short(ev.run_id),
                    _event_text(ev),
                )
                for ev in events
            ],
        )
        p.line()

    if killed is not None:
        name = killed[0]
        resumed_lines = []
        for proc in procs.values():
            if proc.name == name:
                continue
            with contextlib.suppress(OSError):
                for text in proc.log.read_text(errors="replace").splitlines():
                    if f"entry {killed[1]} " in text:
                        resumed_lines.append(f"  [{proc.name}] {text}")
        if resumed_lines:
            p.line(f"Worker log lines about entry {killed[1]} (after the crash):")
            for text in resumed_lines:
                p.line(text)
    p.line(f"\nDone in {time.monotonic() - started:.1f}s. Worker logs: {logdir}")
    summary = {
        "ok": ok,
        "store": store_label,
        "entries": checked,
        "killed": None
        if killed is None
        else {
            "worker": killed[0],
            "entry_id": killed[1],
            "thread_id": killed[2],
            "after_step": killed[3],
        },
        "worker_logs": str(logdir),
    }
    return summary


def _kill_one_mid_run(
    store: Checkpointer,
    procs: Mapping[str, _Proc],
    entry_ids: Sequence[int],
    *,
    deadline: float,
    progress: Callable[[str], None],
) -> tuple[str, int, str, str] | None:
    """SIGKILL the worker holding an entry whose run committed a step but has not finished."""
    queue = store.run_queue
    wanted = set(entry_ids)
    while time.monotonic() < deadline:
        progress("looking for a run between steps...")
        for entry in queue.open_entries(tenant=ANY):
            if (
                entry.entry_id not in wanted
                or entry.lease_holder is None
                or entry.lease_holder not in procs
                or not entry.attempts
            ):
                continue
            head = store.get(entry.thread_id)
            if head is None or head.next == () or head.run_id != entry.attempts[-1].run_id:
                continue
            proc = procs[entry.lease_holder]
            proc.popen.send_signal(signal.SIGKILL)
            proc.popen.wait()
            progress("")
            step = head.metadata.get("step", "?") if isinstance(head.metadata, dict) else "?"
            return proc.name, entry.entry_id, entry.thread_id, str(step)
        time.sleep(0.05)
    progress("")
    return None


def _await_workers_up(
    store: Checkpointer,
    procs: Mapping[str, _Proc],
    *,
    deadline: float,
    progress: Callable[[str], None],
) -> dict[str, str]:
    """Wait until each worker has sent its first beat (it is then leasing) or exited; returns
    the ones that exited, each with the last line of its log (a metrics port in use, say), so
    the demo says why instead of crashing the one worker left and waiting for nothing."""
    pending = dict(procs)
    gone: dict[str, str] = {}
    while pending and time.monotonic() < deadline:
        progress("waiting for the workers to start...")
        beating = {(seen.holder, seen.pid) for seen in store.run_queue.workers()}
        for name, proc in list(pending.items()):
            if (name, proc.popen.pid) in beating:
                del pending[name]
            elif proc.popen.poll() is not None:
                del pending[name]
                lines = proc.log.read_text(errors="replace").strip().splitlines() or ["no log"]
                gone[name] = f"exit {proc.popen.returncode}: {lines[-1]}"
        time.sleep(0.05)
    progress("")
    return gone


def _any_running(procs: Mapping[str, _Proc]) -> bool:
    return any(proc.popen.poll() is None for proc in procs.values())


def _await_all(
    store: Checkpointer,
    entry_ids: Sequence[int],
    deadline: float,
    progress: Callable[[str], None],
    procs: Mapping[str, _Proc],
) -> list[QueueEntry]:
    """The entries, once all are closed, the deadline has passed or no worker is left."""
    queue = store.run_queue
    while True:
        entries = [queue.entry(i) for i in entry_ids]
        known = [e for e in entries if e is not None]
        closed = sum(1 for e in known if e.closed)
        progress(f"closed {closed}/{len(known)} entries")
        if closed == len(known) or time.monotonic() >= deadline or not _any_running(procs):
            return known
        remaining = [e for e in known if not e.closed]
        queue.await_closed(remaining[0].entry_id, timedelta(milliseconds=300))


def _stop_workers(procs: Mapping[str, _Proc]) -> None:
    for proc in procs.values():
        if proc.popen.poll() is None:
            proc.popen.send_signal(signal.SIGTERM)
    for proc in procs.values():
        try:
            proc.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.popen.kill()
            proc.popen.wait()
