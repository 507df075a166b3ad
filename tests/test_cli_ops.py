"""The CLI as an operator meets it (issue #16): exit codes, help and environment variables,
`health`, reads that never create anything, a bounded PostgreSQL open, and worker logs."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from durable_graph import Completed, Failed, Submission
from durable_graph.aio import AsyncInMemoryCheckpointer
from durable_graph.cli import build_parser, open_store
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.worker.aio import AsyncRunContext, AsyncWorker
from durable_graph.worker.sync import RunContext, Worker

BIN = Path(sys.executable).with_name("durable-graph")

FAILING_APP = textwrap.dedent(
    """
    def handler(ctx):
        raise ValueError(f"no model for {ctx.input}")
    """
)


def run(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("DURABLE_GRAPH_")}
    return subprocess.run(
        [str(BIN), *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


# --- exit codes, help, environment ---------------------------------------------------------


def test_exit_codes_are_0_ok_1_failure_2_usage(tmp_path: Path) -> None:
    store = ["--sqlite", str(tmp_path / "s.db")]
    version = run("--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("durable-graph ")
    assert run("frobnicate", cwd=tmp_path).returncode == 2
    assert run("submit", "t", *store, cwd=tmp_path).returncode == 2  # --input missing
    assert run("events", "t", "--limit", "0", *store, cwd=tmp_path).returncode == 2
    assert run("submit", "t", "--input", "1", *store, cwd=tmp_path).returncode == 0
    unknown = run("events", "nope", *store, cwd=tmp_path)
    assert unknown.returncode == 1 and "'nope' not found" in one_error_line(unknown)
    assert run("thread", "show", "nope", *store, cwd=tmp_path).returncode == 1


def _options(parser: argparse.ArgumentParser, path: str = "") -> Iterator[tuple[str, Any]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, f"{path} {name}".strip())
        else:
            yield path, action


def test_every_option_has_help_text_naming_its_environment_variable() -> None:
    for command, action in _options(build_parser()):
        if action.dest in ("help", "version"):
            continue
        assert action.help, f"{command}: {action.option_strings or action.dest} has no help"
        if action.option_strings:
            flag = action.option_strings[-1]
            env = "DURABLE_GRAPH_" + flag.lstrip("-").replace("-", "_").upper()
            assert env in action.help, f"{command} {flag}: {action.help!r}"
    parser = build_parser()
    subcommands = next(
        a for a in parser._actions if isinstance(a, argparse._SubParsersAction)
    ).choices
    for postgres_only in ("sql", "migrate", "grant", "revoke"):
        assert "--sqlite" not in subcommands[postgres_only].format_help()


def test_options_default_to_their_environment_variables(tmp_path: Path) -> None:
    env = {"DURABLE_GRAPH_SQLITE": str(tmp_path / "env.db"), "DURABLE_GRAPH_TENANT": "acme"}
    assert run("submit", "t", "--input", "1", cwd=tmp_path, env=env).returncode == 0
    listed = run("queue", "ls", cwd=tmp_path, env={**env, "DURABLE_GRAPH_JSON": "1"})
    assert [e["tenant"] for e in json.loads(listed.stdout)] == ["acme"]
    bad = run("submit", "t", "--input", "1", cwd=tmp_path, env={**env, "DURABLE_GRAPH_MODE": "x"})
    assert bad.returncode == 2 and "DURABLE_GRAPH_MODE" in one_error_line(bad)


def test_events_follow_exits_130_on_ctrl_c(tmp_path: Path) -> None:
    store = ["--sqlite", str(tmp_path / "s.db")]
    assert run("submit", "t", "--input", "1", *store, cwd=tmp_path).returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURABLE_GRAPH_")}
    follow = subprocess.Popen(
        [str(BIN), "events", "t", "--follow", "--poll-interval", "50ms", *store],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)
    follow.send_signal(signal.SIGINT)
    _, stderr = follow.communicate(timeout=30)
    assert follow.returncode == 130, stderr


# --- thread delete, prune wording ------------------------------------------------------------


def test_thread_delete_of_a_queued_thread_without_commits_says_it_marked_the_entries(
    tmp_path: Path,
) -> None:
    store = ["--sqlite", str(tmp_path / "s.db")]
    assert run("submit", "pg-3", "--input", "1", *store, cwd=tmp_path).returncode == 0
    deleted = run("thread", "delete", "pg-3", *store, cwd=tmp_path)
    assert deleted.returncode == 0, deleted.stderr
    assert "not found" not in deleted.stdout
    assert "marked its 1 open queue entry deleted" in deleted.stdout
    again = run("thread", "delete", "pg-3", *store, "--json", cwd=tmp_path)
    assert json.loads(again.stdout) == {"thread_id": "pg-3", "deleted": False, "entries_marked": 1}
    assert run("thread", "delete", "never", *store, cwd=tmp_path).returncode == 1
    pruned = run("prune", "--keep-last", "1", *store, cwd=tmp_path)
    assert pruned.stdout.strip() == "removed 0 checkpoints and 0 events from 0 threads"


# --- queue ls --state and queue stats ---------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def store_options(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    if request.param == "sqlite":
        return ["--sqlite", str(tmp_path / "s.db")]
    dsn = request.getfixturevalue("pg_dsn")
    return ["--dsn", dsn, "--schema", request.getfixturevalue("pg_schema")]


def _one_of_each_state(store_options: list[str]) -> dict[str, int]:
    """Entries completed, failed, cancelled, and two open ones (one a retry of the failed)."""
    args = build_parser().parse_args(["queue", "ls", *store_options])
    store = open_store(args, must_exist=False)
    try:
        queue = store.run_queue
        ids = {n: queue.submit(Submission(f"t-{n}", n)).entry_id for n in ("ok", "bad", "no")}
        for outcome in (Completed("fine"), Failed("Traceback ...\nValueError: no model")):
            lease = queue.lease("w", timedelta(seconds=30))
            assert lease is not None
            queue.close(lease, outcome)
        queue.cancel(ids["no"])
        ids["waiting"] = queue.submit(Submission("t-waiting", "w")).entry_id
        ids["retry"] = queue.retry(ids["bad"]).entry_id
        return ids
    finally:
        store.close()


def test_queue_ls_by_state_pages_newest_first_and_stats_counts_by_state(
    store_options: list[str], tmp_path: Path
) -> None:
    ids = _one_of_each_state(store_options)
    failed = run("queue", "ls", "--state", "failed", "--json", *store_options, cwd=tmp_path)
    [entry] = json.loads(failed.stdout)
    assert entry["entry_id"] == ids["bad"] and entry["outcome"]["kind"] == "failed"
    first = run("queue", "ls", "--state", "open", "--limit", "1", *store_options, cwd=tmp_path)
    assert first.returncode == 0 and f"--after {ids['retry']}" in first.stderr
    rows = first.stdout.splitlines()
    assert rows[0].split()[:2] == ["ENTRY", "THREAD"] and rows[1].split()[:2] == [
        str(ids["retry"]),
        "t-bad",
    ]
    assert rows[1].split()[-1] == str(ids["bad"])  # RETRY OF
    args = ["--state", "open", "--after", str(ids["retry"]), "--json"]
    second = run("queue", "ls", *args, *store_options, cwd=tmp_path)
    assert [e["entry_id"] for e in json.loads(second.stdout)] == [ids["waiting"]]
    assert second.stderr == ""  # a short page: nothing more
    stats = run("queue", "stats", "--json", *store_options, cwd=tmp_path)
    counts = json.loads(stats.stdout)
    assert counts["oldest_waiting_age"] >= 0
    del counts["oldest_waiting_age"]
    assert counts == {
        "open": 2,
        "running": 0,
        "completed": 1,
        "failed": 1,
        "cancelled": 1,
        "interrupted": 0,
        "waiting_by_kind": {"default": 2},  # SPEC §15
    }
    text = run("queue", "stats", *store_options, cwd=tmp_path).stdout
    assert "failed:" in text and "oldest waiting:" in text and "waiting default:" in text


def test_queue_retry_twice_shows_the_first_retry_and_again_submits_another(
    tmp_path: Path,
) -> None:
    # Issue 26 item 8: a second `queue retry N` no longer makes a second entry that also runs.
    store = ["--sqlite", str(tmp_path / "s.db")]
    assert run("submit", "t", "--input", "1", *store, cwd=tmp_path).returncode == 0
    assert run("queue", "cancel", "1", *store, cwd=tmp_path).returncode == 0
    first = json.loads(run("queue", "retry", "1", "--json", *store, cwd=tmp_path).stdout)
    second = run("queue", "retry", "1", *store, cwd=tmp_path)
    assert second.returncode == 0
    assert f"already retried as entry {first['entry_id']}" in second.stdout
    assert "--again" in second.stdout
    more = json.loads(run("queue", "retry", "1", "--again", "--json", *store, cwd=tmp_path).stdout)
    assert more["entry_id"] > first["entry_id"] and more["existing"] is False
    listed = json.loads(run("queue", "ls", "--json", *store, cwd=tmp_path).stdout)
    assert [e["entry_id"] for e in listed] == [first["entry_id"], more["entry_id"]]


def test_bad_input_is_a_usage_error_with_a_hint_to_quote_a_string(tmp_path: Path) -> None:
    # Issue 26 items 5 and 11: nested past the recursion limit it printed `RecursionError`
    # (exit 1); a bare word failed with "not valid JSON" and no hint.
    store = ["--sqlite", str(tmp_path / "s.db")]
    deep = run("submit", "t", "--input", "[" * 5000 + "]" * 5000, *store, cwd=tmp_path)
    assert deep.returncode == 2, deep.stderr
    assert "nested too deeply" in deep.stderr and "RecursionError" not in deep.stderr
    bare = run("submit", "t", "--input", "hello", *store, cwd=tmp_path)
    assert bare.returncode == 2
    assert "--input '\"hello\"'" in bare.stderr, bare.stderr


# --- health and read-only opens ----------------------------------------------------------------


def test_health_on_sqlite_reports_reachable_current_and_depth(tmp_path: Path) -> None:
    store = ["--sqlite", str(tmp_path / "s.db")]
    missing = run("health", *store, "--json", cwd=tmp_path)
    assert missing.returncode == 1
    assert json.loads(missing.stdout)["reachable"] is False
    assert not (tmp_path / "s.db").exists()
    for thread in ("a", "b"):
        assert run("submit", thread, "--input", "1", *store, cwd=tmp_path).returncode == 0
    healthy = run("health", *store, "--json", cwd=tmp_path)
    assert healthy.returncode == 0, healthy.stdout
    report = json.loads(healthy.stdout)
    assert report["ok"] and report["schema_current"] and report["queue_depth"] == 2
    deep = run("health", *store, "--max-depth", "1", cwd=tmp_path)
    assert deep.returncode == 1 and "UNHEALTHY" in deep.stdout


def test_sqlite_read_only_commands_leave_the_file_untouched(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = ["--sqlite", str(path)]
    assert run("submit", "t", "--input", "1", *store, cwd=tmp_path).returncode == 0
    before = path.read_bytes()
    for command in (["queue", "ls"], ["queue", "show", "1"], ["thread", "ls"], ["health"]):
        assert run(*command, *store, cwd=tmp_path).returncode == 0
    assert path.read_bytes() == before


def test_health_on_postgres_before_and_after_migrate(
    pg_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    store = ["--dsn", pg_dsn, "--schema", pg_schema]
    before = run("health", *store, "--json", cwd=tmp_path)
    assert before.returncode == 1
    report = json.loads(before.stdout)
    assert report["reachable"] is True and report["schema_current"] is False
    assert "durable-graph migrate" in report["problem"]
    with psycopg.connect(pg_dsn) as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (pg_schema,))
        assert found.fetchone() is None  # health created nothing
    assert run("migrate", *store, cwd=tmp_path).returncode == 0
    after = run("health", *store, cwd=tmp_path)
    assert after.returncode == 0 and "healthy" in after.stdout


def test_health_counts_with_stats_waiting_and_running_apart(
    pg_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    # Issue 26 item 3: one stats() call (one snapshot, the store's clock), not a walk over
    # every open entry; waiting and running are told apart.
    store = ["--dsn", pg_dsn, "--schema", pg_schema]
    assert run("migrate", *store, cwd=tmp_path).returncode == 0
    for thread in ("a", "b", "c"):
        assert run("submit", thread, "--input", "1", *store, cwd=tmp_path).returncode == 0
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            f"UPDATE {pg_schema}.queue_entries SET submitted_at = submitted_at - interval '1 hour'"
        )
    with PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=pg_schema)) as pg:
        assert pg.run_queue.lease("w", timedelta(minutes=5)) is not None
    health = run("health", *store, "--json", cwd=tmp_path)
    report = json.loads(health.stdout)
    assert report["queue_depth"] == 3 and report["queue_waiting"] == 2, report
    assert report["queue_running"] == 1
    assert 3590 <= report["oldest_open_age_seconds"] <= 3700, report
    text = run("health", *store, cwd=tmp_path).stdout
    assert "3 open entries: 2 waiting, 1 running" in text, text


def test_a_refused_login_is_reported_as_such_not_as_a_schema_problem(
    pg_dsn: str, tmp_path: Path
) -> None:
    params = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    params["user"] = "no_such_role_h12"
    dsn = psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items()})
    for command in (["queue", "ls"], ["submit", "t", "--input", "1"], ["migrate"]):
        line = one_error_line(run(*command, "--dsn", dsn, cwd=tmp_path))
        assert line.startswith("error: could not connect to PostgreSQL"), line
        assert "could not prepare schema" not in line
    health = run("health", "--json", "--dsn", dsn, cwd=tmp_path)
    report = json.loads(health.stdout)
    assert health.returncode == 1 and report["reachable"] is False
    assert report["problem"].startswith("could not connect to PostgreSQL")


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    listener.close()


def test_opening_on_a_server_that_never_answers_is_bounded(
    silent_server: int, tmp_path: Path
) -> None:
    # The documented bound: connection_timeout (5 s) + call_timeout (5 s), plus process start.
    dsn = f"host=127.0.0.1 port={silent_server} user=u dbname=d"
    started = time.monotonic()
    line = one_error_line(run("queue", "ls", "--dsn", dsn, cwd=tmp_path, timeout=60))
    assert time.monotonic() - started < 13
    assert line.startswith("error: could not connect to PostgreSQL")


# --- worker logs -------------------------------------------------------------------------------


def test_worker_logs_attempts_with_durations_tracebacks_and_json_lines(tmp_path: Path) -> None:
    (tmp_path / "failing_app.py").write_text(FAILING_APP)
    store = ["--sqlite", str(tmp_path / "s.db")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURABLE_GRAPH_")}
    worker = subprocess.Popen(
        [
            str(BIN),
            "worker",
            "--app",
            "failing_app:handler",
            "--poll-interval",
            "50ms",
            "--log-format",
            "json",
            "--log-level",
            "warning",
            *store,
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        submit = ["submit", "t", "--input", '"q"', "--max-attempts", "2", "--wait", "30s"]
        waited = run(*submit, *store, cwd=tmp_path)
    finally:
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=30)
    assert waited.returncode == 1, waited.stderr  # --wait: the run failed
    assert "failed: ValueError: no model for q" in waited.stdout  # issue 26 item 9: the type
    records = [json.loads(line) for line in stderr.splitlines()]
    ends = [r for r in records if r.get("outcome") in ("retry", "failed")]
    assert [(r["level"], r["outcome"], r["attempt"]) for r in ends] == [
        ("WARNING", "retry", 1),
        ("ERROR", "failed", 2),
    ]
    for record in ends:
        assert record["entry_id"] == 1 and record["duration_s"] >= 0
        assert "ValueError: no model for q" in record["traceback"]
        assert 'raise ValueError(f"no model for {ctx.input}")' in record["traceback"]


def _attempt_records(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [
        (r.levelname, r.getMessage().split(": ", 1)[1].split(" in ")[0])
        for r in caplog.records
        if hasattr(r, "entry_id")
    ]


def test_both_workers_log_start_and_end_alike(caplog: pytest.LogCaptureFixture) -> None:
    def handler(ctx: RunContext) -> str:
        if ctx.input == "bad":
            raise RuntimeError("this input fails")
        return "ok"

    async def async_handler(ctx: AsyncRunContext) -> str:
        return handler(ctx)  # type: ignore[arg-type]  # reads ctx.input only

    caplog.set_level(logging.DEBUG)
    store = InMemoryCheckpointer()
    for thread, value in (("a", "bad"), ("b", "good")):
        store.run_queue.submit(Submission(thread, value, max_attempts=1))
    sync_worker = Worker(store, handler)
    while sync_worker.run_once() is not None:
        pass
    sync_lines = _attempt_records(caplog)
    sync_failures = [r for r in caplog.records if r.levelname == "ERROR"]
    caplog.clear()

    async def run_async() -> None:
        async_store = AsyncInMemoryCheckpointer()
        for thread, value in (("a", "bad"), ("b", "good")):
            await async_store.run_queue.submit(Submission(thread, value, max_attempts=1))
        worker = AsyncWorker(async_store, async_handler)
        while await worker.run_once() is not None:
            pass

    asyncio.run(run_async())
    assert (
        _attempt_records(caplog)
        == sync_lines
        == [
            ("INFO", "started (plan fresh)"),
            ("ERROR", "failed (plan fresh)"),
            ("INFO", "started (plan fresh)"),
            ("INFO", "completed (plan fresh)"),
        ]
    )
    async_failures = [r for r in caplog.records if r.levelname == "ERROR"]
    for record in (*sync_failures, *async_failures):
        assert record.exc_info is not None and record.exc_info[0] is RuntimeError
