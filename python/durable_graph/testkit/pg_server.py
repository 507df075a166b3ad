"""A throwaway PostgreSQL server for tests, benchmarks and chaos runs.

`start()` runs ``initdb`` into a temporary directory and starts ``postgres`` on a free loopback
port. ``initdb`` refuses to run as root, so as root the server runs as the ``postgres`` user
(through ``runuser``). The server binaries come from Debian's ``postgresql`` package; `make test`
installs it when missing.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
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


def start(settings: Mapping[str, str] | None = None, *, durable: bool = False) -> PgServer:
    """initdb and start a server on a free port; durable=False turns fsync off (tests)."""
    bindir = find_bindir()
    run_as = "postgres" if os.geteuid() == 0 else None
    root = tempfile.mkdtemp(prefix="durable-graph-pg-")
    datadir = os.path.join(root, "data")
    if run_as is not None:
        shutil.chown(root, user=run_as)
        os.chmod(root, 0o700)
    user = "postgres" if run_as is not None else (os.environ.get("USER") or "postgres")
    server = PgServer(bindir=bindir, datadir=datadir, port=free_port(), user=user, run_as=run_as)
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
    lines = [f"{k} = {v if v.startswith(chr(39)) else repr(v)}" for k, v in conf.items()]
    conf_path = os.path.join(datadir, "postgresql.auto.conf")
    server._run("sh", "-c", f"cat >> {conf_path} <<'EOF'\n" + "\n".join(lines) + "\nEOF\n")
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
    return server


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
def running(
    settings: Mapping[str, str] | None = None, *, durable: bool = False
) -> Iterator[PgServer]:
    server = start(settings, durable=durable)
    try:
        yield server
    finally:
        server.stop()
