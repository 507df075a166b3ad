"""Setting up, upgrading and checking a partitioned store (SPEC §16.3).

`init` installs each partition (the same migrations and functions as ``sql/install.sql``),
makes its entry ids and fencing tokens count in steps of N from an offset equal to its number
(`set_steps`), records its number in its ``schema_meta`` (``partition``, ``partitions``), and
generates the proxy (`install_proxy`): the PL/Proxy cluster (a foreign server named
``dg_<schema>`` whose options ``p0 .. pN-1`` are the partitions' DSNs, with a user mapping for
PUBLIC, so the proxy connects to a partition as the calling role), and the routing functions of
`durable_graph.postgres.partitions.proxy`. The proxy's ``schema_meta`` says ``kind = proxy``:
a store opened on it never installs a local store there (`durable_graph.postgres.migrations`).

`migrate` and `verify` read the partitions from the proxy's cluster and work per partition,
then on the proxy; `grant` grants a runtime role on every partition and on the proxy.

A partition's DSN in the cluster carries **no credentials** (`check_partition_dsn`): every login
role of the proxy database can read a foreign server's options, and PL/Proxy connects with a DSN
naming a user as that user, whoever calls (issue 37). Without one it appends the calling role's
name (or the user and password of that role's user mapping), so each role reaches the
partitions as itself, with the grants `grant` gave it there. The setup commands reach the
partitions with the proxy DSN's user and password (`with_credentials`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from durable_graph.core.errors import ProcessingError, ValidationError
from durable_graph.postgres import migrations, privileges
from durable_graph.postgres.config import PostgresConfig, check_schema
from durable_graph.postgres.partitions import checks, proxy
from durable_graph.postgres.partitions.routing import check_partitions

PROXY_KIND = "proxy"


@dataclass(frozen=True, slots=True)
class Layout:
    """A partitioned store: its schema, the proxy's DSN, the partitions' DSNs by number."""

    schema: str
    proxy: str
    partitions: tuple[str, ...]


def cluster_name(schema: str) -> str:
    """The PL/Proxy cluster (foreign server) of a proxy schema."""
    return f"dg_{check_schema(schema)}"[:63]


@contextlib.contextmanager
def _connect(dsn: str, what: str) -> Iterator[psycopg.Connection[Any]]:
    try:
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise ProcessingError(f"could not connect to {what}: {exc}") from exc
    with conn:
        yield conn


CREDENTIAL_KEYS = ("user", "password", "sslpassword")
"""DSN keywords a partition's DSN in the cluster may not hold (`check_partition_dsn`)."""


def _conninfo(dsn: str, name: str) -> dict[str, Any]:
    try:
        return dict(psycopg.conninfo.conninfo_to_dict(dsn))
    except psycopg.Error as exc:
        raise ValidationError(f"{name} is not a valid DSN: {exc}") from None


def check_partition_dsn(dsn: object, name: str = "partition") -> str:
    """A partition's DSN as the cluster may keep it: a valid libpq DSN without a user, password or
    sslpassword (`ValidationError` naming ``name`` otherwise). The cluster's options are readable
    by every login role of the proxy database, and PL/Proxy uses a DSN that names a user as it
    is (``user=`` anywhere in it), so every caller would run on the partition as that user."""
    if not isinstance(dsn, str):
        raise ValidationError(f"{name} must be a str, got {type(dsn).__name__}")
    found = [key for key in CREDENTIAL_KEYS if key in _conninfo(dsn, name)]
    if found or "user=" in dsn:
        raise ValidationError(
            f"{name} must not carry credentials ({', '.join(found) or 'user='}): the proxy "
            "database's roles can all read a partition's DSN, and PL/Proxy would run every "
            "call there as that user; give it without them (the proxy then connects as the "
            "calling role; passwords go in a user mapping per role or the proxy server's "
            ".pgpass), and the setup commands' login in the proxy DSN"
        )
    return dsn


def without_credentials(dsn: str) -> str:
    """``dsn`` without the keywords `check_partition_dsn` refuses (as given when it has none)."""
    params = _conninfo(dsn, "dsn")
    if not any(key in params for key in CREDENTIAL_KEYS):
        return dsn
    kept = {k: str(v) for k, v in params.items() if k not in CREDENTIAL_KEYS}
    return psycopg.conninfo.make_conninfo(**kept)


def with_credentials(dsn: str, proxy_dsn: str) -> str:
    """A partition's DSN for the setup commands' own connections: the proxy DSN's user and
    password added when the partition's gives none. (The cluster keeps the DSN as given: one
    without a user makes the proxy connect to the partition as the calling role, SPEC §10.5.)"""
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    proxy = psycopg.conninfo.conninfo_to_dict(proxy_dsn)
    for key in ("user", "password"):
        if key not in params and key in proxy:
            params[key] = proxy[key]
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items()})


# --- partitions ---------------------------------------------------------------------------


def set_steps(conn: psycopg.Connection[Any], schema: str, part: int, n: int) -> None:
    """Entry ids and fencing tokens of partition ``part`` of ``n``: ≡ part mod n, from n + part
    on, each continuing above what was issued; the number recorded in ``schema_meta``."""
    ident = sql.Identifier(schema)
    with conn.transaction():
        migrations.name_release(conn)  # the schema_meta view answers a reader naming it
        meta = dict(
            conn.execute(sql.SQL("SELECT key, value FROM {}.schema_meta").format(ident)).fetchall()
        )
        if "partition" in meta and (meta["partition"], meta.get("partitions")) != (
            str(part),
            str(n),
        ):
            raise ProcessingError(
                f"schema {schema} is partition {meta['partition']} of {meta.get('partitions')}, "
                f"not {part} of {n}: a partition keeps its number"
            )
        row = conn.execute(
            "SELECT pg_catalog.pg_get_serial_sequence(%s, 'entry_id')",
            (f'"{schema}".queue_entries',),
        ).fetchone()
        assert row is not None and row[0] is not None
        for seq in (str(row[0]), f'"{schema}".fencing_token_seq'):
            got = conn.execute(
                "SELECT coalesce(last_value, 0), increment_by, start_value"
                " FROM pg_catalog.pg_sequences"
                " WHERE (quote_ident(schemaname) || '.' || quote_ident(sequencename)) = %s"
                "    OR (schemaname || '.' || sequencename) = %s",
                (seq, seq.replace('"', "")),
            ).fetchone()
            last = int(got[0]) if got else 0
            start = n + part
            if got is not None and (int(got[1]), int(got[2])) == (n, start):
                # Already counting for this partition: left alone. A restart computed from
                # last_value would race the live store's nextval (init run again on a store
                # in use, e.g. to change its DSNs) and could hand out an id or token again.
                continue
            nxt = start if last < start else last + ((part - last) % n or n)
            conn.execute(
                sql.SQL("ALTER SEQUENCE {} INCREMENT BY {} START WITH {} RESTART WITH {}").format(
                    sql.SQL(seq), sql.Literal(n), sql.Literal(start), sql.Literal(nxt)
                )
            )
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.schema_meta (key, value) VALUES ('partition', %s), "
                "('partitions', %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
            ).format(ident),
            (str(part), str(n)),
        )


def check_steps(conn: psycopg.Connection[Any], schema: str, part: int, n: int) -> str | None:
    """Why partition ``part`` of ``n`` does not count as it should, or None."""
    with conn.transaction():
        migrations.name_release(conn)  # the schema_meta view answers a reader naming it
        meta = dict(
            conn.execute(
                sql.SQL("SELECT key, value FROM {}.schema_meta").format(sql.Identifier(schema))
            ).fetchall()
        )
    if (meta.get("partition"), meta.get("partitions")) != (str(part), str(n)):
        return (
            f"schema {schema} there is partition {meta.get('partition')} of "
            f"{meta.get('partitions')}, expected {part} of {n}"
        )
    rows = conn.execute(
        "SELECT sequencename, increment_by, start_value FROM pg_catalog.pg_sequences"
        " WHERE schemaname = %s AND sequencename IN ('fencing_token_seq', 'queue_entries_entry_id_seq')",
        (schema,),
    ).fetchall()
    for name, step, start in rows:
        if int(step) != n or int(start) % n != part:
            return f"sequence {name} counts by {step} from {start}, not by {n} from ≡ {part}"
    if len(rows) != 2:
        return "the entry id and fencing token sequences were not found"
    return None


# --- the proxy ----------------------------------------------------------------------------


def read_layout(proxy_dsn: str, schema: str) -> Layout:
    """The partitions of the proxy at ``proxy_dsn``, from its cluster's options."""
    with _connect(proxy_dsn, "the proxy") as conn:
        row = conn.execute(
            "SELECT srvoptions FROM pg_catalog.pg_foreign_server WHERE srvname = %s",
            (cluster_name(schema),),
        ).fetchone()
    if row is None:
        raise ProcessingError(
            f"the database at the proxy DSN has no partition cluster {cluster_name(schema)}: "
            "run durable-graph partitions init first"
        )
    options = dict(str(o).split("=", 1) for o in row[0] or [])
    parts: list[str] = []
    while f"p{len(parts)}" in options:
        parts.append(options[f"p{len(parts)}"])
    return Layout(schema, proxy_dsn, tuple(parts))


def _cluster(conn: psycopg.Connection[Any], cluster: str, partitions: Sequence[str]) -> None:
    """Create the PL/Proxy cluster, or set its partitions' options in place (keeping its user
    mappings and grants, which a drop would take along)."""
    server = sql.Identifier(cluster)
    row = conn.execute(
        "SELECT srvoptions FROM pg_catalog.pg_foreign_server WHERE srvname = %s", (cluster,)
    ).fetchone()
    wanted = {f"p{i}": dsn for i, dsn in enumerate(partitions)}
    if row is None:
        options = sql.SQL(", ").join(
            sql.SQL("{} {}").format(sql.Identifier(k), sql.Literal(v)) for k, v in wanted.items()
        )
        conn.execute(
            sql.SQL(
                "CREATE SERVER {} FOREIGN DATA WRAPPER plproxy OPTIONS "
                "(connection_lifetime '1800', {})"
            ).format(server, options)
        )
        conn.execute(sql.SQL("CREATE USER MAPPING FOR PUBLIC SERVER {}").format(server))
        return
    have = dict(str(o).split("=", 1) for o in row[0] or [])
    changes: list[sql.Composable] = []
    for key, value in wanted.items():
        if have.get(key) != value:
            verb = "SET" if key in have else "ADD"
            changes.append(sql.SQL(verb + " {} {}").format(sql.Identifier(key), sql.Literal(value)))
    for key in have:
        if key.startswith("p") and key[1:].isdigit() and key not in wanted:
            changes.append(sql.SQL("DROP {}").format(sql.Identifier(key)))
    if changes:
        conn.execute(
            sql.SQL("ALTER SERVER {} OPTIONS ({})").format(server, sql.SQL(", ").join(changes))
        )


def install_proxy(proxy_dsn: str, schema: str, partitions: Sequence[str]) -> None:
    """(Re)generate the proxy from partition 0's catalog, in one transaction."""
    n = check_partitions(len(partitions))
    with _connect(with_credentials(partitions[0], proxy_dsn), "partition 0") as part0:
        signatures = proxy.read_signatures(part0, schema)
    cluster = cluster_name(schema)
    statements = proxy.generate(schema, cluster, n, signatures)
    ident = sql.Identifier(schema)
    with _connect(proxy_dsn, "the proxy") as conn, conn.transaction():
        conn.execute("CREATE EXTENSION IF NOT EXISTS plproxy")
        tables = conn.execute(
            "SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
            " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'"
            " AND c.relname <> 'schema_meta'",
            (schema,),
        ).fetchall()
        if tables:
            raise ProcessingError(
                f"schema {schema} of the proxy database holds tables ({tables[0][0]}, ...): a "
                "local store is there; a proxy needs a database (or schema) of its own"
            )
        _cluster(conn, cluster, partitions)
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
        for (sig,) in conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p"
            " WHERE p.pronamespace = (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = %s)",
            (schema,),
        ).fetchall():
            conn.execute(sql.SQL("DROP FUNCTION {} CASCADE").format(sql.SQL(sig)))
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {}.schema_meta (key text PRIMARY KEY, value text NOT NULL)"
            ).format(ident)
        )
        conn.execute(sql.SQL("SET LOCAL search_path TO {}, pg_temp").format(ident))
        conn.execute("SET LOCAL check_function_bodies = off")
        for statement in statements:
            conn.execute(statement.encode("utf-8"))
        proxy.check_signatures(signatures, proxy.read_signatures(conn, schema))
        conn.execute(sql.SQL("REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {} FROM PUBLIC").format(ident))
        meta = {
            "kind": PROXY_KIND,
            "partitions": str(n),
            "version": str(migrations.required_version()),
            "functions_digest": migrations.functions_digest(),
            "proxy_digest": migrations.proxy_digest(conn, schema),
        }
        conn.execute(sql.SQL("DELETE FROM {}.schema_meta").format(ident))
        for key, value in meta.items():
            conn.execute(
                sql.SQL("INSERT INTO {}.schema_meta (key, value) VALUES (%s, %s)").format(ident),
                (key, value),
            )
        # Roles granted before (USAGE on the schema) keep their grants on the new functions.
        for (role,) in conn.execute(
            "SELECT a.grantee::regrole::text FROM pg_catalog.pg_namespace n,"
            " pg_catalog.aclexplode(n.nspacl) a WHERE n.nspname = %s"
            " AND a.privilege_type = 'USAGE' AND a.grantee <> n.nspowner AND a.grantee <> 0",
            (schema,),
        ).fetchall():
            conn.execute(
                sql.SQL("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {} TO {}").format(
                    ident, sql.SQL(str(role))
                )
            )


# --- the commands -------------------------------------------------------------------------


def init(
    proxy_dsn: str, partitions: Sequence[str], schema: str, config: PostgresConfig | None = None
) -> Layout:
    """Install the partitions and generate the proxy (idempotent). Each of ``partitions`` is a
    DSN without credentials (`check_partition_dsn`), checked before anything is written."""
    check_schema(schema)
    n = check_partitions(len(partitions))
    for part, given in enumerate(partitions):
        check_partition_dsn(given, f"partitions[{part}]")
    config = config or PostgresConfig(schema=schema)
    for part, given in enumerate(partitions):
        dsn = with_credentials(given, proxy_dsn)
        migrations.migrate(dsn, schema, config)
        with _connect(dsn, f"partition {part}") as conn:
            set_steps(conn, schema, part, n)
    install_proxy(proxy_dsn, schema, partitions)
    return Layout(schema, proxy_dsn, tuple(partitions))


def migrate(proxy_dsn: str, schema: str, config: PostgresConfig | None = None) -> Layout:
    """Migrate every partition, then regenerate the proxy. A cluster whose DSNs carry
    credentials (set up before issue 37, or by hand) gets them removed: from then on each role
    reaches the partitions as itself."""
    layout = read_layout(proxy_dsn, schema)
    config = config or PostgresConfig(schema=schema)
    for dsn in layout.partitions:
        migrations.migrate(with_credentials(dsn, proxy_dsn), schema, config)
    kept = tuple(without_credentials(dsn) for dsn in layout.partitions)
    install_proxy(proxy_dsn, schema, kept)
    return Layout(schema, proxy_dsn, kept)


def verify(proxy_dsn: str, schema: str) -> list[str]:
    """What is wrong with the partitioned store, per partition and for the proxy ([]: nothing)."""
    layout = read_layout(proxy_dsn, schema)
    n = len(layout.partitions)
    problems: list[str] = []
    for part, dsn in enumerate(layout.partitions):
        try:
            check_partition_dsn(dsn, f"the cluster's DSN of partition {part}")
        except ValidationError as exc:
            problems.append(f"partition {part}: {exc}: {checks.remedy(schema)}")
        try:
            with _connect(with_credentials(dsn, proxy_dsn), f"partition {part}") as conn:
                migrations.verify(conn, schema)
                problem = check_steps(conn, schema, part, n)
                if problem:
                    problems.append(f"partition {part}: {problem}")
        except ProcessingError as exc:
            problems.append(f"partition {part}: {exc}")
    with _connect(proxy_dsn, "the proxy") as conn:
        meta, _ = migrations._read_meta(conn, schema)
        if meta.get("kind") != PROXY_KIND:
            problems.append(f"proxy: schema {schema} there is not a generated proxy")
        else:
            problem = migrations.proxy_check(conn, schema, meta).strict_problem()
            if problem:
                problems.append(f"proxy: {problem}")
    return problems


@dataclass(frozen=True, slots=True)
class NodeRole:
    """One server named by a partition's DSN, as it answered: ``role`` is ``primary``,
    ``standby`` or ``unreachable``; ``detail`` says why (unreachable) or, of a primary, how many
    standbys it streams to synchronously."""

    address: str
    role: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class PartitionNodes:
    """The servers of a partition's DSN in its order (a multi-host DSN names several: the
    primary and its standbys; libpq keeps the first that accepts writes)."""

    partition: int
    nodes: tuple[NodeRole, ...]

    @property
    def primary(self) -> str | None:
        return next((n.address for n in self.nodes if n.role == "primary"), None)

    def line(self) -> str:
        roles = ", ".join(
            f"{n.address} {n.role}" + (f" ({n.detail})" if n.detail else "") for n in self.nodes
        )
        return f"partition {self.partition}: primary {self.primary or 'none'}; {roles}"


def _hosts(dsn: str) -> list[tuple[str, str]]:
    """(host, port) of each server a DSN names, in order (libpq's rules: one port for every
    host, or one port per host; ``hostaddr`` where no ``host`` is given)."""
    params = _conninfo(dsn, "dsn")
    hosts = str(params.get("host") or params.get("hostaddr") or "").split(",")
    ports = str(params.get("port") or "").split(",")
    if len(ports) == 1:
        ports = ports * len(hosts)
    return list(zip(hosts, ports, strict=False))


def _node_role(dsn: str, host: str, port: str) -> NodeRole:
    """What the server at ``host``:``port`` of ``dsn`` is now (``dsn``'s other settings kept,
    ``target_session_attrs`` any: a standby answers too)."""
    address = f"{host or 'localhost'}:{port or '5432'}"
    params = {k: str(v) for k, v in _conninfo(dsn, "dsn").items()}
    params.pop("hostaddr", None)
    params.update(host=host, port=port, target_session_attrs="any")
    params.setdefault("connect_timeout", "5")
    try:
        with psycopg.connect(psycopg.conninfo.make_conninfo(**params), autocommit=True) as conn:
            row = conn.execute(
                "SELECT pg_catalog.pg_is_in_recovery(), (SELECT count(*) FROM"
                " pg_catalog.pg_stat_replication WHERE sync_state IN ('sync', 'quorum'))"
            ).fetchone()
    except psycopg.Error as exc:
        return NodeRole(address, "unreachable", " ".join(str(exc).split())[:200])
    assert row is not None
    if row[0]:
        return NodeRole(address, "standby")
    return NodeRole(address, "primary", f"{row[1]} synchronous standby(s)")


def nodes(proxy_dsn: str, schema: str) -> list[PartitionNodes]:
    """Per partition, each server its cluster DSN names and what it is now: which one is the
    primary after a failover or a switchover, which are standbys, which do not answer (SPEC
    §27). Each is asked directly, with the proxy DSN's login."""
    layout = read_layout(proxy_dsn, schema)
    found = []
    for part, dsn in enumerate(layout.partitions):
        full = with_credentials(dsn, proxy_dsn)
        found.append(PartitionNodes(part, tuple(_node_role(full, h, p) for h, p in _hosts(full))))
    return found


def grant(proxy_dsn: str, schema: str, role: str) -> None:
    """Let ``role`` call the store: on every partition as on one store, and on the proxy USAGE
    on the schema and the cluster and EXECUTE on its functions (they route, nothing more)."""
    privileges.check_role(role)
    layout = read_layout(proxy_dsn, schema)
    for part, dsn in enumerate(layout.partitions):
        with _connect(with_credentials(dsn, proxy_dsn), f"partition {part}") as conn:
            privileges.grant(conn, schema, role)
    ident, who = sql.Identifier(schema), sql.Identifier(role)
    with _connect(proxy_dsn, "the proxy") as conn, conn.transaction():
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ident, who))
        conn.execute(
            sql.SQL("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {} TO {}").format(ident, who)
        )
        conn.execute(
            sql.SQL("GRANT USAGE ON FOREIGN SERVER {} TO {}").format(
                sql.Identifier(cluster_name(schema)), who
            )
        )


__all__ = [
    "CREDENTIAL_KEYS",
    "PROXY_KIND",
    "Layout",
    "NodeRole",
    "PartitionNodes",
    "check_partition_dsn",
    "check_steps",
    "cluster_name",
    "grant",
    "init",
    "install_proxy",
    "migrate",
    "nodes",
    "read_layout",
    "set_steps",
    "verify",
    "with_credentials",
    "without_credentials",
]
