"""Write (or ``--check``) ``sql/api.json``, the public SQL API's manifest (SPEC §23.1, D232).

It installs this checkout's schema (`durable_graph.postgres.migrations.migrate`) into a scratch
schema of a PostgreSQL server, reads every public ``dg_*`` function from the catalog and records
it in the manifest (`durable_graph.postgres.api.merged`): a new function as of this release
(`durable_graph._version.__version__`). A released entry whose shape changed, or which is no
longer installed, is refused: the script names it and exits 1, the file unchanged (give the new
shape a new ``_vN`` name; record a removal by hand, after a release that deprecated it).
``--allow-change`` lets this release's own entries (``since`` = this version, not deprecated)
take their new shape or go. The reviewed fields (``since``, ``deprecated``, ``successor``,
``removed``) are edited by hand and kept.

The server: ``--dsn``, else ``DURABLE_GRAPH_TEST_DSN``, else a throwaway one started for the run
(`durable_graph.testkit.postgres.server`, as the tests do). ``make api-manifest`` runs it;
``tests/test_sql_api.py`` checks the installed schema against the file without writing it.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql

from durable_graph._version import __version__
from durable_graph.postgres import api
from durable_graph.postgres.migrations import migrate
from durable_graph.testkit.postgres import server as pg_server

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "sql" / "api.json"


@contextmanager
def _server_dsn(dsn: str | None) -> Iterator[str]:
    if dsn:
        yield dsn
        return
    server = pg_server.start()
    try:
        yield server.dsn()
    finally:
        server.stop()


def installed_api(dsn: str) -> list[api.Function]:
    """The public functions of this checkout's schema, installed into a scratch schema (dropped
    afterwards)."""
    schema = f"api_{uuid.uuid4().hex[:16]}"
    try:
        migrate(dsn, schema)
        with psycopg.connect(dsn, autocommit=True) as conn:
            return api.installed(conn, schema, __version__)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("DURABLE_GRAPH_TEST_DSN"))
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when the file is not what would be written"
    )
    parser.add_argument(
        "--allow-change",
        action="store_true",
        help="let this release's own entries take their installed shape, or go",
    )
    args = parser.parse_args(argv)
    old_text = MANIFEST.read_text(encoding="utf-8") if MANIFEST.exists() else None
    manifest = api.loads(old_text) if old_text is not None else []
    with _server_dsn(args.dsn) as dsn:
        now = installed_api(dsn)
    new, refused = api.merged(manifest, now, __version__, allow_change=args.allow_change)
    for line in refused:
        print(f"refused: {line}", file=sys.stderr)
    text = api.dumps(new)
    if args.check:
        if text != old_text or refused:
            print(f"{MANIFEST.relative_to(ROOT)} is not current", file=sys.stderr)
            return 1
        return 0
    if refused:
        print(f"{MANIFEST.relative_to(ROOT)} left unchanged", file=sys.stderr)
        return 1
    if text != old_text:
        MANIFEST.write_text(text, encoding="utf-8")
        print(f"wrote {MANIFEST.relative_to(ROOT)} ({len(new)} functions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
