"""`durable-graph dashboard` as a command, and what the dashboard refuses: other binds without
``--allow-remote`` and a token, requests without the token, bad arguments."""

from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from dashboard_support import fill, serving
from durable_graph.core.model import Cancelled
from durable_graph.sqlite import SqliteCheckpointer

BIN = Path(sys.executable).with_name("durable-graph")
TOKEN = "s3cret-token-0123456789"


def _env() -> dict[str, str]:
    return {
        k: v for k, v in os.environ.items() if k not in ("DURABLE_GRAPH_DSN", "DURABLE_GRAPH_TOKEN")
    }


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.mark.parametrize(
    "extra",
    [
        ["--host", "0.0.0.0"],
        ["--host", "192.0.2.10", "--token", TOKEN],
        ["--host", "0.0.0.0", "--allow-remote"],
        ["--host", "0.0.0.0", "--allow-remote", "--token", "short"],
    ],
)
def test_dashboard_refuses_a_remote_bind_without_allow_remote_and_a_token(
    tmp_path: Path, extra: list[str]
) -> None:
    db = tmp_path / "store.db"
    SqliteCheckpointer.open(str(db)).close()
    result = subprocess.run(
        [str(BIN), "--sqlite", str(db), "dashboard", *extra],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert "--allow-remote" in result.stderr


def test_dashboard_command_serves_the_queue_on_localhost(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    with SqliteCheckpointer.open(str(db)) as store:
        fill(store)
    port = _free_port()
    server = subprocess.Popen(
        [str(BIN), "--sqlite", str(db), "dashboard", "--port", str(port)],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status, body, _ = _get(f"http://127.0.0.1:{port}/")
                break
            except OSError:
                assert server.poll() is None, server.communicate()
                assert time.monotonic() < deadline, "the dashboard did not come up"
                time.sleep(0.1)
        assert status == 200
        assert 'data-state="failed"' in body
    finally:
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=30)
    assert server.returncode == 0, stderr


def test_dashboard_with_a_token_refuses_requests_without_it(tmp_path: Path) -> None:
    with SqliteCheckpointer.open(str(tmp_path / "store.db")) as store, serving(store, TOKEN) as url:
        assert _get(url + "/")[0] == 401
        assert _get(url + "/", {"Authorization": "Bearer wrong-token-0123456789"})[0] == 401
        assert _get(url + "/", {"Authorization": f"Bearer {TOKEN}"})[0] == 200
        status, _, headers = _get(url + "/?token=" + TOKEN)
        assert status == 200
        assert "HttpOnly" in headers["set-cookie"]
        assert _get(url + "/", {"Cookie": f"dg_token={TOKEN}"})[0] == 200


def test_dashboard_pages_allow_only_their_own_origin(tmp_path: Path) -> None:
    with SqliteCheckpointer.open(str(tmp_path / "store.db")) as store, serving(store) as url:
        status, _, headers = _get(url + "/")
        assert status == 200
        policy = headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy
        assert headers["x-content-type-options"] == "nosniff"


def test_dashboard_answers_bad_arguments_with_400_and_unknown_ids_with_404(
    tmp_path: Path,
) -> None:
    with SqliteCheckpointer.open(str(tmp_path / "store.db")) as store, serving(store) as url:
        fill(store)
        status, body, _ = _get(url + "/?state=%3Cb%3Ewaiting")
        assert status == 400
        assert "&lt;b&gt;waiting" not in body and "<b>waiting" not in body
        assert _get(url + "/?after=x")[0] == 400
        assert _get(url + "/entry/999")[0] == 404
        assert _get(url + "/thread?id=no-such-thread")[0] == 404
        assert _get(url + "/thread?id=")[0] == 400


def _serve(db: Path, *extra: str) -> tuple[subprocess.Popen[str], int]:
    port = _free_port()
    server = subprocess.Popen(
        [str(BIN), "--sqlite", str(db), "dashboard", "--port", str(port), *extra],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return server, port


def _stop(server: subprocess.Popen[str]) -> None:
    server.send_signal(signal.SIGTERM)
    _, stderr = server.communicate(timeout=30)
    assert server.returncode == 0, stderr


def _until_up(server: subprocess.Popen[str], probe: Any) -> Any:
    deadline = time.monotonic() + 30
    while True:
        try:
            return probe()
        except (OSError, ssl.SSLError):
            assert server.poll() is None, server.communicate()
            assert time.monotonic() < deadline, "the dashboard did not come up"
            time.sleep(0.1)


def test_allow_remote_refuses_to_serve_without_tls_unless_insecure(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    SqliteCheckpointer.open(str(db)).close()
    remote = ["--host", "0.0.0.0", "--allow-remote", "--token", TOKEN]
    refused = subprocess.run(
        [str(BIN), "--sqlite", str(db), "dashboard", *remote],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "--allow-remote needs TLS (--ssl-certfile and --ssl-keyfile)" in refused.stderr
    half = subprocess.run(
        [str(BIN), "--sqlite", str(db), "dashboard", *remote, "--ssl-certfile", "c.pem"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert half.returncode == 2 and "go together" in half.stderr
    server, port = _serve(db, *remote, "--insecure")  # plain HTTP, as asked
    try:
        status = _until_up(
            server, lambda: _get(f"http://127.0.0.1:{port}/", {"Authorization": f"Bearer {TOKEN}"})
        )[0]
        assert status == 200
    finally:
        _stop(server)


def test_dashboard_serves_https_with_ssl_certfile_and_keyfile(tmp_path: Path) -> None:
    """--ssl-certfile/--ssl-keyfile reach uvicorn: the pages are HTTPS, plain HTTP gets nothing."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost"),
            *("-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    db = tmp_path / "store.db"
    with SqliteCheckpointer.open(str(db)) as store:
        fill(store)
    tls = ["--ssl-certfile", str(cert), "--ssl-keyfile", str(key), "--token", TOKEN]
    server, port = _serve(db, *tls)
    context = ssl.create_default_context(cafile=str(cert))

    def fetch() -> tuple[int, str]:
        request = urllib.request.Request(
            f"https://localhost:{port}/", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        with urllib.request.urlopen(request, timeout=10, context=context) as r:
            return r.status, r.read().decode()

    try:
        status, body = _until_up(server, fetch)
        assert status == 200 and 'data-state="failed"' in body
        with pytest.raises((OSError, http.client.HTTPException)):
            _get(f"http://localhost:{port}/")
    finally:
        _stop(server)


def test_cli_help_says_the_command_line_shows_token_and_dsn_in_ps() -> None:
    for command in (["dashboard", "--help"], ["migrate", "--help"]):
        done = subprocess.run(
            [str(BIN), *command], env=_env(), capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0
        flat = " ".join(done.stdout.split())
        assert "visible to every user of the machine in `ps`" in flat
        assert (
            "DURABLE_GRAPH_TOKEN is not"
            if command[0] == "dashboard"
            else "DURABLE_GRAPH_DSN is not"
        ) in flat


def _started_dashboard(
    store_args: list[str], extra: list[str]
) -> tuple[subprocess.Popen[str], str]:
    """``durable-graph ... dashboard`` on a free loopback port, once it answers; (process, url)."""
    port = _free_port()
    server = subprocess.Popen(
        [str(BIN), *store_args, "dashboard", "--port", str(port), *extra],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            _get(url + "/")  # 401 without the token: up all the same
            return server, url
        except OSError:
            assert server.poll() is None, server.communicate()
            assert time.monotonic() < deadline, "the dashboard did not come up"
            time.sleep(0.1)


def _post_action(url: str, entry_id: int, action: str) -> tuple[int, str]:
    """The entry page's form for ``action`` posted as the operator's browser does (the token's
    cookie, the page's CSRF field, the dashboard's own Origin); (status, Location)."""
    cookie = {"Cookie": f"dg_token={TOKEN}"}
    status, page, _ = _get(f"{url}/entry/{entry_id}", cookie)
    assert status == 200, page
    found = re.search(r'name=csrf value="([0-9a-f]+)"', page)
    assert found is not None, "the entry page offers no action form"
    host = url.removeprefix("http://")
    conn = http.client.HTTPConnection(host, timeout=10)
    try:
        conn.request(
            "POST",
            f"/entry/{entry_id}/{action}",
            body=f"csrf={found.group(1)}",
            headers={
                **cookie,
                "Origin": url,
                "Content-Type": "application/x-www-form-urlencoded",
            },
        )
        response = conn.getresponse()
        response.read()
        return response.status, response.getheader("location") or ""
    finally:
        conn.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_dashboard_command_with_a_token_retries_and_cancels(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """Issue 34 item 4: the actions work from ``durable-graph dashboard --token`` itself (it
    opened its store read-only, so both answered 500); without a token it stays read-only."""
    if backend == "sqlite":
        store_args = ["--sqlite", str(tmp_path / "store.db")]
        store: Any = SqliteCheckpointer.open(store_args[1])
    else:
        from durable_graph.postgres import PostgresCheckpointer, PostgresConfig

        dsn, schema = request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")
        store_args = ["--dsn", dsn, "--schema", schema]
        store = PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema))
    with store:
        filled = fill(store)
    server, url = _started_dashboard(store_args, ["--token", TOKEN])
    try:
        status, location = _post_action(url, filled.failed, "retry")
        assert status == 303, location
        retried = int(location.rsplit("/", 1)[1])
        assert retried != filled.failed
        status, location = _post_action(url, filled.running, "cancel")
        assert (status, location) == (303, f"/entry/{filled.running}")
    finally:
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=30)
    assert server.returncode == 0, stderr
    assert "retry and cancel enabled" in stderr
    reopened: Any = (
        SqliteCheckpointer.open(store_args[1])
        if backend == "sqlite"
        else PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema))
    )
    with reopened:
        queue = reopened.run_queue
        copy = queue.entry(retried)
        assert copy is not None and copy.retry_of == filled.failed and not copy.closed
        cancelled = queue.entry(filled.running)
        assert cancelled is not None and isinstance(cancelled.outcome, Cancelled)
