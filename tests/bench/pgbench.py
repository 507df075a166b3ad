"""(d) The physical reference: pgbench on the same server.

Two custom scripts, each client its own connection (``-c N -j N``, simple protocol):

* ``select1``: ``SELECT 1`` — one network round trip and nothing else;
* ``durable_txn``: ``BEGIN; UPDATE`` one random row of a 100,000-row table; ``INSERT`` one
  ~1 KB row; ``END`` — the least a durable write can do: one commit, one WAL flush.

Per-transaction latencies come from pgbench's ``--log`` files (microseconds, column 3).
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import tempfile

import psycopg

from durable_graph.testkit.postgres import server as pg_server

from .common import Result, Sample, percentile

SELECT1 = "SELECT 1;\n"
DURABLE_TXN = """\\set aid random(1, 100000)
BEGIN;
UPDATE bench_accounts SET balance = balance + 1 WHERE id = :aid;
INSERT INTO bench_history (account_id, body) VALUES (:aid, repeat('x', 1000));
END;
"""


def setup(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS bench_accounts (id int PRIMARY KEY, balance bigint)"
        )
        conn.execute(
            "CREATE TABLE IF NOT EXISTS bench_history "
            "(id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, account_id int, body text, "
            "at timestamptz DEFAULT now())"
        )
        conn.execute(
            "INSERT INTO bench_accounts SELECT g, 0 FROM generate_series(1, 100000) g "
            "ON CONFLICT DO NOTHING"
        )
        conn.execute("VACUUM ANALYZE bench_accounts")


def _run_once(
    dsn: str, script_name: str, concurrency: int, seconds: int
) -> tuple[float, list[int]]:
    """One pgbench run: (tps, per-transaction latencies in microseconds)."""
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    pgbench = os.path.join(pg_server.find_bindir(), "pgbench")
    script = SELECT1 if script_name == "select1" else DURABLE_TXN
    with tempfile.TemporaryDirectory(prefix="dg-pgbench-") as tmp:
        path = os.path.join(tmp, f"{script_name}.sql")
        with open(path, "w") as f:
            f.write(script)
        cmd = [
            pgbench,
            "-n",
            "-h",
            str(info.get("host", "127.0.0.1")),
            "-p",
            str(info.get("port", 5432)),
            "-U",
            str(info.get("user", "postgres")),
            "-c",
            str(concurrency),
            "-j",
            str(concurrency),
            "-T",
            str(seconds),
            "-f",
            path,
            "--log",
            "--log-prefix",
            os.path.join(tmp, "log"),
            str(info.get("dbname", "postgres")),
        ]
        env = dict(os.environ)
        if info.get("password"):
            env["PGPASSWORD"] = str(info["password"])
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"pgbench failed: {done.stderr or done.stdout}")
        found = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", done.stdout)
        tps = float(found.group(1)) if found else 0.0
        latencies: list[int] = []
        for log in glob.glob(os.path.join(tmp, "log*")):
            with open(log) as f:
                for line in f:
                    fields = line.split()
                    if len(fields) >= 3:
                        latencies.append(int(fields[2]))
    return tps, latencies


def run_rounds(dsn: str, concurrency: int, duration: float, rounds: int) -> list[Result]:
    """Both scripts at ``concurrency``, alternating, ``duration`` seconds each in ``rounds``
    rounds (at least 1 s each); pooled tps (weighted by time) and latencies."""
    per_round = max(1, round(duration / rounds))
    got: dict[str, list[tuple[float, list[int]]]] = {"select1": [], "durable_txn": []}
    for r in range(rounds):
        names = ["select1", "durable_txn"] if r % 2 == 0 else ["durable_txn", "select1"]
        for name in names:
            got[name].append(_run_once(dsn, name, concurrency, per_round))
    results = []
    for name, runs in got.items():
        latencies = [v for _, lat in runs for v in lat]
        results.append(
            Result(
                family="reference",
                system="pgbench",
                cycle=name,
                concurrency=concurrency,
                ops_per_s=sum(t for t, _ in runs) / len(runs),
                p50_ms=percentile(latencies, 0.5) / 1000,
                p99_ms=percentile(latencies, 0.99) / 1000,
                cycles=len(latencies),
            )
        )
    return results


class PgbenchGroup:
    """pgbench as a workload of `common.measure_interleaved`: each round is one pgbench run of
    ``duration`` seconds (rounded, at least 1); its sample's busy time is the sum of the
    transaction latencies, so its rate is *c* / mean latency like every other workload's."""

    def __init__(self, dsn: str, script: str, concurrency: int) -> None:
        self.dsn = dsn
        self.script = script
        self.concurrency = concurrency

    def wait_ready(self) -> None:
        pass

    def round(self, warmup: float, duration: float) -> list[Sample]:
        _, latencies = _run_once(self.dsn, self.script, self.concurrency, max(1, round(duration)))
        ns = [v * 1000 for v in latencies]
        return [Sample(len(ns), sum(ns), ns, {})]

    def stop(self) -> None:
        pass
