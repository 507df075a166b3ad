"""``partitions init | migrate | verify``: a store over PL/Proxy partitions (SPEC §16.3).

``init`` takes the proxy database (``--dsn``) and either the partition databases (``--partition
DSN``, N of them, in partition order) or servers (``--server DSN``, with ``--partitions N``:
databases ``<prefix>0 .. <prefix>N-1`` created round-robin on them when missing). ``migrate``
and ``verify`` read the partitions from the proxy.

A ``--partition`` DSN naming a user or password is refused (usage error): the proxy's cluster
keeps the DSNs where every role of the proxy database reads them, and PL/Proxy would run every
call as that user. A ``--server`` DSN's user and password serve to create the databases only;
the partitions' DSNs made from it leave them out (`partitions.layout.check_partition_dsn`).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from durable_graph.cli.common import (
    CliError,
    UsageError,
    env_name,
    output_of,
    postgres_config,
    required_dsn,
)


def _databases(args: argparse.Namespace) -> list[str]:
    import psycopg
    from psycopg import sql

    from durable_graph.core.errors import ValidationError
    from durable_graph.postgres.partitions import layout

    if args.partition and args.server:
        raise UsageError("give either --partition DSN ... or --server DSN ... --partitions N")
    if args.partition:
        for given in args.partition:
            try:
                layout.check_partition_dsn(given, "--partition")
            except ValidationError as exc:
                raise UsageError(str(exc)) from None
        return list(args.partition)
    if not args.server or args.partitions is None:
        raise UsageError("init needs --partition DSN (N times) or --server DSN with --partitions N")
    dsns = []
    for part in range(args.partitions):
        server = args.server[part % len(args.server)]
        name = f"{args.database_prefix}{part}"
        try:
            with psycopg.connect(server, autocommit=True, connect_timeout=10) as conn:
                if (
                    conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
                    is None
                ):
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except psycopg.Error as exc:
            raise CliError(f"could not create database {name}: {exc}") from None
        # The server's login created the database; the cluster keeps the DSN without it.
        params: dict[str, Any] = psycopg.conninfo.conninfo_to_dict(
            layout.without_credentials(server)
        )
        params["dbname"] = name
        dsns.append(psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items()}))
    return dsns


def _partitions_command(
    args: argparse.Namespace, act: Callable[[str, str], tuple[dict[str, Any], str]]
) -> int:
    """A ``partitions`` command: ``act(proxy_dsn, schema)`` does the work and says what to
    report (its JSON fields besides the schema, and its line)."""
    schema = postgres_config(args).schema
    proxy = required_dsn(args, "partitions needs --dsn (the proxy database) or DURABLE_GRAPH_DSN")
    fields, text = act(proxy, schema)
    output_of(args).result({"schema": schema, **fields}, text)
    return 0


def cmd_partitions_init(args: argparse.Namespace) -> int:
    from durable_graph.postgres.partitions import layout

    def init(proxy: str, schema: str) -> tuple[dict[str, Any], str]:
        made = layout.init(proxy, _databases(args), schema)
        n = len(made.partitions)
        return {"partitions": list(made.partitions)}, (
            f"partitions: {n} installed, proxy generated for schema {schema}"
        )

    return _partitions_command(args, init)


def cmd_partitions_migrate(args: argparse.Namespace) -> int:
    from durable_graph.postgres.partitions import layout

    def migrate(proxy: str, schema: str) -> tuple[dict[str, Any], str]:
        n = len(layout.migrate(proxy, schema).partitions)
        return {"partitions": n}, f"partitions: {n} migrated, proxy regenerated for schema {schema}"

    return _partitions_command(args, migrate)


def cmd_partitions_verify(args: argparse.Namespace) -> int:
    from durable_graph.postgres.partitions import layout

    def verify(proxy: str, schema: str) -> tuple[dict[str, Any], str]:
        problems = layout.verify(proxy, schema)
        # Which server is each partition's primary now (after a failover or a switchover),
        # told whether or not all is current: the DBA's first question during an outage.
        found = layout.nodes(proxy, schema)
        lines = "\n".join(p.line() for p in found)
        for p in found:
            primaries = [n.address for n in p.nodes if n.role == "primary"]
            if len(primaries) > 1:  # libpq writes to the first: the others' writes diverge
                problems.append(
                    f"partition {p.partition}: {len(primaries)} servers of its DSN are "
                    f"primaries ({', '.join(primaries)}): split brain; demote or stop all but "
                    "one (docs/failover.md)"
                )
        if problems:
            raise CliError("; ".join(problems) + "\n" + lines)
        return {
            "current": True,
            "partitions": [
                {
                    "partition": p.partition,
                    "primary": p.primary,
                    "nodes": [
                        {"address": n.address, "role": n.role, "detail": n.detail} for n in p.nodes
                    ],
                }
                for p in found
            ],
        }, "partitions: every partition and the proxy current\n" + lines

    return _partitions_command(args, verify)


def add_parser(command: Any, action_of: Any, common: Any) -> None:
    """``partitions init | migrate | verify``."""
    group = command(
        "partitions", _no_subcommand, "a store over PL/Proxy partitions: init, migrate, verify"
    )
    action = action_of(group, "partitions_command", common)
    init = action(
        "init", cmd_partitions_init, "install N partitions and generate the proxy (--dsn)"
    )
    # Each option's default comes from its environment variable, named in its help, as every
    # other option's (a list option's variable holds its values separated by white space).
    options: tuple[tuple[str, dict[str, Any]], ...] = (
        (
            "--partition",
            {"action": "append", "metavar": "DSN", "help": "a partition database, in order"},
        ),
        ("--server", {"action": "append", "metavar": "DSN", "help": "a server for the partitions"}),
        (
            "--partitions",
            {"type": int, "metavar": "N", "help": "how many partitions (a power of two)"},
        ),
        (
            "--database-prefix",
            {"default": "dg_part", "help": "partition database names (with --server)"},
        ),
    )
    for flag, kw in options:
        env = env_name(flag)
        from_env = os.environ.get(env) or None
        if from_env is not None:
            kw["default"] = from_env.split() if kw.get("action") == "append" else from_env
        kw["help"] = f"{kw['help']} [env {env}]"
        init.add_argument(flag, **kw)
    action("migrate", cmd_partitions_migrate, "migrate every partition, regenerate the proxy")
    action("verify", cmd_partitions_verify, "check every partition and the proxy")


def _no_subcommand(args: argparse.Namespace) -> int:  # pragma: no cover - argparse requires one
    raise UsageError("partitions needs an action: init, migrate, verify")
