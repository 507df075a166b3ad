"""An upgrade is atomic or nothing (SPEC §23.3, docs/upgrading.md "Atomic or nothing").

From the previous commit's schema (and, for the killed upgrade, the oldest archived state's),
installed by its own package, which also runs a job on it, this package's upgrade —
``durable-graph migrate`` and ``psql -f sql/install.sql`` alike — is made to wait mid-way: another
session holds ``events`` in ACCESS SHARE mode, so the upgrade waits for the ACCESS EXCLUSIVE lock
of its first statement on ``events`` (from the previous commit, ``DROP TRIGGER ... ON events`` in
``sql/77_notify.sql``, after the migration and the function files before it, in the same
transaction); the test checks that it has written by then (its transaction has an id). Then it is

- killed (SIGKILL): the previous version must be whole — ``schema_meta``, every function body
  (by digest) and every catalog row of its functions, relations and triggers as they were (no
  new table or function visible), yoyo's record unchanged — and usable: the old package's
  ``verify`` passes and it runs a job; a rerun of the same command completes the upgrade;
- or failed by the owner role's ``lock_timeout``: the same, and the error says why and, from
  ``migrate``, what to do.

``durable-graph migrate --plan`` says what it would apply, changing nothing.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from durable_graph import Completed
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig, migrations
from test_rolling_upgrade import (
    catalog_state,
    cli,
    env_of,
    previous_package,
    store_meta,
    upgrade,
    upgrade_argv,
)
from upgrade.old_version import OldPackage, extract, states

WAIT = 30.0
"""Seconds any one step may take."""
LOCK_TIMEOUT = "3s"
"""The owner role's lock_timeout in the failing upgrade."""
PATHS = ["migrate", "install.sql"]

OLD_JOB = """
import json
import sys
import uuid
from datetime import timedelta

import psycopg

import durable_graph as dg
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig, migrations

dsn, schema, name = sys.argv[1:4]
with psycopg.connect(dsn) as conn:
    migrations.verify(conn, schema)  # the old package's own check: raises unless current
config = PostgresConfig(schema=schema, auto_migrate=False)
with PostgresCheckpointer.open(dsn, config) as store:
    queue = store.run_queue
    ticket = queue.submit(dg.Submission(name, {"job": name}, key=name))
    run_id = uuid.uuid4().hex
    lease = queue.lease("atomic-test", timedelta(seconds=30), run_id=run_id)
    assert lease is not None and lease.entry.entry_id == ticket.entry_id, lease
    claim = store.claim(name, run_id)
    store.commit(claim, dg.Commit(checkpoint_id=uuid.uuid4().hex, parent_id=None,
                                  run_id=run_id, state={"done": name}))
    store.release_claim(claim)
    closed = queue.close(lease, dg.Completed({"job": name}))
    print(json.dumps({"release": dg.__version__, "entry": ticket.entry_id,
                      "completed": isinstance(closed.outcome, dg.Completed)}))
"""


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> OldPackage:
    return previous_package(tmp_path_factory)


@pytest.fixture(scope="module")
def oldest(tmp_path_factory: pytest.TempPathFactory) -> OldPackage:
    """The oldest archived state: its upgrade applies most migrations before it waits."""
    return extract(states()[0], tmp_path_factory.mktemp("states"))


def old_job(old: OldPackage, dsn: str, schema: str, name: str, cwd: Path) -> int:
    """The old package verifies the schema, then submits, leases, commits and completes a job;
    the job's entry id."""
    script = cwd / "old_job.py"
    script.write_text(OLD_JOB)
    done = old.run(script, dsn, schema, name, timeout=WAIT)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["completed"] and answer["release"] != migrations.release(), answer
    return int(answer["entry"])


def install_previous(old: OldPackage, dsn: str, schema: str, cwd: Path) -> dict[str, Any]:
    """The old package's schema with one job run on it; what must survive a failed upgrade."""
    installed = cli(dsn, old, "migrate", "--schema", schema, cwd=cwd)
    assert installed.returncode == 0, installed.stderr
    assert f"version {old.state.schema_version}" in installed.stdout
    old_job(old, dsn, schema, "before", cwd)
    return previous_version(dsn, schema)


def previous_version(dsn: str, schema: str) -> dict[str, Any]:
    """`catalog_state` with yoyo's record of applied migrations."""
    state = catalog_state(dsn, schema)
    with psycopg.connect(dsn, autocommit=True) as conn:
        state["yoyo"] = conn.execute(
            sql.SQL("SELECT migration_id, xmin::text FROM {} ORDER BY 1").format(
                sql.Identifier(schema, "_yoyo_migration")
            )
        ).fetchall()
    return state


@contextmanager
def upgrade_blocked(
    path: str, dsn: str, schema: str, admin_dsn: str
) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """The upgrade by ``path`` started as a subprocess and waiting mid-way, behind a session
    holding ``events`` in ACCESS SHARE mode (a long read, as a report would); yields it and its
    backend's pid. On leaving, a still running upgrade is killed and the lock released."""
    blocker = psycopg.connect(admin_dsn)
    try:
        blocker.execute(
            sql.SQL("LOCK TABLE {} IN ACCESS SHARE MODE").format(sql.Identifier(schema, "events"))
        )
        proc = subprocess.Popen(
            upgrade_argv(path, dsn, schema),
            env=env_of(dsn, None),
            cwd="/",
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            backend, _ = wait_blocked(admin_dsn, blocker, proc)
            yield proc, backend
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    finally:
        blocker.rollback()
        blocker.close()


def wait_blocked(
    dsn: str, blocker: psycopg.Connection[Any], proc: subprocess.Popen[str]
) -> tuple[int, str]:
    """The backend of ``proc``'s upgrade once it waits for ``blocker``'s lock, and its
    transaction id: set, so the upgrade had already written (it waits mid-way)."""
    deadline = time.monotonic() + WAIT
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            assert proc.poll() is None, proc.communicate()
            row = conn.execute(
                "SELECT pid, backend_xid::text FROM pg_stat_activity"
                " WHERE %s = ANY(pg_catalog.pg_blocking_pids(pid))",
                (blocker.info.backend_pid,),
            ).fetchone()
            if row is not None:
                assert row[1] is not None, "the upgrade waits before it changed anything"
                return int(row[0]), str(row[1])
            assert time.monotonic() < deadline, "the upgrade never waited for the lock"
            time.sleep(0.02)


def wait_gone(dsn: str, pid: int) -> None:
    deadline = time.monotonic() + WAIT
    with psycopg.connect(dsn, autocommit=True) as conn:
        while conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
            assert time.monotonic() < deadline, f"backend {pid} of the killed upgrade stays"
            time.sleep(0.05)


def assert_whole_and_usable(
    old: OldPackage, dsn: str, schema: str, before: dict[str, Any], cwd: Path
) -> None:
    """The previous version as it was, then a job of the old package run on it."""
    assert previous_version(dsn, schema) == before
    old_job(old, dsn, schema, "after", cwd)


def assert_upgraded(dsn: str, schema: str, first_entry: int = 1) -> None:
    """The schema is this package's, and the old job's entry reads back through it."""
    with psycopg.connect(dsn) as conn:
        migrations.verify(conn, schema)
    config = PostgresConfig(schema=schema, auto_migrate=False)
    with PostgresCheckpointer.open(dsn, config) as store:
        meta = {m.key: m.value for m in store_meta(dsn, schema)}
        assert meta["release"] == migrations.release(), meta
        assert meta["version"] == str(migrations.required_version()), meta
        entry = store.run_queue.entry(first_entry)
        assert entry is not None and isinstance(entry.outcome, Completed), entry


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("state", ["previous", "oldest"])
def test_a_killed_upgrade_leaves_the_previous_version_whole_and_a_rerun_completes_it(
    state: str,
    path: str,
    request: pytest.FixtureRequest,
    pg_dsn: str,
    pg_schema: str,
    tmp_path: Path,
) -> None:
    previous: OldPackage = request.getfixturevalue(state)
    before = install_previous(previous, pg_dsn, pg_schema, tmp_path)
    with upgrade_blocked(path, pg_dsn, pg_schema, pg_dsn) as (_, backend):
        # Meanwhile everybody else still sees the previous version (its bookkeeping is read
        # after the kill: a reader of it waits for the upgrade's lock on its table).
        during = catalog_state(pg_dsn, pg_schema, meta=False)
        assert during == {k: v for k, v in before.items() if k != "yoyo"} | {"meta": None}
    wait_gone(pg_dsn, backend)
    assert_whole_and_usable(previous, pg_dsn, pg_schema, before, tmp_path)

    rerun = upgrade(path, pg_dsn, pg_schema)
    assert rerun.returncode == 0, rerun.stderr
    assert_upgraded(pg_dsn, pg_schema)


@pytest.fixture
def owner(pg_dsn: str) -> Iterator[str]:
    """A LOGIN role whose sessions give up a lock wait after `LOCK_TIMEOUT`, as a DBA sets one."""
    name = f"dg_upg_{uuid.uuid4().hex[:10]}"
    ident = sql.Identifier(name)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(ident))
        conn.execute(
            sql.SQL("ALTER ROLE {} SET lock_timeout = {}").format(ident, sql.Literal(LOCK_TIMEOUT))
        )
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(ident))
        conn.execute(sql.SQL("DROP ROLE {}").format(ident))


def as_role(dsn: str, role: str) -> str:
    params = {k: str(v) for k, v in psycopg.conninfo.conninfo_to_dict(dsn).items()}
    params["user"] = role
    params.pop("password", None)
    return psycopg.conninfo.make_conninfo(**params)


@pytest.mark.parametrize("path", PATHS)
def test_a_failed_upgrade_leaves_the_previous_version_whole_and_says_what_to_do(
    path: str, previous: OldPackage, pg_dsn: str, pg_schema: str, owner: str, tmp_path: Path
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
                sql.Identifier(pg_schema), sql.Identifier(owner)
            )
        )
    dsn = as_role(pg_dsn, owner)
    before = install_previous(previous, dsn, pg_schema, tmp_path)
    with upgrade_blocked(path, dsn, pg_schema, pg_dsn) as (proc, _):
        _, stderr = proc.communicate(timeout=WAIT)
    assert proc.returncode != 0
    assert "lock timeout" in stderr, stderr
    if path == "migrate":  # psql prints the server's error; migrate says what to do
        assert re.search(r"nothing was changed", stderr, re.IGNORECASE), stderr
        assert "durable-graph migrate" in stderr, stderr
    assert_whole_and_usable(previous, dsn, pg_schema, before, tmp_path)

    rerun = upgrade(path, dsn, pg_schema)
    assert rerun.returncode == 0, rerun.stderr
    assert_upgraded(dsn, pg_schema)


def test_migrate_plan_says_what_it_would_apply_and_changes_nothing(
    previous: OldPackage, pg_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    helped = cli(pg_dsn, None, "migrate", "--help", cwd=tmp_path)
    assert "--plan" in helped.stdout, helped.stdout
    before = install_previous(previous, pg_dsn, pg_schema, tmp_path)
    planned = cli(pg_dsn, None, "migrate", "--plan", "--schema", pg_schema, cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    old_version, version = previous.state.schema_version, migrations.required_version()
    pending = [f.name for f in migrations.migration_files()[old_version:]]
    assert pending
    for named in (
        f"version {old_version}",
        f"version {version}",
        migrations.release(),
        "one transaction",
        *pending,
    ):
        assert named in planned.stdout, (named, planned.stdout)
    assert previous_version(pg_dsn, pg_schema) == before

    migrated = cli(pg_dsn, None, "migrate", "--schema", pg_schema, cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    after = previous_version(pg_dsn, pg_schema)
    planned = cli(pg_dsn, None, "migrate", "--plan", "--schema", pg_schema, cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    assert "nothing to apply" in planned.stdout, planned.stdout
    assert not any(name in planned.stdout for name in pending), planned.stdout
    assert previous_version(pg_dsn, pg_schema) == after
