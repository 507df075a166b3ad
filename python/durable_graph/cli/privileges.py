"""``grant`` / ``revoke``: a runtime role's USAGE + EXECUTE on a store's schema (SPEC §10.5)."""

from __future__ import annotations

import argparse
import sys

from durable_graph.cli.common import CliError, output_of, postgres_config, required_dsn


def _privileges(args: argparse.Namespace, action: str) -> int:
    from durable_graph.postgres import privileges

    schema = postgres_config(args).schema
    role = privileges.check_role(args.role, "--role")
    script = (privileges.grant_sql if action == "grant" else privileges.revoke_sql)(schema, role)
    if args.print:
        sys.stdout.write(script)
        return 0
    dsn = required_dsn(args, f"{action} needs --dsn (or DURABLE_GRAPH_DSN), or --print")
    import psycopg

    try:
        conn = psycopg.connect(dsn, connect_timeout=10)
    except psycopg.Error as exc:
        raise CliError(f"could not connect: {type(exc).__name__}") from None
    from durable_graph.postgres import migrations

    with conn:
        proxy = migrations.kind(conn, schema) == "proxy"
        if not proxy:
            (privileges.grant if action == "grant" else privileges.revoke)(conn, schema, role)
    if proxy:  # a partition proxy (SPEC §16.3): every partition, then the proxy
        from durable_graph.postgres.partitions import layout

        if action != "grant":
            raise CliError("revoke on a partition proxy: revoke on each partition's DSN instead")
        layout.grant(dsn, schema, role)
    done = "granted" if action == "grant" else "revoked"
    output_of(args).result(
        {"schema": schema, "role": role, action: True}, f"{done}: role {role} on schema {schema}"
    )
    return 0


def cmd_grant(args: argparse.Namespace) -> int:
    return _privileges(args, "grant")


def cmd_revoke(args: argparse.Namespace) -> int:
    return _privileges(args, "revoke")
