"""The markdown of a benchmark run: results, ratios against the targets, growth, diagnosis."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable

from .common import FOREIGN_LIMIT, Result, foreign_cell
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
* **Foreign CPU.** Each row also gets the cores the machine spent, while it was measured, on
  anything but the benchmark's own processes (clients, pgbench) and its PostgreSQL server
  (`/proc/stat` busy time less those process trees' CPU); a ratio of rows measured beside more
  than 0.2 core of such work is marked not comparable.
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
        "| family | system | cycle | c | ops/s | p50 ms | p99 ms | cycles | foreign CPU | note |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        if r.skipped:
            lines.append(
                f"| {r.family} | {r.system} | {r.cycle} | {r.concurrency} | — | — | — | — | — | "
                f"skipped: {r.skipped} |"
            )
            continue
        lines.append(
            f"| {r.family} | {r.system} | {r.cycle} | {r.concurrency} | {_fmt(r.ops_per_s, 0)} | "
            f"{_fmt(r.p50_ms)} | {_fmt(r.p99_ms)} | {r.cycles} | {foreign_cell(r)} | {r.note} |"
        )
    return lines


def _foreign(*rows: Result | None) -> float:
    """The most foreign CPU (cores) beside any of ``rows`` (0 when none was measured)."""
    return max((r.foreign_cores or 0.0 for r in rows if r is not None), default=0.0)


def _targets(results: list[Result], cs: list[int]) -> list[str]:
    lines = [
        "| target | c | ours | anchor | ratio | goal | met | foreign CPU (most of the two) |",
        "|---|---:|---:|---:|---:|---:|:---:|---:|",
    ]

    def row(label: str, c: int, ours: float, anchor: float, goal: float, foreign: float) -> None:
        if not ours or not anchor:
            lines.append(f"| {label} | {c} | — | — | n/a | ≥ {goal:g}x | — | — |")
            return
        ratio = ours / anchor
        met = "yes" if ratio >= goal else "**no**"
        if foreign > FOREIGN_LIMIT:  # other work may have slowed one side more than the other
            met = "not comparable"
        lines.append(
            f"| {label} | {c} | {_fmt(ours, 0)} | {_fmt(anchor, 0)} | {ratio:.2f}x | "
            f"≥ {goal:g}x | {met} | {foreign:.2f} |"
        )

    for c in cs:
        ck = _find(results, "durable_graph", "commit + get", c)
        lg = _find(results, "LangGraph PostgresSaver", "put + get_tuple", c)
        txn = _ref(results, "durable_txn", c, "checkpoint")
        sel = _ref(results, "select1", c, "checkpoint")
        phys = 1 / (1 / txn.ops_per_s + 1 / sel.ops_per_s) if txn and sel else 0.0
        ours = ck.ops_per_s if ck else 0.0
        row("checkpoint cycle vs LangGraph put + get_tuple", c, ours, lg.ops_per_s if lg else 0,
            2, _foreign(ck, lg))  # fmt: skip
        row("checkpoint cycle vs physical reference (txn + SELECT 1)", c, ours, phys, 0.8,
            _foreign(ck, txn, sel))  # fmt: skip
        pr = _find(results, "procrastinate", "defer + fetch_job + finish_job", c)
        pq = _find(results, "pgqueuer", "enqueue + dequeue + log_jobs", c)
        for cycle in (LIFECYCLE, FUSED):
            q = _find(results, "durable_graph", cycle, c)
            qv = q.ops_per_s if q else 0.0
            row(f"{cycle} vs procrastinate", c, qv, pr.ops_per_s if pr else 0, 1.5,
                _foreign(q, pr))  # fmt: skip
            row(f"{cycle} vs pgqueuer", c, qv, pq.ops_per_s if pq else 0, 1, _foreign(q, pq))
        for call, r in _write_calls(results, c):
            mean = r.parts[call][2]
            rate = 1000.0 * c / mean if mean else 0.0
            ref = _ref(results, "durable_txn", c, r.family)
            row(f"write call `{call}` ({r.family}) vs pgbench durable txn", c, rate,
                ref.ops_per_s if ref else 0, 0.7, _foreign(r, ref))  # fmt: skip
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
             "|---|---:|---:|---:|---|"]  # fmt: skip
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
        ratio = _ratio(r.ops_per_s, pv)
        if ratio != "n/a" and _foreign(r, pg) > FOREIGN_LIMIT:
            ratio += f" (not comparable: {_foreign(r, pg):.2f} core foreign)"
        lines.append(
            f"| {r.cycle} | {r.concurrency} | {_fmt(r.ops_per_s, 0)} | "
            f"{_fmt(pv, 0) if pv else '—'} | {ratio} |"
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


def docs_page(results_text: str) -> str:
    """A page of one run's results with the method (``--docs PATH``); docs/bench.md itself is
    kept by hand: the current figures, the method, how to reproduce (history is in git)."""
    body = results_text.split("\n", 1)[1] if results_text.startswith("# ") else results_text
    return "# Benchmark run\n\n" + METHOD + "\n## Results\n" + body
