"""What SECURITY DEFINER + a pinned search_path cost per call (SPEC §10.5), measured on the server.

Three copies of one store's functions, each in its own schema, called from PL/pgSQL loops on the
server (no client round trip, whose noise would hide microseconds):

- ``definer``: as installed (``SECURITY DEFINER SET search_path = schema, pg_temp``);
- ``invoker_set``: as version 1 was (``SECURITY INVOKER``, ``SET search_path``);
- ``invoker``: no SET clause at all (the session's search_path names the schema).

Per call kind (commit: a claim and a first commit; submit; a cheap read, where a fixed cost per
call shows most; lease of a submitted entry), each
variant runs ``n`` calls per round, rounds interleaved, and the median round gives µs per call.
Run: ``python -m tests.bench.privileges_overhead [n] [rounds]``.
"""

from __future__ import annotations

import statistics
import sys
import uuid
from typing import Any

import psycopg
from psycopg import sql

from durable_graph.postgres.migrations import migrate
from durable_graph.testkit.postgres import server as pg_server

VARIANTS = ("definer", "invoker_set", "invoker")

LOOPS = {
    # µs per iteration; each iteration's calls are listed in the key's comment in the report
    "claim+commit": """
        FOR i IN 1..{n} LOOP
            SELECT token INTO v_token FROM dg_claim_v1('c' || i, 'h', interval '1 hour');
            PERFORM dg_commit_v1('c' || i, v_token, 'cp', NULL, 'r', '{{}}', '{{}}', '{{}}',
                                 '{{}}', '{{}}', '{{}}', NULL, NULL, NULL, NULL);
        END LOOP;""",
    "submit": """
        FOR i IN 1..{n} LOOP
            PERFORM dg_submit_v1('s' || i, '{{}}', NULL, NULL, 'enqueue', 3);
        END LOOP;""",
    "thread (read)": """
        FOR i IN 1..{n} LOOP
            PERFORM dg_thread_v1('missing');
        END LOOP;""",
    "lease": """
        FOR i IN 1..{n} LOOP
            PERFORM dg_lease_v1('h', interval '1 hour', true, NULL, NULL);
        END LOOP;""",
}


def _setup(conn: psycopg.Connection[Any], dsn: str, base: str) -> dict[str, str]:
    schemas = {}
    for variant in VARIANTS:
        schema = f"{base}_{variant}"
        migrate(dsn, schema)
        ident = sql.Identifier(schema)
        rows = conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p"
            " WHERE p.pronamespace = %s::regnamespace AND p.proname LIKE 'dg\\_%%'",
            (schema,),
        ).fetchall()
        for (sig,) in rows:
            if variant == "invoker_set":
                conn.execute(
                    sql.SQL("ALTER FUNCTION {} SECURITY INVOKER SET search_path = {}").format(
                        sql.SQL(sig), ident
                    )
                )
            elif variant == "invoker":
                conn.execute(
                    sql.SQL("ALTER FUNCTION {} SECURITY INVOKER RESET search_path").format(
                        sql.SQL(sig)
                    )
                )
        schemas[variant] = schema
    return schemas


def _reset(conn: psycopg.Connection[Any], schema: str) -> None:
    from durable_graph.testkit.postgres.schema import reset_store

    reset_store(conn, schema)


def _round(conn: psycopg.Connection[Any], schema: str, kind: str, n: int) -> float:
    """µs per iteration of one loop of ``n``."""
    _reset(conn, schema)
    conn.execute(sql.SQL("SET search_path TO {}, pg_temp").format(sql.Identifier(schema)))
    if kind == "lease":
        conn.execute(
            f"DO $$ BEGIN FOR i IN 1..{n} LOOP "
            "PERFORM dg_submit_v1('l' || i, '{}', NULL, NULL, 'enqueue', 3); END LOOP; END $$"
        )
    body = LOOPS[kind].format(n=n)
    conn.execute(
        "DO $$ DECLARE v_token bigint; v_t0 timestamptz; BEGIN v_t0 := clock_timestamp();"
        + body
        + " PERFORM set_config('bench.us', (extract(epoch FROM clock_timestamp() - v_t0)"
        " * 1e6)::text, false); END $$"
    )
    row = conn.execute("SELECT current_setting('bench.us')::float8").fetchone()
    assert row is not None
    return float(row[0]) / n


def main(n: int = 2000, rounds: int = 7) -> None:
    server = pg_server.start()
    try:
        dsn = server.dsn()
        base = f"b_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            schemas = _setup(conn, dsn, base)
            results: dict[str, dict[str, list[float]]] = {k: {} for k in LOOPS}
            for _ in range(rounds):
                for kind in LOOPS:
                    for variant in VARIANTS:
                        us = _round(conn, schemas[variant], kind, n)
                        results[kind].setdefault(variant, []).append(us)
        print(f"µs per iteration, median of {rounds} rounds of {n} (server-side loops)")
        print(f"{'call':<14}" + "".join(f"{v:>14}" for v in VARIANTS) + f"{'definer - v1':>16}")
        for kind, by_variant in results.items():
            med = {v: statistics.median(by_variant[v]) for v in VARIANTS}
            print(
                f"{kind:<14}"
                + "".join(f"{med[v]:>14.1f}" for v in VARIANTS)
                + f"{med['definer'] - med['invoker_set']:>16.1f}"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
