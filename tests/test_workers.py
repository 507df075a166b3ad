"""The worker registry as the workers write it (issue 26 item 13): a running worker, sync or
async, beats while idle and while busy, says "stopped" on a clean stop; `durable-graph workers`
lists it; a version 7 SQLite file gains the registry. The store calls themselves are in the
contract suites (testkit/contract/run_queue/workers.py)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from durable_graph import ANY, Commit, Schedule, Submission
from durable_graph.aio import AsyncInMemoryCheckpointer
from durable_graph.core.errors import ValidationError
from durable_graph.core.workers import WorkerBeat
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.sqlite import SCHEMA_VERSION, SqliteCheckpointer
from durable_graph.worker.aio import AsyncRunContext, AsyncWorker
from durable_graph.worker.sync import RunContext, Worker
from upgrade.store_driver import OLD_CRON, OLD_CRON_INPUT, OLD_CRON_RECORD

QUICK: dict[str, Any] = {
    "heartbeat_every": timedelta(milliseconds=50),
    "poll_interval": timedelta(milliseconds=50),
}


def _until(check: Callable[[], bool], what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _states(store: Any) -> dict[str, str]:
    return {w.holder: w.state for w in store.run_queue.workers()}


def test_a_sync_worker_is_listed_idle_then_busy_then_leaves_on_stop() -> None:
    store = InMemoryCheckpointer()
    running = threading.Event()
    finish = threading.Event()

    def handler(ctx: RunContext) -> Any:
        running.set()
        assert finish.wait(10)
        return "done"

    worker = Worker(store, handler, holder="w-sync", kinds=["report"], **QUICK)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        _until(lambda: _states(store).get("w-sync") == "idle", "never listed idle")
        (seen,) = store.run_queue.workers()
        assert seen.kinds == ("report",) and seen.pid > 0 and seen.host
        store.run_queue.submit(Submission("t-1", "go", kind="report"))
        assert running.wait(10)
        _until(lambda: _states(store).get("w-sync") == "busy", "never listed busy")
        finish.set()
        _until(lambda: _states(store).get("w-sync") == "idle", "never idle again")
        assert store.run_queue.workers()[0].started_at == seen.started_at
    finally:
        finish.set()
        worker.stop()
        thread.join(10)
    assert not thread.is_alive()
    assert _states(store) == {}  # its last beat said "stopped"
    assert store.run_queue.workers(timedelta(days=1)) == []


def test_an_async_worker_is_listed_idle_then_busy_then_leaves_on_stop() -> None:
    async def scenario() -> list[dict[str, str]]:
        seen: list[dict[str, str]] = []
        async with AsyncInMemoryCheckpointer() as store:
            running = asyncio.Event()
            finish = asyncio.Event()

            async def handler(ctx: AsyncRunContext) -> Any:
                running.set()
                await finish.wait()
                return "done"

            async def states() -> dict[str, str]:
                return {w.holder: w.state for w in await store.run_queue.workers()}

            async def until(state: str) -> None:
                deadline = time.monotonic() + 10
                while (await states()).get("w-async") != state:
                    assert time.monotonic() < deadline, f"never listed {state}"
                    await asyncio.sleep(0.02)

            worker = AsyncWorker(store, handler, holder="w-async", **QUICK)
            task = asyncio.create_task(worker.run())
            await until("idle")
            seen.append(await states())
            await store.run_queue.submit(Submission("t-1", "go"))
            await asyncio.wait_for(running.wait(), 10)
            await until("busy")
            seen.append(await states())
            finish.set()
            await until("idle")
            worker.stop()
            await asyncio.wait_for(task, 10)
            seen.append(await states())
        return seen

    assert asyncio.run(scenario()) == [{"w-async": "idle"}, {"w-async": "busy"}, {}]


def test_a_failing_heartbeat_does_not_stop_the_worker(caplog: pytest.LogCaptureFixture) -> None:
    store = InMemoryCheckpointer()
    done = threading.Event()

    def refuse(beat: WorkerBeat) -> Any:
        raise ValidationError("registry refused")

    store.run_queue.worker_heartbeat = refuse  # type: ignore[method-assign]
    worker = Worker(store, lambda ctx: done.set(), **QUICK)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        store.run_queue.submit(Submission("t-1", "go"))
        assert done.wait(10)
    finally:
        worker.stop()
        thread.join(10)
    assert "heartbeat not recorded: registry refused" in caplog.text


def test_heartbeat_every_is_checked() -> None:
    store = InMemoryCheckpointer()
    for bad in (timedelta(0), timedelta(hours=2), 5):
        with pytest.raises(ValidationError, match="heartbeat_every"):
            Worker(store, lambda ctx: None, heartbeat_every=bad)  # type: ignore[arg-type]


def _cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "durable_graph.cli", *args], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_workers_command_lists_idle_and_busy_workers(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteCheckpointer.open(path) as store:
        store.run_queue.worker_heartbeat(WorkerBeat("w-a", "host-1", 11, None, "idle"))
        store.run_queue.worker_heartbeat(WorkerBeat("w-b", "host-2", 12, ("mail",), "busy"))
        store.run_queue.worker_heartbeat(WorkerBeat("w-c", "host-2", 13, None, "stopped"))
    out = _cli("workers", "--sqlite", str(path))
    lines = out.splitlines()
    assert lines[0].split()[:5] == ["HOLDER", "STATE", "HOST", "PID", "KINDS"]
    assert lines[1].split()[:5] == ["w-a", "idle", "host-1", "11", "all"]
    assert lines[2].split()[:5] == ["w-b", "busy", "host-2", "12", "mail"]
    assert "w-c" not in out
    assert lines[-1] == "2 worker(s): 1 busy, 1 idle"
    listed = json.loads(_cli("workers", "--sqlite", str(path), "--json"))
    assert [(w["holder"], w["state"], w["kinds"]) for w in listed] == [
        ("w-a", "idle", None),
        ("w-b", "busy", ["mail"]),
    ]


def test_the_workers_command_reads_one_page_and_says_how_to_go_on(tmp_path: Path) -> None:
    # Issue 37 item 9: the registry is read a page at a time.
    path = tmp_path / "s.db"
    with SqliteCheckpointer.open(path) as store:
        for i in range(5):
            store.run_queue.worker_heartbeat(WorkerBeat(f"w-{i}", "h", i, None, "idle"))
    base = [sys.executable, "-m", "durable_graph.cli", "workers", "--sqlite", str(path)]
    first = subprocess.run([*base, "--limit", "3", "--json"], capture_output=True, text=True)
    assert [w["holder"] for w in json.loads(first.stdout)] == ["w-0", "w-1", "w-2"]
    shown = subprocess.run([*base, "--limit", "3"], capture_output=True, text=True)
    assert shown.returncode == 0 and "more may follow: --after w-2" in shown.stderr
    rest = json.loads(_cli("workers", "--sqlite", str(path), "--after", "w-2", "--json"))
    assert [w["holder"] for w in rest] == ["w-3", "w-4"]


def test_the_workers_command_says_when_none_beat(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    SqliteCheckpointer.open(path).close()
    out = _cli("workers", "--sqlite", str(path), "--seen-within", "2m")
    assert out == "no worker beat in the last 120s\n"


def test_a_version_7_sqlite_file_gains_the_worker_registry(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = SqliteCheckpointer.open(path)
    entry_id = store.run_queue.submit(Submission("t-1", "go")).entry_id
    store.close()
    with sqlite3.connect(path) as raw:  # what version 7 had
        raw.execute("DROP TABLE workers")
        raw.execute("DROP TABLE items")  # version 8's (migrate_v8.sql)
        raw.execute("ALTER TABLE threads DROP COLUMN deleted_at")  # version 9's
        raw.execute("DROP TABLE item_vectors")  # version 11's (migrate_v11.sql)
        raw.execute("DROP TABLE thread_ttls")  # version 10's (migrate_v10.sql)
        raw.execute("PRAGMA user_version = 7")
    with SqliteCheckpointer.open(path) as store:
        assert [e.entry_id for e in store.run_queue.open_entries()] == [entry_id]
        store.run_queue.worker_heartbeat(WorkerBeat("w-1", "h", 1, None, "idle"))
        assert [w.holder for w in store.run_queue.workers()] == ["w-1"]
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 12


def test_a_version_10_sqlite_file_gains_thread_ttls(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with SqliteCheckpointer.open(path) as store:
        claim = store.claim("t-1", "h")
        store.commit(claim, Commit("c1", None, "run-1", {}))
        store.release_claim(claim)
    with sqlite3.connect(path) as raw:  # what version 10 had
        raw.execute("DROP TABLE item_vectors")  # version 11's (migrate_v11.sql)
        raw.execute("DROP TABLE thread_ttls")
        raw.execute("PRAGMA user_version = 10")
    with SqliteCheckpointer.open(path) as store:
        ttl = store.set_thread_ttl("t-1", 30, "keep_latest")
        assert ttl is not None and ttl == store.thread_ttl("t-1")
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 12


def test_a_version_11_sqlite_file_gains_item_vectors(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with SqliteCheckpointer.open(path) as store:
        store.run_queue.put_item(("memories",), "old", {"v": 1})
    with sqlite3.connect(path) as raw:  # what version 11 had
        raw.execute("DROP TABLE item_vectors")
        raw.execute("PRAGMA user_version = 11")
    with SqliteCheckpointer.open(path) as store:
        store.run_queue.put_indexed_item(("memories",), "new", {"v": 2}, {"$": [1.0, 0.0]})
        found = store.run_queue.search_items_by_vector(("memories",), [1.0, 0.0])
        assert [(s.item.key, s.score) for s in found] == [("new", 1.0), ("old", None)]
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 12


def test_a_version_8_sqlite_file_gains_the_item_store(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = SqliteCheckpointer.open(path)
    entry_id = store.run_queue.submit(Submission("t-1", "go")).entry_id
    store.close()
    with sqlite3.connect(path) as raw:  # what version 8 had
        raw.execute("DROP TABLE items")
        raw.execute("ALTER TABLE threads DROP COLUMN deleted_at")  # version 9's
        raw.execute("DROP TABLE item_vectors")  # version 11's (migrate_v11.sql)
        raw.execute("DROP TABLE thread_ttls")  # version 10's (migrate_v10.sql)
        raw.execute("PRAGMA user_version = 8")
    with SqliteCheckpointer.open(path) as store:
        assert [e.entry_id for e in store.run_queue.open_entries()] == [entry_id]
        store.run_queue.put_item(("memories",), "k", {"v": 1})
        got = store.run_queue.get_item(("memories",), "k")
        assert got is not None and got.value == {"v": 1}
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 12


def test_a_version_9_sqlite_file_gains_thread_deletion_times(tmp_path: Path) -> None:
    """Migration v9 -> v10 (D241): a tombstone of before it counts as deleted at the upgrade, so
    a schedule made before the upgrade never fires into it; live threads were never deleted."""
    path = tmp_path / "old.db"
    with SqliteCheckpointer.open(path) as store:
        for thread_id in ("gone", "kept"):
            claim = store.claim(thread_id, "w")
            store.commit(claim, Commit("c1", None, "r1", {}))
            store.release_claim(claim)
        store.run_queue.put_schedule(Schedule("s", "* * * * * *", "gone", tenant="a"))
        store.delete_thread("gone")
        store.run_queue.put_schedule(Schedule(OLD_CRON, "0 3 * * *", "c", OLD_CRON_INPUT))
    with sqlite3.connect(path) as raw:  # what version 9 had
        raw.execute("ALTER TABLE threads DROP COLUMN deleted_at")
        raw.execute("DROP TABLE item_vectors")  # version 11's (migrate_v11.sql)
        raw.execute("DROP TABLE thread_ttls")  # version 10's
        raw.execute("PRAGMA user_version = 9")
    with SqliteCheckpointer.open(path) as store:
        schedule = store.run_queue.schedules()[0]
        slot = schedule.created_at.replace(microsecond=0) + timedelta(seconds=1)
        time.sleep(max(0.0, (slot - datetime.now(UTC)).total_seconds()) + 0.05)
        assert store.run_queue.fire_schedule("s", slot) is None
        assert store.run_queue.open_entries(tenant=ANY) == []
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 12
        rows = dict(raw.execute("SELECT thread_id, deleted_at FROM threads").fetchall())
        assert rows["gone"] is not None and rows["kept"] is None
    with SqliteCheckpointer.open(path) as store:  # a cron of before D242: a run request now
        (cron,) = [s for s in store.run_queue.schedules() if s.schedule.name == OLD_CRON]
        request = OLD_CRON_INPUT["langgraph"]
        assert cron.schedule.input == {
            "langgraph": {**request, "service": {"after_seq": 0, "cron": OLD_CRON_RECORD}}
        }
