"""What every command shares: the CLI's errors, argument types, output, and opening the store."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import enum
import json
import os
import re
import sys
import unicodedata
import urllib.parse
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.model import (
    Cancelled,
    Completed,
    EntryOutcome,
    Failed,
    Interrupted,
    QueueEntry,
)
from durable_graph.observe import readable

DSN_ENV = "DURABLE_GRAPH_DSN"
DEBUG_ENV = "DURABLE_GRAPH_DEBUG"
ENV_PREFIX = "DURABLE_GRAPH_"
DEFAULT_SQLITE_PATH = "durable_graph.db"
PAGE = 500


class CliError(Exception):
    """A user mistake the CLI reports as one ``error:`` line (exit 1)."""


class UsageError(Exception):
    """A bad command line (exit 2)."""


class Unreachable(CliError):
    """The store cannot be reached: no SQLite file, or no PostgreSQL connection."""


# --- durations -----------------------------------------------------------------------------

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> timedelta:
    """``30s``, ``5m``, ``2h``, ``7d``, ``250ms`` or a sum such as ``1h30m``."""
    compact = text.strip().replace(" ", "")
    parts = _DURATION_PART.findall(compact)
    if not compact or "".join(n + u for n, u in parts) != compact:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r} (use e.g. 30s, 5m, 2h, 7d, 250ms)"
        )
    return timedelta(seconds=sum(float(n) * _UNITS[u] for n, u in parts))


def _int_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
    return value


def positive_int(text: str) -> int:
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    return _int_at_least(text, 0)


def json_value(text: str) -> Any:
    """A JSON value given on the command line; a bad one is a usage error (exit 2), with a hint
    when it looks like a bare word meant as a string (issue 26 items 5 and 11)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise argparse.ArgumentTypeError("not valid JSON: nested too deeply to read") from None
    except json.JSONDecodeError as exc:
        hint = ""
        start = text.lstrip()[:1]
        if (
            start
            and start not in '{["-0123456789'
            and text.strip() not in ("true", "false", "null")
        ):
            quoted = json.dumps(text)
            hint = f"; a string is quoted in JSON: --input '{quoted}'"
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}{hint}") from None


def env_name(flag: str) -> str:
    """The environment variable of an option: ``--poll-interval`` → ``DURABLE_GRAPH_POLL_INTERVAL``."""
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


def env_flag(flag: str) -> bool:
    """A boolean option's environment variable: ``1``, ``true``, ``yes`` or ``on`` sets it."""
    return os.environ.get(env_name(flag), "").strip().lower() in ("1", "true", "yes", "on")


# --- output --------------------------------------------------------------------------------


def to_jsonable(value: Any) -> Any:
    """Store values as plain JSON: datetimes ISO 8601, durations in seconds, outcomes tagged."""
    if isinstance(value, (Completed, Failed, Cancelled, Interrupted)):
        return {"kind": type(value).__name__.lower(), **_fields(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = _fields(value)
        if isinstance(value, QueueEntry):
            data["closed"] = value.closed
        return data
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


def _fields(value: Any) -> dict[str, Any]:
    return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}


def when(value: datetime | None) -> str:
    return "-" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def compact(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def outcome_text(outcome: EntryOutcome | None, limit: int = 40) -> str:
    if outcome is None:
        return "open"
    if isinstance(outcome, Completed):
        if outcome.output is None:
            return "completed"
        asked = readable.waiting_for_output(outcome.output)
        if asked is not None:  # a LangGraph run stopped at interrupt()
            return f"waiting for input: {compact(asked, limit)}"
        return f"completed {compact(outcome.output, limit)}"
    if isinstance(outcome, Failed):  # a traceback's last line names the exception (D67)
        lines = [line for line in outcome.error.splitlines() if line.strip()]
        return f"failed: {lines[-1] if lines else outcome.error}"
    if isinstance(outcome, Cancelled):
        return f"cancelled ({outcome.reason})"
    return f"{readable.SUPERSEDED} by entry {outcome.by}"


class Output:
    """Tables for people, JSON for scripts."""

    def __init__(self, as_json: bool, out: TextIO = sys.stdout) -> None:
        self.as_json = as_json
        self.out = out

    def json(self, value: Any) -> None:
        json.dump(to_jsonable(value), self.out, ensure_ascii=False, indent=2)
        self.out.write("\n")

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        cells = [[shown(str(c)) for c in row] for row in rows]
        widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        self.out.write(fmt.format(*headers).rstrip() + "\n")
        for row in cells:
            self.out.write(fmt.format(*row).rstrip() + "\n")

    def fields(self, pairs: Sequence[tuple[str, object]]) -> None:
        width = max(len(k) for k, _ in pairs)
        for key, val in pairs:
            self.out.write(f"{key + ':':<{width + 1}} {shown(str(val))}\n")

    def result(self, value: Any, text: str) -> None:
        """A command's result: ``value`` as JSON for scripts, else the line ``text``."""
        if self.as_json:
            self.json(value)
        else:
            self.line(text)

    def line(self, text: str = "") -> None:
        """One line (or several: newlines are kept, every other control character escaped)."""
        self.out.write("\n".join(shown(part) for part in text.split("\n")) + "\n")


class Progress:
    """A status line on stderr for long operations: only on a terminal, or with ``--progress``."""

    def __init__(self, enabled: bool, err: TextIO = sys.stderr) -> None:
        self.enabled = enabled
        self.err = err
        self._tty = err.isatty()
        self._last = ""

    def __call__(self, text: str) -> None:
        if not self.enabled or text == self._last:
            return
        self._last = text
        if self._tty:
            self.err.write("\r\x1b[K" + text)
        elif text:
            self.err.write(text + "\n")
        self.err.flush()

    def done(self) -> None:
        self("")


def shown(text: str) -> str:
    """``text`` with every control or format character escaped (``\\x1b``, ``\\u202e``), so an
    id, a tenant or an error message cannot move the cursor, recolour or reorder a terminal."""
    return "".join(ch if unicodedata.category(ch) not in _HIDDEN else _escape(ch) for ch in text)


_HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"}


def _escape(ch: str) -> str:
    code = ord(ch)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )


def redacted(text: str, dsn: str | None) -> str:
    """``text`` without the secrets of the DSN, each as ``***``: a password written in the text
    (``user:PASSWORD@``, ``password=PASSWORD``) and the DSN's own password wherever it stands
    as a word of its own. Nothing else: host, user, database and port are not secret, and a
    word that merely contains a secret (``postgresql`` for a user ``postgres``) stays whole
    (issue 26 item 10)."""
    text = _PASSWORD_ASSIGNMENT.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", text))
    if not dsn:
        return text
    for secret in sorted(_secrets(dsn), key=len, reverse=True):
        text = re.sub(rf"(?<![\w]){re.escape(secret)}(?![\w])", "***", text)
    return text


_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")
_PASSWORD_ASSIGNMENT = re.compile(r"((?:password|passwd)\s*=\s*)('[^']*'|\S+)", re.IGNORECASE)


def _secrets(dsn: str) -> set[str]:
    """The DSN's password (URL or ``password=``), and in a key=value DSN every token without a
    ``=`` (a malformed DSN: libpq quotes the bad fragment, which may be a password)."""
    found: set[str] = set()
    if "://" in dsn:
        url = urllib.parse.urlsplit(dsn.strip())
        with contextlib.suppress(ValueError):
            if url.password:
                found |= {url.password, urllib.parse.unquote(url.password)}
        found |= {v for k, v in urllib.parse.parse_qsl(url.query) if k == "password"}
    else:
        for token in dsn.split():
            key, eq, value = token.partition("=")
            if not eq:
                found.add(token)
            elif key.strip().lower() == "password":
                found.add(value.strip("'"))
    return {s for s in found if s}


# --- the store -----------------------------------------------------------------------------


def dsn_of(args: argparse.Namespace) -> str | None:
    dsn: str | None = getattr(args, "dsn", None)
    if dsn is not None and getattr(args, "sqlite", None) is not None:
        raise UsageError("give either --dsn or --sqlite, not both")
    if dsn is None and getattr(args, "sqlite", None) is None:
        dsn = os.environ.get(DSN_ENV) or None
    return dsn


def required_dsn(args: argparse.Namespace, missing: str) -> str:
    """`dsn_of` for a command that works on PostgreSQL only: `UsageError` ``missing`` without
    one."""
    dsn = dsn_of(args)
    if dsn is None:
        raise UsageError(missing)
    return dsn


def sqlite_path(args: argparse.Namespace) -> str:
    given = getattr(args, "sqlite", None) or os.environ.get(env_name("--sqlite"))
    return str(given or DEFAULT_SQLITE_PATH)


def schema_of(args: argparse.Namespace) -> str | None:
    schema: str | None = getattr(args, "schema", None) or os.environ.get(env_name("--schema"))
    return schema or None


def postgres_config(args: argparse.Namespace) -> Any:
    from durable_graph.postgres import PostgresConfig

    schema = schema_of(args)
    return PostgresConfig() if schema is None else PostgresConfig(schema=schema)


def open_store(
    args: argparse.Namespace, *, must_exist: bool = True, read_only: bool = False
) -> Checkpointer:
    """The store the options name. ``must_exist``: a missing SQLite file is an error, not created.

    ``read_only`` (the commands that only read): nothing is ever created, converted or migrated —
    a SQLite file opens read-only, a PostgreSQL schema is verified (a missing or old one is the
    one-line error naming ``durable-graph migrate``).
    """
    dsn = dsn_of(args)
    if dsn is not None:
        return _open_postgres(dsn, postgres_config(args), read_only)
    if getattr(args, "schema", None) is not None:
        raise UsageError(
            "--schema applies to PostgreSQL only (give --dsn or set DURABLE_GRAPH_DSN)"
        )
    path = sqlite_path(args)
    if (must_exist or read_only) and not Path(path).exists():
        raise Unreachable(
            f"no store at {path} (give --sqlite PATH or --dsn, or submit a run to create it)"
        )
    try:
        from durable_graph.sqlite import SqliteCheckpointer, SqliteConfig
    except ImportError as exc:
        raise CliError(f"the SQLite backend is not available: {exc}") from None
    sqlite_store: Checkpointer = SqliteCheckpointer.open(path, SqliteConfig(read_only=read_only))
    return sqlite_store


def connect(dsn: str, config: Any) -> Any:
    """A store session on ``dsn`` (bounded by ``connect_timeout``), or `Unreachable`."""
    import psycopg

    try:
        return psycopg.connect(dsn, **config.connection_kwargs())
    except psycopg.Error as exc:
        raise Unreachable(f"could not connect to PostgreSQL: {exc}") from None


def _open_postgres(dsn: str, config: Any, read_only: bool) -> Checkpointer:
    """Connect once first, so that an unreachable server or a refused login is reported as
    such (not as a schema problem), within ``connection_timeout`` whatever the server does;
    a read-only command then verifies the schema on that connection (never creates it)."""
    try:
        import psycopg

        from durable_graph.postgres import PostgresCheckpointer, migrations
    except ImportError as exc:
        raise CliError(f"the PostgreSQL backend is not available: {exc}") from None
    with connect(dsn, config) as conn:
        if read_only:
            try:
                migrations.verify(conn, config.schema)
            except psycopg.Error as exc:
                raise CliError(f"cannot read schema {config.schema}: {exc}") from None
    if read_only:
        config = dataclasses.replace(config, auto_migrate=False)
    store: Checkpointer = PostgresCheckpointer.open(dsn, config)
    return store


async def open_async_store(
    args: argparse.Namespace, *, must_exist: bool = True
) -> AsyncCheckpointer:
    """The async store (`durable_graph.aio`) of the options' backend, on the running loop, with
    `open_store`'s checks: a missing SQLite file (``must_exist``) and an unreachable PostgreSQL
    are one-line errors. PostgreSQL's is native asyncio (its waits are woken by NOTIFY)."""
    dsn = dsn_of(args)
    if dsn is not None:
        config = postgres_config(args)
        try:
            from durable_graph.postgres.async_store import AsyncPostgresCheckpointer
        except ImportError as exc:
            raise CliError(f"the PostgreSQL backend is not available: {exc}") from None
        await asyncio.to_thread(lambda: connect(dsn, config).close())  # reachable, else one line
        postgres: AsyncCheckpointer = await AsyncPostgresCheckpointer.open(dsn, config)
        return postgres
    if getattr(args, "schema", None) is not None:
        raise UsageError(
            "--schema applies to PostgreSQL only (give --dsn or set DURABLE_GRAPH_DSN)"
        )
    path = sqlite_path(args)
    if must_exist and not Path(path).exists():
        raise Unreachable(
            f"no store at {path} (give --sqlite PATH or --dsn, or submit a run to create it)"
        )
    try:
        from durable_graph.sqlite.async_store import AsyncSqliteCheckpointer
    except ImportError as exc:
        raise CliError(f"the SQLite backend is not available: {exc}") from None
    sqlite: AsyncCheckpointer = await AsyncSqliteCheckpointer.open(path)
    return sqlite


def store_label(args: argparse.Namespace) -> str:
    dsn = dsn_of(args)
    if dsn is None:
        return f"SQLite {sqlite_path(args)}"
    return f"PostgreSQL (schema {postgres_config(args).schema})"


def store_of(
    args: argparse.Namespace, *, must_exist: bool = True, read_only: bool = False
) -> contextlib.closing[Checkpointer]:
    """The store the options name, closed when the ``with`` block ends."""
    return contextlib.closing(open_store(args, must_exist=must_exist, read_only=read_only))


def output_of(args: argparse.Namespace) -> Output:
    return Output(bool(getattr(args, "json", False)) or env_flag("--json"))


def progress_of(args: argparse.Namespace) -> Progress:
    enabled = bool(getattr(args, "progress", False)) or env_flag("--progress")
    return Progress(enabled or sys.stderr.isatty())


def tenant_of(args: argparse.Namespace) -> str | None:
    tenant: str | None = getattr(args, "tenant", None)
    return tenant


def all_open_entries(store: Any, tenant: Any, thread_id: str | None) -> list[QueueEntry]:
    """Every open entry, page by page (open_entries is paginated, SPEC §10 rule 2)."""
    entries: list[QueueEntry] = []
    after: int | None = None
    while page := store.run_queue.open_entries(tenant, thread_id, after, 1000):
        entries += page
        after = page[-1].entry_id
    return entries


def all_children(store: Any, thread_id: str) -> list[str]:
    """Every child of the thread, page by page (children is paginated, SPEC §10 rule 2)."""
    children: list[str] = []
    after: str | None = None
    while page := store.children(thread_id, after, 1000):
        children += page
        after = page[-1]
    return children
