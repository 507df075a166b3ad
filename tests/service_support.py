"""Running ``durable-graph serve`` and ``durable-graph worker`` as real processes for the tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

APP = Path(__file__).parent / "service_app"
CONFIG = APP / "langgraph.json"
BIN = Path(sys.executable).with_name("durable-graph")


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


@contextmanager
def serving(
    backend: Backend,
    tmp: Path,
    *,
    workers: int = 1,
    token: str | None = None,
    config: Path = CONFIG,
    extra: Sequence[str] = (),
) -> Iterator[str]:
    """``durable-graph serve`` on ``backend`` (``config``, ``extra`` options); yields its URL
    once it answers ``/ok``."""
    with serving_process(
        backend, tmp, workers=workers, token=token, config=config, extra=extra
    ) as (url, _):
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
