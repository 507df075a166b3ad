"""The SQL functions from another language: tests/node/cycle.mjs with node-postgres (issue #11).

On a schema installed with psql alone (sql/install.sql), the Node.js script drives a full cycle through the
dg_* functions alone and checks every bad-input class of issue #11 gets DG000 with nothing
written; then Python submits a keyed run and Node's retry of it (``1.0`` for Python's ``1``)
gets Python's ticket. `make test` installs node-postgres (``npm ci`` in tests/node); run alone,
this test does it when ``node_modules`` is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from durable_graph.core.model import Submission
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig, migrations
from upgrade.old_version import extract, states

NODE_DIR = Path(__file__).parent / "node"
INSTALL_SQL = Path(__file__).parent.parent / "sql" / "install.sql"


def _node_env(dsn: str, schema: str) -> dict[str, str]:
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    env = dict(os.environ)
    env.update(
        DG_SCHEMA=schema,
        PGHOST=str(info.get("host") or "127.0.0.1"),
        PGPORT=str(info.get("port") or 5432),
        PGUSER=str(info.get("user") or "postgres"),
        PGDATABASE=str(info.get("dbname") or "postgres"),
    )
    if info.get("password"):
        env["PGPASSWORD"] = str(info["password"])
    return env


def _node_modules() -> Path:
    """tests/node/node_modules, with node-postgres installed when missing."""
    if not (NODE_DIR / "node_modules" / "pg").is_dir():
        npm = shutil.which("npm")
        assert npm is not None, "npm is needed: apt-get install npm"
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True)
    return NODE_DIR / "node_modules"


def _node(
    args: list[str], env: dict[str, str], script: str = "cycle.mjs", folder: Path = NODE_DIR
) -> str:
    node = shutil.which("node")
    assert node is not None, "Node.js is needed: apt-get install nodejs npm (.ci/run does)"
    _node_modules()
    result = subprocess.run(
        [node, str(folder / script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _install_with_psql(env: dict[str, str], schema: str) -> None:
    """Install ``schema`` with psql and sql/install.sql alone, as a non-Python caller would."""
    psql = shutil.which("psql")
    assert psql is not None, "psql is needed: apt-get install postgresql-client (.ci/run does)"
    subprocess.run(
        [psql, "-X", "-q", "-v", f"schema={schema}", "-f", str(INSTALL_SQL)],
        env=env,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def node_schema(pg_dsn: str) -> str:
    schema = "node_h4"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    return schema


def test_node_postgres_drives_a_cycle_and_meets_every_check_in_sql(
    pg_dsn: str, node_schema: str, tmp_path: Path
) -> None:
    env = _node_env(pg_dsn, node_schema)
    _install_with_psql(env, node_schema)
    out = _node([], env)
    assert "all checks passed" in out
    assert out.count("ok   bad input refused") == 22
    assert "ok   deprecated dg_put_writes_v1 and dg_workers_v1 answer as before" in out

    config = PostgresConfig(schema=node_schema, auto_migrate=False)
    with PostgresCheckpointer.open(pg_dsn, config) as store:
        ticket = store.run_queue.submit(
            Submission("py-thread", {"n": 1, "list": [1, 2]}, key="py-key")
        )
    out = _node(["identity"], {**env, "DG_PY_ENTRY": str(ticket.entry_id)})
    assert "all checks passed" in out
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(node_schema)))


def test_node_postgres_retries_and_resumes_never_applying_the_input_again(
    pg_dsn: str,
) -> None:
    """SPEC §23.5: a worker written against the SQL API alone (tests/node/retry.mjs) begins a
    retry of an admitted, failed entry with plan 'resume' from its checkpoint — the guarantee is
    SQL's, not our Python's — and its put_writes after its own close is refused."""
    schema = "node_retry"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    env = _node_env(pg_dsn, schema)
    _install_with_psql(env, schema)
    out = _node([], env, "retry.mjs")
    assert "all checks passed" in out and out.count("ok   ") == 3
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def test_the_previous_commits_node_client_passes_on_a_store_it_installed_and_we_upgraded(
    pg_dsn: str, tmp_path: Path
) -> None:
    """SPEC §23.1, §23.2: a caller of the SQL API written against the last commit before this
    release keeps working after the upgrade. The archived commit's own node-postgres client
    (tests/node/cycle.mjs of 2026-12-04-9f124fb: a full cycle through the dg_* functions and
    every bad-input check) runs against a store that commit's psql install made, then this
    release's install.sql upgraded."""
    (state,) = [s for s in states() if s.label == "2026-12-04-9f124fb"]
    old = extract(state, tmp_path)
    schema = "node_previous"
    env = _node_env(pg_dsn, schema)
    psql = shutil.which("psql")
    assert psql is not None, "psql is needed: apt-get install postgresql-client (.ci/run does)"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    for install in (old.root / "sql" / "install.sql", INSTALL_SQL):  # theirs, then ours
        subprocess.run(
            [psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", f"schema={schema}", "-f", install],
            env=env,
            check=True,
            capture_output=True,
        )
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        meta: dict[str, str] = dict(
            conn.execute(
                sql.SQL("SELECT key, value FROM {}.dg_schema_meta_v1()").format(
                    sql.Identifier(schema)
                )
            ).fetchall()
        )
    assert meta["version"] == str(migrations.required_version())
    assert meta["release"] == migrations.release()
    client = tmp_path / "client"
    client.mkdir()
    shutil.copy(old.root / "tests" / "node" / "cycle.mjs", client / "cycle.mjs")
    (client / "node_modules").symlink_to(_node_modules())
    out = _node([], env, folder=client)
    assert "all checks passed" in out
    assert out.count("ok   bad input refused") == 20  # that commit's 20 checks
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
