"""Throwaway pg_auto_failover formations for tests (SPEC §27): one monitor, and per formation a
primary and a standby, each a ``pg_autoctl`` keeper with its own PostgreSQL on a loopback port.

Needs Debian's ``pg-auto-failover-cli`` and ``postgresql-15-auto-failover`` (``make
failover-suite`` installs them). ``pg_autoctl`` refuses to run as root, so as root every
command runs as the ``postgres`` user (through ``runuser``), with its configuration and state
files (``XDG_CONFIG_HOME``, ``XDG_DATA_HOME``, ``XDG_RUNTIME_DIR``) under the cluster's own
temporary directory. `stop` ends every process the cluster started, whatever happened: each
keeper, and each PostgreSQL its keeper started (found by its data directory, which lies in
that directory).

Each formation's settings are what a DBA keeping acknowledged writes sets
(pg_auto_failover's own documentation, "Architecture basics"): every node has ``replication
quorum`` true, so the primary's ``synchronous_standby_names`` is ``ANY 1 (its standby)`` and a
commit is acknowledged once the standby flushed it; ``number_sync_standbys`` 0, the only value a
formation with one standby accepts (1 needs two standbys). ``synchronous=False`` makes the
standby leave the quorum (``replication quorum`` false): asynchronous replication.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from durable_graph.testkit.postgres.server import find_bindir, free_port, process_stats

SMALL_SETTINGS: dict[str, str] = {
    "shared_buffers": "32MB",
    "max_connections": "200",
    "max_locks_per_transaction": "256",
    "log_min_messages": "fatal",
}
"""Small servers: the machine runs seven of them on two cores."""


def find_pg_autoctl() -> str:
    found = shutil.which("pg_autoctl")
    if found is None:
        raise RuntimeError(
            "pg_autoctl not found: install Debian's pg-auto-failover-cli and "
            "postgresql-15-auto-failover (make failover-suite does)"
        )
    return found


@dataclass
class Node:
    """One keeper and its PostgreSQL."""

    name: str
    formation: str
    pgdata: str
    port: int
    host: str = "127.0.0.1"
    proc: subprocess.Popen[bytes] | None = None

    def postmaster_pid(self) -> int | None:
        try:
            with open(os.path.join(self.pgdata, "postmaster.pid"), encoding="ascii") as f:
                return int(f.readline().strip())
        except (OSError, ValueError):
            return None

    def kill_postgres(self) -> int | None:
        """SIGKILL this node's postmaster and every process it started (its keeper lives on, as
        after a crash of the database server alone). The postmaster's pid, None when not
        running."""
        pid = self.postmaster_pid()
        if pid is None:
            return None
        children = [c for c, fields in process_stats() if int(fields[1]) == pid]
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        return pid


@dataclass
class NodeState:
    name: str
    port: int
    reported: str
    assigned: str
    healthy: bool = True
    """The monitor's last health check of the node succeeded (``health`` 1)."""


@dataclass
class Formation:
    """A pg_auto_failover formation holding one partition's database."""

    name: str
    dbname: str
    nodes: list[Node] = field(default_factory=list)

    def dsn(self, dbname: str | None = None, **extra: str) -> str:
        """The multi-host DSN a client (or the proxy's cluster) reaches the primary by, to
        ``dbname`` (the formation's own by default); no user (the proxy connects as the calling
        role)."""
        hosts = ",".join(n.host for n in self.nodes)
        ports = ",".join(str(n.port) for n in self.nodes)
        more = "".join(f" {k}={v}" for k, v in extra.items())
        return (
            f"host={hosts} port={ports} dbname={dbname or self.dbname}"
            f" target_session_attrs=read-write{more}"
        )

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)


class AutoFailover:
    """A monitor and formations, all under one temporary directory."""

    def __init__(self, root: str | None = None) -> None:
        self.pg_autoctl = find_pg_autoctl()
        self.bindir = find_bindir()
        self.run_as = "postgres" if os.geteuid() == 0 else None
        self.root = root or tempfile.mkdtemp(prefix="durable-graph-ha-")
        if self.run_as is not None:
            shutil.chown(self.root, user=self.run_as)
        os.chmod(self.root, 0o700)
        for sub in ("config", "share", "run"):
            self._run("mkdir", "-p", os.path.join(self.root, sub))
        self.monitor_port = 0
        self.monitor_proc: subprocess.Popen[bytes] | None = None
        self.formations: dict[str, Formation] = {}
        self.user = (
            "postgres" if self.run_as is not None else (os.environ.get("USER") or "postgres")
        )

    # -- running commands as the keepers' user ------------------------------------------------

    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PG", "XDG_")) and k != "DURABLE_GRAPH_TEST_DSN"
        }
        env.update(
            PATH=f"{self.bindir}{os.pathsep}{env.get('PATH', '')}",
            XDG_CONFIG_HOME=os.path.join(self.root, "config"),
            XDG_DATA_HOME=os.path.join(self.root, "share"),
            XDG_RUNTIME_DIR=os.path.join(self.root, "run"),
            HOME=self.root,
        )
        return env

    def argv(self, *args: str) -> list[str]:
        if self.run_as is None:
            return list(args)
        return ["runuser", "-u", self.run_as, "--", *args]

    def _run(self, *args: str, timeout: float = 180.0) -> str:
        result = subprocess.run(
            self.argv(*args),
            env=self.env() if hasattr(self, "bindir") else None,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"{' '.join(args)} exited {result.returncode}: {result.stderr[-2000:]}"
            )
        return result.stdout

    def autoctl(self, *args: str, timeout: float = 180.0) -> str:
        """``pg_autoctl ARGS`` as the keepers' user; its output."""
        return self._run(self.pg_autoctl, *args, timeout=timeout)

    def _keeper(self, pgdata: str, log: str) -> subprocess.Popen[bytes]:
        """``pg_autoctl run`` for ``pgdata``, in a session of its own, logging to ``log``."""
        out = open(os.path.join(self.root, log), "ab")  # noqa: SIM115
        try:
            return subprocess.Popen(
                self.argv(self.pg_autoctl, "run", "--pgdata", pgdata),
                env=self.env(),
                cwd=self.root,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            out.close()

    # -- the monitor ----------------------------------------------------------------------------

    @property
    def monitor_pgdata(self) -> str:
        return os.path.join(self.root, "monitor")

    @property
    def monitor_uri(self) -> str:
        return (
            f"postgres://autoctl_node@127.0.0.1:{self.monitor_port}/pg_auto_failover"
            "?sslmode=disable"
        )

    def monitor_dsn(self) -> str:
        return f"host=127.0.0.1 port={self.monitor_port} user={self.user} dbname=pg_auto_failover"

    def start_monitor(self) -> None:
        self.monitor_port = free_port()
        self.autoctl(
            "create", "monitor", "--pgdata", self.monitor_pgdata, "--pgport",
            str(self.monitor_port), "--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl",
            "--pgctl", os.path.join(self.bindir, "pg_ctl"),
        )  # fmt: skip
        self.monitor_proc = self._keeper(self.monitor_pgdata, "monitor.log")
        self._wait(lambda: self._monitor_answers(), 120, "the monitor to accept connections")

    def _monitor_answers(self) -> bool:
        try:
            with psycopg.connect(self.monitor_dsn(), connect_timeout=2) as conn:
                conn.execute("SELECT 1 FROM pgautofailover.node LIMIT 1")
        except psycopg.Error:
            return False
        return True

    # -- formations and nodes -----------------------------------------------------------------

    def create_formation(self, name: str, dbname: str) -> Formation:
        self.autoctl(
            "create", "formation", "--pgdata", self.monitor_pgdata, "--formation", name,
            "--kind", "pgsql", "--dbname", dbname, "--enable-secondary",
        )  # fmt: skip
        formation = Formation(name, dbname)
        self.formations[name] = formation
        return formation

    def add_node(self, formation: Formation, name: str, *, replication_quorum: bool = True) -> Node:
        """Register and start a node: the formation's first is its primary, the next clone it
        (``pg_basebackup``, by the keeper) and follow as standbys."""
        pgdata = os.path.join(self.root, name)
        node = Node(name, formation.name, pgdata, free_port())
        if not formation.nodes:
            self._initdb(pgdata)
        self.autoctl(
            "create", "postgres", "--pgdata", pgdata, "--pgport", str(node.port),
            "--listen", "127.0.0.1", "--hostname", node.host, "--name", name,
            "--formation", formation.name, "--dbname", formation.dbname,
            "--monitor", self.monitor_uri, "--auth", "trust", "--no-ssl",
            "--pgctl", os.path.join(self.bindir, "pg_ctl"),
            "--replication-quorum", "true" if replication_quorum else "false",
        )  # fmt: skip
        node.proc = self._keeper(pgdata, f"{name}.log")
        formation.nodes.append(node)
        return node

    def _initdb(self, pgdata: str) -> None:
        """The primary's cluster, made here so that its settings are small; pg_autoctl adopts
        an existing data directory, and its standbys copy ``postgresql.auto.conf``."""
        self._run(
            os.path.join(self.bindir, "initdb"), "-D", pgdata, "-U", self.user, "-A", "trust",
            "-E", "UTF8", "--no-sync", "--locale=C",
        )  # fmt: skip
        lines = "".join(f"{k} = '{v}'\n" for k, v in SMALL_SETTINGS.items())
        self._run("sh", "-c", f"cat >> {pgdata}/postgresql.auto.conf <<'EOF'\n{lines}EOF\n")

    def states(self, formation: str) -> list[NodeState]:
        """Each node of ``formation`` as the monitor sees it."""
        with psycopg.connect(self.monitor_dsn(), connect_timeout=5) as conn:
            rows = conn.execute(
                "SELECT nodename, nodeport, reportedstate::text, goalstate::text,"
                " health = 1 AND reportedpgisrunning"
                " FROM pgautofailover.node WHERE formationid = %s ORDER BY nodeid",
                (formation,),
            ).fetchall()
        return [NodeState(str(a), int(b), str(c), str(d), bool(e)) for a, b, c, d, e in rows]

    def events(self, formation: str) -> list[tuple[float, str]]:
        """The monitor's events of ``formation`` (its state changes, with their reasons): (unix
        time, description)."""
        with psycopg.connect(self.monitor_dsn(), connect_timeout=5) as conn:
            rows = conn.execute(
                "SELECT extract(epoch FROM eventtime)::float8, nodename || ': ' || description"
                " FROM pgautofailover.event WHERE formationid = %s ORDER BY eventid",
                (formation,),
            ).fetchall()
        return [(float(a), str(b)) for a, b in rows]

    def primary(self, formation: str) -> Node | None:
        """The node the monitor has as the formation's stable primary."""
        for s in self.states(formation):
            if s.reported == s.assigned == "primary":
                return self.formations[formation].node(s.name)
        return None

    def stable(self, formation: str, *, standbys: int = 1) -> bool:
        """A primary and ``standbys`` secondaries, each in the state the monitor assigned and
        healthy in its eyes (a standby the monitor has not yet found healthy is no candidate
        for a promotion)."""
        states = self.states(formation)
        if not all(s.healthy for s in states):
            return False
        prim = sum(1 for s in states if s.reported == s.assigned == "primary")
        sec = sum(1 for s in states if s.reported == s.assigned == "secondary")
        return prim == 1 and sec == standbys

    def wait_stable(self, formations: Sequence[str] | None = None, timeout: float = 240.0) -> None:
        names = list(formations or self.formations)

        def all_stable() -> bool:
            try:
                return all(
                    self.stable(f, standbys=len(self.formations[f].nodes) - 1) for f in names
                )
            except psycopg.Error:
                return False

        self._wait(all_stable, timeout, f"formations {', '.join(names)} to be stable")

    def wait_single(self, formation: str, timeout: float = 180.0) -> None:
        def single() -> bool:
            try:
                return any(s.reported == s.assigned == "single" for s in self.states(formation))
            except psycopg.Error:
                return False

        self._wait(single, timeout, f"the first node of {formation} to run")

    @staticmethod
    def _wait(check: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(0.5)

    def show_state(self, formation: str) -> str:
        return self.autoctl(
            "show", "state", "--pgdata", self.monitor_pgdata, "--formation", formation
        )

    # -- the end ----------------------------------------------------------------------------------

    def our_pids(self) -> list[int]:
        """Every process started for this cluster: its command line names the directory, or
        its environment does (``XDG_CONFIG_HOME``: a keeper's workers rename themselves,
        ``pg_autoctl: node active``, and outlive a keeper killed first)."""
        mine: list[int] = []
        needle = self.root.encode()
        for pid, _ in process_stats():
            if pid == os.getpid():
                continue
            for part in ("cmdline", "environ"):
                try:
                    with open(f"/proc/{pid}/{part}", "rb") as f:
                        if needle in f.read():
                            mine.append(pid)
                            break
                except OSError:
                    continue
        return mine

    def stop(self) -> None:
        """Kill every keeper and server of this cluster and remove its directory (repeats
        until none is left: a keeper may restart its PostgreSQL between two kills)."""
        procs = [n.proc for f in self.formations.values() for n in f.nodes] + [self.monitor_proc]
        for proc in procs:
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        for _ in range(20):
            pids = self.our_pids()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        for proc in procs:
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.wait(timeout=5)
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def running(
    partitions: int, *, synchronous: bool = True, prefix: str = "dg_part"
) -> Iterator[AutoFailover]:
    """A monitor and ``partitions`` formations ``part0..``, each a primary and one standby
    holding database ``<prefix>N``, all stable; everything killed and removed on exit."""
    cluster = AutoFailover()
    try:
        cluster.start_monitor()
        formations = [
            cluster.create_formation(f"part{i}", f"{prefix}{i}") for i in range(partitions)
        ]
        for i, formation in enumerate(formations):
            cluster.add_node(formation, f"p{i}a")
        for formation in formations:
            cluster.wait_single(formation.name)
        for i, formation in enumerate(formations):
            cluster.add_node(formation, f"p{i}b", replication_quorum=synchronous)
        cluster.wait_stable()
        yield cluster
    finally:
        cluster.stop()


__all__ = ["SMALL_SETTINGS", "AutoFailover", "Formation", "Node", "NodeState", "running"]
