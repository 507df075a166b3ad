"""The `durable-graph` command line, driven as real subprocesses on SQLite files and PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from durable_graph import ANY, Failed, Submission
from durable_graph.cli import parse_duration
from durable_graph.cli.common import redacted
from durable_graph.sqlite import SqliteCheckpointer

BIN = Path(sys.executable).with_name("durable-graph")

APP = textwrap.dedent(
    """
    from durable_graph import EventIn

    def handler(ctx):
        ctx.commit({"input": ctx.input, "step": 1}, next=["two"],
                   events=[EventIn("note", {"step": 1})])
        ctx.commit({"input": ctx.input, "step": 2}, events=[EventIn("note", {"step": 2})])
        return {"echo": ctx.input}
    """
)


@dataclass
class Cli:
    """Runs the CLI against one store (its options are appended to every command)."""

    store_args: list[str]
    cwd: Path

    def run(
        self, *args: str, timeout: float = 60, store: bool = True
    ) -> subprocess.CompletedProcess[str]:
        argv = [str(BIN), *args, *(self.store_args if store else [])]
        env = {k: v for k, v in os.environ.items() if k != "DURABLE_GRAPH_DSN"}
        return subprocess.run(
            argv, cwd=self.cwd, env=env, capture_output=True, text=True, timeout=timeout
        )

    def ok(self, *args: str, timeout: float = 60) -> str:
        result = self.run(*args, timeout=timeout)
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
        return result.stdout

    def json(self, *args: str, timeout: float = 60) -> Any:
        return json.loads(self.ok(*args, "--json", timeout=timeout))

    def start(self, *args: str) -> subprocess.Popen[str]:
        """The command running in the background, its output piped (as text)."""
        env = {k: v for k, v in os.environ.items() if k != "DURABLE_GRAPH_DSN"}
        return subprocess.Popen(
            [str(BIN), *args, *self.store_args],
            cwd=self.cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def start_worker(self, *extra: str) -> subprocess.Popen[str]:
        return self.start(
            "worker", "--app", "cli_test_app:handler", "--poll-interval", "100ms", *extra
        )


@pytest.fixture(params=["sqlite", "postgres"])
def cli(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cli]:
    (tmp_path / "cli_test_app.py").write_text(APP)
    if request.param == "sqlite":
        yield Cli(["--sqlite", str(tmp_path / "store.db")], tmp_path)
    else:
        dsn = request.getfixturevalue("pg_dsn")
        schema = request.getfixturevalue("pg_schema")
        yield Cli(["--dsn", dsn, "--schema", schema], tmp_path)


def _assert_one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def _run_to_completion(cli: Cli, thread: str, value: Any) -> dict[str, Any]:
    """Submit and let a worker process run it; returns the submit --wait JSON."""
    worker = cli.start_worker()
    submitted = cli.run("submit", thread, "--input", json.dumps(value), "--wait", "30s", "--json")
    worker.send_signal(signal.SIGTERM)
    _, worker_stderr = worker.communicate(timeout=30)
    assert submitted.returncode == 0, (submitted.stderr, worker_stderr)
    result: dict[str, Any] = json.loads(submitted.stdout)
    return result


# --- pure helpers --------------------------------------------------------------------------


def test_durations_accept_units_and_sums() -> None:
    assert parse_duration("30s") == timedelta(seconds=30)
    assert parse_duration("5m") == timedelta(minutes=5)
    assert parse_duration("2h") == timedelta(hours=2)
    assert parse_duration("7d") == timedelta(days=7)
    assert parse_duration("250ms") == timedelta(milliseconds=250)
    assert parse_duration("1h30m") == timedelta(minutes=90)


# --- submit and the queue ------------------------------------------------------------------


def test_keyed_submit_retried_returns_the_same_ticket(cli: Cli) -> None:
    first = cli.json("submit", "t1", "--input", '{"a": 1}', "--key", "k1")
    again = cli.json("submit", "t1", "--input", '{"a":1}', "--key", "k1")
    assert first == {"entry_id": first["entry_id"], "existing": False}
    assert again == {"entry_id": first["entry_id"], "existing": True}
    assert "existing" in cli.ok("submit", "t1", "--input", '{"a":1}', "--key", "k1")


def test_queue_ls_lists_open_entries_as_a_table_and_as_json(cli: Cli) -> None:
    cli.ok("submit", "t1", "--input", "1")
    cli.ok("submit", "t2", "--input", '"two"', "--tenant", "acme", "--mode", "interrupt")
    table = cli.ok("queue", "ls").splitlines()
    assert table[0].split() == [
        "ENTRY",
        "THREAD",
        "TENANT",
        "MODE",
        "KEY",
        "ATTEMPTS",
        "LEASE",
        "SUBMITTED",
    ]
    assert [line.split()[1] for line in table[1:]] == ["t1", "t2"]
    # Columns are aligned: every row starts its THREAD column where the header does.
    column = table[0].index("THREAD")
    assert all(line[column:].startswith("t") for line in table[1:])
    entries = cli.json("queue", "ls")
    assert [(e["thread_id"], e["tenant"], e["mode"]) for e in entries] == [
        ("t1", None, "enqueue"),
        ("t2", "acme", "interrupt"),
    ]
    assert [e["thread_id"] for e in cli.json("queue", "ls", "--tenant", "acme")] == ["t2"]


def test_queue_show_and_cancel(cli: Cli) -> None:
    entry_id = cli.json("submit", "t1", "--input", '{"x": [1, 2]}')["entry_id"]
    shown = cli.json("queue", "show", str(entry_id))
    assert shown["input"] == {"x": [1, 2]} and shown["closed"] is False
    assert "outcome:" in cli.ok("queue", "show", str(entry_id))
    assert f"entry {entry_id} cancelled" in cli.ok("queue", "cancel", str(entry_id))
    cancelled = cli.json("queue", "show", str(entry_id))
    assert cancelled["outcome"] == {"kind": "cancelled", "reason": "requested"}
    line = _assert_one_line_error(cli.run("queue", "cancel", str(entry_id)))
    assert "closed" in line


def test_tenant_entries_are_shown_only_with_their_tenant(cli: Cli) -> None:
    entry_id = cli.json("submit", "t1", "--input", "1", "--tenant", "acme")["entry_id"]
    _assert_one_line_error(cli.run("queue", "show", str(entry_id)))
    assert cli.json("queue", "show", str(entry_id), "--tenant", "acme")["tenant"] == "acme"


def test_reclaim_removes_closed_entries(cli: Cli) -> None:
    entry_id = cli.json("submit", "t1", "--input", "1")["entry_id"]
    cli.ok("queue", "cancel", str(entry_id))
    assert cli.json("queue", "reclaim", "--older-than", "0s") == {"reclaimed": 1}
    _assert_one_line_error(cli.run("queue", "show", str(entry_id)))


# --- workers, threads and events -----------------------------------------------------------


def test_worker_runs_submitted_entries_and_stops_on_sigterm(cli: Cli) -> None:
    worker = cli.start_worker("--holder", "w1")
    try:
        result = cli.json("submit", "t1", "--input", '{"q": "hi"}', "--wait", "30s")
    finally:
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=30)
    assert result["outcome"] == {"kind": "completed", "output": {"echo": {"q": "hi"}}}
    assert worker.returncode == 0
    assert "Traceback" not in stderr
    assert "w1 stopped" in stderr


def test_thread_commands_show_history_children_and_delete(cli: Cli) -> None:
    _run_to_completion(cli, "t1", {"n": 1})
    threads = cli.json("thread", "ls")
    assert [t["thread_id"] for t in threads] == ["t1"]
    assert "t1" in cli.ok("thread", "ls")
    shown = cli.json("thread", "show", "t1")
    assert shown["head"]["state"] == {"input": {"n": 1}, "step": 2}
    assert '"step": 2' in cli.ok("thread", "show", "t1")
    history = cli.json("thread", "history", "t1")
    assert [cp["state"]["step"] for cp in history] == [2, 1]
    assert history[0]["parent_id"] == history[1]["checkpoint_id"]
    assert len(cli.ok("thread", "history", "t1").splitlines()) == 3
    assert cli.json("thread", "children", "t1") == []
    assert "deleted thread t1" in cli.ok("thread", "delete", "t1")
    assert cli.json("thread", "ls") == []
    _assert_one_line_error(cli.run("thread", "show", "t1"))
    _assert_one_line_error(cli.run("thread", "delete", "t1"))


def test_events_lists_a_thread_log_after_a_sequence_number(cli: Cli) -> None:
    _run_to_completion(cli, "t1", "x")
    events = cli.json("events", "t1")
    assert [e["kind"] for e in events] == ["note", "store.checkpoint", "note", "store.checkpoint"]
    assert [e["seq"] for e in events] == [1, 2, 3, 4]
    assert [e["seq"] for e in cli.json("events", "t1", "--after", "2")] == [3, 4]
    table = cli.ok("events", "t1").splitlines()
    assert table[0].split() == ["SEQ", "KIND", "RUN", "CREATED", "PAYLOAD"] and len(table) == 5


def test_events_follow_prints_events_as_they_land(cli: Cli) -> None:
    _run_to_completion(cli, "t1", "x")
    follower = cli.start("events", "t1", "--follow", "--json", "--after", "2")
    try:
        assert follower.stdout is not None
        lines = [json.loads(follower.stdout.readline()) for _ in range(2)]
    finally:
        follower.send_signal(signal.SIGINT)
        _, stderr = follower.communicate(timeout=30)
    assert [e["seq"] for e in lines] == [3, 4]
    assert "Traceback" not in stderr


def test_first_hour_outputs_say_what_they_show(cli: Cli) -> None:
    # Issue 26 item 11: an empty `queue ls` right after a run says where it went; history
    # explains its SEQ; `events --follow` has a header and says it cuts payloads.
    _run_to_completion(cli, "t1", {"long": "x" * 100})
    ls = cli.run("queue", "ls")
    assert ls.returncode == 0
    assert (
        ls.stdout.strip() == "no open entries; 1 closed in the last hour (--state all lists them)"
    )
    listed = cli.json("queue", "ls", "--state", "all")
    assert [e["thread_id"] for e in listed] == ["t1"]
    history = cli.run("thread", "history", "t1")
    assert history.returncode == 0 and "SEQ: the thread's event number" in history.stderr
    follower = cli.start("events", "t1", "--follow", "--poll-interval", "50ms")
    try:
        assert follower.stdout is not None
        header = follower.stdout.readline()
        first = follower.stdout.readline()
    finally:
        follower.send_signal(signal.SIGINT)
        _, stderr = follower.communicate(timeout=30)
    assert header.split() == ["SEQ", "KIND", "RUN", "CREATED", "PAYLOAD"]
    assert first.split()[0] == "1"
    assert "following thread t1" in stderr and "--json shows them whole" in stderr


def test_prune_keeps_the_newest_checkpoints(cli: Cli) -> None:
    _run_to_completion(cli, "t1", 1)
    _run_to_completion(cli, "t1", 2)
    assert len(cli.json("thread", "history", "t1")) == 4
    result = cli.json("prune", "--keep-last", "1", "--progress")
    assert result == {"checkpoints_removed": 3, "events_removed": 0, "threads": 1}
    assert len(cli.json("thread", "history", "t1")) == 1
    _assert_one_line_error(cli.run("prune"))


# --- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["queue", "show", "999"],
        ["queue", "cancel", "999"],
        ["queue", "show", "not-a-number"],
        ["submit", "t1", "--input", "{bad json"],
        ["submit", "t1", "--input", "1", "--max-attempts", "0"],
        ["submit", "", "--input", "1"],
        ["queue", "reclaim", "--older-than", "5 parsecs"],
        ["thread", "show", "nope"],
        ["thread", "history", "nope"],
        ["worker", "--app", "no_such_module:handler"],
        ["worker", "--app", "cli_test_app:missing"],
        ["worker", "--app", "cli_test_app:handler", "--claim-ttl", "1s", "--claim-renew", "2s"],
        ["frobnicate"],
        ["queue"],
    ],
)
def test_mistakes_are_one_line_errors_with_a_nonzero_exit(cli: Cli, args: list[str]) -> None:
    cli.ok("submit", "seed", "--input", "1")  # the store exists
    _assert_one_line_error(cli.run(*args))


def test_reused_submission_key_is_a_one_line_error(cli: Cli) -> None:
    cli.ok("submit", "t1", "--input", "1", "--key", "k")
    line = _assert_one_line_error(cli.run("submit", "t1", "--input", "2", "--key", "k"))
    assert "key" in line


def test_missing_sqlite_file_is_an_error_not_a_new_store(tmp_path: Path) -> None:
    cli = Cli(["--sqlite", str(tmp_path / "missing.db")], tmp_path)
    _assert_one_line_error(cli.run("queue", "ls"))
    assert not (tmp_path / "missing.db").exists()


def test_unreachable_postgres_is_a_one_line_error(tmp_path: Path) -> None:
    cli = Cli(["--dsn", "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1"], tmp_path)
    started = time.monotonic()
    _assert_one_line_error(cli.run("queue", "ls", timeout=60))
    assert time.monotonic() - started < 30


# --- PostgreSQL schema commands ------------------------------------------------------------


def test_sql_prints_the_install_script(tmp_path: Path) -> None:
    out = Cli([], tmp_path).ok("sql", "--schema", "dg_review")
    assert "dg_review" in out and "CREATE" in out.upper()


def test_migrate_brings_the_schema_to_its_version(
    pg_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    cli = Cli(["--dsn", pg_dsn, "--schema", pg_schema], tmp_path)
    first = cli.json("migrate")
    assert first["schema"] == pg_schema and first["version"] >= 1
    assert cli.json("migrate") == first  # idempotent
    assert cli.json("queue", "ls") == []


# --- the demo ------------------------------------------------------------------------------


def test_demo_runs_end_to_end_and_every_run_completes_exactly_once(tmp_path: Path) -> None:
    cli = Cli(["--sqlite", str(tmp_path / "demo.db")], tmp_path)
    started = time.monotonic()
    result = cli.run("demo", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert time.monotonic() - started < 60
    assert "Traceback" not in result.stderr
    assert "OK: all 7 runs completed exactly once" in result.stdout
    assert "SIGKILL demo-worker-" in result.stdout
    assert "A fresh store" in result.stdout
    # Issue 26 item 12: the command that opens the dashboard on this store.
    opening = f"dashboard --sqlite {tmp_path / 'demo.db'}"
    assert any(
        line.startswith("Look at it in the dashboard: ") and line.endswith(opening)
        for line in result.stdout.splitlines()
    ), result.stdout


def test_make_demo_installs_only_what_the_demo_needs_with_progress() -> None:
    # Issue 26 item 12: not the test and langgraph extras (~80 s of silent pip).
    root = Path(__file__).parents[1]
    plan = subprocess.run(
        ["make", "-n", "-B", "demo", "VENV=/nonexistent-venv"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    installs = [line for line in plan.splitlines() if "pip install" in line]
    assert installs, plan
    assert all("test" not in line and "langgraph" not in line for line in installs), installs
    assert all(" -q" not in line for line in installs), installs  # pip shows its progress
    assert "[dashboard]" in " ".join(installs)


def test_a_second_demo_on_one_store_says_the_store_was_used_before(tmp_path: Path) -> None:
    cli = Cli(["--sqlite", str(tmp_path / "demo.db")], tmp_path)
    cli.ok("submit", "earlier", "--input", "1")  # a store with work in it already
    result = cli.run("demo", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "A fresh store" not in result.stdout
    assert "A store used before" in result.stdout


def test_demo_json_summary_on_postgres(pg_dsn: str, pg_schema: str, tmp_path: Path) -> None:
    cli = Cli(["--dsn", pg_dsn, "--schema", pg_schema], tmp_path)
    summary = cli.json("demo", timeout=120)
    assert summary["ok"] is True
    assert summary["killed"] is not None
    completed = [e for e in summary["entries"] if e["outcome"] == "completed"]
    assert len(completed) == 7 and all(e["applied"] == 1 for e in completed)


# --- what the CLI prints: escaped, and never the DSN (issue #11) ---------------------------


def test_control_characters_in_ids_tenants_and_error_text_are_shown_escaped(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    with SqliteCheckpointer.open(path) as store:
        store.run_queue.submit(Submission("t\x1b[2J", None, tenant="ac\x07me"))
        lease = store.run_queue.lease("w\x9b", timedelta(seconds=30), tenant=ANY)
        assert lease is not None
        store.run_queue.close(lease, Failed("boom\x1b]0;pwned\x07\u202e"))
    cli = Cli(["--sqlite", str(path)], tmp_path)
    shown = cli.ok("queue", "show", "1", "--tenant", "ac\x07me")
    assert not any(c in shown for c in "\x1b\x07\x9b\u202e")
    assert "t\\x1b[2J" in shown and "ac\\x07me" in shown
    assert "boom\\x1b]0;pwned\\x07\\u202e" in shown
    line = _assert_one_line_error(cli.run("queue", "show", "1", "--tenant", "x\x1b[2J"))
    assert "\x1b" not in line and "x\\x1b[2J" in line
    assert cli.json("queue", "show", "1", "--tenant", "ac\x07me")["tenant"] == "ac\x07me"


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://bob:s3cr3t-pw@127.0.0.1:1/appdb?connect_timeout=1",
        "host=127.0.0.1 port=1 user=bob password=s3cr3t-pw dbname=appdb connect_timeout=1",
        "host=127.0.0.1 user=bob s3cr3t-pw",  # malformed: libpq quotes the bad fragment
    ],
)
def test_no_password_in_error_lines(tmp_path: Path, dsn: str) -> None:
    cli = Cli(["--dsn", dsn], tmp_path)
    for command in (["queue", "ls"], ["submit", "t", "--input", "1"], ["migrate"]):
        line = _assert_one_line_error(cli.run(*command, timeout=60))
        assert "s3cr3t" not in line, line


def test_redaction_hides_the_password_and_never_part_of_another_word() -> None:
    # Issue 26 item 10: with the user `postgres`, errors read `database "***" does not exist`
    # and `/usr/lib/***ql/15/lib/plpgsql.so`.
    dsn = "postgresql://postgres:pg-s3cret@127.0.0.1:5432/postgres"
    plain = 'database "postgres" does not exist; see /usr/lib/postgresql/15/lib/plpgsql.so'
    assert redacted(plain, dsn) == plain
    leaked = "connecting to postgresql://postgres:pg-s3cret@127.0.0.1/x as pg-s3cret failed"
    shown = redacted(leaked, dsn)
    assert "pg-s3cret" not in shown and "postgres:***@127.0.0.1" in shown, shown
    assert shown.endswith("as *** failed")
    kv = "host=db user=postgres password=hunter2 dbname=postgres"
    assert redacted("password=hunter2 for hunter2x", kv) == "password=*** for hunter2x"


def test_worker_app_in_the_current_directory_never_shadows_a_library_module(
    tmp_path: Path,
) -> None:
    # The SQLite store imports sqlite3 after the app is loaded: this file must not be it.
    (tmp_path / "sqlite3.py").write_text("raise ImportError('shadowed by the current directory')")
    (tmp_path / "cli_test_app.py").write_text(APP)
    cli = Cli(["--sqlite", str(tmp_path / "store.db")], tmp_path)
    worker = cli.start_worker()
    try:
        time.sleep(1.5)
        assert worker.poll() is None, worker.communicate()[1]
    finally:
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=30)
    assert worker.returncode == 0, stderr
    assert "shadowed" not in stderr


def test_app_module_named_like_an_installed_module_is_refused(tmp_path: Path) -> None:
    (tmp_path / "json.py").write_text("def handler(ctx):\n    return 1\n")
    cli = Cli(["--sqlite", str(tmp_path / "store.db")], tmp_path)
    line = _assert_one_line_error(cli.run("worker", "--app", "json:handler"))
    assert "'json'" in line and "rename" in line


def test_read_only_commands_never_create_a_postgres_schema(
    pg_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    cli = Cli(["--dsn", pg_dsn, "--schema", pg_schema], tmp_path)
    for command in (["queue", "ls"], ["thread", "ls"], ["events", "t"], ["queue", "show", "1"]):
        line = _assert_one_line_error(cli.run(*command))
        assert "durable-graph migrate" in line
    with psycopg.connect(pg_dsn) as conn:
        found = conn.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", (pg_schema,)
        ).fetchone()
    assert found is None


def test_thread_prune_keeps_each_threads_latest_state_or_deletes(tmp_path: Path) -> None:
    """``durable-graph thread prune`` (SPEC §24.3): LangGraph's ``prune`` over the store, as
    ``threads.prune`` of ``serve`` runs it."""
    from typing import TypedDict

    from langgraph.graph import END, StateGraph

    from durable_graph.langgraph import DurableSaver

    class State(TypedDict):
        n: int

    builder = StateGraph(State)
    builder.add_node("add", lambda s: {"n": s["n"] + 1})
    builder.set_entry_point("add")
    builder.add_edge("add", END)
    path = tmp_path / "store.db"

    def config(thread_id: str) -> Any:
        return {"configurable": {"thread_id": thread_id}}

    with SqliteCheckpointer.open(path) as store:
        graph = builder.compile(checkpointer=DurableSaver(store))
        for thread_id in ("t1", "t2"):
            for n in (1, 10):
                graph.invoke({"n": n}, config(thread_id))
        before = graph.get_state(config("t1"))
        assert len(list(graph.get_state_history(config("t1")))) > 1
    cli = Cli(["--sqlite", str(path)], tmp_path)
    pruned = cli.json("thread", "prune", "t1", "missing")
    assert pruned == {"pruned_count": 1, "strategy": "keep_latest", "thread_ids": ["t1"]}
    assert cli.json("thread", "prune", "t2", "--strategy", "delete")["pruned_count"] == 1
    with SqliteCheckpointer.open(path) as store:
        graph = builder.compile(checkpointer=DurableSaver(store))
        history = list(graph.get_state_history(config("t1")))
        assert [h.config for h in history] == [before.config]
        assert graph.get_state(config("t1")).values == before.values == {"n": 11}
        assert graph.invoke({"n": 5}, config("t1")) == {"n": 6}  # it goes on from there
        assert store.thread("t2") is None
