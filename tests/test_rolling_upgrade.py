"""A rolling upgrade under load, as docs/upgrading.md tells an operator to run it (SPEC §23.4).

The previous commit's package (the archived state ``2026-12-04-9f124fb``, run from its extract
with ``PYTHONPATH``) installs its schema with its own ``migrate`` and runs two ``durable-graph
worker`` processes and an API process that submits a stream of keyed entries over several
threads. Mid-stream this package upgrades the schema (``durable-graph migrate``, or psql with
``sql/install.sql``) while all of them keep running; more entries follow, which the old workers
run on the upgraded schema; then one old worker is killed (SIGKILL) in the middle of an attempt
that applied its input, workers of this package start (and take that attempt over once its
lease expires, planned ``Resume``), and the other old worker gets SIGTERM. Every entry must close
``Completed`` with its input applied exactly once (one checkpoint marked ``applied`` and one
effect per entry), keyed submits must deduplicate across the upgrade, and an old process that
starts after the upgrade must refuse, naming both versions, and change nothing.
The helpers that run either package and snapshot a schema serve tests/test_upgrade_atomic.py too.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from durable_graph import Completed, QueueEntry, Submission
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig, migrations
from upgrade.old_version import OldPackage, extract, states

PREVIOUS = "2026-12-04-9f124fb"
"""The state of the commit before this release (tests/upgrade/states/SOURCES.json)."""
ROOT = Path(__file__).resolve().parent.parent
PSQL = "/usr/bin/psql"
THREADS = 6
BEFORE, AFTER, ROLLED = 18, 12, 12
"""Entries submitted before the upgrade, after it (run by the old workers alone), and once the
new workers replaced the old ones (half by the old API process, half by this package); more are
submitted all the time the upgrade runs (at least ``DURING``)."""
DURING = 5
SLOW = 4
"""Entries whose handler sleeps `SLEEP` after applying its input, submitted before the roll: an
old worker is killed in the middle of one."""
SLEEP = 1.5
TTL = "3s"
"""The workers' lease and claim ttl: how soon a killed worker's attempt is taken over."""
WAIT = 45.0
"""Seconds any one step may take."""

APP = '''
import time

import durable_graph
from durable_graph import Resume

RELEASE = durable_graph.__version__


def handler(ctx):
    """Apply the input once (a checkpoint marked applied), record one effect, finish."""
    if isinstance(ctx.plan, Resume):
        state = ctx.plan.checkpoint.state
    else:
        state = {"input": ctx.input}
        ctx.commit(state, next=["effect"], metadata={"applied": ctx.entry.entry_id})
    time.sleep(ctx.input.get("sleep", 0.02))
    effect = ctx.record_effect(
        f"effect/{ctx.entry.entry_id}", lambda: {"run": ctx.run_id, "release": RELEASE}
    )
    ctx.commit({**state, "effect": effect}, metadata={"finished": ctx.entry.entry_id})
    return {"release": RELEASE, "run": ctx.run_id}
'''

SUBMITTER = """
import itertools
import json
import sys
import time

import durable_graph
from durable_graph import ProcessingError, Submission
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig

dsn, schema = sys.argv[1], sys.argv[2]
config = PostgresConfig(schema=schema, auto_migrate=False)
with PostgresCheckpointer.open(dsn, config) as store:
    print(json.dumps({"ready": durable_graph.__version__}), flush=True)
    for line in sys.stdin:
        thread_id, key, value = json.loads(line)
        retries = 0
        while True:
            try:  # a keyed submit is retried safely: the store answers the same ticket
                ticket = store.run_queue.submit(
                    Submission(thread_id, value, key=key, max_attempts=10)
                )
                break
            except ProcessingError:  # waited past its call timeout
                retries += 1
                if retries > 50:
                    raise
                time.sleep(0.1)
        answer = {"key": key, "entry": ticket.entry_id, "existing": ticket.existing,
                  "retries": retries}
        print(json.dumps(answer), flush=True)
"""


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> OldPackage:
    return previous_package(tmp_path_factory)


def env_of(dsn: str, old: OldPackage | None) -> dict[str, str]:
    """The environment of a child: this package, or the old one first on ``PYTHONPATH``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DURABLE_GRAPH_"))}
    env["DURABLE_GRAPH_DSN"] = dsn
    if old is not None:
        env["PYTHONPATH"] = str(old.python_path)
    return env


def previous_package(tmp_path_factory: pytest.TempPathFactory) -> OldPackage:
    """The previous commit's package, extracted from its archived state."""
    state = next(s for s in states() if s.label == PREVIOUS)
    return extract(state, tmp_path_factory.mktemp("states"))


def cli(
    dsn: str, old: OldPackage | None, *args: str, cwd: Path, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``durable-graph ARGS`` of the old package (``old``) or of this one, run to its end."""
    return subprocess.run(
        [sys.executable, "-m", "durable_graph.cli", *args],
        env=env_of(dsn, old),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def upgrade_argv(path: str, dsn: str, schema: str) -> list[str]:
    """This package's upgrade of ``schema`` by one of the two documented paths: ``durable-graph
    migrate``, or psql with ``sql/install.sql`` (run from any directory: it includes its files
    relative to itself)."""
    if path == "migrate":
        return [sys.executable, "-m", "durable_graph.cli", "migrate", "--schema", schema]
    install = str(ROOT / "sql" / "install.sql")
    return [PSQL, "-X", "-q", "-d", dsn, "-v", f"schema={schema}", "-f", install]


def upgrade(path: str, dsn: str, schema: str) -> subprocess.CompletedProcess[str]:
    """`upgrade_argv`, run to its end."""
    return subprocess.run(
        upgrade_argv(path, dsn, schema),
        env=env_of(dsn, None),
        cwd="/",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@dataclass
class Worker:
    """A ``durable-graph worker`` process and its log."""

    proc: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")


def start_worker(dsn: str, schema: str, old: OldPackage | None, cwd: Path, name: str) -> Worker:
    log = cwd / f"{name}.log"
    argv = ["worker", "--schema", schema, "--app", "rolling_app:handler", "--holder", name]
    argv += ["--concurrency", "2", "--poll-interval", "100ms", "--backoff", "100ms"]
    argv += ["--lease-ttl", TTL, "--claim-ttl", TTL]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "durable_graph.cli", *argv, "--shutdown-deadline", "20s"],
            env=env_of(dsn, old),
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return Worker(proc, log)


def wait_started(workers: list[Worker]) -> None:
    deadline = time.monotonic() + WAIT
    while not all(" started (" in w.text() for w in workers):
        for w in workers:
            assert w.proc.poll() is None, f"worker exited {w.proc.returncode}:\n{w.text()}"
        assert time.monotonic() < deadline, [w.text() for w in workers]
        time.sleep(0.1)


@contextlib.contextmanager
def workers_running(workers: list[Worker]) -> Iterator[list[Worker]]:
    try:
        yield workers
    finally:
        for w in workers:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait()


def thread_of(key: str) -> str:
    return f"chat-{int(key.split('-')[1]) % THREADS}"


@dataclass
class Submitter:
    """An API process of the old package: submits what it is fed, answers each ticket."""

    proc: subprocess.Popen[str]
    log: Path
    answers: queue.Queue[dict[str, Any]] = field(default_factory=queue.Queue)
    tickets: dict[str, int] = field(default_factory=dict)
    retries: int = 0

    def read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.answers.put(json.loads(line))

    def answer(self) -> dict[str, Any]:
        try:
            return self.answers.get(timeout=WAIT)
        except queue.Empty:
            raise AssertionError(f"no answer: {self.log.read_text(errors='replace')}") from None

    def submit(self, key: str, **more: float) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps([thread_of(key), key, {"key": key, **more}]) + "\n")
        self.proc.stdin.flush()
        answer = self.answer()
        assert answer["key"] == key and not answer["existing"], answer
        self.tickets[key] = int(answer["entry"])
        self.retries += int(answer["retries"])


@contextlib.contextmanager
def old_api_process(dsn: str, schema: str, old: OldPackage, cwd: Path) -> Iterator[Submitter]:
    (cwd / "rolling_submitter.py").write_text(SUBMITTER)
    log_path = cwd / "submitter.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "rolling_submitter.py", dsn, schema],
            env=env_of(dsn, old),
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
    sub = Submitter(proc, log_path)
    threading.Thread(target=sub.read, daemon=True).start()
    try:
        ready = sub.answer()
        assert set(ready) == {"ready"} and ready["ready"] != migrations.release(), ready
        yield sub
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def catalog_state(dsn: str, schema: str, *, meta: bool = True) -> dict[str, Any]:
    """What an old process must leave alone: the bookkeeping, the installed function bodies (by
    digest) and every row of the schema's functions, relations and triggers, with its xmin.
    The bookkeeping is read from the table that holds it (``schema_bookkeeping`` from 0.2.0
    on, behind the ``schema_meta`` view); ``meta=False`` leaves it out, for a reader beside an
    upgrade in flight, whose lock on that table it would wait for."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = conn.execute(
            "SELECT to_regclass(format('%%I.schema_bookkeeping', %s::text)) IS NOT NULL", (schema,)
        ).fetchone()
        table = "schema_bookkeeping" if found and found[0] else "schema_meta"
        rows = (
            conn.execute(
                sql.SQL("SELECT key, value, xmin::text FROM {} ORDER BY key").format(
                    sql.Identifier(schema, table)
                )
            ).fetchall()
            if meta
            else None
        )
        procs = conn.execute(
            "SELECT p.oid::bigint, p.xmin::text, p.proname, p.prosrc FROM pg_proc p"
            " WHERE p.pronamespace = %s::regnamespace ORDER BY 1",
            (schema,),
        ).fetchall()
        relations = conn.execute(
            "SELECT c.oid::bigint, c.xmin::text, c.relname FROM pg_class c"
            " WHERE c.relnamespace = %s::regnamespace ORDER BY 1",
            (schema,),
        ).fetchall()
        triggers = conn.execute(
            "SELECT g.oid::bigint, g.xmin::text, g.tgname FROM pg_trigger g"
            " JOIN pg_class c ON c.oid = g.tgrelid WHERE c.relnamespace = %s::regnamespace"
            " ORDER BY 1",
            (schema,),
        ).fetchall()
        digest = migrations.proxy_digest(conn, schema)
    return {
        "meta": rows,
        "digest": digest,
        "functions": procs,
        "relations": relations,
        "triggers": triggers,
    }


def mid_attempt(store: PostgresCheckpointer, holder: str) -> int:
    """An entry ``holder`` leases whose input its attempt applied (admitted), once there is one."""
    deadline = time.monotonic() + WAIT
    while True:
        for entry in store.run_queue.open_entries():
            if entry.lease_holder == holder and entry.admitted:
                return entry.entry_id
        assert time.monotonic() < deadline, f"{holder} never ran a slow entry"
        time.sleep(0.02)


def applications(store: PostgresCheckpointer, thread_id: str) -> Counter[int]:
    """How many checkpoints of the thread's whole history each entry's input applied."""
    applied: Counter[int] = Counter()
    before: str | None = None
    while page := store.history(thread_id, before=before, limit=100):
        for checkpoint in page:
            metadata = checkpoint.metadata
            if isinstance(metadata, dict) and "applied" in metadata:
                applied[int(metadata["applied"])] += 1
        before = page[-1].checkpoint_id
    return applied


@pytest.mark.parametrize("path", ["migrate", "install.sql"])
def test_workers_of_the_previous_commit_run_through_the_upgrade_and_are_replaced(
    path: str, previous: OldPackage, pg_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    old_version = previous.state.schema_version
    version = cli(pg_dsn, previous, "--version", cwd=tmp_path)
    assert version.returncode == 0 and "0.2.0" not in version.stdout, version
    installed = cli(pg_dsn, previous, "migrate", "--schema", pg_schema, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    assert f"version {old_version}" in installed.stdout
    (tmp_path / "rolling_app.py").write_text(APP)
    keys = (f"k-{i}" for i in itertools.count())

    old = [start_worker(pg_dsn, pg_schema, previous, tmp_path, f"old-{i}") for i in range(2)]
    with workers_running(old), old_api_process(pg_dsn, pg_schema, previous, tmp_path) as api:
        wait_started(old)
        for key in itertools.islice(keys, BEFORE):
            api.submit(key)

        # 1. The upgrade, while the old workers run and the old API process keeps submitting.
        upgrading = threading.Event()
        failed: list[BaseException] = []

        def feed() -> None:
            try:
                while upgrading.is_set() or len(api.tickets) < BEFORE + DURING:
                    api.submit(next(keys))
                    time.sleep(0.02)
            except BaseException as exc:  # reported by the test's thread below
                failed.append(exc)

        upgrading.set()
        feeding = threading.Thread(target=feed)
        feeding.start()
        upgraded = upgrade(path, pg_dsn, pg_schema)
        upgrading.clear()
        feeding.join(WAIT)
        assert not feeding.is_alive() and not failed, failed
        assert upgraded.returncode == 0, upgraded.stderr
        for key in itertools.islice(keys, AFTER):
            api.submit(key)

        config = PostgresConfig(schema=pg_schema, auto_migrate=False)
        with PostgresCheckpointer.open(pg_dsn, config) as store:
            meta = {r.key: r.value for r in store_meta(pg_dsn, pg_schema)}
            assert meta["release"] == migrations.release()
            assert meta["version"] == str(migrations.required_version())
            # The old workers alone run everything submitted so far, on the upgraded schema.
            for key, entry_id in api.tickets.items():
                closed = store.run_queue.await_closed(entry_id, timedelta(seconds=WAIT))
                assert release_of(closed) != migrations.release(), (key, closed)

            # 2. Workers of this package; one old worker is killed mid-attempt, after its
            # handler applied the input, and the other gets SIGTERM.
            for key in itertools.islice(keys, SLOW):
                api.submit(key, sleep=SLEEP)
            killed = mid_attempt(store, "old-0")
            old[0].proc.kill()
            new = [start_worker(pg_dsn, pg_schema, None, tmp_path, f"new-{i}") for i in range(2)]
            with workers_running(new):
                wait_started(new)
                old[1].proc.send_signal(signal.SIGTERM)
                assert old[1].proc.wait(WAIT) == 0, old[1].text()
                for key in itertools.islice(keys, ROLLED // 2):
                    api.submit(key)
                tickets = dict(api.tickets)
                for key in itertools.islice(keys, ROLLED // 2):
                    ticket = store.run_queue.submit(
                        Submission(thread_of(key), {"key": key}, key=key, max_attempts=10)
                    )
                    assert not ticket.existing
                    tickets[key] = ticket.entry_id
                # A keyed submit retried across the upgrade gets its ticket back.
                for key in ("k-0", "k-1", "k-2"):
                    again = store.run_queue.submit(
                        Submission(thread_of(key), {"key": key}, key=key, max_attempts=10)
                    )
                    assert (again.entry_id, again.existing) == (tickets[key], True)

                # 3. Every entry closed once, each input applied exactly once.
                assert len(set(tickets.values())) == len(tickets) > BEFORE + AFTER + ROLLED
                by_release: Counter[str] = Counter()
                for key, entry_id in tickets.items():
                    closed = store.run_queue.await_closed(entry_id, timedelta(seconds=WAIT))
                    by_release[release_of(closed)] += 1
                    effect = store.get_effect(thread_of(key), f"effect/{entry_id}")
                    assert effect is not None, key
                for w in new:
                    w.proc.send_signal(signal.SIGTERM)
                for w in new:
                    assert w.proc.wait(WAIT) == 0, w.text()
            applied: Counter[int] = Counter()
            for t in range(THREADS):
                applied.update(applications(store, f"chat-{t}"))
            assert applied == Counter({entry_id: 1 for entry_id in tickets.values()})
            assert by_release[migrations.release()] >= ROLLED + 1
            taken_over = store.run_queue.entry(killed)
            assert taken_over is not None and len(taken_over.attempts) >= 2, taken_over
            assert release_of(taken_over) == migrations.release(), taken_over
            assert sum(by_release.values()) == len(tickets)
            stats = store.run_queue.stats()
            assert stats.counts() == {**{k: 0 for k in stats.counts()}, "completed": len(tickets)}
        assert api.proc.stdin is not None
        api.proc.stdin.close()
        assert api.proc.wait(WAIT) == 0

    # An old process that starts now refuses, naming both versions, and changes nothing.
    before = catalog_state(pg_dsn, pg_schema)
    for argv in (
        ["worker", "--schema", pg_schema, "--app", "rolling_app:handler"],
        ["migrate", "--schema", pg_schema],
    ):
        refused = cli(pg_dsn, previous, *argv, cwd=tmp_path)
        assert refused.returncode == 1, (argv, refused)
        named = (
            f"version {migrations.required_version()}",
            f"durable-graph {migrations.release()}",
        )
        assert all(n in refused.stderr for n in named), (argv, refused.stderr)
        assert re.search(rf"\b{old_version}\b", refused.stderr), (argv, refused.stderr)
    assert catalog_state(pg_dsn, pg_schema) == before
    with psycopg.connect(pg_dsn) as conn:
        migrations.verify(conn, pg_schema)


def release_of(entry: QueueEntry | None) -> str:
    """The release of the worker that completed ``entry`` (the handler's output says it)."""
    assert entry is not None and isinstance(entry.outcome, Completed), entry
    output = entry.outcome.output
    assert isinstance(output, dict) and isinstance(output.get("release"), str), entry
    return str(output["release"])


@dataclass(frozen=True)
class _Meta:
    key: str
    value: str


def store_meta(dsn: str, schema: str) -> list[_Meta]:
    """``dg_schema_meta_v1()``'s rows."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            sql.SQL("SELECT key, value FROM {}.dg_schema_meta_v1()").format(sql.Identifier(schema))
        ).fetchall()
    return [_Meta(str(k), str(v)) for k, v in rows]
