"""What limits us, by measurement (no SQL or caller is changed here).

For each of our calls, serially on a quiet server (the benchmark processes are gone):

1. **API latency** — through the real store (`PostgresCheckpointer`: pool of one connection,
   watchdog, error mapping), p50 over ``n`` calls.
2. **Raw latency** — the very same `Call` (statement, parameters, decoder from
   `durable_graph.postgres.calls`) executed on a bare psycopg connection: the difference to (1)
   is the executor's own cost.
3. **Server** — in the diagnostic session only: ``pg_stat_statements.track = all`` (nested
   statements of the PL/pgSQL functions), ``track_wal_io_timing = on``; per call: the function's
   mean execution time, its costliest nested statements, WAL records / bytes / full-page images,
   and from ``pg_stat_wal`` the WAL flushes (``wal_sync``) and their time.
4. **Client CPU** — building the call (validation + JSON encoding) and decoding its rows, timed
   in a loop without I/O; and a cProfile of the checkpoint cycle and the queue lifecycle.
5. **Plans** — ``auto_explain`` (``log_analyze``, ``log_nested_statements``) of one call of
   each write function, and of ``lease`` / ``commit`` on the grown store, delivered to the client
   as notices.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from durable_graph.core.model import ANY, Commit, Completed, Submission
from durable_graph.postgres import calls
from durable_graph.postgres.config import PostgresConfig

from .checkpoint import LONG_CLAIM
from .common import JOB_INPUT, STATE, percentile
from .growth import GrowthReport
from .stores import open_store

LEASE_TTL = timedelta(minutes=5)
SCHEMA = "diag"


@dataclass
class Nested:
    query: str
    per_call: float
    mean_ms: float
    share: float


@dataclass
class CallCost:
    name: str
    api_p50: float = 0.0
    raw_p50: float = 0.0
    server_ms: float = 0.0
    build_us: float = 0.0
    decode_us: float = 0.0
    wal_records: float = 0.0
    wal_bytes: float = 0.0
    wal_fpi: float = 0.0
    wal_syncs: float = 0.0
    wal_sync_ms: float = 0.0
    nested: list[Nested] = field(default_factory=list)


@dataclass
class Diagnosis:
    n: int
    costs: list[CallCost] = field(default_factory=list)
    select1_py_p50: float = 0.0
    txn_py_p50: float = 0.0
    txn_wal_bytes: float = 0.0
    txn_wal_syncs: float = 0.0
    txn_sync_ms: float = 0.0
    executor_parts_us: dict[str, float] = field(default_factory=dict)
    profiles: dict[str, str] = field(default_factory=dict)
    plans: dict[str, list[tuple[float, str]]] = field(default_factory=dict)
    experiment: list[tuple[str, float]] = field(default_factory=list)
    """(variant, median µs per call from Python) of the SQL-function experiment."""


def _p50_ms(values: list[int]) -> float:
    return percentile(values, 0.5) / 1e6


class _Raw:
    """A bare psycopg connection running Calls, with the diagnostic session settings."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True, row_factory=dict_row)
        self.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        self.conn.execute("SET pg_stat_statements.track = 'all'")
        self.conn.execute("SET track_wal_io_timing = on")
        self.notices: list[str] = []
        self.conn.add_notice_handler(lambda d: self.notices.append(d.message_primary or ""))

    def run(self, call: calls.SqlCall[Any]) -> Any:
        cur = self.conn.execute(call.query, call.params)
        rows = cur.fetchall() if cur.description is not None else []
        return call.decode(rows)

    def wal(self) -> dict[str, float]:
        self.conn.execute("SELECT pg_stat_force_next_flush()")
        self.conn.execute("SELECT 1")
        row = self.conn.execute(
            "SELECT wal_records, wal_fpi, wal_bytes, wal_sync, wal_sync_time FROM pg_stat_wal"
        ).fetchone()
        assert row is not None
        return {k: float(v) for k, v in row.items()}

    def window(
        self, cost: CallCost, n: int, fn: Callable[[int], Any], function: str | None
    ) -> list[Any]:
        """Run ``fn(i)`` n times; fill ``cost`` with raw latency, server and WAL figures."""
        self.conn.execute("SELECT pg_stat_statements_reset()")
        before = self.wal()
        out = []
        times = []
        for i in range(n):
            t0 = time.perf_counter_ns()
            out.append(fn(i))
            times.append(time.perf_counter_ns() - t0)
        after = self.wal()
        cost.raw_p50 = _p50_ms(times)
        cost.wal_records = (after["wal_records"] - before["wal_records"]) / n
        cost.wal_fpi = (after["wal_fpi"] - before["wal_fpi"]) / n
        cost.wal_bytes = (after["wal_bytes"] - before["wal_bytes"]) / n
        cost.wal_syncs = (after["wal_sync"] - before["wal_sync"]) / n
        cost.wal_sync_ms = (after["wal_sync_time"] - before["wal_sync_time"]) / n
        if function is not None:
            self._statements(cost, n, function)
        return out

    def _statements(self, cost: CallCost, n: int, function: str) -> None:
        rows = self.conn.execute(
            "SELECT toplevel, query, calls, total_exec_time FROM pg_stat_statements "
            "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "ORDER BY total_exec_time DESC"
        ).fetchall()
        top = [r for r in rows if r["toplevel"] and function in r["query"]]
        total = sum(float(r["total_exec_time"]) for r in top)
        cost.server_ms = total / n if n else 0.0
        nested = [r for r in rows if not r["toplevel"]]
        for r in nested[:6]:
            t = float(r["total_exec_time"])
            cost.nested.append(
                Nested(
                    query=re.sub(r"\s+", " ", str(r["query"]))[:150],
                    per_call=int(r["calls"]) / n,
                    mean_ms=t / max(1, int(r["calls"])),
                    share=t / total if total else 0.0,
                )
            )

    def explain(self, label: str, fn: Callable[[], Any], diag: Diagnosis) -> None:
        """auto_explain every statement of one call of ``fn``; keep (duration, plan) notices."""
        self.conn.execute("LOAD 'auto_explain'")
        for setting in (
            "auto_explain.log_min_duration = 0",
            "auto_explain.log_analyze = on",
            "auto_explain.log_buffers = on",
            "auto_explain.log_nested_statements = on",
            "auto_explain.log_level = 'notice'",
            "client_min_messages = 'notice'",
        ):
            self.conn.execute(f"SET {setting}")
        self.notices.clear()
        try:
            fn()
        finally:
            self.conn.execute("SET auto_explain.log_min_duration = -1")
        plans = []
        for message in self.notices:
            found = re.match(r"duration: ([0-9.]+) ms", message)
            if found:
                plans.append((float(found.group(1)), message))
        plans.sort(key=lambda p: -p[0])
        diag.plans[label] = plans

    def close(self) -> None:
        self.conn.close()


def _time_loop(fn: Callable[[], Any], n: int = 2000) -> float:
    """Mean microseconds of ``fn()`` over ``n`` runs."""
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - t0) / n / 1000


def _profile(fn: Callable[[], Any], n: int) -> str:
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(n):
        fn()
    profile.disable()
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.sort_stats("tottime").print_stats(18)
    text = out.getvalue()
    # Keep the table only, with paths shortened.
    start = text.find("   ncalls")
    text = text[start:] if start >= 0 else text
    text = re.sub(r"/[^ ]*/site-packages/", "", text)
    text = re.sub(r"/[^ ]*/python/durable_graph/", "durable_graph/", text)
    return re.sub(r"/[^ ]*/lib/python3\.\d+/", "", text).rstrip()


def run(
    dsn: str, growth: GrowthReport | None, *, n: int = 200, log: Callable[[str], None] = print
) -> Diagnosis:
    params = {"backend": "postgres", "dsn": dsn, "schema": SCHEMA}
    store = open_store(params, migrate=True)
    config = PostgresConfig(schema=SCHEMA, auto_migrate=False)
    raw = _Raw(dsn)
    diag = Diagnosis(n=n)
    tag = uuid.uuid4().hex[:6]
    try:
        _measure_calls(store, raw, config, diag, n, tag)
        _reference(raw, diag, n)
        _executor_parts(store, diag, n)
        _profiles(store, diag, tag)
        _plans(raw, config, diag, tag, growth)
        _sql_function_experiment(dsn, diag, tag)
    finally:
        raw.close()
        store.close()
    for c in diag.costs:
        log(
            f"  {c.name}: api {c.api_p50:.2f} ms, raw {c.raw_p50:.2f} ms, server "
            f"{c.server_ms:.3f} ms, build {c.build_us:.0f} us, decode {c.decode_us:.0f} us, "
            f"{c.wal_syncs:.2f} flushes ({c.wal_sync_ms:.2f} ms), {c.wal_bytes:.0f} WAL bytes"
        )
    return diag


def _api(n: int, fn: Callable[[int], Any]) -> float:
    times = []
    for i in range(n):
        t0 = time.perf_counter_ns()
        fn(i)
        times.append(time.perf_counter_ns() - t0)
    return _p50_ms(times)


def _measure_calls(
    store: Any, raw: _Raw, config: PostgresConfig, diag: Diagnosis, n: int, tag: str
) -> None:
    q = store.run_queue
    costs = {name: CallCost(name) for name in (
        "claim", "commit", "get", "submit", "lease", "record_attempt", "close",
        "lease(run_id)", "entry", "latest_of_runs",
    )}  # fmt: skip

    def commit_of(parent: str | None, run_id: str) -> Commit:
        return Commit(uuid.uuid4().hex, parent, run_id, STATE, next=("agent",))

    # --- checkpoint calls: raw windows, then the same through the API ----------------------
    threads = [f"claim-{tag}-{i}" for i in range(n)]
    raw.window(costs["claim"], n,
               lambda i: raw.run(calls.claim(config, threads[i], "diag", LONG_CLAIM)),
               "dg_claim_v1")  # fmt: skip
    costs["claim"].api_p50 = _api(n, lambda i: store.claim(f"api-{threads[i]}", "d", LONG_CLAIM))
    chain = f"chain-{tag}"
    claim = raw.run(calls.claim(config, chain, "diag", LONG_CLAIM))
    head: list[str | None] = [None]

    def raw_commit(i: int) -> None:
        done = raw.run(calls.commit(config, claim, commit_of(head[0], "run-a")))
        head[0] = done.checkpoint_id

    raw.window(costs["commit"], n, raw_commit, "dg_commit_v1")

    def api_commit(i: int) -> None:
        done = store.commit(claim, commit_of(head[0], "run-a"))
        head[0] = done.checkpoint_id

    costs["commit"].api_p50 = _api(n, api_commit)
    raw.window(costs["get"], n, lambda i: raw.run(calls.get(config, chain, None)), "dg_get_v1")
    costs["get"].api_p50 = _api(n, lambda i: store.get(chain))
    raw.window(costs["latest_of_runs"], n,
               lambda i: raw.run(calls.latest_of_runs(config, chain, ["run-a"])),
               "dg_latest_of_runs_v1")  # fmt: skip
    costs["latest_of_runs"].api_p50 = _api(n, lambda i: store.latest_of_runs(chain, ["run-a"]))

    # --- queue calls -------------------------------------------------------------------------
    def submission(i: int, prefix: str) -> Submission:
        return Submission(thread_id=f"{prefix}-{tag}-{i}", input=JOB_INPUT)

    raw.window(costs["submit"], n,
               lambda i: raw.run(calls.submit(config, submission(i, "raw"))), "dg_submit_v1")  # fmt: skip
    leases = raw.window(costs["lease"], n,
                        lambda i: raw.run(calls.lease(config, "diag", LEASE_TTL, ANY, None, None)),
                        "dg_lease_v1")  # fmt: skip
    raw.window(costs["record_attempt"], n,
               lambda i: raw.run(calls.record_attempt(config, leases[i], f"run-{tag}-{i}")),
               "dg_record_attempt_v1")  # fmt: skip
    raw.window(costs["entry"], n,
               lambda i: raw.run(calls.entry(config, leases[i].entry.entry_id, None)),
               "dg_entry_v1")  # fmt: skip
    raw.window(costs["close"], n,
               lambda i: raw.run(calls.close(config, leases[i], Completed({"ok": True}))),
               "dg_close_v1")  # fmt: skip
    for i in range(n):
        raw.run(calls.submit(config, submission(i, "rawf")))
    fused = raw.window(costs["lease(run_id)"], n,
                       lambda i: raw.run(calls.lease(config, "diag", LEASE_TTL, ANY,
                                                     f"runf-{tag}-{i}", None)),
                       "dg_lease_v1")  # fmt: skip
    for lease in fused:
        raw.run(calls.close(config, lease, Completed(None)))

    # The same through the API.
    costs["submit"].api_p50 = _api(n, lambda i: q.submit(submission(i, "api")))
    api_leases: list[Any] = []
    costs["lease"].api_p50 = _api(n, lambda i: api_leases.append(q.lease("d", LEASE_TTL)))
    costs["record_attempt"].api_p50 = _api(
        n, lambda i: q.record_attempt(api_leases[i], f"api-{tag}-{i}")
    )
    costs["entry"].api_p50 = _api(n, lambda i: q.entry(api_leases[i].entry.entry_id))
    costs["close"].api_p50 = _api(n, lambda i: q.close(api_leases[i], Completed({"ok": True})))
    for i in range(n):
        q.submit(submission(i, "apif"))
    api_fused: list[Any] = []
    costs["lease(run_id)"].api_p50 = _api(
        n, lambda i: api_fused.append(q.lease("d", LEASE_TTL, run_id=f"apif-{tag}-{i}"))
    )
    for lease in api_fused:
        q.close(lease, Completed(None))

    # --- client CPU: build (validation + encoding) and decode, no I/O ------------------------
    sample_lease = api_fused[0]
    builds: dict[str, Callable[[], calls.SqlCall[Any]]] = {
        "claim": lambda: calls.claim(config, "t", "h", LONG_CLAIM),
        "commit": lambda: calls.commit(config, claim, commit_of("p", "r")),
        "get": lambda: calls.get(config, chain, None),
        "latest_of_runs": lambda: calls.latest_of_runs(config, chain, ["run-a"]),
        "submit": lambda: calls.submit(config, submission(0, "b")),
        "lease": lambda: calls.lease(config, "d", LEASE_TTL, ANY, None, None),
        "lease(run_id)": lambda: calls.lease(config, "d", LEASE_TTL, ANY, "r", None),
        "record_attempt": lambda: calls.record_attempt(config, sample_lease, "r"),
        "entry": lambda: calls.entry(config, 1, None),
        "close": lambda: calls.close(config, sample_lease, Completed({"ok": True})),
    }
    samples: dict[str, tuple[calls.SqlCall[Any], list[dict[str, Any]]]] = {}
    with raw.conn.transaction(force_rollback=True):
        for name in ("get", "latest_of_runs", "entry"):
            call = builds[name]()
            if name == "entry":
                call = calls.entry(config, sample_lease.entry.entry_id, None)
            samples[name] = (call, raw.conn.execute(call.query, call.params).fetchall())
    for name, build in builds.items():
        costs[name].build_us = _time_loop(build)
    for name, (call, rows) in samples.items():
        costs[name].decode_us = _time_loop(lambda c=call, r=rows: c.decode(r))  # type: ignore[misc]
    # Write calls return rows too: decode a representative row of each.
    lease_row_call = calls.lease(config, "d", LEASE_TTL, ANY, None, None)
    with raw.conn.transaction(force_rollback=True):
        raw.run(calls.submit(config, submission(0, "dec")))
        lrows = raw.conn.execute(lease_row_call.query, lease_row_call.params).fetchall()
    costs["lease"].decode_us = _time_loop(lambda: lease_row_call.decode(lrows))
    costs["lease(run_id)"].decode_us = costs["lease"].decode_us
    commit_call = calls.commit(config, claim, commit_of(head[0], "run-a"))
    with raw.conn.transaction(force_rollback=True):
        crows = raw.conn.execute(commit_call.query, commit_call.params).fetchall()
    costs["commit"].decode_us = _time_loop(lambda: commit_call.decode(crows))
    diag.costs = list(costs.values())


def _reference(raw: _Raw, diag: Diagnosis, n: int) -> None:
    """The physical floor from Python: SELECT 1, and the minimal durable transaction."""
    conn = raw.conn
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {SCHEMA}.ref_accounts (id int PRIMARY KEY, balance bigint)"
    )
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {SCHEMA}.ref_history (id bigint GENERATED ALWAYS AS "
        "IDENTITY PRIMARY KEY, account_id int, body text, at timestamptz DEFAULT now())"
    )
    conn.execute(
        f"INSERT INTO {SCHEMA}.ref_accounts SELECT g, 0 FROM generate_series(1, 1000) g "
        "ON CONFLICT DO NOTHING"
    )
    times = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        conn.execute("SELECT 1").fetchall()
        times.append(time.perf_counter_ns() - t0)
    diag.select1_py_p50 = _p50_ms(times)
    cost = CallCost("minimal durable txn")

    def txn(i: int) -> None:
        with conn.transaction():
            conn.execute(
                f"UPDATE {SCHEMA}.ref_accounts SET balance = balance + 1 WHERE id = %s",
                (i % 1000 + 1,),
            )
            conn.execute(
                f"INSERT INTO {SCHEMA}.ref_history (account_id, body) "
                "VALUES (%s, repeat('x', 1000))",
                (i,),
            )

    raw.window(cost, n, txn, None)
    diag.txn_py_p50 = cost.raw_p50
    diag.txn_wal_bytes = cost.wal_bytes
    diag.txn_wal_syncs = cost.wal_syncs
    diag.txn_sync_ms = cost.wal_sync_ms


def _executor_parts(store: Any, diag: Diagnosis, n: int) -> None:
    """What the executor adds around the statement: the pool checkout and return (the rest of
    its cost -- watchdog, error mapping -- is API latency minus raw latency)."""
    pool = store._x.pool

    def checkout() -> None:
        conn = pool.getconn(timeout=5)
        pool.putconn(conn)

    diag.executor_parts_us["pool getconn + putconn"] = _time_loop(checkout, n)


def _profiles(store: Any, diag: Diagnosis, tag: str) -> None:
    q = store.run_queue
    thread = f"prof-{tag}"
    claim = store.claim(thread, "prof", LONG_CLAIM)
    head: list[str | None] = [None]

    def checkpoint_cycle() -> None:
        done = store.commit(claim, Commit(uuid.uuid4().hex, head[0], "run-p", STATE))
        head[0] = done.checkpoint_id
        store.get(thread)

    counter = [0]

    def queue_cycle() -> None:
        counter[0] += 1
        q.submit(Submission(thread_id=f"profq-{tag}-{counter[0]}", input=JOB_INPUT))
        lease = q.lease("prof", LEASE_TTL)
        q.record_attempt(lease, f"profr-{tag}-{counter[0]}")
        q.close(lease, Completed({"ok": True}))

    diag.profiles["checkpoint cycle (commit + get), 200 cycles"] = _profile(checkpoint_cycle, 200)
    diag.profiles["queue lifecycle (submit + lease + record_attempt + close), 100 cycles"] = (
        _profile(queue_cycle, 100)
    )


def _plans(
    raw: _Raw, config: PostgresConfig, diag: Diagnosis, tag: str, growth: GrowthReport | None
) -> None:
    claim = raw.run(calls.claim(config, f"plan-{tag}", "diag", LONG_CLAIM))
    raw.explain(
        "commit (small store)",
        lambda: raw.run(calls.commit(config, claim, Commit("p1", None, "run-x", STATE))),
        diag,
    )
    raw.explain(
        "submit (small store)",
        lambda: raw.run(calls.submit(config, Submission(thread_id=f"plan-{tag}", input=JOB_INPUT))),
        diag,
    )
    raw.explain(
        "lease(run_id) (small store)",
        lambda: raw.run(calls.lease(config, "diag", LEASE_TTL, ANY, f"plan-run-{tag}", None)),
        diag,
    )
    if growth is None:
        return
    big = PostgresConfig(schema=growth.schemas["big"], auto_migrate=False)
    raw.run(calls.submit(big, Submission(thread_id=f"plan-{tag}", input=JOB_INPUT)))
    lease = [None]

    def big_lease() -> None:
        lease[0] = raw.run(calls.lease(big, "diag", LEASE_TTL, ANY, f"plan-big-{tag}", None))

    raw.explain("lease(run_id) (grown store)", big_lease, diag)
    if lease[0] is not None:
        raw.run(calls.close(big, lease[0], Completed(None)))
    deep = raw.conn.execute(
        f'SELECT head_id FROM "{growth.schemas["big"]}".threads WHERE thread_id = %s',
        (growth.deep_thread,),
    ).fetchone()
    bclaim = raw.run(calls.claim(big, growth.deep_thread, "diag-plan", LONG_CLAIM))
    parent = None if deep is None else deep["head_id"]
    raw.explain(
        "commit on the 10,000-checkpoint thread (grown store)",
        lambda: raw.run(calls.commit(big, bclaim, Commit(f"p-{tag}", parent, "run-y", STATE))),
        diag,
    )
    raw.run(calls.release_claim(big, bclaim))
    middle = f"c{growth.checkpoints // 2}"
    raw.explain(
        "history(before=middle, limit=100) on the 10,000-checkpoint thread (grown store)",
        lambda: raw.run(calls.history(big, growth.deep_thread, middle, 100)),
        diag,
    )
    raw.explain(
        "latest_of_runs(oldest run) on the 10,000-checkpoint thread (grown store)",
        lambda: raw.run(calls.latest_of_runs(big, growth.deep_thread, ["r0"])),
        diag,
    )


_REFRESH_BODY = """UPDATE {s}.threads q
   SET (head_entry_id, head_tenant) =
           (SELECT e.entry_id, e.tenant FROM {s}.queue_entries e
             WHERE e.thread_id = p_thread_id AND e.outcome_kind IS NULL
             ORDER BY e.queue_rank, e.entry_id LIMIT 1),
       lease_expires_at =
           (SELECT o.lease_until FROM {s}.threads o
             WHERE o.thread_id = p_thread_id)
 WHERE q.thread_id = p_thread_id"""
"""The original body, two sub-selects; its second read the lease's expiry from the thread's
entries, where migration 0017 took it off: it reads it from the thread row now (0018)."""


def _sql_function_experiment(dsn: str, diag: Diagnosis, tag: str, rounds: int = 1000) -> None:
    """Why did small helpers cost so much? The store's own ``_dg_refresh_queue_thread`` (now
    plpgsql, not pinned) and its original body as scratch copies (``LANGUAGE sql`` without
    ``SET search_path``; ``plpgsql`` with and without it), plus ``_dg_entry`` and ``_dg_iso``,
    interleaved call by call on a plain connection; medians. Scratch functions live in the
    diagnostic schema only."""
    body = _REFRESH_BODY.format(s=SCHEMA)
    with psycopg.connect(dsn, autocommit=True) as conn:
        # The internal helpers are not pinned to the schema (only the dg_* functions are):
        # called directly, they run under the session's search_path.
        conn.execute(f"SET search_path TO {SCHEMA}")
        for name, lang, setting in (
            ("x_sql_noset", "sql", ""),
            ("x_plpgsql_set", "plpgsql", "SET search_path FROM CURRENT"),
            ("x_plpgsql_noset", "plpgsql", ""),
        ):
            code = body if lang == "sql" else f"BEGIN {body}; END"
            conn.execute(
                f"CREATE OR REPLACE FUNCTION {SCHEMA}.{name}(p_thread_id text) RETURNS void "
                f"LANGUAGE {lang} VOLATILE {setting} AS $fn$ {code} $fn$"
            )
        thread = f"raw-{tag}-0"
        entry_id = conn.execute(
            f"SELECT min(entry_id) FROM {SCHEMA}.queue_entries WHERE thread_id = %s", (thread,)
        ).fetchone()
        eid = entry_id[0] if entry_id else 1
        variants = [
            ("round trip floor: SELECT %s", "SELECT %s::text", thread),
            ("_dg_refresh_queue_thread as shipped",
             f"SELECT {SCHEMA}._dg_refresh_queue_thread(%s)", thread),
            ("same body, LANGUAGE sql, no SET", f"SELECT {SCHEMA}.x_sql_noset(%s)", thread),
            ("same body, plpgsql, SET search_path", f"SELECT {SCHEMA}.x_plpgsql_set(%s)", thread),
            ("same body, plpgsql, no SET", f"SELECT {SCHEMA}.x_plpgsql_noset(%s)", thread),
            ("_dg_entry(id) as shipped", f"SELECT * FROM {SCHEMA}._dg_entry(%s)",
             eid),
            ("_dg_iso(now()) as shipped",
             f"SELECT {SCHEMA}._dg_iso(now()), %s::text", thread),
        ]  # fmt: skip
        times: dict[str, list[int]] = {label: [] for label, _, _ in variants}
        for r in range(rounds):
            for label, query, arg in variants:
                t0 = time.perf_counter_ns()
                conn.execute(query, (arg,)).fetchall()
                if r >= rounds // 10:
                    times[label].append(time.perf_counter_ns() - t0)
    diag.experiment = [(label, percentile(v, 0.5) / 1000) for label, v in times.items()]
