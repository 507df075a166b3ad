"""``langgraph.json``'s ``checkpointer.ttl`` and ``store.ttl`` under ``durable-graph serve``
(SPEC §24, issue 47), with real ``serve`` processes and LangGraph's SDK on SQLite and
PostgreSQL: the default TTL of new threads, the sweeps set up as §15 schedules of kind
``retention`` and run as queue jobs by the service's worker (a thread past its TTL deleted, or
pruned to its head with its state kept), the schedules removed when the file drops them, and a
bad setting refused naming it before the service starts."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import NotFoundError

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ValidationError
from durable_graph.core.model import Completed, Submission
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.service import retention
from durable_graph.sqlite import SqliteCheckpointer
from service_support import APP, BIN, Backend, env_of, serving, store_backend

HI = {"messages": [{"role": "user", "content": "hi"}]}
SHORT = 0.02
"""A TTL of 1.2 s, in minutes (the reference takes fractions of a minute too)."""


def _config(tmp: Path, **sections: Any) -> Path:
    """A langgraph.json serving the test app's graph, with ``sections`` (checkpointer, store)."""
    path = tmp / f"langgraph-{uuid.uuid4().hex[:8]}.json"
    given = {"dependencies": [str(APP)], "graphs": {"agent": f"{APP}/agent.py:graph"}}
    path.write_text(json.dumps({**given, **sections}), encoding="utf-8")
    return path


@contextmanager
def _store(backend: Backend) -> Iterator[Checkpointer]:
    """The backend's store, opened by this process beside the service."""
    if backend.name == "postgres":
        schema = backend.args[1]
        config = PostgresConfig(schema=schema, auto_migrate=False)
        with PostgresCheckpointer.open(backend.env["DURABLE_GRAPH_DSN"], config) as store:
            yield store
    else:
        with SqliteCheckpointer.open(backend.args[1]) as store:
            yield store


def _run_job(store: Checkpointer, given: dict[str, Any]) -> Any:
    """Submit one retention job, as its schedule's slot does, and wait for the service's
    worker to run it; its output."""
    name = retention.THREADS if given["sweep"] == "threads" else retention.ITEMS
    ticket = store.run_queue.submit(
        Submission(thread_id=name, input=given, kind=retention.KIND, key=uuid.uuid4().hex)
    )
    closed = store.run_queue.await_closed(ticket.entry_id, timedelta(seconds=60))
    assert closed is not None and isinstance(closed.outcome, Completed), closed
    return closed.outcome.output


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Backend:
    return store_backend(request.param, request, tmp_path_factory, "ret")


def test_checkpointer_ttl_gives_the_default_and_its_sweep_is_a_queue_job(
    backend: Backend, tmp_path: Path
) -> None:
    ttl = {"strategy": "delete", "default_ttl": SHORT, "sweep_interval_minutes": 1}
    config = _config(tmp_path, checkpointer={"ttl": {**ttl, "sweep_limit": 10}})
    with serving(backend, tmp_path, config=config) as url:
        client: Any = get_sync_client(url=url)
        gone = client.threads.create()["thread_id"]
        client.runs.wait(gone, "agent", input=HI)
        got = client.threads.get(gone, include=["ttl"])["ttl"]
        assert (got["strategy"], got["ttl_minutes"]) == ("delete", SHORT)
        # keep_latest asked for by the request, over the file's strategy.
        kept = client.threads.create(ttl={"ttl": SHORT, "strategy": "keep_latest"})["thread_id"]
        for _ in range(2):
            client.runs.wait(kept, "agent", input=HI)
        before = client.threads.get_state(kept)
        assert len(client.threads.get_history(kept, limit=100)) > 1
        lasting = client.threads.create(ttl=60)["thread_id"]
        with _store(backend) as store:
            schedules = {s.schedule.name: s.schedule for s in store.run_queue.schedules()}
            sweep = schedules[retention.THREADS]
            assert (sweep.kind, sweep.cron, sweep.thread_id) == (
                retention.KIND,
                "*/1 * * * *",
                retention.THREADS,
            )
            assert sweep.input == {"sweep": "threads", "limit": 10}
            assert retention.ITEMS not in schedules
            time.sleep(SHORT * 60 + 0.5)
            output = _run_job(store, {"sweep": "threads", "limit": 10})
        # This job's counts, unless the schedule's own slot (each minute, run by serve's
        # worker) swept them first: what the threads are now is the check either way.
        assert {"deleted", "kept_latest"} <= set(output), output
        with pytest.raises(NotFoundError):
            client.threads.get(gone)
        after = client.threads.get_state(kept)
        assert after["values"] == before["values"]
        assert after["checkpoint"] == before["checkpoint"]
        assert len(client.threads.get_history(kept, limit=100)) == 1
        assert client.threads.get(lasting)["thread_id"] == lasting
    # Served again without the TTL: the sweep's schedule goes with it.
    with serving(backend, tmp_path, config=_config(tmp_path)), _store(backend) as store:
        assert retention.THREADS not in {s.schedule.name for s in store.run_queue.schedules()}


def test_store_ttl_sets_up_the_item_sweep(backend: Backend, tmp_path: Path) -> None:
    config = _config(tmp_path, store={"ttl": {"default_ttl": 5, "sweep_interval_minutes": 120}})
    with serving(backend, tmp_path, config=config) as url:
        client: Any = get_sync_client(url=url)
        client.store.put_item(["notes"], "short", {"v": 1}, ttl=SHORT)
        client.store.put_item(["notes"], "long", {"v": 2}, ttl=60)
        with _store(backend) as store:
            sweep = {s.schedule.name: s.schedule for s in store.run_queue.schedules()}[
                retention.ITEMS
            ]
            assert (sweep.kind, sweep.cron) == (retention.KIND, "0 */2 * * *")
            time.sleep(SHORT * 60 + 0.5)
            assert _run_job(store, {"sweep": "items", "batch": 100}) == {"removed": 1}
        assert client.store.get_item(["notes"], "long")["value"] == {"v": 2}


@pytest.mark.parametrize(
    ("sections", "named"),
    [
        ({"checkpointer": {"ttl": {"strategy": "purge"}}}, "checkpointer.ttl.strategy"),
        ({"checkpointer": {"ttl": {"default_ttl": -1}}}, "checkpointer.ttl.default_ttl"),
        ({"checkpointer": {"ttl": {"sweep_limit": 0}}}, "checkpointer.ttl.sweep_limit"),
        (
            {"checkpointer": {"ttl": {"sweep_interval_minutes": 90}}},
            "checkpointer.ttl.sweep_interval_minutes",
        ),
        ({"store": {"ttl": {"refresh_on_read": "yes"}}}, "store.ttl.refresh_on_read"),
    ],
)
def test_a_bad_ttl_setting_stops_serve_naming_it(
    tmp_path: Path, sections: dict[str, Any], named: str
) -> None:
    db = tmp_path / "bad.db"
    argv = [str(BIN), "--sqlite", str(db), "serve", "--config", str(_config(tmp_path, **sections))]
    done = subprocess.run(
        argv, env=env_of(Backend("sqlite", (), {})), capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert named in done.stderr, done.stderr
    assert not db.exists()  # refused before the store was opened


@pytest.mark.parametrize(
    ("minutes", "cron"),
    [(1, "*/1 * * * *"), (5, "*/5 * * * *"), (59, "*/59 * * * *"), (60, "0 */1 * * *"),
     (360, "0 */6 * * *"), (1440, "0 */24 * * *")],
)  # fmt: skip
def test_a_sweep_interval_is_its_schedules_cron(minutes: int, cron: str) -> None:
    config = retention.thread_ttl_config({"sweep_interval_minutes": minutes})
    assert config is not None and retention.cron_every(config.sweep_interval_minutes) == cron


def test_a_request_ttl_reads_as_the_reference_maps_it() -> None:
    keep = retention.thread_ttl_config({"strategy": "keep_latest", "default_ttl": 30})
    assert retention.requested_ttl(None, keep) == (30.0, "keep_latest")  # the file's default
    assert retention.requested_ttl(None, None) is None
    assert retention.requested_ttl(7, keep) == (7.0, "keep_latest")
    assert retention.requested_ttl({"ttl": 7, "strategy": "delete"}, keep) == (7.0, "delete")
    assert retention.requested_ttl({"default_ttl": 3}, None) == (3.0, "delete")
    for bad, named in [
        ({"ttl": 5, "when": 1}, "ttl"),
        ({"ttl": 5, "strategy": "x"}, "ttl.strategy"),
    ]:
        with pytest.raises(ValidationError, match=named):
            retention.requested_ttl(bad, None)


def test_two_services_sweep_each_slot_once_between_them(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """Two API processes with their workers and schedulers on one PostgreSQL store: the sweep's
    schedule fires each minute's slot once between them (its key), one worker runs it, and the
    expired thread is gone — no test submits anything of the sweep's."""
    backend = store_backend("postgres", request, tmp_path_factory, "ret2")
    ttl = {"default_ttl": SHORT, "sweep_interval_minutes": 1, "sweep_limit": 5}
    config = _config(tmp_path, checkpointer={"ttl": ttl})
    with (
        serving(backend, tmp_path, config=config) as url,
        serving(backend, tmp_path, config=config),
        _store(backend) as store,
    ):
        client: Any = get_sync_client(url=url)
        gone = client.threads.create()["thread_id"]
        deadline = time.monotonic() + 150  # the next minute's slot, then its run
        swept: list[Any] = []
        while time.monotonic() < deadline:
            swept = store.run_queue.entries(thread_id=retention.THREADS, state="completed")
            if any(_deleted(e.outcome) for e in swept):
                break
            time.sleep(1)
        keys = [e.key for e in store.run_queue.entries(thread_id=retention.THREADS)]
        assert swept and keys, "no sweep ran within a slot"
        assert all(k is not None and k.startswith("schedule:retention:threads:") for k in keys)
        assert len(keys) == len(set(keys))  # each slot once, however many fired it
        with pytest.raises(NotFoundError):
            client.threads.get(gone)


def _deleted(outcome: object) -> int:
    """How many threads a completed sweep job deleted (its output)."""
    assert isinstance(outcome, Completed) and isinstance(outcome.output, dict)
    return int(outcome.output["deleted"])
