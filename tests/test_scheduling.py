"""SPEC §15 beyond the contract suites: an `App` of handlers by kind run by a real worker
(in-process and ``durable-graph worker --app mod:app``), concurrency limits under eight
concurrent workers against real PostgreSQL and a real SQLite file, and three scheduler processes
(one killed) submitting each slot exactly once."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from durable_graph import Completed, Failed, Submission
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.model import BackoffPolicy, ClaimPolicy, QueueEntry
from durable_graph.core.scheduling import Schedule, StoredSchedule, due_slots, slot_key
from durable_graph.postgres.config import PostgresConfig
from durable_graph.postgres.store import PostgresCheckpointer
from durable_graph.sqlite.store import SqliteCheckpointer
from durable_graph.worker.app import App, HandlerTimeout
from durable_graph.worker.scheduler import Scheduler
from durable_graph.worker.sync import RunContext, Worker

BIN = Path(sys.executable).with_name("durable-graph")
TTL = timedelta(seconds=30)


def _entry(store: Checkpointer, entry_id: int, tenant: str | None = None) -> QueueEntry:
    entry = store.run_queue.entry(entry_id, tenant=tenant)
    assert entry is not None
    return entry


# --- an App of handlers by kind ------------------------------------------------------------


def test_an_app_worker_runs_each_kind_with_its_handler_and_leaves_other_kinds(
    tmp_path: Path,
) -> None:
    app = App()

    @app.handler("summarize")
    def summarize(ctx: RunContext) -> str:
        return f"summary of {ctx.input}"

    @app.handler()
    def chat(ctx: RunContext) -> str:
        return f"reply to {ctx.input}"

    with SqliteCheckpointer.open(str(tmp_path / "s.db")) as store:
        q = store.run_queue
        a = q.submit(Submission("t-a", "doc", kind="summarize")).entry_id
        b = q.submit(Submission("t-b", "hi")).entry_id
        c = q.submit(Submission("t-c", "img", kind="vision")).entry_id
        worker = Worker(store, app, poll_interval=timedelta(milliseconds=50))
        assert worker.settings.kinds == ("default", "summarize")
        reports = [worker.run_once() for _ in range(3)]
        assert [r is not None for r in reports] == [True, True, False]
        assert _entry(store, a).outcome == Completed("summary of doc")
        assert _entry(store, b).outcome == Completed("reply to hi")
        vision = _entry(store, c)  # no running worker serves "vision": it waits
        assert vision.outcome is None and vision.attempts == ()
        assert q.stats().waiting_by_kind == {"vision": 1}


def test_an_app_kinds_options_cap_attempts_set_backoff_and_time_out(tmp_path: Path) -> None:
    app = App()
    calls: list[str] = []

    @app.handler("flaky", max_attempts=2, backoff=BackoffPolicy(base=timedelta(0), jitter=0))
    def flaky(ctx: RunContext) -> str:
        calls.append("flaky")
        raise RuntimeError("down")

    @app.handler("slow", timeout=timedelta(milliseconds=50), max_attempts=1)
    def slow(ctx: RunContext) -> str:
        time.sleep(0.2)
        assert app.over_time(ctx)
        return "late"

    with SqliteCheckpointer.open(str(tmp_path / "o.db")) as store:
        q = store.run_queue
        flaky_id = q.submit(Submission("t-1", "x", kind="flaky", max_attempts=10)).entry_id
        slow_id = q.submit(Submission("t-2", "x", kind="slow", max_attempts=10)).entry_id
        worker = Worker(
            store,
            app,
            poll_interval=timedelta(milliseconds=50),
            backoff=BackoffPolicy(base=timedelta(hours=1)),
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (
            _entry(store, flaky_id).outcome is None or _entry(store, slow_id).outcome is None
        ):
            if worker.run_once() is None:
                time.sleep(0.05)
        flaky_entry = _entry(store, flaky_id)
        # The kind's cap (2) beats the entry's 10, and its zero backoff beat the worker's hour.
        # (The failure keeps the handler's traceback: issue 26.)
        assert isinstance(flaky_entry.outcome, Failed) and len(flaky_entry.attempts) == 2
        assert flaky_entry.outcome.error.endswith("RuntimeError: down")
        slow_entry = _entry(store, slow_id)
        assert isinstance(slow_entry.outcome, Failed)
        assert "timeout" in slow_entry.outcome.error
    assert calls == ["flaky", "flaky"]
    assert issubclass(HandlerTimeout, Exception)


APP_MODULE = textwrap.dedent(
    """
    from durable_graph.worker.app import App

    app = App()

    @app.handler("summarize")
    def summarize(ctx):
        return {"summary": ctx.input}

    @app.handler("translate", max_attempts=1)
    def translate(ctx):
        return {"translation": ctx.input}
    """
)


def test_the_worker_command_takes_an_app_of_several_handlers(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text(APP_MODULE)
    db = str(tmp_path / "w.db")
    with SqliteCheckpointer.open(db) as store:
        q = store.run_queue
        s = q.submit(Submission("t-1", "a", kind="summarize")).entry_id
        t = q.submit(Submission("t-2", "b", kind="translate")).entry_id
        other = q.submit(Submission("t-3", "c")).entry_id
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURABLE_GRAPH_")}
    proc = subprocess.Popen(
        [str(BIN), "--sqlite", db, "worker", "--app", "jobs:app", "--poll-interval", "0.1s"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with SqliteCheckpointer.open(db) as store:
            closed = store.run_queue.await_closed(t, timedelta(seconds=30))
            assert closed is not None and closed.outcome == Completed({"translation": "b"})
            assert _entry(store, s).outcome == Completed({"summary": "a"})
            time.sleep(0.5)
            assert _entry(store, other).outcome is None  # "default" is not served
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


# --- concurrency limits under 8 concurrent workers ------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def store_factory(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[], Checkpointer]]:
    """A function opening a new store (own connections) on one real SQLite file or one real
    PostgreSQL schema."""
    if request.param == "sqlite":
        path = str(tmp_path / "limits.db")
        SqliteCheckpointer.open(path).close()
        yield lambda: SqliteCheckpointer.open(path)
    else:
        dsn = request.getfixturevalue("pg_dsn")
        config = PostgresConfig(schema=request.getfixturevalue("pg_schema"), max_pool_size=2)
        PostgresCheckpointer.open(dsn, config).close()
        yield lambda: PostgresCheckpointer.open(dsn, config)


def test_eight_concurrent_workers_never_hold_more_leases_than_the_limits(
    store_factory: Callable[[], Checkpointer],
) -> None:
    open_store = store_factory
    tenant_limit, kind_limit, workers, per_worker = 3, 2, 8, 12
    with open_store() as admin:
        q = admin.run_queue
        q.set_limit("tenant", "acme", tenant_limit)
        q.set_limit("kind", "gpu", kind_limit)
        for i in range(60):
            q.submit(Submission(f"acme-{i}", i, tenant="acme"))
            q.submit(Submission(f"gpu-{i}", i, tenant="zeta", kind="gpu"))
    live = {"acme": 0, "gpu": 0}
    peak = {"acme": 0, "gpu": 0}
    lock = threading.Lock()
    errors: list[BaseException] = []
    leased = [0]

    def work(index: int) -> None:
        try:
            with open_store() as store:
                done = 0
                misses = 0
                while done < per_worker and misses < 200:
                    lease = store.run_queue.lease(f"w-{index}", TTL)
                    if lease is None:
                        misses += 1
                        time.sleep(0.01)
                        continue
                    name = "gpu" if lease.entry.kind == "gpu" else lease.entry.tenant
                    with lock:
                        if name in live:
                            live[name] += 1
                            peak[name] = max(peak[name], live[name])
                        leased[0] += 1
                    time.sleep(0.05)
                    with lock:  # counted down before the close frees the place
                        if name in live:
                            live[name] -= 1
                    store.run_queue.close(lease, Completed())
                    done += 1
        except BaseException as exc:  # reported below
            errors.append(exc)

    sampled = {"acme": 0, "gpu": 0, "samples": 0}
    working = threading.Event()

    def sample() -> None:
        """The store's own view: its running (live-leased) entries, read as one snapshot."""
        try:
            with open_store() as store:
                while working.is_set():
                    running = store.run_queue.entries(state="running", limit=1000)
                    acme = sum(1 for e in running if e.tenant == "acme")
                    gpu = sum(1 for e in running if e.kind == "gpu")
                    sampled["acme"] = max(sampled["acme"], acme)
                    sampled["gpu"] = max(sampled["gpu"], gpu)
                    sampled["samples"] += 1
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    working.set()
    sampler = threading.Thread(target=sample)
    sampler.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    working.clear()
    sampler.join(timeout=30)
    assert not errors, errors
    assert sampled["samples"] > 0
    assert sampled["acme"] <= tenant_limit and sampled["gpu"] <= kind_limit, sampled
    assert leased[0] == workers * per_worker
    # The limits held (the count above is at most the store's: it goes down before the close).
    assert 1 <= peak["acme"] <= tenant_limit and 1 <= peak["gpu"] <= kind_limit, peak


# --- three schedulers, one killed -----------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def scheduler_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[list[str], object]]:
    """The CLI options naming a real store, and a function opening it."""
    if request.param == "sqlite":
        path = str(tmp_path / "sched.db")
        SqliteCheckpointer.open(path).close()
        yield ["--sqlite", path], lambda: SqliteCheckpointer.open(path)
    else:
        dsn = request.getfixturevalue("pg_dsn")
        schema = request.getfixturevalue("pg_schema")
        PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema)).close()
        yield (
            ["--dsn", dsn, "--schema", schema],
            lambda: PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema)),
        )


def _slots_between(stored: StoredSchedule, end: datetime) -> list[datetime]:
    """Every slot of the schedule after its creation, up to ``end``."""
    catching_up = dataclasses.replace(stored.schedule, catch_up=True)
    return due_slots(StoredSchedule(catching_up, False, stored.created_at, None), end)


@pytest.mark.parametrize("catch_up", [False, True])
def test_three_schedulers_one_killed_submit_each_slot_exactly_once(
    scheduler_store: tuple[list[str], Callable[[], Checkpointer]], catch_up: bool
) -> None:
    options, open_store = scheduler_store
    with open_store() as store:
        store.run_queue.put_schedule(
            Schedule(
                "tick", "* * * * * *", "ticks", {"n": 1}, kind="tick", catch_up=catch_up
            )  # every second: several slot boundaries within the test
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURABLE_GRAPH_")}
    procs = [
        subprocess.Popen(
            [str(BIN), *options, "scheduler", "--interval", "0.1s", "--log-level", "warning"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    try:
        deadline = time.monotonic() + 60  # the processes start (imports, store open)
        while time.monotonic() < deadline:
            with open_store() as store:
                if store.run_queue.schedules()[0].last_slot is not None:
                    break
            time.sleep(0.2)
        time.sleep(2.5)
        procs[0].kill()  # mid-way, without a chance to clean up
        procs[0].wait(timeout=10)
        time.sleep(2.5)
    finally:
        for p in procs[1:]:
            p.send_signal(signal.SIGTERM)
        for p in procs[1:]:
            assert p.wait(timeout=30) == 0, p.stderr.read() if p.stderr else ""
    with open_store() as store:
        (stored,) = store.run_queue.schedules()
        assert stored.last_slot is not None
        entries = store.run_queue.open_entries(thread_id="ticks", limit=1000)
        keys = [e.key or "" for e in entries]
        expected = [slot_key("tick", s) for s in _slots_between(stored, stored.last_slot)]
    assert len(keys) == len(set(keys))  # no slot twice
    if catch_up:  # each slot since the schedule was added, the ones before the start included
        assert sorted(keys) == expected
    else:  # the latest only: slots missed while the processes started were skipped
        assert set(keys) <= set(expected) and max(keys) == expected[-1]
    assert len(keys) >= 3
    assert all(e.kind == "tick" and e.input == {"n": 1} for e in entries)


def test_a_scheduler_fires_only_the_latest_missed_slot_unless_catching_up(
    tmp_path: Path,
) -> None:
    now = [datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC).timestamp()]
    with SqliteCheckpointer.open(str(tmp_path / "m.db"), clock=lambda: now[0]) as store:
        q = store.run_queue
        q.put_schedule(Schedule("latest", "*/10 * * * *", "a"))
        q.put_schedule(Schedule("each", "*/10 * * * *", "b", catch_up=True))
        now[0] += 3600  # an hour of downtime: six slots missed
        fired = Scheduler(q, clock=lambda: now[0]).tick()
        by_name = {name: [f.slot for f in fired if f.name == name] for name in ("latest", "each")}
        assert by_name["latest"] == [datetime(2026, 1, 1, 13, 0, tzinfo=UTC)]
        assert len(by_name["each"]) == 6
        assert Scheduler(q, clock=lambda: now[0]).tick() == []  # nothing twice


def test_the_worker_scheduler_option_runs_the_loop_inside_the_worker(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text(APP_MODULE)
    db = str(tmp_path / "ws.db")
    with SqliteCheckpointer.open(db) as store:
        store.run_queue.put_schedule(Schedule("every", "* * * * * *", "s", "x", kind="summarize"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURABLE_GRAPH_")}
    proc = subprocess.Popen(
        [str(BIN), "--sqlite", db, "worker", "--app", "jobs:app", "--scheduler",
         "--poll-interval", "0.1s"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        done: list[QueueEntry] = []
        while time.monotonic() < deadline and not done:
            with SqliteCheckpointer.open(db) as store:
                done = store.run_queue.entries(state="completed", thread_id="s")
            time.sleep(0.2)
        assert done and done[0].outcome == Completed({"summary": "x"})
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_claim_policy_is_untouched_by_apps() -> None:
    # An App is a handler like any other for the worker's own options.
    app = App()
    app.handler()(lambda ctx: None)
    from durable_graph.memory.store import InMemoryCheckpointer

    worker = Worker(InMemoryCheckpointer(), app, claim_policy=ClaimPolicy())
    assert worker.claim_policy == ClaimPolicy()
    _ = psycopg  # the PostgreSQL fixtures come from conftest


# --- the dashboard's scheduling page ----------------------------------------------------------


def test_the_dashboard_shows_kinds_limits_and_schedules_with_their_next_run(
    tmp_path: Path,
) -> None:
    import urllib.request

    from dashboard_support import serving

    with SqliteCheckpointer.open(str(tmp_path / "d.db")) as store:
        q = store.run_queue
        q.submit(Submission("t-1", "x", kind="summarize"))
        q.submit(Submission("t-2", "x", kind="summarize", tenant="acme"))
        q.submit(Submission("t-3", "x", kind="vision <b>"))
        q.set_limit("tenant", "acme", 5)
        q.set_limit("kind", "summarize", 2)
        lease = q.lease("w", TTL, kinds=["summarize"])
        assert lease is not None
        q.put_schedule(Schedule("nightly", "0 3 * * *", "report", timezone="Europe/Paris"))
        with (
            serving(store) as base,
            urllib.request.urlopen(f"{base}/scheduling", timeout=10) as response,
        ):
            html = response.read().decode()
    assert "<h2>Waiting by kind</h2>" in html
    assert "<td>summarize</td><td>1</td>" in html  # one of the two is leased
    assert "vision &lt;b&gt;" in html  # shown as text
    assert "<td>kind</td><td>summarize</td><td>1</td><td>2</td>" in html  # live / max
    assert "<td>tenant</td><td>acme</td>" in html
    assert "<td>nightly</td><td><code>0 3 * * *</code></td><td>Europe/Paris</td>" in html
    # the next run: 03:00 in Paris, i.e. 02:00 or 01:00 UTC
    assert " 02:00:00" in html or " 01:00:00" in html
    assert "latest only" in html
