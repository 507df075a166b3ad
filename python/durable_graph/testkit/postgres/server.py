"""A throwaway PostgreSQL server for tests, benchmarks and chaos runs.

`start()` runs ``initdb`` into a temporary directory and starts ``postgres`` on a free loopback
port. `start_replicated()` adds a streaming-replication standby (``pg_basebackup``) of such a
server, synchronous by default, for failover tests. ``initdb`` refuses to run as root, so as root the server runs as the ``postgres`` user
(through ``runuser``). The server binaries come from Debian's ``postgresql`` package; `make test`
installs it when missing.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

_DEFAULT_SETTINGS: dict[str, str] = {
    "listen_addresses": "127.0.0.1",
    "max_connections": "300",
    "shared_buffers": "128MB",
    "max_locks_per_transaction": "256",
    "shared_preload_libraries": "pg_stat_statements",
    "log_min_messages": "fatal",
}

TEST_SETTINGS: dict[str, str] = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}
"""Extra settings for correctness tests: durability is not what they measure."""


def find_bindir() -> str:
    """The newest installed PostgreSQL server's bin directory."""
    explicit = os.environ.get("DURABLE_GRAPH_PG_BINDIR")
    if explicit:
        return explicit
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0,
    )
    if candidates:
        return os.path.dirname(candidates[-1])
    found = shutil.which("initdb")
    if found:
        return os.path.dirname(found)
    raise RuntimeError(
        "no PostgreSQL server binaries found: install them with "
        "`apt-get install postgresql` (make test does this when missing)"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PgServer:
    """A running throwaway server; `stop()` removes it and its data."""

    bindir: str
    datadir: str
    port: int
    user: str = "postgres"
    run_as: str | None = None
    _stopped: bool = field(default=False, repr=False)

    @property
    def host(self) -> str:
        return "127.0.0.1"

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host={self.host} port={self.port} user={self.user} dbname={dbname}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        cmd = list(args)
        if self.run_as is not None:
            cmd = ["runuser", "-u", self.run_as, "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, cwd="/")

    def pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        return self._run(
            os.path.join(self.bindir, "pg_ctl"), "-D", self.datadir, *args, check=check
        )

    def restart(self, mode: str = "fast") -> None:
        """Stop and start the server on the same port (chaos runs use ``mode="immediate"``)."""
        self.pg_ctl("stop", "-m", mode, "-w", check=False)
        self.pg_ctl("start", "-w", "-t", "60", "-l", os.path.join(self.datadir, "server.log"))

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.pg_ctl("stop", "-m", "immediate", "-w", check=False)
        shutil.rmtree(os.path.dirname(self.datadir), ignore_errors=True)

    def postmaster_pid(self) -> int | None:
        try:
            with open(os.path.join(self.datadir, "postmaster.pid"), encoding="ascii") as f:
                return int(f.readline().strip())
        except (OSError, ValueError):
            return None

    def kill_hard(self) -> None:
        """SIGKILL the postmaster, then every process it had started: the machine is gone.

        Killing only the postmaster would leave its backends serving their open connections
        for a while (they notice the postmaster's death lazily); a lost machine serves nothing.
        """
        pid = self.postmaster_pid()
        if pid is None:
            return
        children = _children_of(pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        for child in children + _children_of(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)


def process_stats() -> Iterator[tuple[int, list[str]]]:
    """Each live process's pid and the fields of its ``/proc/PID/stat`` after its name (state,
    ppid, ...; ``proc(5)`` numbers them from 3)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                # pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        yield int(entry), fields


def _children_of(pid: int) -> list[int]:
    return [child for child, fields in process_stats() if int(fields[1]) == pid]


REPLICATION_SETTINGS: dict[str, str] = {
    "wal_level": "replica",
    "max_wal_senders": "5",
    "wal_keep_size": "256MB",
    "hot_standby": "on",
    "synchronous_commit": "on",
}


@dataclass
class ReplicatedPair:
    """A primary and its streaming standby; `dsn()` names both, libpq picks the writable one."""

    primary: PgServer
    standby: PgServer
    synchronous: bool
    standby_name: str = "dg_standby"

    def dsn(self, dbname: str = "postgres", host: str | None = None) -> str:
        """A multi-host DSN: libpq tries both servers in order and keeps the read-write one."""
        h = host or self.primary.host
        return (
            f"host={h},{h} port={self.primary.port},{self.standby.port} "
            f"user={self.primary.user} dbname={dbname} target_session_attrs=read-write"
        )

    def replication_state(self) -> list[tuple[str, str, str]]:
        """(application_name, state, sync_state) of each standby the primary streams to."""
        out = self.primary._run(
            os.path.join(self.primary.bindir, "psql"),
            "-X",
            "-At",
            "-h",
            self.primary.host,
            "-p",
            str(self.primary.port),
            "-U",
            self.primary.user,
            "-d",
            "postgres",
            "-F",
            "|",
            "-c",
            "SELECT application_name, state, sync_state FROM pg_stat_replication",
        )
        rows = [line.split("|") for line in out.stdout.decode().splitlines() if line]
        return [(r[0], r[1], r[2]) for r in rows]

    def promote(self) -> None:
        """Make the standby the primary (``pg_ctl promote``, waiting until it accepts writes)."""
        self.standby.pg_ctl("promote", "-w", "-t", "60")

    def stop(self) -> None:
        self.standby.stop()
        self.primary.stop()


def start_replicated(
    settings: Mapping[str, str] | None = None,
    *,
    synchronous: bool = True,
    hba_lines: tuple[str, ...] = (),
    timeout: float = 60.0,
) -> ReplicatedPair:
    """A durable primary (fsync on) and a standby cloned from it by ``pg_basebackup``.

    With ``synchronous`` the primary names the standby in ``synchronous_standby_names`` (and runs
    ``synchronous_commit=on``): a commit is acknowledged only once the standby has flushed it.
    The standby's own ``synchronous_standby_names`` stays empty, so once promoted it commits
    alone instead of waiting for a standby that does not exist. ``hba_lines`` are appended to
    ``pg_hba.conf`` (e.g. to admit workers from network namespaces).
    """
    conf = {**REPLICATION_SETTINGS, **(settings or {})}
    primary = start(conf, durable=True)
    standby: PgServer | None = None
    try:
        if hba_lines:
            _append(primary, os.path.join(primary.datadir, "pg_hba.conf"), list(hba_lines))
            primary.pg_ctl("reload")
        standby = _new_server()
        pair = ReplicatedPair(primary, standby, synchronous)
        primary._run(
            os.path.join(primary.bindir, "pg_basebackup"),
            "-h",
            primary.host,
            "-p",
            str(primary.port),
            "-U",
            primary.user,
            "-D",
            standby.datadir,
            "-X",
            "stream",
            "-c",
            "fast",
            "-R",
        )
        if standby.run_as is not None:
            subprocess.run(["chown", "-R", standby.run_as, standby.datadir], check=True)
        conninfo = (
            f"host={primary.host} port={primary.port} user={primary.user} "
            f"application_name={pair.standby_name}"
        )
        _append(
            standby,
            os.path.join(standby.datadir, "postgresql.auto.conf"),
            _conf_lines(
                {
                    "port": str(standby.port),
                    "unix_socket_directories": f"'{os.path.dirname(standby.datadir)}'",
                    "primary_conninfo": f"'{conninfo}'",
                    "synchronous_standby_names": "",
                }
            ),
        )
        _start_on_free_port(standby)
        if synchronous:
            _append(
                primary,
                os.path.join(primary.datadir, "postgresql.auto.conf"),
                _conf_lines({"synchronous_standby_names": pair.standby_name}),
            )
            primary.pg_ctl("reload")
        want = "sync" if synchronous else "async"
        deadline = time.monotonic() + timeout
        while (pair.standby_name, "streaming", want) not in pair.replication_state():
            if time.monotonic() > deadline:
                raise RuntimeError(f"standby not streaming ({want}): {pair.replication_state()}")
            time.sleep(0.1)
        return pair
    except BaseException:
        if standby is not None:
            standby.stop()
        primary.stop()
        raise


def _new_server() -> PgServer:
    """A server handle on a fresh private directory (nothing started yet)."""
    bindir = find_bindir()
    run_as = "postgres" if os.geteuid() == 0 else None
    root = tempfile.mkdtemp(prefix="durable-graph-pg-")
    datadir = os.path.join(root, "data")
    if run_as is not None:
        shutil.chown(root, user=run_as)
        os.chmod(root, 0o700)
    user = "postgres" if run_as is not None else (os.environ.get("USER") or "postgres")
    return PgServer(bindir=bindir, datadir=datadir, port=free_port(), user=user, run_as=run_as)


def _append(server: PgServer, path: str, lines: list[str]) -> None:
    """Append lines to a file of the cluster, as its owner."""
    server._run("sh", "-c", f"cat >> {path} <<'EOF'\n" + "\n".join(lines) + "\nEOF\n")


def start(settings: Mapping[str, str] | None = None, *, durable: bool = False) -> PgServer:
    """initdb and start a server on a free port; durable=False turns fsync off (tests)."""
    server = _new_server()
    bindir, datadir, user = server.bindir, server.datadir, server.user
    root = os.path.dirname(datadir)
    server._run(
        os.path.join(bindir, "initdb"),
        "-D",
        datadir,
        "-U",
        user,
        "-A",
        "trust",
        "-E",
        "UTF8",
        "--no-sync",
        "--locale=C.UTF-8" if _has_locale("C.UTF-8") else "--locale=C",
    )
    conf = dict(_DEFAULT_SETTINGS)
    if not durable:
        conf.update(TEST_SETTINGS)
    conf.update(settings or {})
    conf["port"] = str(server.port)
    conf["unix_socket_directories"] = f"'{root}'"
    conf_path = os.path.join(datadir, "postgresql.auto.conf")
    _append(server, conf_path, _conf_lines(conf))
    _start_on_free_port(server)
    return server


def _conf_lines(conf: Mapping[str, str]) -> list[str]:
    return [f"{k} = {v if v.startswith(chr(39)) else repr(v)}" for k, v in conf.items()]


def _start_on_free_port(server: PgServer) -> None:
    datadir = server.datadir
    conf_path = os.path.join(datadir, "postgresql.auto.conf")
    for attempt in range(3):
        result = server.pg_ctl(
            "start", "-w", "-t", "60", "-l", os.path.join(datadir, "server.log"), check=False
        )
        if result.returncode == 0:
            break
        # The port may have been taken between free_port() and start: pick another.
        server.port = free_port()
        server._run("sh", "-c", f"echo \"port = '{server.port}'\" >> {conf_path}")
        if attempt == 2:
            log = server._run("cat", os.path.join(datadir, "server.log"), check=False)
            raise RuntimeError(f"PostgreSQL did not start: {log.stdout.decode(errors='replace')}")
    _wait_ready(server)


def _has_locale(name: str) -> bool:
    try:
        out = subprocess.run(["locale", "-a"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return False
    return name.lower().replace("-", "") in out.lower().replace("-", "")


def _wait_ready(server: PgServer, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((server.host, server.port), 1):
            return
        time.sleep(0.1)
    raise RuntimeError("PostgreSQL did not accept connections in time")


@contextlib.contextmanager
def running_replicated(
    settings: Mapping[str, str] | None = None,
    *,
    synchronous: bool = True,
    hba_lines: tuple[str, ...] = (),
) -> Iterator[ReplicatedPair]:
    pair = start_replicated(settings, synchronous=synchronous, hba_lines=hba_lines)
    try:
        yield pair
    finally:
        pair.stop()


@contextlib.contextmanager
def running(
    settings: Mapping[str, str] | None = None, *, durable: bool = False
) -> Iterator[PgServer]:
    server = start(settings, durable=durable)
    try:
        yield server
    finally:
        server.stop()
