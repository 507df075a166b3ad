"""The markdown of a benchmark run: results, ratios against the targets, growth, diagnosis."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable

from .common import Result
from .diagnose import Diagnosis
from .growth import GrowthReport

LIFECYCLE = "submit + lease + record_attempt + close"
FUSED = "submit + lease(run_id) + close"

METHOD = """\
## Method

* **One server.** A throwaway PostgreSQL 15 (`durable_graph.testkit.postgres.server.start(durable=True)`:
  `fsync`, `synchronous_commit` and `full_page_writes` on) or the server of
  `DURABLE_GRAPH_TEST_DSN`; every system gets its own database on it. SQLite files live on the
  same disk (`synchronous=FULL`, WAL).
* **Concurrency = processes.** At *c* = 1 and 4 each worker is its own process (`spawn`) with its
  own single connection (our stores: a pool of exactly one connection; LangGraph: one
  `psycopg.Connection` as `from_conn_string` opens it; procrastinate: its `PsycopgConnector`
  with a pool of one; pgqueuer: one async psycopg connection). The anchors are driven through
  their own APIs: LangGraph `PostgresSaver.put` + `get_tuple`; procrastinate `JobManager`
  `defer_job_async` + `fetch_job` + `finish_job` (no worker loop); pgqueuer `Queries.enqueue` +
  `dequeue` + `log_jobs` (its completion; no QueueManager).
* **Same payloads.** ~1 KB agent state (a chat transcript) for every checkpointer; a small JSON
  job input for every queue. Our queue cycle uses a fresh thread per job; all workers share one
  queue (ours `tenant=ANY`, one procrastinate queue, one pgqueuer entrypoint), so a worker may
  take another worker's job; an empty fetch is retried and counted.
* **Fair time.** The machine is shared (2 cores, other jobs running), so the systems of one
  comparison are measured in alternating rounds (`--rounds`, default 3) of `--duration / rounds`
  seconds each, after a warm-up, all workers released together by a barrier. ops/s =
  *c* x cycles / busy seconds; p50/p99 over every cycle of every worker.
* **Reference.** pgbench (`-c N -j N`, simple protocol) on the same server: `SELECT 1`, and the
  minimal durable transaction `BEGIN; UPDATE` one random row of 100,000; `INSERT` one ~1 KB row;
  `END`. The checkpoint cycle's physical reference is one such transaction plus one `SELECT 1`
  round trip: ops/s = 1 / (1/tps(txn) + 1/tps(select1)) at the same *c*.
* **Per call.** Each cycle times its calls; a call's *rate* at concurrency *c* is
  *c* / its mean latency, compared with pgbench's minimal durable transaction tps at the same *c*.
* **Worker cycle.** lease(run_id) → claim → entry → latest_of_runs → commit → close; the submit
  that feeds each cycle is timed but excluded. `Worker.run_once` is the real runtime (it also
  records the output effect and releases the claim).
* **Growth.** Bulk SQL into our tables, `VACUUM ANALYZE`, then measured through the API on one
  connection, alternating small and big store call by call (`tests/bench/growth.py`).
* **Diagnosis.** Serial calls on the quiet server: the same `Call` objects through the API and
  on a bare connection; `pg_stat_statements` (track = all, nested statements) and `pg_stat_wal`
  (flushes, WAL bytes; `track_wal_io_timing`) in the diagnostic session; `auto_explain`
  (`log_analyze`, `log_nested_statements`) delivered as notices; build/decode timed without I/O;
  cProfile of the client (`tests/bench/diagnose.py`).
"""


def _fmt(v: float, digits: int = 2) -> str:
    return f"{v:,.{digits}f}"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if a and b else "n/a"


def _find(
    results: Iterable[Result], system: str, cycle: str, c: int, family: str | None = None
) -> Result | None:
    for r in results:
        if (
            r.system == system
            and r.cycle == cycle
            and r.concurrency == c
            and not r.skipped
            and (family is None or r.family == family)
        ):
            return r
    return None


def _ref(results: list[Result], script: str, c: int, family: str) -> Result | None:
    """pgbench's ``script`` measured in the rounds of ``family`` (else the standalone run)."""
    return _find(results, "pgbench", script, c, family) or _find(
        results, "pgbench", script, c, "reference"
    )


def _first(results: Iterable[Result], family: str, system_prefix: str, c: int) -> Result | None:
    for r in results:
        if (
            r.family == family
            and r.system.startswith(system_prefix)
            and r.concurrency == c
            and not r.skipped
        ):
            return r
    return None


def _main_table(results: list[Result]) -> list[str]:
    lines = [
        "| family | system | cycle | c | ops/s | p50 ms | p99 ms | cycles | note |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        if r.skipped:
            lines.append(
                f"| {r.family} | {r.system} | {r.cycle} | {r.concurrency} | — | — | — | — | "
                f"skipped: {r.skipped} |"
            )
            continue
        lines.append(
            f"| {r.family} | {r.system} | {r.cycle} | {r.concurrency} | {_fmt(r.ops_per_s, 0)} | "
            f"{_fmt(r.p50_ms)} | {_fmt(r.p99_ms)} | {r.cycles} | {r.note} |"
        )
    return lines


def _targets(results: list[Result], cs: list[int]) -> list[str]:
    lines = [
        "| target | c | ours | anchor | ratio | goal | met |",
        "|---|---:|---:|---:|---:|---:|:---:|",
    ]

    def row(label: str, c: int, ours: float, anchor: float, goal: float) -> None:
        if not ours or not anchor:
            lines.append(f"| {label} | {c} | — | — | n/a | ≥ {goal:g}x | — |")
            return
        ratio = ours / anchor
        met = "yes" if ratio >= goal else "**no**"
        lines.append(
            f"| {label} | {c} | {_fmt(ours, 0)} | {_fmt(anchor, 0)} | {ratio:.2f}x | "
            f"≥ {goal:g}x | {met} |"
        )

    for c in cs:
        ck = _find(results, "durable_graph", "commit + get", c)
        lg = _find(results, "LangGraph PostgresSaver", "put + get_tuple", c)
        txn = _ref(results, "durable_txn", c, "checkpoint")
        sel = _ref(results, "select1", c, "checkpoint")
        phys = 1 / (1 / txn.ops_per_s + 1 / sel.ops_per_s) if txn and sel else 0.0
        ours = ck.ops_per_s if ck else 0.0
        row("checkpoint cycle vs LangGraph put + get_tuple", c, ours, lg.ops_per_s if lg else 0, 2)
        row("checkpoint cycle vs physical reference (txn + SELECT 1)", c, ours, phys, 0.8)
        pr = _find(results, "procrastinate", "defer + fetch_job + finish_job", c)
        pq = _find(results, "pgqueuer", "enqueue + dequeue + log_jobs", c)
        for cycle in (LIFECYCLE, FUSED):
            q = _find(results, "durable_graph", cycle, c)
            qv = q.ops_per_s if q else 0.0
            row(f"{cycle} vs procrastinate", c, qv, pr.ops_per_s if pr else 0, 1.5)
            row(f"{cycle} vs pgqueuer", c, qv, pq.ops_per_s if pq else 0, 1)
        for call, r in _write_calls(results, c):
            mean = r.parts[call][2]
            rate = 1000.0 * c / mean if mean else 0.0
            ref = _ref(results, "durable_txn", c, r.family)
            row(f"write call `{call}` ({r.family}) vs pgbench durable txn", c, rate,
                ref.ops_per_s if ref else 0, 0.7)  # fmt: skip
    return lines


WRITE_CALLS = ("commit", "claim", "submit", "lease", "record_attempt", "close", "lease(run_id)")


def _write_calls(results: list[Result], c: int) -> list[tuple[str, Result]]:
    """(call, the cycle it was timed in) for each of our PostgreSQL write calls."""
    out: list[tuple[str, Result]] = []
    sources = [
        ("commit", _find(results, "durable_graph", "commit + get", c, "checkpoint")),
        ("claim", _first(results, "worker", "durable_graph", c)),
        ("submit", _find(results, "durable_graph", LIFECYCLE, c, "queue")),
        ("lease", _find(results, "durable_graph", LIFECYCLE, c, "queue")),
        ("record_attempt", _find(results, "durable_graph", LIFECYCLE, c, "queue")),
        ("close", _find(results, "durable_graph", LIFECYCLE, c, "queue")),
        ("lease(run_id)", _find(results, "durable_graph", FUSED, c, "queue")),
    ]
    for call, r in sources:
        if r is not None and call in r.parts:
            out.append((call, r))
    return out


def _parts_table(results: list[Result]) -> list[str]:
    lines = [
        "| system | cycle | c | call | p50 ms | p99 ms | mean ms |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    for r in results:
        for name, (p50, p99, mean) in r.parts.items():
            lines.append(
                f"| {r.system} | {r.cycle} | {r.concurrency} | {name} | {_fmt(p50)} | "
                f"{_fmt(p99)} | {_fmt(mean)} |"
            )
    return lines


def _sqlite_vs_pg(results: list[Result], cs: list[int]) -> list[str]:
    lines = ["| cycle | c | SQLite ops/s | PostgreSQL ops/s | SQLite / PostgreSQL |",
             "|---|---:|---:|---:|---:|"]  # fmt: skip
    for r in results:
        if r.family != "sqlite" or r.skipped:
            continue
        pg = next(
            (
                x
                for x in results
                if x.system == "durable_graph"
                and x.cycle == r.cycle
                and x.concurrency == r.concurrency
                and x.family != "sqlite"
            ),
            None,
        )
        pv = pg.ops_per_s if pg else 0.0
        lines.append(
            f"| {r.cycle} | {r.concurrency} | {_fmt(r.ops_per_s, 0)} | "
            f"{_fmt(pv, 0) if pv else '—'} | {_ratio(r.ops_per_s, pv)} |"
        )
    return lines


def _growth(g: GrowthReport) -> list[str]:
    lines = [
        f"Big store: {g.entries:,} open entries over {g.threads:,} threads and one thread of "
        f"{g.checkpoints:,} checkpoints (populated and analysed in {g.populate_seconds:.1f} s); "
        f"small store: the same shapes 1000x smaller (250 checkpoints). {g.samples} samples "
        "each, c = 1, alternating.",
        "",
        *(
            [
                f"Issue 12's hazards in the same stores (small: 1000x fewer): "
                f"{g.hazards.busy:,} threads holding a live lease with the oldest heads (lease), "
                f"one thread with {g.hazards.backlog:,} open entries (submit and INTERRUPT "
                f"submit to it), {g.hazards.dead:,} dead thread rows before the live ones "
                f"(threads). prune_all: {g.prune_threads:,} threads x {g.prune_checkpoints:,} "
                "day-old checkpoints to keep_last=1, timed per step (one transaction of at most "
                "10,000 rows); small: 10 threads.",
                "",
            ]
            if g.hazards is not None
            else []
        ),
        "| operation | small p50 ms | small p99 ms | big p50 ms | big p99 ms | big/small p50 | "
        "within 1.5x |",
        "|---|---:|---:|---:|---:|---:|:---:|",
    ]
    for row in g.rows:
        met = "yes" if row.ratio <= 1.5 else "**no**"
        lines.append(
            f"| {row.operation} | {_fmt(row.small_p50)} | {_fmt(row.small_p99)} | "
            f"{_fmt(row.big_p50)} | {_fmt(row.big_p99)} | {row.ratio:.2f}x | {met} |"
        )
    return lines


def _diagnosis(d: Diagnosis) -> list[str]:
    lines = [
        f"Serial, one connection, {d.n} calls each, on the quiet server. Python floor: "
        f"`SELECT 1` round trip {_fmt(d.select1_py_p50, 3)} ms; minimal durable transaction "
        f"(UPDATE + 1 KB INSERT, psycopg) {_fmt(d.txn_py_p50, 3)} ms, "
        f"{d.txn_wal_syncs:.2f} WAL flushes ({_fmt(d.txn_sync_ms, 3)} ms), "
        f"{d.txn_wal_bytes:,.0f} WAL bytes.",
        "",
        "| call | API p50 ms | raw p50 ms | server exec ms | build µs | decode µs | "
        "WAL flushes | flush ms | WAL records | WAL bytes | FPI |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in d.costs:
        lines.append(
            f"| {c.name} | {_fmt(c.api_p50, 3)} | {_fmt(c.raw_p50, 3)} | {_fmt(c.server_ms, 3)} | "
            f"{c.build_us:.0f} | {c.decode_us:.0f} | {c.wal_syncs:.2f} | {_fmt(c.wal_sync_ms, 3)} | "
            f"{c.wal_records:.1f} | {c.wal_bytes:,.0f} | {c.wal_fpi:.2f} |"
        )
    lines += ["", "API = through `PostgresCheckpointer` (pool, watchdog, error mapping); raw = "
              "the same `Call` on a bare psycopg connection; server exec = pg_stat_statements "
              "mean of the function call (excludes the commit's WAL flush); build = validation "
              "+ JSON encoding + statement; decode = rows → model values."]  # fmt: skip
    for name, us in d.executor_parts_us.items():
        lines.append(f"Executor part: {name} {us:.1f} µs per call.")
    lines += ["", "### Costliest nested statements per call (pg_stat_statements, track = all)", ""]
    for c in d.costs:
        if not c.nested:
            continue
        lines += [f"**{c.name}** (server {c.server_ms:.3f} ms per call)", "",
                  "| statement | per call | mean ms | share of the call |",
                  "|---|---:|---:|---:|"]  # fmt: skip
        for n in c.nested:
            q = n.query.replace("|", "\\|")
            lines.append(f"| `{q}` | {n.per_call:.2f} | {n.mean_ms:.3f} | {n.share:.0%} |")
        lines.append("")
    if d.experiment:
        floor = d.experiment[0][1]
        lines += ["### Experiment: what a small LANGUAGE sql helper costs per call", "",
                  "Interleaved call by call on a plain connection (no pg_stat_statements "
                  "tracking); median µs from Python, and above the round-trip floor.", "",
                  "| variant | median µs | above floor µs |", "|---|---:|---:|"]  # fmt: skip
        for label, us in d.experiment:
            lines.append(f"| {label} | {us:.0f} | {us - floor:.0f} |")
        lines.append("")
    if d.profiles:
        lines += ["### Client profile (cProfile, sorted by own time)", ""]
        for name, text in d.profiles.items():
            lines += [f"<details><summary>{name}</summary>", "", "```", text, "```", "",
                      "</details>", ""]  # fmt: skip
    if d.plans:
        lines += ["### Plans (auto_explain, log_analyze, nested statements; slowest first)", ""]
        for label, plans in d.plans.items():
            lines += [f"<details><summary>{label}: {len(plans)} statements, slowest "
                      f"{plans[0][0] if plans else 0:.3f} ms</summary>", "", "```"]  # fmt: skip
            for _, text in plans[:4]:
                lines += [text.rstrip(), ""]
            lines += ["```", "", "</details>", ""]
    return lines


def render(
    results: list[Result],
    *,
    facts: dict[str, str],
    where: str,
    args: argparse.Namespace,
    anchors: dict[str, str | None],
    growth: GrowthReport | None,
    diagnosis: Diagnosis | None,
    failures: list[str],
    elapsed: float,
    load: tuple[str, str] = ("", ""),
) -> str:
    cs = list(args.concurrency)
    out = [
        "# durable_graph benchmarks",
        "",
        f"Run: `python -m tests.bench.run` — {elapsed:.0f} s; {where}; "
        + ", ".join(f"{k} = {v}" for k, v in facts.items())
        + f"; {os.cpu_count()} CPUs; load average at start {load[0]}, at end {load[1]}; "
        f"{args.duration:g} s measured per system and concurrency in {args.rounds} rounds.",
        "",
        "Anchors: "
        + ", ".join(f"{k}: {'installed' if v is None else v}" for k, v in anchors.items())
        + ".",
        "",
        "## Targets",
        "",
        *_targets(results, cs),
        "",
        "## Results",
        "",
        *_main_table(results),
        "",
        "## Calls inside each cycle",
        "",
        *_parts_table(results),
        "",
    ]
    if any(r.family == "sqlite" for r in results):
        out += ["## SQLite vs PostgreSQL (same cycles)", "", *_sqlite_vs_pg(results, cs), ""]
    if growth is not None:
        out += ["## Growth", "", *_growth(growth), ""]
    if diagnosis is not None:
        out += ["## What limits us (diagnosis)", "", *_diagnosis(diagnosis), ""]
    if failures:
        out += ["## Failures", "", *[f"- {f}" for f in failures], ""]
    return "\n".join(out) + "\n"


ANALYSIS = """\
## Analysis, second pass: client CPU per call (2026-11-30)

The SQL pass (below) left the Python client as the limit: it spent more CPU per call than the
server. This pass changed only the client (`durable_graph.postgres.connection`, `.calls`,
`durable_graph.core.validation`); the calls, their SQL, their results and their errors are unchanged.

### What changed (each measured; kept only what paid)

1. **The watchdog thread no longer wakes on every call.** Arming a call's watchdog notified the
   watchdog thread whenever the new deadline reached the front of its heap, which with serial
   calls was every call: a thread switch and ~40 us of process CPU per call, outside the
   calling thread (invisible to `thread_time`, visible in `process_time`). The thread now
   records the deadline it sleeps until, and is notified only for an earlier one (or when it
   sleeps with nothing armed); calls of one `call_timeout` arm ever-later deadlines, so a
   steady stream costs about one wake-up per `call_timeout`. The guarantee is unchanged: every
   armed deadline is examined by the thread before it passes (`tests/test_postgres_faults.py`).
2. **The statement is rendered once.** `calls.statement()` still composes
   `SELECT * FROM {schema}.{function}(%s::type, ...)` with `sql.Identifier`, but caches the
   rendered bytes (`Composed.as_bytes`; schema and function names are ASCII by rule 27, so the
   bytes are the same in any client encoding). psycopg re-rendered the `Composed` on every
   execute (~20 nested `as_bytes` calls per statement). `Call.query` is now `bytes`; the
   async executor passes it to `execute` unchanged.
3. **No `Column` objects per call.** The executor asked `cursor.description is not None`,
   which builds one `Column` (with a type lookup) per result field, 11 for a checkpoint row;
   it now checks the result status (`TUPLES_OK`) directly. `dict_row` only reads field names.
4. **JSON check without path bookkeeping.** `encode_json` first walks the value depth first
   with a stack of iterators (no recursion, no path list; a cycle still fails after
   `MAX_JSON_DEPTH` steps); only when that walk finds a problem does the original
   recursive `_check_tree` run, to name the first bad element with the same message. 6 us
   instead of 11-15 us for the ~1 KB state; equivalence checked ad hoc on 20,000 random trees
   (accepted by one iff by the other), and by `tests/test_fuzz_inputs.py`.

Measured and not changed: binary result format (no faster: the text loaders of these columns
are C), tuple rows instead of `dict_row` (within noise: the dict is built by a C `zip`),
psycopg's automatic prepared statements (already in use after 5 executions: bytes queries keep
one cache key), pool `getconn` + `putconn` (7 us) and a call's build (4-5 us for `get`).

Client CPU per call (`tests/bench/client_cpu.py`: `process_time` over batches of 20 serial
calls, interleaved, median of 30 batches; three alternating runs of before and after on the
same server, ranges over the runs; the machine was busy, so absolute values are higher than
the quiet-moment figures quoted below for the previous run):

| call | before µs | after µs | | call | before µs | after µs |
|---|---:|---:|---|---|---:|---:|
| commit (1 KB) | 993-1123 | 608-860 | | lease(run_id) | 831-967 | 460-734 |
| get | 580-690 | 320-485 | | close | 777-913 | 421-690 |
| submit | 645-736 | 304-552 | | bare `SELECT 1` | 91-115 | 70-86 |

A separate serial loop of 4 x 300 commits: 570-700 -> 410-455 us process CPU per commit
(wall 1.25-1.58 -> 1.08-1.20 ms).

The targets table under "Latest results" below is the full `make bench` run made after both
passes (the SQL pass, next section, and this client pass).

### What limits us now

* **psycopg's own per-statement work.** What remains of a `get` on the client is mostly
  psycopg: the extended-protocol send of a prepared statement, the per-result loader set-up
  (one loader lookup per column), row loading and its wait loop, ~180 us against ~120 us for
  its `SELECT 1` at the same moment, then our decode (~30 us, half of it `json.loads` of the
  1 KB state, most of the rest the frozen-dataclass construction in `model.py`), the executor
  (~15 us: pool, watchdog, cursor) and the call's build (~5 us). Cutting deeper means
  bypassing psycopg's cursor (e.g. libpq `exec_prepared` on `pgconn`), which would change the
  error and cancellation paths: not done.
* **The checkpoint cycle vs the physical reference** is two Python round trips carrying a
  1 KB state each way against pgbench's C client; at c=4 four Python processes and four
  backends share 2 cores. The reference's `SELECT 1` leg is ~0.05 ms at c=4; ours is a full
  `get` (~0.3 ms client + 0.07 ms server).

## Analysis, first pass: the SQL functions (run 2026-11-30, `make bench`, 317 s)

Machine: 2 vCPUs shared with other jobs (load average 1-2 during this run, much higher at
times while measuring), local ext4 disk (`pg_test_fsync`: fdatasync ~0.9 ms). Absolute numbers
are depressed and noisy (the serial `SELECT 1` floor moved between 0.09 and 0.6 ms over the
day); the ratios come from interleaved rounds, so they are the figures to read.

### What changed (issue 7: `sql/` only; signatures, result rows and behaviour unchanged)

1. **No SQL function is planned per call any more.** Every `dg_*` function is PL/pgSQL (the
   reads were `LANGUAGE sql` with `SET`: planned on every call), so its plans are cached per
   session. Internal helpers lost `SET search_path` (they run under their pinned caller's path;
   `sql/README.md` "Names"): scalar SQL helpers are inlined into the calling expression
   (`store_now`, `_dg_iso` -- now `STABLE` since `to_char` is --, `_dg_json_pair`), the
   row helpers became `STABLE` set-returning SQL functions that the planner inlines into the
   calling statement (`_dg_writes` and `_dg_attempts` replace the per-row scalar
   `_dg_writes_json` / `_dg_attempts_json`, `_dg_entry`), the rest are PL/pgSQL
   (`_dg_refresh_queue_thread`, `_dg_close_entry`, the lock helpers).
2. **Fewer statements, locks and row versions per write.** `_dg_refresh_queue_thread` is one
   `UPDATE` that leaves the row alone when nothing moved; `dg_lease_v1` writes the lease and the
   attempt count in one `UPDATE` (one row version instead of two), sets `queue_threads` directly,
   and skips the live-lease re-check and the clearing `UPDATE` when `queue_threads` shows no
   lease token; `dg_commit_v1` locks its thread with one `SELECT ... FOR UPDATE` when there is
   no fence, inserts the caller's events in one `INSERT`, and detects a reused checkpoint id by
   the primary key (`ON CONFLICT DO NOTHING`) -- the old `EXISTS` probe had been given a generic
   plan on `checkpoints_run_idx` that filtered the whole thread (51 us at 300 checkpoints,
   growing with the thread); a lock helper that inserts the missing row keeps it as its lock
   instead of locking it again (one statement and one WAL record less on a new thread).
3. **Growth.** `dg_latest_of_runs_v1`: one backward probe of `checkpoints_run_idx` per run id
   (LATERAL over `unnest`), then the newest, with `plan_cache_mode = force_generic_plan` (left
   to choose, PL/pgSQL re-planned it on every call: 0.50 vs 0.11 ms); `dg_history_v1` and
   `dg_threads_v1` split the NULL / non-NULL cursor into two statements, so the cursor bounds
   the index scan.

Server time per call (`pg_stat_statements` mean of the function, serial, quiet; before = the
shipped functions, same machine and harness, `SELECT 1` floor 0.11 ms; after = floor 0.09-0.21
ms):

| call | before ms | after ms | | call | before ms | after ms |
|---|---:|---:|---|---|---:|---:|
| claim | 0.25 | 0.16 | | lease | 0.98 | 0.41 |
| commit | 0.81 | 0.30 | | lease(run_id) | 1.55 | 0.40 |
| get | 0.35 | 0.07 | | record_attempt | 0.93 | 0.46 |
| latest_of_runs | 0.81 | 0.11 | | close | 1.56 | 0.29 |
| entry | 0.41 | 0.07 | | submit | 0.67 | 0.33 |

`latest_of_runs(oldest run)` on the 10,000-checkpoint thread went from 4.6x to 1.00x of the small
store; `history(limit=100)` from 7-12 ms to 5-6 ms (now mostly decoding 100 x 1 KB states). WAL
per call is unchanged in kind (one flush per write; `lease(run_id)` 1.6 KB, was 1.8 KB).

### Targets (this run, before -> after)

Met now: the fused queue lifecycle `submit + lease(run_id) + close` vs procrastinate at c=1
(0.69x -> **1.50x**) and vs pgqueuer at c=1 and c=4 (0.51x / 0.90x -> **1.07x / 1.12x**); every
write call at c=1 (0.31-0.53x -> **0.77-0.92x**, claim 1.42x); claim at c=4 (0.37x -> 0.70x);
the checkpoint cycle vs the physical reference was met at c=1 in a shorter run of the same code
(0.89x) but not in this one (0.53x: pgbench's reference round was faster here); growth (all
within 1.14x). Improved but missed: checkpoint cycle vs LangGraph 1.35x / 1.02x -> 1.59x /
1.59x (goal 2x), vs the physical reference 0.43x / 0.30x -> 0.53x / 0.41x (goal 0.8x); the fused
lifecycle vs procrastinate at c=4 0.86x -> 1.20x (goal 1.5x); the four-call lifecycle 0.59x /
0.69x -> 1.13x / 0.90x procrastinate and 0.43x / 0.73x -> 0.81x / 0.83x pgqueuer; write calls at
c=4 0.36-0.46x -> 0.58-0.66x (goal 0.7x).

### What limits us now: the client's CPU and the call count, not the SQL

* **Client CPU per call exceeds server CPU.** Measured with `time.process_time` around 400
  serial calls through the store (quiet moment): commit 0.54 ms of client CPU (0.48 ms on a bare
  connection, of which building the call 0.05 ms), get 0.43, submit 0.38, lease(run_id) 0.58,
  close 0.50; psycopg's own `SELECT 1` 0.12 ms. The functions now run in 0.07-0.45 ms. At c=4,
  four Python clients and four backends share 2 cores: a commit costs ~0.5 ms client + ~0.3 ms
  server + the WAL writer, against pgbench's durable transaction whose C client costs almost
  nothing and whose server work is one UPDATE and one INSERT (~0.1-0.2 ms). That is the 0.58x
  of `commit` at c=4 and the 0.41x of the checkpoint cycle (two Python calls, each sending and
  getting back a 1 KB state) against "one durable transaction + one `SELECT 1` from pgbench".
  Closing it is client work (`durable_graph.postgres` executor and `calls`: e.g. not returning
  the committed state back, fewer psycopg round-trip layers), outside `sql/`.
* **Server CPU that remains is real work**: 10-15 statements per write call (checks, one row
  lock per locked row, 2-4 index insertions per new row version: `checkpoints` has three
  indexes, `queue_entries` four; an attempt changes `queue_rank`, which `queue_entries_open_idx`
  holds, so that `UPDATE` cannot be HOT). Measured nested calls cost ~2 us each; converting the
  `PERFORM _dg_check(...)` lines to inline `IF`s would save ~4 us per check (~25 us per commit),
  not done: small against the client's share.
* **Four durable calls where the anchors make three.** Each call is its own transaction and WAL
  flush (0.2-0.6 ms here); the four-call lifecycle pays one more than procrastinate or pgqueuer.
  The fused `lease(run_id)` (SPEC 5) is our lifecycle and meets pgqueuer; at c=4 it reaches
  1.20x procrastinate, limited as above by client CPU (four Python processes on 2 cores).

**SQLite** runs the same cycles 2.5-3.6x faster than PostgreSQL at c=1 (was 3.4-4.1x; no
network, no PL/pgSQL) and 1.0-1.7x at c=4, where its p99 grows to 80-245 ms (processes queue on
the single writer lock, bounded by `busy_timeout`). Not interleaved with the PostgreSQL runs:
compare loosely.
"""


def docs_page(results_text: str) -> str:
    body = results_text.split("\n", 1)[1] if results_text.startswith("# ") else results_text
    return (
        "# Benchmarks\n\n`make bench` (= `.venv/bin/python -m tests.bench.run --out "
        "bench-results.md`) measures durable_graph against LangGraph's PostgresSaver, "
        "procrastinate and pgqueuer on one durable PostgreSQL server, with pgbench as the "
        "physical reference, and SQLite; it then measures growth and diagnoses what limits "
        "us. This page is rewritten by each run; the analysis section is kept by hand.\n\n"
        + ANALYSIS
        + "\n"
        + METHOD
        + "\n## Latest results\n"
        + body
    )
