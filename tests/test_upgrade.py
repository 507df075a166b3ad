"""Upgrades from real earlier states of this repository (SPEC §23.2; issue 45).

Each state archived in ``tests/upgrade/states`` (``tools/archive_state.py``: the package, the
migrations and the SQL of an earlier commit, checked against SOURCES.json's sha256 — a CI clone
may be shallow, so no git history is read) is installed into two fresh schemas by its OWN
package, run in a subprocess (`upgrade.old_version`), which also grants a runtime role with its
own privileges module and fills both schemas and a SQLite file through its own API
(`upgrade.store_driver`) and reads them back as JSON. Then one schema is upgraded by this
package's ``migrate`` and the other by ``psql -f sql/install.sql``, and each is checked:

- every value the old package read reads back identical through the new package (the fields
  both versions have);
- no input applied twice: the entries the old worker leased mid-attempt are taken, once their
  lease and claim ttl passed, by a new worker's ``begin_attempt``, planned `Resume` / `Finished`
  from the checkpoint the old attempt committed (`Fresh` only for the one never admitted);
- keyed submits of the same key return the old ticket;
- the runtime role still calls the functions and still reads no table; the ACLs of the schema,
  its tables and functions are unchanged where the names exist in both versions;
- a second ``migrate`` (or a second install.sql) changes no row of pg_catalog for the schema;
- the old package refuses a schema the new one upgraded (open and migrate), changing nothing;

and SQLite files both ways: the old package's file opens in the new one with the same values;
the new package's file is refused by the old one, naming both versions, when it is newer.
Nothing here is skipped: an upgrade that fails fails each check of its case with its error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import durable_graph as dg
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.postgres.migrations import migrate, release, required_version
from durable_graph.sqlite import SqliteCheckpointer
from durable_graph.sqlite.connection import SCHEMA_VERSION as SQLITE_VERSION
from upgrade import old_version, store_driver
from upgrade.old_version import OldPackage, State

ROOT = Path(__file__).resolve().parent.parent
INSTALL_SQL = ROOT / "sql" / "install.sql"
STATES = old_version.states()
PATHS = ("migrate", "install_sql")
CASES = [pytest.param(s, p, id=f"{s.label}-{p}") for s in STATES for p in PATHS]
BY_STATE = [pytest.param(s, id=s.label) for s in STATES]


# --- the catalog, as two runs compare it ------------------------------------------------------

_CATALOG = """
SELECT 'namespace', n.nspname, n.xmin::text FROM pg_catalog.pg_namespace n WHERE n.oid = %(ns)s
UNION ALL
SELECT 'class', c.relname, c.xmin::text FROM pg_catalog.pg_class c WHERE c.relnamespace = %(ns)s
UNION ALL
SELECT 'attribute', c.relname || '.' || a.attname, a.xmin::text
  FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
 WHERE c.relnamespace = %(ns)s
UNION ALL
SELECT 'proc', p.oid::pg_catalog.regprocedure::text, p.xmin::text
  FROM pg_catalog.pg_proc p WHERE p.pronamespace = %(ns)s
UNION ALL
SELECT 'trigger', c.relname || '.' || t.tgname, t.xmin::text
  FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace = %(ns)s
UNION ALL
SELECT 'index', ic.relname, i.xmin::text
  FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
 WHERE ic.relnamespace = %(ns)s
"""

_ACLS = """
SELECT 'schema', n.nspname, n.nspacl::text[] FROM pg_catalog.pg_namespace n WHERE n.oid = %(ns)s
UNION ALL
SELECT 'class', c.relname, c.relacl::text[] FROM pg_catalog.pg_class c
 WHERE c.relnamespace = %(ns)s AND c.relkind IN ('r', 'p', 'S', 'v', 'm')
UNION ALL
SELECT 'proc', p.proname || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')',
       p.proacl::text[]
  FROM pg_catalog.pg_proc p WHERE p.pronamespace = %(ns)s
"""


def _namespace(conn: psycopg.Connection[Any], schema: str) -> int:
    row = conn.execute(
        "SELECT oid::int8 FROM pg_catalog.pg_namespace WHERE nspname = %s", (schema,)
    ).fetchone()
    assert row is not None, f"schema {schema} does not exist"
    return int(row[0])


def catalog_rows(dsn: str, schema: str) -> dict[tuple[str, str], str]:
    """(catalog, object) -> the row's xmin, for every catalog row of ``schema``."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        ns = _namespace(conn, schema)
        return {(k, name): xmin for k, name, xmin in conn.execute(_CATALOG, {"ns": ns})}


def acls(dsn: str, schema: str) -> dict[tuple[str, str], list[str]]:
    """(kind, name) -> the object's ACL, sorted (``[]`` for the default)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        ns = _namespace(conn, schema)
        return {(k, name): sorted(acl or []) for k, name, acl in conn.execute(_ACLS, {"ns": ns})}


def common(old: Any, new: Any) -> tuple[Any, Any]:
    """``old`` and ``new`` cut to what both have: objects to their shared keys (recursively)."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(old.keys() & new.keys())
        pairs = [common(old[k], new[k]) for k in keys]
        return dict(zip(keys, (p[0] for p in pairs), strict=True)), dict(
            zip(keys, (p[1] for p in pairs), strict=True)
        )
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        pairs = [common(o, n) for o, n in zip(old, new, strict=True)]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    return old, new


def as_role(dsn: str, role: str) -> str:
    params = {k: str(v) for k, v in psycopg.conninfo.conninfo_to_dict(dsn).items()}
    params["user"] = role
    params.pop("password", None)
    return psycopg.conninfo.make_conninfo(**params)


def install_sql(dsn: str, schema: str) -> None:
    """``psql -v schema=S -f sql/install.sql`` as the DSN's role; raises with psql's output."""
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    env = dict(os.environ)
    env["PGOPTIONS"] = "-c client_min_messages=warning"  # the error, not the NOTICEs before it
    if params.get("password"):
        env["PGPASSWORD"] = str(params["password"])
    command = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", f"schema={schema}"]
    for flag, key in (("-h", "host"), ("-p", "port"), ("-U", "user"), ("-d", "dbname")):
        if params.get(key):
            command += [flag, str(params[key])]
    command += ["-f", str(INSTALL_SQL)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"psql exited {done.returncode}: {done.stderr.strip()[-3000:]}")


def upgrade(path: str, dsn: str, schema: str) -> None:
    if path == "migrate":
        migrate(dsn, schema)
    else:
        install_sql(dsn, schema)


# --- one lab for the module: roles, the old states prepared, the upgrades -------------------------


@dataclass
class Prepared:
    """A state installed and filled by its own package: two schemas (one per path), SQLite."""

    package: OldPackage
    schemas: dict[str, str]
    answer: dict[str, Any]


@dataclass
class Upgraded:
    """One schema after its upgrade: the error, or the new package's snapshot and the ACLs."""

    prepared: Prepared
    path: str
    schema: str
    acls_before: dict[tuple[str, str], list[str]]
    error: str | None = None
    snapshot: dict[str, Any] = field(default_factory=dict)
    acls_after: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    @property
    def facts(self) -> dict[str, Any]:
        facts: dict[str, Any] = self.prepared.answer["schemas"][self.schema]["facts"]
        return facts

    @property
    def old_snapshot(self) -> dict[str, Any]:
        snap: dict[str, Any] = self.prepared.answer["schemas"][self.schema]["snapshot"]
        return snap

    def require(self) -> None:
        """Fail the check when the upgrade itself failed (its error, not a skip)."""
        if self.error is not None:
            pytest.fail(
                f"upgrade of {self.prepared.package.state.label} by {self.path} failed: "
                f"{self.error}",
                pytrace=False,
            )


class Lab:
    def __init__(self, dsn: str, workdir: Path) -> None:
        self.dsn = dsn
        self.workdir = workdir
        tag = uuid.uuid4().hex[:8]
        self.owner = f"dg_up_owner_{tag}"
        self.runtime = f"dg_up_runtime_{tag}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            for role in (self.owner, self.runtime):
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        self.owner_dsn = as_role(dsn, self.owner)
        self.runtime_dsn = as_role(dsn, self.runtime)
        self.new_sqlite = workdir / "new.db"
        with SqliteCheckpointer.open(self.new_sqlite) as store:
            claim = store.claim("t-new", "run-new")
            store.commit(claim, dg.Commit("n1", None, "run-new", {"new": True}))
            store.release_claim(claim)
        self.schemas: list[str] = []
        self._pool = ThreadPoolExecutor(max_workers=2)
        self._prepared = {s.label: self._pool.submit(self._prepare, s) for s in STATES}
        self._upgraded: dict[tuple[str, str], Upgraded] = {}

    def _prepare(self, state: State) -> Prepared:
        package = old_version.extract(state, self.workdir)
        schemas = {p: f"up_{p}_{uuid.uuid4().hex[:10]}" for p in PATHS}
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for schema in schemas.values():
                self.schemas.append(schema)
                conn.execute(
                    sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
                        sql.Identifier(schema), sql.Identifier(self.owner)
                    )
                )
        answer = package.run_driver(
            {
                "command": "prepare",
                "owner_dsn": self.owner_dsn,
                "runtime_dsn": self.runtime_dsn,
                "runtime_role": self.runtime,
                "schemas": list(schemas.values()),
                "sqlite_path": str(package.root / "old.db"),
                "new_sqlite_path": str(self._copy_new_sqlite(package)),
            }
        )
        return Prepared(package, schemas, answer)

    def _copy_new_sqlite(self, package: OldPackage) -> Path:
        """A copy of the new package's file per state: an old open may change it."""
        copy = package.root / "new.db"
        shutil.copyfile(self.new_sqlite, copy)
        return copy

    def prepared(self, state: State) -> Prepared:
        future: Future[Prepared] = self._prepared[state.label]
        return future.result()

    def upgraded(self, state: State, path: str) -> Upgraded:
        key = (state.label, path)
        if key not in self._upgraded:
            prepared = self.prepared(state)
            schema = prepared.schemas[path]
            done = Upgraded(prepared, path, schema, acls(self.dsn, schema))
            try:
                upgrade(path, self.owner_dsn, schema)
            except Exception as exc:
                done.error = f"{type(exc).__name__}: {exc}"
            else:
                config = PostgresConfig(schema=schema, auto_migrate=False)
                with PostgresCheckpointer.open(self.owner_dsn, config) as store:
                    done.snapshot = store_driver.snapshot(store, done.facts)
                done.acls_after = acls(self.dsn, schema)
            self._upgraded[key] = done
        return self._upgraded[key]

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for schema in self.schemas:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )
            for role in (self.runtime, self.owner):
                ident = sql.Identifier(role)
                conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(ident))
                conn.execute(sql.SQL("DROP ROLE {}").format(ident))


@pytest.fixture(scope="module")
def lab(pg_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    made = Lab(pg_dsn, tmp_path_factory.mktemp("upgrade"))
    try:
        yield made
    finally:
        made.close()


# --- the archive ---------------------------------------------------------------------------------


def test_every_archived_tarball_is_listed_in_sources() -> None:
    tarballs = {p.name for p in old_version.STATES.glob("*.tar.gz")}
    assert tarballs == {s.tarball.name for s in STATES}
    assert len(STATES) >= 5


@pytest.mark.parametrize("state", BY_STATE)
def test_archived_state_matches_its_source(state: State) -> None:
    assert old_version.tarball_digest(state) == state.sha256, state.command
    assert len(state.commit) == 40 and state.label.endswith(state.commit[:7])


@pytest.mark.parametrize("state", BY_STATE)
def test_old_state_runs_its_own_package(lab: Lab, state: State) -> None:
    prepared = lab.prepared(state)
    package = Path(prepared.answer["package"]).resolve()
    assert package == (prepared.package.python_path / "durable_graph" / "__init__.py").resolve()
    migrations = list((prepared.package.root / "migrations").glob("[0-9][0-9][0-9][0-9].*.sql"))
    assert len(migrations) == state.schema_version


# --- PostgreSQL: each state, each path -------------------------------------------------------------


@pytest.mark.parametrize(("state", "path"), CASES)
def test_values_read_back_identical(lab: Lab, state: State, path: str) -> None:
    done = lab.upgraded(state, path)
    done.require()
    old, new = common(done.old_snapshot, done.snapshot)
    assert new == old
    assert done.snapshot.keys() >= done.old_snapshot.keys()


@pytest.mark.parametrize(("state", "path"), CASES)
def test_mid_attempt_entries_resume_never_fresh(lab: Lab, state: State, path: str) -> None:
    done = lab.upgraded(state, path)
    done.require()
    wait = done.facts["mid_leased_at"] + store_driver.TTL_SECONDS + 0.3 - time.time()
    if wait > 0:
        time.sleep(wait)
    config = PostgresConfig(schema=done.schema, auto_migrate=False)
    plans: dict[str, Any] = {}
    with PostgresCheckpointer.open(lab.owner_dsn, config) as store:
        for tenant, next_ in store_driver.MID.items():
            begun = store.begin_attempt(
                "new-worker", timedelta(seconds=30), run_id=f"{tenant}-run-2", tenant=tenant
            )
            assert begun is not None, f"{tenant}: the old lease was not recovered"
            assert begun.entry.entry_id == done.facts["entries"][tenant][0]
            assert begun.attempt == dg.Started(2)
            assert begun.claim is not None, f"{tenant}: the old claim was not recovered"
            plan = begun.plan
            if next_ is None:
                plans[tenant] = plan == dg.Fresh()
            elif next_:
                plans[tenant] = (
                    isinstance(plan, dg.Resume) and plan.checkpoint.checkpoint_id == f"{tenant}-c1"
                )
            else:
                plans[tenant] = (
                    isinstance(plan, dg.Finished)
                    and plan.checkpoint is not None
                    and plan.checkpoint.checkpoint_id == f"{tenant}-c1"
                )
            if not plans[tenant]:
                plans[tenant] = repr(plan)
    assert plans == {tenant: True for tenant in store_driver.MID}


@pytest.mark.parametrize(("state", "path"), CASES)
def test_keyed_submit_returns_the_old_ticket(lab: Lab, state: State, path: str) -> None:
    done = lab.upgraded(state, path)
    done.require()
    keyed = store_driver.KEYED
    config = PostgresConfig(schema=done.schema, auto_migrate=False)
    with PostgresCheckpointer.open(lab.owner_dsn, config) as store:
        ticket = store.run_queue.submit(
            dg.Submission(
                thread_id=str(keyed["thread_id"]),
                input=keyed["input"],
                tenant=str(keyed["tenant"]),
                key=str(keyed["key"]),
            )
        )
        assert ticket == dg.Ticket(done.facts["entries"]["keyed"][0], existing=True)
        with pytest.raises(dg.SubmissionKeyReused):
            store.run_queue.submit(
                dg.Submission(
                    thread_id=str(keyed["thread_id"]),
                    input={"other": True},
                    tenant=str(keyed["tenant"]),
                    key=str(keyed["key"]),
                )
            )


@pytest.mark.parametrize(("state", "path"), CASES)
def test_an_old_thread_takes_a_ttl_after_the_upgrade(lab: Lab, state: State, path: str) -> None:
    # Migration 0021 (thread_ttls): a thread the old package wrote takes a TTL through the
    # runtime role, reads it back, and a sweep runs (nothing is due yet); the old values stay.
    done = lab.upgraded(state, path)
    done.require()
    config = PostgresConfig(schema=done.schema, auto_migrate=False)
    with PostgresCheckpointer.open(lab.runtime_dsn, config) as store:
        ttl = store.set_thread_ttl("t-main", 60, "keep_latest")
        assert ttl is not None and (ttl.minutes, ttl.strategy) == (60.0, "keep_latest")
        assert store.thread_ttl("t-main") == ttl
        assert store.sweep_threads(10) == dg.ThreadSweep(0, 0, 0)
        assert store.set_thread_ttl("t-main", None) is None
        info = store.thread("t-main")
        assert info is not None and info.head_id == "c3"


@pytest.mark.parametrize("state", BY_STATE)
def test_an_old_sqlite_file_takes_a_ttl_after_the_upgrade(lab: Lab, state: State) -> None:
    prepared = lab.prepared(state)
    copy = prepared.package.root / "old-ttl.db"
    shutil.copyfile(prepared.package.root / "old.db", copy)
    with SqliteCheckpointer.open(copy) as store:
        ttl = store.set_thread_ttl("t-main", 60)
        assert ttl is not None and ttl == store.thread_ttl("t-main")
        assert store.sweep_threads(10) == dg.ThreadSweep(0, 0, 0)


@pytest.mark.parametrize(("state", "path"), CASES)
def test_old_items_are_searched_by_vector_after_the_upgrade(
    lab: Lab, state: State, path: str
) -> None:
    # Migration 0022 (item_vectors, D296-D298): the runtime role puts an item with vectors and
    # searches by vector; the items the old package wrote (where it had items) have none, so
    # they follow, unscored, in the order a plain search gives them.
    done = lab.upgraded(state, path)
    done.require()
    config = PostgresConfig(schema=done.schema, auto_migrate=False)
    with PostgresCheckpointer.open(lab.runtime_dsn, config) as store:
        queue = store.run_queue
        old = [(i.namespace, i.key) for i in queue.search_items((), limit=1000)]
        queue.put_indexed_item(("users", "u3"), "new", {"text": "y"}, {"$": [1.0, 0.0]})
        found = queue.search_items_by_vector((), [1.0, 0.0], limit=1000)
        assert (found[0].item.key, found[0].score) == ("new", 1.0)
        assert [(s.item.namespace, s.item.key) for s in found[1:]] == old
        assert all(s.score is None for s in found[1:])


@pytest.mark.parametrize("state", BY_STATE)
def test_an_old_sqlite_file_searches_by_vector_after_the_upgrade(lab: Lab, state: State) -> None:
    prepared = lab.prepared(state)
    copy = prepared.package.root / "old-vectors.db"
    shutil.copyfile(prepared.package.root / "old.db", copy)
    with SqliteCheckpointer.open(copy) as store:
        queue = store.run_queue
        old = [(i.namespace, i.key) for i in queue.search_items((), limit=1000)]
        queue.put_indexed_item(("users", "u3"), "new", {"text": "y"}, {"$": [1.0, 0.0]})
        found = queue.search_items_by_vector((), [1.0, 0.0], limit=1000)
        assert (found[0].item.key, found[0].score) == ("new", 1.0)
        assert [(s.item.namespace, s.item.key) for s in found[1:]] == old
        assert all(s.score is None for s in found[1:])


@pytest.mark.parametrize(("state", "path"), CASES)
def test_grants_and_least_privilege_unchanged(lab: Lab, state: State, path: str) -> None:
    done = lab.upgraded(state, path)
    done.require()
    old = done.prepared.answer["schemas"][done.schema]
    assert old["granted"], "every archived state has durable_graph.postgres.privileges.grant"
    assert old["runtime"].get("table_read") == "42501", old["runtime"]
    assert "thread" in old["runtime"], old["runtime"]
    shared = done.acls_before.keys() & done.acls_after.keys()
    changed = {k: (done.acls_before[k], done.acls_after[k]) for k in sorted(shared)}
    changed = {k: v for k, v in changed.items() if v[0] != v[1]}
    assert changed == {}
    # The runtime role calls the new functions and still reads no table.
    config = PostgresConfig(schema=done.schema, auto_migrate=False)
    with PostgresCheckpointer.open(lab.runtime_dsn, config) as store:
        info = store.thread("t-main")
        assert info is not None and info.head_id == "c3"
    with psycopg.connect(lab.runtime_dsn, autocommit=True) as conn:
        for table in ("threads", "checkpoints", "queue_entries"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(
                    sql.SQL("SELECT 1 FROM {}.{}").format(
                        sql.Identifier(done.schema), sql.Identifier(table)
                    )
                )


@pytest.mark.parametrize(("state", "path"), CASES)
def test_second_run_changes_nothing_in_the_catalog(lab: Lab, state: State, path: str) -> None:
    done = lab.upgraded(state, path)
    done.require()
    problems = {}
    # The path's own second run, then the other path's.
    for again in (path, *(p for p in PATHS if p != path)):
        before = catalog_rows(lab.dsn, done.schema)
        upgrade(again, lab.owner_dsn, done.schema)
        after = catalog_rows(lab.dsn, done.schema)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        if changed:
            problems[again] = f"{len(changed)} catalog rows changed, first: {changed[:10]}"
    assert problems == {}


# --- SQLite files both ways --------------------------------------------------------------------------


@pytest.mark.parametrize("state", BY_STATE)
def test_old_sqlite_file_opens_forward_with_the_same_values(lab: Lab, state: State) -> None:
    prepared = lab.prepared(state)
    old = prepared.answer["sqlite"]
    with SqliteCheckpointer.open(prepared.package.root / "old.db") as store:
        new_snapshot = store_driver.snapshot(store, old["facts"])
    old_cut, new_cut = common(old["snapshot"], new_snapshot)
    assert new_cut == old_cut


@pytest.mark.parametrize("state", BY_STATE)
def test_new_sqlite_file_refused_by_old_code(lab: Lab, state: State) -> None:
    prepared = lab.prepared(state)
    old_version_number = prepared.answer["sqlite"]["schema_version"]
    seen = prepared.answer["sqlite_newer"]
    if old_version_number < SQLITE_VERSION:
        assert "error" in seen, f"the old package opened a version {SQLITE_VERSION} file: {seen}"
        message = seen["error"]["message"]
        assert f"version {SQLITE_VERSION}" in message and f"({old_version_number})" in message
    else:
        # The same SQLite schema: the old package reads the new file as it is.
        assert seen.get("opened") and seen["thread"]["head_id"] == "n1", seen


# --- last: the old package meets the upgraded schema ------------------------------------------------


@pytest.mark.parametrize(("state", "path"), CASES)
def test_old_code_refuses_the_upgraded_schema(lab: Lab, state: State, path: str) -> None:
    done = lab.upgraded(state, path)
    done.require()
    before = catalog_rows(lab.dsn, done.schema)
    answer = done.prepared.package.run_driver(
        {"command": "open_newer", "owner_dsn": lab.owner_dsn, "schema": done.schema}
    )
    after = catalog_rows(lab.dsn, done.schema)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    new_version = str(required_version())
    problems = []
    if changed:
        problems.append(f"the old package changed {len(changed)} catalog rows: {changed[:10]}")
    for step in ("open", "migrate"):
        if "error" not in answer[step]:
            problems.append(
                f"old {step} accepted a schema at version {new_version}: {answer[step]}"
            )
            continue
        message = answer[step]["error"]["message"]
        # Code of the pre-release commits cannot name its own version: the schema names its
        # own and says the code is older (the schema_meta view, or the bookkeeping's guard
        # for code that got past it; D228).
        theirs = f"at version {new_version} (durable-graph {release()})"
        older = "older code never" in message or f"to {state.schema_version}" in message
        if theirs not in message or not older:
            problems.append(
                f"old {step} refused without naming versions {state.schema_version} and "
                f"{new_version}: {message}"
            )
    assert problems == []


@pytest.mark.parametrize(("state", "path"), CASES)
def test_a_thread_deleted_before_the_upgrade_gets_no_schedule_run(
    lab: Lab, state: State, path: str
) -> None:
    """Migration 0020 (D241): a tombstone of before it counts as deleted at the upgrade, so a
    schedule made for it before the upgrade fires nothing into it (nor re-creates it)."""
    done = lab.upgraded(state, path)
    done.require()
    if "schedules" not in done.facts["features"]:
        return  # a state before schedules: nothing to fire
    config = PostgresConfig(schema=done.schema, auto_migrate=False)
    with PostgresCheckpointer.open(lab.owner_dsn, config) as store:
        queue = store.run_queue
        queue.pause_schedule("on-deleted", False)
        (made,) = [s for s in queue.schedules() if s.schedule.name == "on-deleted"]
        slot = made.created_at.replace(microsecond=0) + timedelta(seconds=1)
        time.sleep(max(0.0, (slot - datetime.now(UTC)).total_seconds()) + 0.05)
        assert queue.fire_schedule("on-deleted", slot) is None
        assert queue.open_entries(thread_id="t-deleted", tenant=dg.ANY) == []
        assert store.thread("t-deleted") is None


@pytest.mark.parametrize(("state", "path"), CASES)
def test_a_cron_stored_before_0020_becomes_a_run_request(lab: Lab, state: State, path: str) -> None:
    """Migration 0020 (D242): a cron `serve` stored with its record beside the run request
    (which a worker ran as a plain input) has the record in the request's service part."""
    done = lab.upgraded(state, path)
    done.require()
    if "schedules" not in done.facts["features"]:
        return
    config = PostgresConfig(schema=done.schema, auto_migrate=False)
    with PostgresCheckpointer.open(lab.owner_dsn, config) as store:
        (cron,) = [
            s for s in store.run_queue.schedules() if s.schedule.name == store_driver.OLD_CRON
        ]
    request = store_driver.OLD_CRON_INPUT["langgraph"]
    assert cron.schedule.input == {
        "langgraph": {**request, "service": {"after_seq": 0, "cron": store_driver.OLD_CRON_RECORD}}
    }
