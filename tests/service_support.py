"""Running ``durable-graph serve`` and ``durable-graph worker`` as real processes for the tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, Unpack

import pytest

APP = Path(__file__).parent / "service_app"
CONFIG = APP / "langgraph.json"
BIN = Path(sys.executable).with_name("durable-graph")
REFERENCE = os.environ.get("DURABLE_GRAPH_LANGGRAPH_DEV")
"""The ``langgraph`` command of an environment with ``langgraph-cli[inmem]`` (LangGraph's own dev
server; `make service-reference` sets it up): when set, the client tests also run against it, so
our answers are checked against the reference's."""
SERVED_KINDS = ["sqlite", "postgres", *(["reference"] if REFERENCE else [])]
"""The params of a module's served fixture: our service on each store, and the reference."""


@dataclass(frozen=True)
class Backend:
    """How the processes reach one store: CLI arguments before the command, and environment."""

    name: str
    args: tuple[str, ...]
    env: dict[str, str]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def env_of(backend: Backend) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURABLE_GRAPH_")}
    env.update(backend.env)
    env["PYTHONUNBUFFERED"] = "1"
    return env


@contextmanager
def process(
    argv: list[str], backend: Backend, log: Path, cwd: Path = APP
) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, env=env_of(backend), stdout=out, stderr=out, cwd=cwd)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class ServeOptions(TypedDict, total=False):
    """`serving_process`'s options of ``durable-graph serve``, for `serving` to pass on."""

    workers: int
    token: str | None
    config: Path
    extra: Sequence[str]


@contextmanager
def serving(backend: Backend, tmp: Path, **options: Unpack[ServeOptions]) -> Iterator[str]:
    """``durable-graph serve`` on ``backend`` (``config``, ``extra`` options); yields its URL
    once it answers ``/ok``."""
    with serving_process(backend, tmp, **options) as (url, _):
        yield url


@contextmanager
def serving_process(
    backend: Backend,
    tmp: Path,
    *,
    workers: int = 1,
    token: str | None = None,
    config: Path = CONFIG,
    extra: Sequence[str] = (),
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`serving`, yielding the process too (URL, process)."""
    port = free_port()
    argv = [str(BIN), *backend.args, "serve", "--config", str(config), "--port", str(port)]
    argv += ["--workers", str(workers), *extra]
    if token is not None:
        argv += ["--token", token]
    log = tmp / f"serve-{port}.log"
    with process(argv, backend, log) as proc:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                headers = {"x-api-key": token} if token else {}
                with urllib.request.urlopen(urllib.request.Request(url + "/ok", headers=headers)):
                    break
            except OSError:
                if proc.poll() is not None:
                    raise AssertionError(f"serve exited: {log.read_text()}") from None
                if time.monotonic() > deadline:
                    raise AssertionError(f"serve did not come up: {log.read_text()}") from None
                time.sleep(0.2)
        yield url, proc


@contextmanager
def reference_serving(langgraph: str, tmp: Path, config: Path = CONFIG) -> Iterator[str]:
    """LangGraph's own ``langgraph dev`` (in-memory) serving the same graph."""
    with reference_serving_process(langgraph, tmp, config) as (url, _):
        yield url


@contextmanager
def reference_serving_process(
    langgraph: str, tmp: Path, config: Path = CONFIG, jobs: int = 4
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`reference_serving`, yielding the process too, running ``jobs`` runs at once."""
    port = free_port()
    argv = [langgraph, "dev", "--config", str(config), "--port", str(port)]
    argv += ["--no-browser", "--no-reload", "--allow-blocking", "--n-jobs-per-worker", str(jobs)]
    log = tmp / f"reference-{port}.log"
    with process(argv, Backend("reference", (), {}), log, config.parent) as proc:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(url + "/ok"):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"langgraph dev: {log.read_text()}") from None
                time.sleep(0.3)
        yield url, proc


def worker_argv(backend: Backend, *extra: str) -> list[str]:
    return [
        str(BIN),
        *backend.args,
        "worker",
        "--langgraph-config",
        str(CONFIG),
        "--poll-interval",
        "100ms",
        *extra,
    ]


def store_backend(
    kind: str,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    schema_prefix: str = "svc",
) -> Backend:
    """A backend on a store of its own: with ``kind`` "postgres" a new schema
    ``<schema_prefix>_…`` in the session's database, else a new SQLite file."""
    if kind == "postgres":
        dsn: str = request.getfixturevalue("pg_dsn")
        schema = f"{schema_prefix}_{uuid.uuid4().hex[:12]}"
        return Backend("postgres", ("--schema", schema), {"DURABLE_GRAPH_DSN": dsn})
    db = tmp_path_factory.mktemp(schema_prefix) / "service.db"
    return Backend("sqlite", ("--sqlite", str(db)), {})


@contextmanager
def served_url(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    config: Path = CONFIG,
    schema_prefix: str = "svc",
    extra: Sequence[str] = (),
) -> Iterator[str]:
    """The URL of ``config``'s graphs served on the store ``request.param`` names (one of
    `SERVED_KINDS`: a `store_backend` of its own, or LangGraph's reference server); ``extra``:
    more options of our ``serve``."""
    logs = tmp_path_factory.mktemp("logs")
    if request.param == "reference":
        assert REFERENCE is not None
        with reference_serving(REFERENCE, logs, config) as url:
            yield url
        return
    backend = store_backend(request.param, request, tmp_path_factory, schema_prefix)
    with serving(backend, logs, workers=1, config=config, extra=extra) as url:
        yield url


def sqlite_worker(db: str, app: str, cwd: Path, *options: str) -> subprocess.Popen[str]:
    """``durable-graph --sqlite db worker --app app`` polling every 100 ms (then ``options``),
    started in ``cwd`` without this environment's DURABLE_GRAPH_DSN; its output piped, as text."""
    env = {k: v for k, v in os.environ.items() if k != "DURABLE_GRAPH_DSN"}
    return subprocess.Popen(
        [str(BIN), "--sqlite", db, "worker", "--app", app, "--poll-interval", "100ms", *options],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
