"""``make failover-suite``: partitions failing over under pg_auto_failover, under load (SPEC §27).

Not part of ``make test`` (its name is not ``test_*.py``; the make target names the file). Three
pg_auto_failover formations under one monitor (`durable_graph.testkit.postgres.autofailover`),
each a primary and a standby on loopback ports, hold the store's 4 partitions (N is a power of
two, SPEC §16: partitions 0 and 3 share the first formation); a proxy on a server of its own
reaches each partition by its formation's multi-host DSN (``target_session_attrs=read-write``),
set up by ``durable-graph partitions init``. Worker processes and producers run the chaos
worker's jobs (lease, claim, read, plan, commit the input applied, commit the result, close;
workers SIGKILLed and restarted) through the proxy (`tests/failover/fleet.py`), while the
primary PostgreSQL of one formation after another is SIGKILLed (its postmaster and every
process it started; the keeper lives on), five times. The monitor promotes the standby; the
proxy is never restarted.

Checked (each failure a violation): the chaos supervisor's invariants and the fleet's
(`tests/chaos/supervisor.py`, `tests/failover/fleet.py`: every acknowledged submit, commit and
close present, nothing applied twice, fencing, tokens and entry ids only increasing per thread);
during each outage a thread of a failed partition fails with `ProcessingError` naming its
partition database, and works after; the other formations' partitions never fail a call (a
probe on each, and every failed call of the workers and producers names a partition of the
formation that was down, and came while it was); after each kill the monitor made the standby
the primary and the old primary rejoined as its standby; ``partitions verify`` names the
primaries the monitor has. Measured: kill -> first successful call on the failed partition
(p50 and max over the kills), printed (run with ``-s``) and reported in docs/failover.md.

The second test runs the same load on asynchronous standbys (``replication quorum`` false),
each kill preceded by a standby that falls behind for a second (its WAL receiver stopped, as on
a busy network), and shows what that loses: acknowledged writes of the lag window, only on the
failed formation's partitions.

The third runs docs/failover.md's DBA procedure as written (`test_the_dba_procedure_runs_as_written`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

from chaos.supervisor import Env
from durable_graph import ClaimPolicy, ProcessingError, StoreError
from durable_graph.postgres import PostgresCheckpointer
from durable_graph.postgres.partitions import partition_of_thread
from durable_graph.testkit.postgres import autofailover
from durable_graph.testkit.postgres import server as pg_server
from failover.fleet import Fleet, FleetEnv, FleetPlan
from test_failover import print_fleet_report, store_config

ROOT = Path(__file__).resolve().parent.parent.parent
SCHEMA = "ha"
PARTITIONS = 4
GROUPS = 3
KILLS = int(os.environ.get("DURABLE_GRAPH_HA_KILLS", "5"))
SEED = int(os.environ.get("DURABLE_GRAPH_CHAOS_SEED", "1"))
PROBE_POLICY = ClaimPolicy(ttl=timedelta(seconds=30), renew_every=timedelta(seconds=10))
OUTAGE_LIMIT = 120.0
"""A partition not writable this long after its primary's kill is a violation."""


def group_of(part: int) -> int:
    return part % GROUPS


def thread_on(part: int, prefix: str) -> str:
    return next(
        f"{prefix}-{i}"
        for i in range(10_000)
        if partition_of_thread(f"{prefix}-{i}", PARTITIONS) == part
    )


@dataclass
class Kill:
    """One kill of a formation's primary and what followed."""

    group: int
    old_primary: str
    at: float
    first_ok: float | None = None
    stable_at: float | None = None
    """When the monitor had the formation stable again (a primary and a healthy standby)."""
    new_primary: str | None = None
    errors: list[str] = field(default_factory=list)
    lag: float = 0.0

    @property
    def outage(self) -> float:
        return (self.first_ok - self.at) if self.first_ok is not None else float("inf")

    @property
    def parts(self) -> list[int]:
        return [p for p in range(PARTITIONS) if group_of(p) == self.group]


class HAFleet(Fleet):
    """The fleet of `tests/failover/fleet.py` with pg_auto_failover doing the promotions: its
    one failover becomes ``KILLS`` kills of a formation's primary, each probed until the failed
    partition answers again and the formation is stable."""

    def __init__(
        self,
        plan: FleetPlan,
        fenv: FleetEnv,
        workdir: Path,
        ha: autofailover.AutoFailover,
        proxy_dsn: str,
        *,
        kills: int,
        lag: float = 0.0,
    ) -> None:
        super().__init__(plan, fenv, workdir)
        self.ha = ha
        self.proxy_dsn = proxy_dsn
        self.kills_planned = kills
        self.lag = lag
        self.kills: list[Kill] = []
        self.failures: list[tuple[float, str]] = []
        """(time, message) of every failed producer and probe call."""
        self.control_failures: list[str] = []
        self.timeouts = 0

    def call(self, fn: Any) -> Any:
        """A producer's call, retried through the outage; each failure kept with its message."""
        deadline = time.monotonic() + 180.0
        while True:
            started = time.monotonic()
            try:
                result = fn()
            except ProcessingError as exc:
                with self.lock:
                    self.producer_failures.append(time.monotonic() - started)
                    self.failures.append((time.time(), str(exc)))
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
                continue
            with self.lock:
                self.producer_ok.append(time.time())
            return result

    # -- the kills ------------------------------------------------------------------------------

    def failover(self) -> None:
        try:
            self._failovers()
        except Exception as exc:
            with self.lock:
                self.result.violations.append(f"the failovers themselves failed: {exc!r}")

    def _failovers(self) -> None:
        probe = PostgresCheckpointer.open(self.proxy_dsn, store_config(SCHEMA, auto_migrate=False))
        try:
            for k in range(self.kills_planned):
                self._one_kill(probe, k)
        finally:
            probe.close()

    def _one_kill(self, probe: PostgresCheckpointer, k: int) -> None:
        group = k % GROUPS
        name = f"part{group}"
        old = self.ha.primary(name)
        if old is None:
            self.result.violations.append(f"kill {k}: {name} has no stable primary")
            return
        parts = [p for p in range(PARTITIONS) if group_of(p) == group]
        # A fresh thread for each try: a claim that failed at call_timeout may have committed
        # after all (ProcessingError means "unknown"), and would hold its thread.
        targets = (thread_on(parts[0], f"probe{k}-{i}") for i in range(100_000))
        target = next(targets)
        controls = [p for p in range(PARTITIONS) if p not in parts]
        standby = next(n for n in self.ha.formations[name].nodes if n.name != old.name)
        stopped = self._stop_walreceiver(standby) if self.lag else None
        if stopped is not None:
            time.sleep(self.lag)
        at = time.time()
        old.kill_postgres()
        if stopped is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped, signal.SIGCONT)
        kill = Kill(group, old.name, at, lag=self.lag if stopped is not None else 0.0)
        self.kills.append(kill)
        self.marks.setdefault("kill", at)
        tries = 0
        while kill.first_ok is None:
            try:
                claim = probe.claim(target, "probe", PROBE_POLICY)
                probe.release_claim(claim)
                kill.first_ok = time.time()
            except ProcessingError as exc:
                kill.errors.append(str(exc))
                with self.lock:
                    self.failures.append((time.time(), str(exc)))
                target = next(targets)
            tries += 1
            for part in controls:  # the other formations' partitions answer throughout
                thread = thread_on(part, f"control{k}-{tries}")
                try:
                    probe.release_claim(probe.claim(thread, "control", PROBE_POLICY))
                except ProcessingError as exc:
                    self.control_failures.append(f"kill {k}: {thread}: {exc}")
            if kill.first_ok is None:
                if time.time() - at > OUTAGE_LIMIT:
                    self.result.violations.append(
                        f"kill {k}: partition {parts[0]} not writable {OUTAGE_LIMIT:.0f}s after"
                    )
                    return
                time.sleep(0.05)
        self.marks.setdefault("promote", kill.first_ok)
        # Stable again: a primary and a healthy standby, once the monitor has acted (right
        # after the kill the formation still looks as before it).
        while old.name == getattr(self.ha.primary(name), "name", None) and time.time() < at + 30:
            time.sleep(0.5)
        self.ha.wait_stable([name], timeout=300)
        kill.stable_at = time.time()
        new = self.ha.primary(name)
        kill.new_primary = None if new is None else new.name
        # One more call on the failed partition once the formation settled (the old primary
        # now its standby), through the same proxy, never restarted.
        target = next(targets)
        try:
            probe.release_claim(probe.claim(target, "probe", PROBE_POLICY))
        except ProcessingError as exc:
            self.result.violations.append(f"kill {k}: {target} fails after recovery: {exc}")
        time.sleep(3.0)

    def _stop_walreceiver(self, standby: autofailover.Node) -> int | None:
        """SIGSTOP the standby's WAL receiver: it falls behind while the primary acknowledges
        (asynchronous) commits; the kill's SIGCONT lets it find its primary gone."""
        dsn = f"host={standby.host} port={standby.port} user={self.ha.user} dbname=postgres"
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            row = conn.execute("SELECT pid FROM pg_catalog.pg_stat_wal_receiver").fetchone()
        if row is None:
            return None
        os.kill(int(row[0]), signal.SIGSTOP)
        return int(row[0])

    # -- the checks of SPEC §27 ---------------------------------------------------------------

    def kill_window(self, t: float) -> Kill | None:
        """The kill whose failover (kill .. the formation stable again + 3 s) holds ``t``: its
        standby's promotion, and the old primary's restart as its standby, which ends the
        connections the proxy had made to it while its keeper had it up again."""
        for kill in self.kills:
            end = (kill.stable_at or float("inf")) + 3.0
            if kill.at - 0.5 <= t <= end:
                return kill
        return None

    def check_failures(self) -> None:
        """Every failed call of a worker, producer or probe came during a failover and names a
        partition of the formation that was down (or reached call_timeout: `TIMED_OUT`); the
        control calls never failed; each kill's probe was refused naming its partition."""
        v = self.result.violations
        v.extend(f"a call on a live partition failed: {c}" for c in self.control_failures)
        failures = list(self.failures)
        failures += [
            (r["t"], str(r.get("error", "")))
            for r in self.read_logs()
            if r["kind"] == "call_failed"
        ]
        for t, message in failures:
            kill = self.kill_window(t)
            if kill is None:
                v.append(f"a call failed outside every failover (t={t:.2f}): {message[:160]}")
                continue
            named = named_partitions(message)
            if not named and TIMED_OUT in message:
                self.timeouts += 1
            elif not named:
                v.append(f"a failed call names no partition (part{kill.group}): {message[:200]}")
            elif not named <= set(kill.parts):
                v.append(
                    f"a failed call names partition(s) {sorted(named)} while only "
                    f"{kill.parts} were down: {message[:200]}"
                )
        for k, kill in enumerate(self.kills):
            if not kill.errors:
                continue  # the formation answered before the first probe could fail
            name = f"dg_part{kill.parts[0]}"
            if not any(name in m for m in kill.errors):
                v.append(f"kill {k}: no failed probe named {name}: {kill.errors[:3]}")
            for message in kill.errors:
                if name not in message and TIMED_OUT not in message:
                    v.append(f"kill {k}: a probe's error does not name {name}: {message[:200]}")

    def outages(self) -> list[float]:
        return [k.outage for k in self.kills]


TIMED_OUT = "no answer within call_timeout"
"""A call that reached the old primary while its keeper had it up again (before the monitor
demoted it) waits there for its synchronous standby, which is being promoted, until the
store's watchdog cancels it: the client cannot tell which partition the proxy waited on."""


def timeline(fleet: HAFleet, ha: autofailover.AutoFailover, path: Path) -> None:
    """The kills, the monitor's events and every failed call, in time order, into ``path``."""
    rows: list[tuple[float, str]] = []
    for k, kill in enumerate(fleet.kills):
        rows.append((kill.at, f"KILL {k} part{kill.group} {kill.old_primary}"))
        if kill.first_ok is not None:
            rows.append((kill.first_ok, f"FIRST OK {k}"))
        if kill.stable_at is not None:
            rows.append((kill.stable_at, f"STABLE {k} primary {kill.new_primary}"))
    for g in range(GROUPS):
        rows += [(t, f"monitor part{g}: {e}") for t, e in ha.events(f"part{g}")]
    rows += [(t, f"failed: {m[:200]}") for t, m in fleet.failures]
    rows += [
        (r["t"], f"{r['worker']} failed: {str(r.get('error', ''))[:200]}")
        for r in fleet.read_logs()
        if r["kind"] == "call_failed"
    ]
    start = min((t for t, _ in rows), default=0.0)
    text = "".join(f"{t - start:9.3f} {' '.join(line.split())}\n" for t, line in sorted(rows))
    path.write_text(text)
    kept = ROOT / "build" / "failover-suite"
    kept.mkdir(parents=True, exist_ok=True)
    (kept / path.name).write_text(text)


def named_partitions(message: str) -> set[int]:
    """The partitions a failed call's message names: ``partition database dg_partN`` (a
    thread's call) or ``partition(s) 1, 4 ... unavailable`` (a listing)."""
    found = {int(m) for m in re.findall(r"dg_part(\d+)", message)}
    listed = re.search(r"partition\(s\) ([\d, ]+) (?:are|of)", message)
    if listed:
        found |= {int(p) for p in listed.group(1).replace(" ", "").split(",") if p}
    return found


# --- setting it up --------------------------------------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durable_graph.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@contextlib.contextmanager
def ha_store(*, synchronous: bool) -> Any:
    """The formations, the proxy, the partitions installed by ``partitions init`` with the
    formations' multi-host DSNs; yields (ha, proxy DSN)."""
    proxy_server = pg_server.start()
    try:
        with autofailover.running(GROUPS, synchronous=synchronous) as ha:
            formations = [ha.formations[f"part{g}"] for g in range(GROUPS)]
            dsns = []
            for part in range(PARTITIONS):
                formation = formations[group_of(part)]
                db = f"dg_part{part}"
                if db != formation.dbname:  # a second partition database in the formation
                    with psycopg.connect(
                        formation.dsn(dbname="postgres", user=ha.user), autocommit=True
                    ) as c:
                        c.execute(f"CREATE DATABASE {db}")
                dsns.append(formation.dsn(dbname=db))
            with psycopg.connect(proxy_server.dsn(), autocommit=True) as c:
                c.execute("CREATE DATABASE dg_proxy")
            proxy = proxy_server.dsn("dg_proxy")
            args = ["partitions", "init", "--dsn", proxy, "--schema", SCHEMA]
            for dsn in dsns:
                args += ["--partition", dsn]
            done = cli(*args)
            assert done.returncode == 0, done.stderr
            yield ha, proxy
    finally:
        proxy_server.stop()


def verify_names_the_primaries(ha: autofailover.AutoFailover, proxy: str) -> None:
    """``partitions verify`` says, per partition, the primary the monitor has."""
    done = cli("partitions", "verify", "--dsn", proxy, "--schema", SCHEMA)
    assert done.returncode == 0, done.stderr
    print(done.stdout)
    for part in range(PARTITIONS):
        primary = ha.primary(f"part{group_of(part)}")
        assert primary is not None
        assert f"partition {part}: primary {primary.host}:{primary.port};" in done.stdout, (
            done.stdout
        )


def run_ha_fleet(
    ha: autofailover.AutoFailover,
    proxy: str,
    tmp_path: Path,
    plan: FleetPlan,
    *,
    kills: int,
    lag: float = 0.0,
) -> HAFleet:
    worker_cfg: dict[str, Any] = {
        "backend": "postgres",
        "dsn": proxy,
        "schema": SCHEMA,
        "time_calls": True,
    }

    def open_store() -> PostgresCheckpointer:
        return PostgresCheckpointer.open(proxy, store_config(SCHEMA, auto_migrate=False))

    fenv = FleetEnv(
        env=Env(open_store=open_store, worker_cfg=worker_cfg, tokens_per_thread=True),
        kill_primary=None,
        promote=None,
        open_producer_store=open_store,
    )
    fleet = HAFleet(plan, fenv, tmp_path, ha, proxy, kills=kills, lag=lag)
    fleet.run_fleet()
    return fleet


def report(fleet: HAFleet, title: str) -> str:
    outages = fleet.outages()
    finite = [o for o in outages if o != float("inf")]
    lines = [
        f"{title}: kills={len(fleet.kills)} outage p50={statistics.median(finite):.2f}s "
        f"max={max(outages):.2f}s ({', '.join(f'{o:.2f}' for o in outages)})"
        if finite
        else f"{title}: no outage measured",
    ]
    for k, kill in enumerate(fleet.kills):
        lines.append(
            f"  kill {k}: part{kill.group} {kill.old_primary} -> {kill.new_primary} "
            f"({'promoted' if kill.new_primary != kill.old_primary else 'restarted in place'}) "
            f"outage {kill.outage:.2f}s, {len(kill.errors)} failed probes"
            + (f" (first: {kill.errors[0][:120]})" if kill.errors else "")
        )
    return "\n".join(lines)


# --- the tests --------------------------------------------------------------------------------


def test_partitions_fail_over_under_load_losing_nothing_acknowledged(tmp_path: Path) -> None:
    started = time.monotonic()
    with ha_store(synchronous=True) as (ha, proxy):
        for g in range(GROUPS):
            with psycopg.connect(
                ha.formations[f"part{g}"].dsn(dbname="postgres", user=ha.user), autocommit=True
            ) as c:
                row = c.execute("SHOW synchronous_standby_names").fetchone()
            assert row is not None and row[0].startswith("ANY 1 ("), row  # the quorum
        verify_names_the_primaries(ha, proxy)
        setup = time.monotonic() - started
        plan = FleetPlan(
            seconds=150, threads=24, workers=5, failover_at=0.08, kill_every=(6.0, 12.0),
            backlog=30, seed=SEED,
        )  # fmt: skip
        fleet = run_ha_fleet(ha, proxy, tmp_path, plan, kills=KILLS)
        fleet.check_failures()
        timeline(fleet, ha, tmp_path / "synchronous-timeline.txt")
        verify_names_the_primaries(ha, proxy)
    print_fleet_report(fleet.result, fleet.figures)
    print(report(fleet, "synchronous standbys"))
    print(f"  failed calls at call_timeout, naming no partition: {fleet.timeouts}")
    print(f"  timeline: {ROOT / 'build' / 'failover-suite' / 'synchronous-timeline.txt'}")
    print(f"  wall time: {time.monotonic() - started:.0f}s (setup {setup:.0f}s)")
    v = fleet.result.violations
    assert len(fleet.kills) == KILLS
    # A kill the keeper outran (PostgreSQL restarted before it was reported down) is crash
    # recovery in place, not a failover; the suite must still show the proxy following one.
    promoted = sum(1 for k in fleet.kills if k.new_primary != k.old_primary)
    assert promoted >= 1, "no kill led to a promotion"
    assert not v, f"{len(v)} violations: {v[:8]}"


def test_an_asynchronous_standby_loses_the_lag_window_of_the_failed_partitions(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    with ha_store(synchronous=False) as (ha, proxy):
        with psycopg.connect(
            ha.formations["part0"].dsn(dbname="postgres", user=ha.user), autocommit=True
        ) as c:
            row = c.execute("SHOW synchronous_standby_names").fetchone()
        assert row is not None and row[0] == "", row  # asynchronous: nobody waited for
        plan = FleetPlan(
            seconds=60, threads=24, workers=5, failover_at=0.2, kill_every=(6.0, 12.0),
            backlog=30, seed=SEED,
        )  # fmt: skip
        fleet = run_ha_fleet(ha, proxy, tmp_path, plan, kills=2, lag=1.0)
        timeline(fleet, ha, tmp_path / "asynchronous-timeline.txt")
    print_fleet_report(fleet.result, fleet.figures)
    print(report(fleet, "asynchronous standbys, 1 s behind at each kill"))
    kinds = Counter(violation_kind(v) for v in fleet.result.violations)
    print(f"  lost or broken: {dict(kinds)}")
    print(f"  wall time: {time.monotonic() - started:.0f}s")
    assert len(fleet.kills) == 2
    assert kinds["lost"] > 0, "a standby 1 s behind lost nothing acknowledged: lag not shown"
    down = {p for kill in fleet.kills for p in kill.parts}
    for violation in fleet.result.violations:
        part = partition_named(violation)
        assert part is None or part in down, f"a loss on partition {part}: {violation}"


def violation_kind(violation: str) -> str:
    """A violation without its numbers and ids: what kind of loss or repeat it is."""
    if " is lost" in violation or " lost: " in violation:
        return "lost"
    text = re.sub(r"fleet-\d+|\b[0-9a-f]{32}\b", "X", violation.split(" (", 1)[0])
    return re.sub(r"\d+(\.\d+)?", "N", text)[:70]


def partition_named(violation: str) -> int | None:
    """The partition of the entry (an id is ≡ its partition mod N) or thread a violation
    names, when it names one."""
    entry = re.search(r"entry (?:id )?(\d+)", violation)
    if entry:
        return int(entry.group(1)) % PARTITIONS
    thread = re.search(r"\b(fleet-\d+)\b", violation)
    if thread:
        return partition_of_thread(thread.group(1), PARTITIONS)
    return None


# --- docs/failover.md's procedure, as written --------------------------------------------------

PROCEDURE = "### The DBA's procedure, step by step"


def procedure_blocks() -> list[str]:
    """The ```text blocks of docs/failover.md's procedure, in order."""
    doc = (ROOT / "docs" / "failover.md").read_text()
    section = doc.split(PROCEDURE, 1)[1].split("\n## ", 1)[0]
    return [part.split("```", 1)[0] for part in section.split("```text\n")[1:]]


def commands(block: str) -> list[str]:
    """A block's commands, a line continued by a trailing backslash joined to the next."""
    found: list[str] = []
    pending = ""
    for line in block.splitlines():
        pending += line
        if line.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        if pending.strip():
            found.append(pending.strip())
        pending = ""
    return found


def with_values(block: str, values: dict[str, str]) -> str:
    """The names block with this machine's values in place of the examples."""
    for name, value in values.items():
        quoted = re.compile(rf'\b{name}="[^"]*"')
        plain = re.compile(rf"\b{name}=[^\s\"]+")
        replacement = f'{name}="{value}"'.replace("\\", "\\\\")  # a template, not a regex
        block, n = quoted.subn(replacement, block)
        if n == 0:
            block, n = plain.subn(replacement, block)
        assert n == 1, f"{name} is not set once in the procedure's first block"
    return block


def descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for child, fields in pg_server.process_stats():
        kids.setdefault(int(fields[1]), []).append(child)
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(kids.get(p, []))
    return found


def lose_machine(ha: autofailover.AutoFailover, pgdata: str) -> None:
    """SIGKILL a node's keeper and everything under it (its PostgreSQL): its machine is gone."""
    for pid in ha.our_pids():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"run" in cmdline and pgdata.encode() in cmdline and b"pg_autoctl" in cmdline[0]:
            for p in descendants(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, signal.SIGKILL)


class Load:
    """Writes through the proxy on both partitions while the procedure runs: submits (each
    with its key) and claim + commit + release on fresh threads; each acknowledged one kept."""

    def __init__(self, proxy: str) -> None:
        self.store = PostgresCheckpointer.open(proxy, store_config("app", auto_migrate=False))
        self.tickets: list[int] = []
        self.commits: list[tuple[str, str]] = []
        self.ok: list[float] = []
        self.failed: list[tuple[float, str]] = []
        self.refused: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        from durable_graph import Commit, Submission

        i = 0
        while not self.stop.is_set():
            i += 1
            thread = f"load-{i}"
            try:
                ticket = self.store.run_queue.submit(Submission(thread, {"i": i}, key=f"k{i}"))
                self.tickets.append(ticket.entry_id)
                claim = self.store.claim(thread, "load", PROBE_POLICY)
                cp = self.store.commit(
                    claim, Commit(checkpoint_id=f"c{i}", parent_id=None, run_id="r", state={})
                )
                self.commits.append((thread, cp.checkpoint_id))
                self.store.release_claim(claim)
                self.ok.append(time.time())
            except ProcessingError as exc:
                self.failed.append((time.time(), str(exc)))
                time.sleep(0.1)
            except StoreError as exc:  # a refusal: no write here should ever get one
                self.refused.append(f"{type(exc).__name__}: {exc}")

    def check(self) -> list[str]:
        """What an acknowledged write lost (nothing, on synchronous standbys)."""
        lost = [
            f"entry {e}"
            for e in self.tickets
            if retry_read(lambda e=e: self.store.run_queue.entry(e)) is None
        ]
        for thread, cid in self.commits:
            if retry_read(lambda t=thread: self.store.get(t)) is None:
                lost.append(f"commit {cid} of {thread}")
        return lost

    def longest_gap(self, since: float, until: float) -> float:
        times = [since] + [t for t in self.ok if since <= t <= until] + [until]
        return max(b - a for a, b in itertools.pairwise(times))


def retry_read(fn: Any) -> Any:
    deadline = time.monotonic() + 60
    while True:
        try:
            return fn()
        except ProcessingError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_the_dba_procedure_runs_as_written(tmp_path: Path) -> None:
    """docs/failover.md's procedure: every command as written, in order, with this machine's
    ports and directories for its names; ``pg_autoctl`` as the ``postgres`` user, the rest as
    the DBA. Under load during the switchover and the loss of a node: no acknowledged write
    lost, and the proxy (never restarted) names the new primaries."""
    blocks = procedure_blocks()
    assert len(blocks) == 7, [b[:60] for b in blocks]
    ha = autofailover.AutoFailover()
    proxy_server = pg_server.start()
    load: Load | None = None
    try:
        root = ha.root
        values = {
            "HA_SECURITY": "--auth trust --no-ssl",
            "MON_HOST": "127.0.0.1",
            "MON_PORT": str(pg_server.free_port()),
            "MON_PGDATA": f"{root}/monitor",
            "PROXY_SERVER": proxy_server.dsn().replace(f"user={proxy_server.user} ", ""),
            "PROXY": proxy_server.dsn("dg_proxy").replace(f"user={proxy_server.user} ", ""),
        }
        for node in "ABC":
            values |= {
                f"{node}_HOST": "127.0.0.1",
                f"{node}_PORT": str(pg_server.free_port()),
                f"{node}_PGDATA": f"{root}/{node.lower()}",
            }
        names = with_values(blocks[0], values)
        venv_bin = str(Path(sys.executable).parent)
        dba_env = {**os.environ, "PGUSER": ha.user, "PATH": f"{venv_bin}:{os.environ['PATH']}"}
        dba_env.pop("PGDATABASE", None)

        def run(command: str) -> str:
            script = f"{names}\n{command}\n"
            argv = ["bash", "-e", "-c", script]
            keeper = "pg_autoctl" in command
            done = subprocess.run(
                ha.argv(*argv) if keeper else argv,
                env=ha.env() if keeper else dba_env,
                cwd=root if keeper else tmp_path,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
            return done.stdout

        outputs: list[str] = []
        for i, block in enumerate(blocks[1:], start=2):
            if i == 6:
                load = Load(values["PROXY"] + f" user={ha.user}")
                load.thread.start()
                time.sleep(3.0)
                switch_at = time.time()
            if i == 7:
                assert load is not None
                lose_machine(ha, values["A_PGDATA"])
                lost_at = time.time()
            for command in commands(block):
                outputs.append(run(command))
            if i == 6:
                switched = time.time()
                time.sleep(3.0)
        assert load is not None
        done_at = time.time()
        time.sleep(3.0)
        load.stop.set()
        load.thread.join(timeout=60)
        b, c = (f"127.0.0.1:{values[f'{n}_PORT']}" for n in "BC")
        # After the switchover, b is the primary; after the replacement, c is b's standby.
        assert f"partition 0: primary {b};" in outputs[-1], outputs[-1]
        assert f"{c} standby" in outputs[-1], outputs[-1]
        lost = load.check()
        print(
            f"\nprocedure: {len(load.tickets)} submits, {len(load.commits)} commits acknowledged, "
            f"{len(load.failed)} calls failed; writes paused {load.longest_gap(switch_at, switched):.1f}s "
            f"during the switchover ({switched - switch_at:.1f}s), "
            f"{load.longest_gap(lost_at, done_at):.1f}s after the standby's loss"
        )
        assert not lost, lost
        assert not load.refused, load.refused[:5]
        assert load.ok and max(load.ok) > done_at, "writes did not resume after the procedure"
    finally:
        if load is not None:
            load.stop.set()
            load.thread.join(timeout=60)
            load.store.close()
        ha.stop()
        proxy_server.stop()
