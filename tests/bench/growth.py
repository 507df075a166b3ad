"""Growth: do our calls stay flat as the store grows?

Two PostgreSQL schemas in the benchmark database, populated with bulk SQL (``INSERT ...
SELECT generate_series``) straight into the tables of ``migrations/0001.tables.sql``, then
``VACUUM ANALYZE``-d (as autovacuum would soon do):

* **big**: ``entries`` open queue entries spread round-robin over ``threads`` threads (entry
  ``i`` on thread ``g-(i mod threads)``, so every thread has entries/threads open entries and a
  head on its ``threads`` row), plus one thread ``deep`` with ``checkpoints`` checkpoints (ten per
  run id) and their ``store.checkpoint`` events;
* **small**: the queue 1000x smaller (100 entries over 10 threads) and a ``deep`` thread of 250
  checkpoints (so that ``history(before=<middle>, limit=100)`` returns 100 rows on both sides).

Then the same operations are measured through the API, one connection, alternating small and
big call by call (the machine is shared: both see the same noise):

* ``lease`` — a ``submit`` to a fresh thread first and a ``close`` after (both untimed), so the
  number of open entries stays constant;
* ``submit`` — to one of the populated threads, picked at random;
* ``commit`` — under a claim on a populated queue thread (its admission update reads that
  thread's open entries), and on ``deep``;
* ``get`` (head), ``history(limit=100)``, ``history(before=<middle>, limit=100)``,
  ``latest_of_runs`` with the newest run id and with the oldest one, on ``deep``.

The hazards of issue 12, in the same two schemas (small: 1000x smaller):

* ``busy`` threads (50,000) each holding a live lease, with the oldest heads, so that ``lease``
  would walk past all of them;
* one thread ``backlog`` with ``backlog`` (50,000) open entries: ``submit`` and INTERRUPT
  ``submit`` to it (each INTERRUPT closes the previous one, so the backlog stays);
* ``dead`` (100,000) thread rows that were claimed or deleted once (``live = false``), sorting
  before 150 live ones: ``threads(limit=100)``.

And ``prune_all`` on its own pair of schemas: ``prune_threads`` (1,000) threads of
``prune_checkpoints`` (2,200) checkpoints each, all older than a day, pruned to ``keep_last=1``;
measured per step (one ``dg_prune_batch_v1`` call, one transaction), small = 10 threads.
"""

from __future__ import annotations

import contextlib
import random
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.model import Commit, Completed, Mode, Submission
from durable_graph.core.validation import encode_json

from .checkpoint import LONG_CLAIM
from .common import JOB_INPUT, STATE, percentile
from .stores import open_store

LEASE_TTL = timedelta(minutes=5)


@dataclass
class GrowthRow:
    operation: str
    small_p50: float
    small_p99: float
    big_p50: float
    big_p99: float

    @property
    def ratio(self) -> float:
        return self.big_p50 / self.small_p50 if self.small_p50 else 0.0


@dataclass
class GrowthReport:
    entries: int
    threads: int
    checkpoints: int
    populate_seconds: float
    samples: int
    rows: list[GrowthRow] = field(default_factory=list)
    schemas: dict[str, str] = field(default_factory=dict)
    """"small" / "big" -> schema name (the diagnosis explains plans on them)."""
    deep_thread: str = "deep"
    queue_thread: str = "g-1"
    hazards: Hazards | None = None
    prune_threads: int = 0
    prune_checkpoints: int = 0
    prune_steps: int = 0
    prune_seconds: float = 0.0


@dataclass(frozen=True)
class Hazards:
    """Sizes of issue 12's growth hazards in one schema."""

    busy: int
    backlog: int
    dead: int


def populate(
    dsn: str, schema: str, entries: int, threads: int, checkpoints: int, hazards: Hazards
) -> None:
    state = encode_json("state", STATE, 1 << 30)
    job = encode_json("input", JOB_INPUT, 1 << 30, canonical=True)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path = "{schema}"')
        with conn.transaction():
            # Busy threads first: their heads are the oldest, each under a live lease (the lease
            # is the thread row's, inserted below; migrations 0017, 0018).
            conn.execute(
                """INSERT INTO queue_entries (tenant, thread_id, key, input, mode, max_attempts,
                                              submitted_at, queue_rank)
                   SELECT NULL, 'busy-' || g, NULL, %(input)s, 'enqueue', 3, now(), 2
                     FROM generate_series(1, %(n)s) g ORDER BY g""",
                {"n": hazards.busy, "input": job},
            )
            conn.execute(
                """INSERT INTO queue_entries (tenant, thread_id, key, input, mode, max_attempts,
                                              submitted_at, queue_rank)
                   SELECT NULL, 'g-' || (g %% %(threads)s), NULL, %(input)s, 'enqueue', 3, now(),
                          2
                     FROM generate_series(1, %(entries)s) g ORDER BY g""",
                {"threads": threads, "entries": entries, "input": job},
            )
            conn.execute(
                """INSERT INTO queue_entries (tenant, thread_id, key, input, mode, max_attempts,
                                              submitted_at, queue_rank)
                   SELECT NULL, 'backlog', NULL, %(input)s, 'enqueue', 3, now(), 2
                     FROM generate_series(1, %(n)s) g ORDER BY g""",
                {"n": hazards.backlog, "input": job},
            )
            conn.execute(
                """INSERT INTO threads (thread_id, head_entry_id, head_tenant, head_priority_key,
                                        head_kind, lease_expires_at, lease_entry_id,
                                        lease_until, lease_kind, lease_token, lease_holder,
                                        lease_ttl)
                   SELECT h.thread_id, h.head, NULL, 0, h.kind, l.lease_until, l.head,
                          l.lease_until, l.kind, l.token, l.holder, l.ttl
                     FROM (SELECT thread_id, min(entry_id) AS head, min(kind) AS kind
                             FROM queue_entries WHERE outcome_kind IS NULL
                            GROUP BY thread_id ORDER BY min(entry_id)) h
                     LEFT JOIN LATERAL (
                          SELECT h.head, h.kind, now() + interval '2 days' AS lease_until,
                                 nextval('fencing_token_seq') AS token, 'busy' AS holder,
                                 interval '172800 seconds' AS ttl
                           WHERE h.thread_id LIKE 'busy-%') l ON true"""
            )
            conn.execute(
                """INSERT INTO threads (thread_id, live, last_seq)
                   SELECT 'dead-' || g, false, 1 FROM generate_series(1, %(n)s) g""",
                {"n": hazards.dead},
            )
            conn.execute(
                """INSERT INTO threads (thread_id, live, last_seq, head_id, created_at,
                                        updated_at, first_commit_order)
                   SELECT 'live-' || g, true, 0, NULL, now(), now(),
                          nextval('thread_first_commit_seq')
                     FROM generate_series(1, 150) g"""
            )
            conn.execute(
                """INSERT INTO threads (thread_id, live, last_seq, head_id, created_at,
                                        updated_at, first_commit_order)
                   VALUES ('deep', true, %(n)s, 'c' || %(n)s, now(), now(),
                           nextval('thread_first_commit_seq'))""",
                {"n": checkpoints},
            )
            conn.execute(
                """INSERT INTO checkpoints (thread_id, checkpoint_id, seq, parent_id, run_id,
                                            state, metadata, next, created_at, committed_at)
                   SELECT 'deep', 'c' || g, g, CASE WHEN g > 1 THEN 'c' || (g - 1) END,
                          'r' || ((g - 1) / 10), %(state)s, 'null', '{agent}', now(), now()
                     FROM generate_series(1, %(n)s) g""",
                {"n": checkpoints, "state": state},
            )
            conn.execute(
                """INSERT INTO events (thread_id, seq, kind, payload, run_id, created_at,
                                       committed_at)
                   SELECT 'deep', g, 'store.checkpoint',
                          json_build_object('checkpoint_id', 'c' || g,
                                            'run_id', 'r' || ((g - 1) / 10))::text,
                          'r' || ((g - 1) / 10), now(), now()
                     FROM generate_series(1, %(n)s) g""",
                {"n": checkpoints},
            )
        for table in ("queue_entries", "threads", "checkpoints", "events"):
            conn.execute(f"VACUUM ANALYZE {table}")


class _Side:
    """One store (small or big) and the state its measured operations need."""

    def __init__(self, store: Checkpointer, threads: int, checkpoints: int) -> None:
        self.store = store
        self.queue = store.run_queue
        self.threads = threads
        self.checkpoints = checkpoints
        self.times: dict[str, list[int]] = {}
        self.n = 0
        self.claims: dict[str, Any] = {}
        self.heads: dict[str, str | None] = {}
        self.run = f"bench-{uuid.uuid4().hex[:8]}"

    def timed(self, name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter_ns()
        value = fn()
        self.times.setdefault(name, []).append(time.perf_counter_ns() - t0)
        return value

    def step(self, rng: random.Random) -> None:
        self.n += 1
        q, s = self.queue, self.store
        q.submit(Submission(thread_id=f"fresh-{self.run}-{self.n}", input=JOB_INPUT))
        lease = self.timed("lease", lambda: q.lease("grower", LEASE_TTL))
        assert lease is not None
        q.close(lease, Completed(None))
        target = f"g-{rng.randrange(self.threads)}"
        self.timed("submit", lambda: q.submit(Submission(thread_id=target, input=JOB_INPUT)))
        for label, thread in (("commit (queue thread)", "g-1"), ("commit (deep thread)", "deep")):
            if thread not in self.claims:
                self.claims[thread] = s.claim(thread, "grower", LONG_CLAIM)
                head = s.get(thread)
                self.heads[thread] = None if head is None else head.checkpoint_id
            commit = Commit(
                checkpoint_id=uuid.uuid4().hex,
                parent_id=self.heads[thread],
                run_id=self.run,
                state=STATE,
                next=("agent",),
            )
            claim = self.claims[thread]
            done = self.timed(label, lambda c=claim, m=commit: s.commit(c, m))  # type: ignore[misc]
            self.heads[thread] = done.checkpoint_id
        middle = f"c{self.checkpoints // 2}"
        newest_run = f"r{(self.checkpoints - 1) // 10}"
        self.timed("get (head)", lambda: s.get("deep"))
        self.timed("history(limit=100)", lambda: s.history("deep", limit=100))
        self.timed("history(before=middle)", lambda: s.history("deep", before=middle, limit=100))
        self.timed("latest_of_runs(newest run)", lambda: s.latest_of_runs("deep", [newest_run]))
        self.timed("latest_of_runs(oldest run)", lambda: s.latest_of_runs("deep", ["r0"]))
        backlog = Submission(thread_id="backlog", input=JOB_INPUT)
        self.timed("submit (backlog thread)", lambda: q.submit(backlog))
        interrupt = Submission(thread_id="backlog", input=JOB_INPUT, mode=Mode.INTERRUPT)
        self.timed("INTERRUPT submit (backlog thread)", lambda: q.submit(interrupt))
        self.timed("threads(limit=100) past dead rows", lambda: s.threads(limit=100))


def run(
    dsn: str,
    *,
    entries: int,
    threads: int,
    checkpoints: int,
    hazards: Hazards = Hazards(busy=50_000, backlog=50_000, dead=100_000),
    prune_threads: int = 1_000,
    prune_checkpoints: int = 2_200,
    samples: int = 200,
    log: Callable[[str], None] = print,
) -> GrowthReport:
    schemas = {"small": "growth_small", "big": "growth_big"}
    shapes = {
        "small": (max(1, entries // 1000), max(1, threads // 1000), min(checkpoints, 250)),
        "big": (entries, threads, checkpoints),
    }
    started = time.monotonic()
    sides: dict[str, _Side] = {}
    for name, schema in schemas.items():
        params = {"backend": "postgres", "dsn": dsn, "schema": schema}
        open_store(params, migrate=True).close()
        n_entries, n_threads, n_checkpoints = shapes[name]
        t0 = time.monotonic()
        shape = (
            hazards
            if name == "big"
            else Hazards(
                *(max(1, n // 1000) for n in (hazards.busy, hazards.backlog, hazards.dead))
            )
        )
        populate(dsn, schema, n_entries, n_threads, n_checkpoints, shape)
        log(
            f"  growth {name}: {n_entries} open entries over {n_threads} threads, "
            f"{n_checkpoints} checkpoints, {shape}, populated in {time.monotonic() - t0:.1f} s"
        )
        sides[name] = _Side(open_store(params), n_threads, n_checkpoints)
    populate_seconds = time.monotonic() - started
    rng = random.Random(7)
    try:
        for _ in range(10):  # warm-up
            for side in sides.values():
                side.step(rng)
        for side in sides.values():
            side.times.clear()
        for _ in range(samples):
            for side in sides.values():
                side.step(rng)
    finally:
        for side in sides.values():
            for claim in side.claims.values():
                with contextlib.suppress(Exception):
                    side.store.release_claim(claim)
            side.store.close()
    report = GrowthReport(
        entries=entries,
        threads=threads,
        checkpoints=checkpoints,
        populate_seconds=populate_seconds,
        samples=samples,
        schemas=schemas,
        hazards=hazards,
        prune_threads=prune_threads,
        prune_checkpoints=prune_checkpoints,
    )
    small, big = sides["small"].times, sides["big"].times
    prune_small = measure_prune(dsn, "growth_prune_small", 10, prune_checkpoints, log)
    prune_big = measure_prune(dsn, "growth_prune_big", prune_threads, prune_checkpoints, log)
    small["prune_all step (one transaction)"] = prune_small
    big["prune_all step (one transaction)"] = prune_big
    for name in small:
        row = GrowthRow(
            name,
            percentile(small[name], 0.5) / 1e6,
            percentile(small[name], 0.99) / 1e6,
            percentile(big[name], 0.5) / 1e6,
            percentile(big[name], 0.99) / 1e6,
        )
        report.rows.append(row)
        log(
            f"  growth {name}: small p50 {row.small_p50:.2f} ms, big p50 {row.big_p50:.2f} ms "
            f"(x{row.ratio:.2f}; mean big {statistics.fmean(big[name]) / 1e6:.2f} ms)"
        )
    return report


def measure_prune(
    dsn: str, schema: str, threads: int, checkpoints: int, log: Callable[[str], None]
) -> list[int]:
    """prune_all(keep_last=1) over ``threads`` x ``checkpoints`` day-old checkpoints (each with
    its store.checkpoint event), step by step as the Python caller loops; ns per step."""
    open_store({"backend": "postgres", "dsn": dsn, "schema": schema}, migrate=True).close()
    t0 = time.monotonic()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path = "{schema}"')
        with conn.transaction():
            conn.execute(
                """INSERT INTO threads (thread_id, live, last_seq, head_id, created_at,
                                        updated_at, first_commit_order)
                   SELECT 'p-' || t, true, %(n)s, 'c' || %(n)s, now(), now(), t
                     FROM generate_series(1, %(t)s) t""",
                {"t": threads, "n": checkpoints},
            )
            conn.execute(
                """INSERT INTO checkpoints (thread_id, checkpoint_id, seq, parent_id, run_id,
                                            state, metadata, next, created_at, committed_at)
                   SELECT 'p-' || t, 'c' || g, g, NULL, 'r' || g, '{}', 'null', '{}',
                          now() - interval '2 days', now() - interval '2 days'
                     FROM generate_series(1, %(t)s) t, generate_series(1, %(n)s) g""",
                {"t": threads, "n": checkpoints},
            )
            conn.execute(
                """INSERT INTO events (thread_id, seq, kind, payload, run_id, created_at,
                                       committed_at)
                   SELECT 'p-' || t, g, 'store.checkpoint', '{}', 'r' || g,
                          now() - interval '2 days', now() - interval '2 days'
                     FROM generate_series(1, %(t)s) t, generate_series(1, %(n)s) g""",
                {"t": threads, "n": checkpoints},
            )
        for table in ("threads", "checkpoints", "events"):
            conn.execute(f"VACUUM ANALYZE {table}")
        populated = time.monotonic() - t0
        times: list[int] = []
        after: str | None = None
        removed = 0
        t1 = time.monotonic()
        while True:
            s0 = time.perf_counter_ns()
            row = conn.execute(
                "SELECT * FROM dg_prune_batch_v1(%s, 1000, 1, interval '1 day')", (after,)
            ).fetchone()
            times.append(time.perf_counter_ns() - s0)
            assert row is not None
            removed += int(row[0])
            if int(row[2]) < 1000:
                break
            if row[3] is not None:
                after = str(row[3])
        log(
            f"  growth prune {threads} x {checkpoints}: populated in {populated:.1f} s; "
            f"{removed:,} checkpoints removed in {len(times)} steps, {time.monotonic() - t1:.1f} s"
            f" (max step {max(times) / 1e6:.1f} ms)"
        )
        assert removed == threads * (checkpoints - 1)
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return times
