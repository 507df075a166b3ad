"""Fill a store and read it back as JSON, through whichever durable_graph package is imported.

Run by `old_version.OldPackage.run_driver` against an earlier state's package (``python
store_driver.py REQUEST ANSWER``: JSON in, JSON out), and imported by ``tests/test_upgrade.py``
to read the same store through the new package after the upgrade. It uses the public API only
(names every earlier state exports), and detects by the store's methods what a version has
(schedules, items, limits, trace contexts, the worker registry, task paths).

`fill` writes, through the package's own calls (so its own SQL functions): threads with
histories (a child thread too), pending writes, events, effects; queue entries queued, failed,
completed, cancelled, delayed, keyed, interrupted and three leased mid-attempt with a live claim
(`MID`: one admitted and not finished, one admitted and finished, one never admitted); and,
where the version has them, limits, schedules, items, a trace context and a worker's beat.
`snapshot` reads every one of them back as JSON (`to_json`).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import sys
import time
from datetime import datetime, timedelta
from typing import Any

import durable_graph as dg

TTL_SECONDS = 2.0
"""The mid-attempt entries' lease ttl and their claims' ttl."""

MID = {
    "mid-resume": ("step2",),
    "mid-finished": (),
    "mid-fresh": None,
}
"""Tenant (and thread) of each mid-attempt entry -> its commit's ``next`` (None: no commit)."""

EFFECT_KEYS = ("send-mail", "charge")
KEYED: dict[str, Any] = {
    "tenant": "acme",
    "key": "order-17",
    "thread_id": "q-keyed",
    "input": {"order": 17},
}
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def to_json(value: Any) -> Any:
    """A store value as plain JSON: dataclasses as objects (with ``"type"``), enums by value,
    datetimes as ISO text, durations in seconds, tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {"type": type(value).__name__}
        for f in dataclasses.fields(value):
            out[f.name] = to_json(getattr(value, f.name))
        return out
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"to_json: {type(value).__name__}")


def _pending_write(task_id: str, channel: str, value: Any, task_path: str) -> dg.PendingWrite:
    names = {f.name for f in dataclasses.fields(dg.PendingWrite)}
    if "task_path" in names:
        return dg.PendingWrite(task_id=task_id, channel=channel, value=value, task_path=task_path)
    return dg.PendingWrite(task_id=task_id, channel=channel, value=value)


def _commit(
    checkpoint_id: str,
    parent_id: str | None,
    run_id: str,
    state: Any,
    next_: tuple[str, ...] = (),
    events: tuple[dg.EventIn, ...] = (),
    parent_thread_id: str | None = None,
) -> dg.Commit:
    return dg.Commit(
        checkpoint_id=checkpoint_id,
        parent_id=parent_id,
        run_id=run_id,
        state=state,
        metadata={"source": "loop", "step": checkpoint_id, "n": 1.5},
        next=next_,
        events=events,
        parent_thread_id=parent_thread_id,
    )


OLD_CRON = "cron:6f1d5c3e-0c56-4d2e-9a51-3d9b8a0f4e21"
OLD_CRON_RECORD = {"cron_id": "6f1d5c3e-0c56-4d2e-9a51-3d9b8a0f4e21", "metadata": {"m": 1}}
OLD_CRON_INPUT = {
    "langgraph": {"input": {"msg": "from-cron"}, "graph": "agent", "service": {"after_seq": 0}},
    "cron": OLD_CRON_RECORD,
}


def fill(store: Any) -> dict[str, Any]:
    """Write the store's content; the facts a reader needs (entry ids, tenants, what was there)."""
    queue = store.run_queue
    facts: dict[str, Any] = {"entries": {}, "features": []}
    entries: dict[str, list[Any]] = facts["entries"]
    policy = dg.ClaimPolicy(ttl=timedelta(seconds=60), renew_every=timedelta(seconds=10))

    # A thread with a history of three checkpoints over two runs, writes, events, effects.
    claim = store.claim("t-main", "run-1", policy)
    events = (dg.EventIn("progress", {"pct": 10}), dg.EventIn("note", "ünïcode ✓"))
    store.commit(claim, _commit("c1", None, "run-1", {"messages": ["hi"]}, ("a",), events))
    store.commit(claim, _commit("c2", "c1", "run-1", {"messages": ["hi", "there"]}, ("b",)))
    store.append_events(claim, [dg.EventIn("log", {"line": 1, "big": 10**20})], run_id="run-1")
    store.release_claim(claim)
    claim = store.claim("t-main", "run-2", policy)
    store.commit(claim, _commit("c3", "c2", "run-2", {"messages": [], "x": None}, ("c", "d")))
    store.put_writes(
        claim,
        "c3",
        [
            _pending_write("task-b", "messages", {"role": "ai", "n": 1}, "~__pregel_pull, b"),
            _pending_write("task-a", "x", [1, 2.5, "three"], ""),
        ],
    )
    for key in EFFECT_KEYS:
        store.record_effect(claim, key, {"effect": key, "at": 1}, run_id="run-2")
    store.release_claim(claim)

    # A child thread of t-main, two checkpoints.
    child = store.claim("t-child", "run-c", policy)
    store.commit(child, _commit("k1", None, "run-c", {"sub": 1}, ("x",), (), "t-main"))
    store.commit(child, _commit("k2", "k1", "run-c", {"sub": 2}))
    store.release_claim(child)

    def submit(name: str, **kw: Any) -> int:
        ticket = queue.submit(dg.Submission(**kw))
        entries[name] = [ticket.entry_id, kw.get("tenant")]
        return int(ticket.entry_id)

    ttl = timedelta(seconds=60)
    submit("queued", thread_id="q-queued", input={"q": [1, 2]})
    submit("queued-behind", thread_id="q-queued", input={"q": 3}, max_attempts=5)
    submit("delayed", thread_id="q-delayed", input=None, not_before=_in_a_day(store))
    submit(
        "keyed",
        thread_id=KEYED["thread_id"],
        input=KEYED["input"],
        tenant=KEYED["tenant"],
        key=KEYED["key"],
    )
    cancelled = submit("cancelled", thread_id="q-cancelled", input="stop me")
    queue.cancel(cancelled)
    submit("interrupted", thread_id="q-int", input=1, mode=dg.Mode.INTERRUPT)
    submit("interrupter", thread_id="q-int", input=2, mode=dg.Mode.INTERRUPT)

    submit("failed", thread_id="q-failed", input={"f": 1}, tenant="t-failed", max_attempts=1)
    lease = queue.lease("old-worker", ttl, tenant="t-failed")
    queue.record_attempt(lease, "failed-run-1")
    queue.close(lease, dg.Failed("boom: ValueError"))

    submit("completed", thread_id="q-completed", input={"c": 1}, tenant="t-completed")
    lease = queue.lease("old-worker", ttl, tenant="t-completed")
    queue.record_attempt(lease, "completed-run-1")
    claim = store.claim("q-completed", "completed-run-1", policy)
    store.commit(claim, _commit("done-1", None, "completed-run-1", {"done": True}))
    queue.close(lease, dg.Completed({"answer": 42}))
    store.release_claim(claim)

    _fill_optional(store, queue, facts)

    # Last, so their ttl runs from here: three entries leased mid-attempt with a live claim.
    short = timedelta(seconds=TTL_SECONDS)
    mid_policy = dg.ClaimPolicy(ttl=short, renew_every=timedelta(seconds=TTL_SECONDS / 2))
    for tenant, next_ in MID.items():
        submit(tenant, thread_id=f"q-{tenant}", input={"mid": tenant}, tenant=tenant)
        lease = queue.lease("old-worker", short, tenant=tenant)
        run_id = f"{tenant}-run-1"
        queue.record_attempt(lease, run_id)
        claim = store.claim(f"q-{tenant}", run_id, mid_policy)
        if next_ is not None:
            store.commit(claim, _commit(f"{tenant}-c1", None, run_id, {"mid": tenant}, next_))
    facts["mid_leased_at"] = time.time()
    return facts


def _in_a_day(store: Any) -> datetime:
    from datetime import UTC

    return datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)


def _fill_optional(store: Any, queue: Any, facts: dict[str, Any]) -> None:
    """What only some versions have: each found by the queue's methods."""
    features: list[str] = facts["features"]
    if hasattr(queue, "set_limit"):
        features.append("limits")
        queue.set_limit("kind", "heavy", 2)
        queue.set_limit("tenant", "acme", 5)
    if hasattr(queue, "put_schedule"):
        features.append("schedules")
        schedule = dg.Schedule  # exported by the states that have schedules
        queue.put_schedule(
            schedule(
                name="nightly",
                cron="0 3 * * *",
                thread_id="sched-thread",
                input={"report": "daily"},
                timezone="Europe/Paris",
                tenant="acme",
                priority=3,
                max_attempts=2,
            )
        )
        queue.put_schedule(schedule(name="paused", cron="*/5 * * * *", thread_id="s2"))
        queue.pause_schedule("paused")
        # A schedule of a thread deleted before the upgrade (migration 0020, D241): paused
        # so that no scheduler of the old package fires it; the test resumes it after.
        claim = store.claim("t-deleted", "run-d")
        store.commit(claim, _commit("d1", None, "run-d", {"gone": True}))
        store.release_claim(claim)
        store.delete_thread("t-deleted")
        queue.put_schedule(
            schedule(name="on-deleted", cron="* * * * * *", thread_id="t-deleted", tenant="acme")
        )
        queue.pause_schedule("on-deleted")
        # A cron as `serve` stored one before 0020 (its record beside the run request).
        queue.put_schedule(
            schedule(name=OLD_CRON, cron="0 3 * * *", thread_id="c", input=OLD_CRON_INPUT)
        )
    if hasattr(queue, "put_item"):
        features.append("items")
        queue.put_item(("users", "u1"), "prefs", {"theme": "dark", "n": [1, 2]})
        queue.put_item(("users", "u2"), "prefs", {"theme": "light"}, ttl=600.0)
        queue.put_item(("docs",), "d1", {"text": "x"}, tenant="acme")
    if hasattr(queue, "set_trace_context"):
        try:
            from durable_graph.core.model import TraceContext
        except ImportError:  # the flat layout of the first states
            from durable_graph.observe import TraceContext

        features.append("trace_contexts")
        entry_id = facts["entries"]["queued"][0]
        queue.set_trace_context(entry_id, TraceContext(TRACEPARENT, "k=v"))
    if hasattr(queue, "worker_heartbeat"):
        from durable_graph.core.workers import WorkerBeat

        features.append("workers")
        queue.worker_heartbeat(WorkerBeat("old-worker", "host-a", 4242, ("default",), "busy"))


def snapshot(store: Any, facts: dict[str, Any]) -> dict[str, Any]:
    """Everything `fill` wrote, read back through the package's API, as JSON."""
    queue = store.run_queue
    out: dict[str, Any] = {}
    threads = store.threads(limit=100)
    out["threads"] = to_json(threads)
    per_thread: dict[str, Any] = {}
    for info in threads:
        tid = info.thread_id
        per_thread[tid] = {
            "head": to_json(store.get(tid)),
            "history": to_json(store.history(tid, limit=100)),
            "checkpoints": {
                c.checkpoint_id: to_json(store.get(tid, c.checkpoint_id))
                for c in store.history(tid, limit=100)
            },
            "events": to_json(store.events_after(tid, 0)),
            "children": to_json(store.children(tid)),
            "effects": {key: to_json(store.get_effect(tid, key)) for key in EFFECT_KEYS},
            "thread": to_json(store.thread(tid)),
        }
    out["per_thread"] = per_thread
    out["entries"] = {
        name: to_json(queue.entry(entry_id, tenant=tenant))
        for name, (entry_id, tenant) in facts["entries"].items()
    }
    out["open_entries"] = to_json(queue.open_entries(tenant=dg.ANY))
    if hasattr(queue, "entries"):
        out["listing"] = to_json(queue.entries(tenant=dg.ANY, limit=100))
    stats = queue.stats() if hasattr(queue, "stats") else None
    if stats is not None:
        # Closed counts only: open/running and the oldest wait move with the clock (the
        # mid-attempt leases expire between the two reads).
        out["closed_counts"] = {
            name: getattr(stats, name)
            for name in ("completed", "failed", "cancelled", "interrupted")
        }
    features = facts["features"]
    if "limits" in features:
        out["limits"] = to_json(queue.limits())
    if "schedules" in features:
        out["schedules"] = to_json(queue.schedules())
    if "items" in features:
        out["items"] = {
            "u1": to_json(queue.get_item(("users", "u1"), "prefs")),
            "u2": to_json(queue.get_item(("users", "u2"), "prefs")),
            "acme": to_json(queue.get_item(("docs",), "d1", tenant="acme")),
            "search": to_json(queue.search_items(("users",), limit=10)),
            "namespaces": to_json(queue.item_namespaces()),
        }
    if "trace_contexts" in features:
        out["trace_context"] = to_json(queue.trace_context(facts["entries"]["queued"][0]))
    if "workers" in features:
        out["workers"] = to_json(queue.workers(seen_within=timedelta(hours=1)))
    return out


# --- run as a script against an old package ---------------------------------------------------


def _pg_config(schema: str) -> Any:
    from durable_graph.postgres import PostgresConfig

    return PostgresConfig(schema=schema)


def _open_pg(dsn: str, schema: str) -> Any:
    from durable_graph.postgres import PostgresCheckpointer

    return PostgresCheckpointer.open(dsn, _pg_config(schema))


def _error(exc: BaseException) -> dict[str, str]:
    return {"type": type(exc).__name__, "message": str(exc)}


def prepare(request: dict[str, Any]) -> dict[str, Any]:
    """Install the package's schema in each of ``request["schemas"]`` (as their owner), grant the
    runtime role, fill and snapshot each; fill and snapshot a SQLite file; try to open the new
    package's SQLite file."""
    import psycopg

    from durable_graph.postgres import migrations

    answer: dict[str, Any] = {"package": dg.__file__, "schemas": {}}
    dsn = request["owner_dsn"]
    for schema in request["schemas"]:
        migrations.migrate(dsn, schema)
        granted = False
        try:
            from durable_graph.postgres import privileges
        except ImportError:
            privileges = None  # type: ignore[assignment]
        if privileges is not None and hasattr(privileges, "grant"):
            with psycopg.connect(dsn, autocommit=True) as conn:
                privileges.grant(conn, schema, request["runtime_role"])
            granted = True
        store = _open_pg(dsn, schema)
        try:
            facts = fill(store)
            snap = snapshot(store, facts)
        finally:
            store.close()
        answer["schemas"][schema] = {"facts": facts, "snapshot": snap, "granted": granted}
        if granted:
            answer["schemas"][schema]["runtime"] = runtime_check(request["runtime_dsn"], schema)
    answer["sqlite"] = sqlite_fill(request["sqlite_path"])
    answer["sqlite_newer"] = sqlite_open_newer(request["new_sqlite_path"])
    return answer


def runtime_check(dsn: str, schema: str) -> dict[str, Any]:
    """What the runtime role can do: read a thread through the API; read a table (refused)."""
    import psycopg

    result: dict[str, Any] = {}
    try:
        store = _open_pg(dsn, schema)
        try:
            result["thread"] = to_json(store.thread("t-main"))
        finally:
            store.close()
    except Exception as exc:
        result["thread_error"] = _error(exc)
    with psycopg.connect(dsn, autocommit=True) as conn:
        try:
            conn.execute(f'SELECT count(*) FROM "{schema}".threads')
            result["table_read"] = "allowed"
        except psycopg.Error as exc:
            result["table_read"] = getattr(exc, "sqlstate", None) or "error"
    return result


def sqlite_fill(path: str) -> dict[str, Any]:
    from durable_graph import sqlite as dg_sqlite

    store = dg_sqlite.SqliteCheckpointer.open(path)
    try:
        facts = fill(store)
        snap = snapshot(store, facts)
    finally:
        store.close()
    version = getattr(dg_sqlite, "SCHEMA_VERSION", None)
    if version is None:
        from durable_graph.sqlite import connection

        version = connection.SCHEMA_VERSION
    return {"facts": facts, "snapshot": snap, "schema_version": version}


def sqlite_open_newer(path: str) -> dict[str, Any]:
    """Open a file the new package made: the error, or what it reads."""
    from durable_graph import sqlite as dg_sqlite

    try:
        store = dg_sqlite.SqliteCheckpointer.open(path)
    except Exception as exc:
        return {"error": _error(exc)}
    try:
        return {"opened": True, "thread": to_json(store.thread("t-new"))}
    finally:
        store.close()


def open_newer(request: dict[str, Any]) -> dict[str, Any]:
    """Against a schema the new package upgraded: the old package's open and its migrate."""
    from durable_graph.postgres import migrations

    answer: dict[str, Any] = {"package": dg.__file__}
    dsn, schema = request["owner_dsn"], request["schema"]
    try:
        store = _open_pg(dsn, schema)
        try:
            answer["open"] = {"opened": True, "thread": to_json(store.thread("t-main"))}
        finally:
            store.close()
    except Exception as exc:
        answer["open"] = {"error": _error(exc)}
    try:
        answer["migrate"] = {"applied": migrations.migrate(dsn, schema)}
    except Exception as exc:
        answer["migrate"] = {"error": _error(exc)}
    return answer


COMMANDS = {"prepare": prepare, "open_newer": open_newer}


def main(argv: list[str]) -> int:
    request_path, answer_path = argv[1], argv[2]
    with open(request_path) as f:
        request = json.load(f)
    answer = COMMANDS[request["command"]](request)
    with open(answer_path, "w") as f:
        json.dump(answer, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
