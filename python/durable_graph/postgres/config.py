"""`PostgresConfig`: where a PostgreSQL store lives and how long its calls may take (SPEC §6).

Every field is checked at construction (SPEC §8 rule 27): a bad schema name or duration raises
`ValidationError` before any connection is opened or any SQL is composed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from durable_graph.core.errors import ValidationError
from durable_graph.core.validation import (
    DEFAULT_MAX_VALUE_BYTES,
    INT32_MAX,
    check_int,
    check_max_value_bytes,
)

SCHEMA_PATTERN = re.compile(r"[a-z_][a-z0-9_]{0,62}")
MIN_CONNECTION_TIMEOUT_MS = 250
CONNECTION_CHECK_INTERVAL_MS = 1000
"""``client_connection_check_interval`` of a store session (at most ``call_timeout``)."""
_MS = timedelta(milliseconds=1)


def check_schema(value: object, name: str = "schema") -> str:
    """A schema name of rule 27: ``^[a-z_][a-z0-9_]{0,62}$`` and not starting ``pg_``."""
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a str, got {type(value).__name__}")
    if SCHEMA_PATTERN.fullmatch(value) is None:
        raise ValidationError(
            f"{name} {value!r} must match ^[a-z_][a-z0-9_]{{0,62}}$ "
            "(lower-case letters, digits and _, at most 63 characters)"
        )
    if value.startswith("pg_"):
        raise ValidationError(f"{name} {value!r} must not start with 'pg_' (reserved)")
    return value


def round_up_ms(name: str, value: object) -> timedelta:
    """A `timedelta` rounded up to whole milliseconds, then checked: > 0 and <= 2^31-1 ms."""
    if not isinstance(value, timedelta):
        raise ValidationError(f"{name} must be a datetime.timedelta, got {type(value).__name__}")
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    millis = -(-micros // 1000)
    if millis <= 0:
        raise ValidationError(f"{name} must be positive, got {value}")
    if millis > INT32_MAX:
        raise ValidationError(f"{name} must be at most {INT32_MAX} ms, got {value}")
    return timedelta(milliseconds=millis)


@dataclass(frozen=True, slots=True)
class PostgresConfig:
    """Configuration of a PostgreSQL store.

    ``call_timeout`` bounds each call on the server (``statement_timeout``, ``lock_timeout``,
    ``idle_in_transaction_session_timeout``) and on the client; ``connection_timeout`` bounds the
    wait for a pooled connection. Durations are kept rounded up to whole milliseconds.
    """

    schema: str = "llm4s"
    call_timeout: timedelta = timedelta(seconds=5)
    connection_timeout: timedelta = timedelta(seconds=5)
    max_pool_size: int = 10
    auto_migrate: bool = True
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES

    def __post_init__(self) -> None:
        check_schema(self.schema)
        object.__setattr__(self, "call_timeout", round_up_ms("call_timeout", self.call_timeout))
        connection_timeout = round_up_ms("connection_timeout", self.connection_timeout)
        if connection_timeout < MIN_CONNECTION_TIMEOUT_MS * _MS:
            raise ValidationError(
                f"connection_timeout must be at least {MIN_CONNECTION_TIMEOUT_MS} ms, "
                f"got {self.connection_timeout}"
            )
        object.__setattr__(self, "connection_timeout", connection_timeout)
        check_int("max_pool_size", self.max_pool_size, minimum=1, maximum=10_000)
        if not isinstance(self.auto_migrate, bool):
            raise ValidationError(
                f"auto_migrate must be a bool, got {type(self.auto_migrate).__name__}"
            )
        check_max_value_bytes(self.max_value_bytes)

    @property
    def call_timeout_ms(self) -> int:
        return self.call_timeout // _MS

    @property
    def connection_timeout_ms(self) -> int:
        return self.connection_timeout // _MS

    @property
    def connect_timeout_s(self) -> int:
        """libpq's ``connect_timeout``: whole seconds, at least 2 (libpq's own minimum)."""
        return max(2, -(-self.connection_timeout_ms // 1000))

    def session_options(self) -> str:
        """The libpq ``options`` every store session pins (SPEC §10.8), whatever the server's or
        role's defaults: durable commits, UTC (the functions' time arithmetic and text never
        depend on a DBA's TimeZone), and a check that the client is still there, so a query
        whose caller went away is ended by the server within a second, not left to land."""
        check_ms = min(CONNECTION_CHECK_INTERVAL_MS, self.call_timeout_ms)
        return (
            "-c synchronous_commit=on -c TimeZone=UTC "
            f"-c client_connection_check_interval={check_ms}"
        )

    def connection_options(self) -> str:
        """The libpq ``options`` of a store session: the server-side timeouts (SPEC §6) and
        `session_options`."""
        ms = self.call_timeout_ms
        return (
            f"-c statement_timeout={ms} -c lock_timeout={ms} "
            f"-c idle_in_transaction_session_timeout={ms} " + self.session_options()
        )

    def connection_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `psycopg.connect` (or a pool's ``kwargs``) of this store.

        Pass them to your own `ConnectionPool` before `PostgresCheckpointer.create` so the server
        enforces ``call_timeout`` too; the client-side bound applies either way.
        """
        return {
            "autocommit": True,
            "options": self.connection_options(),
            "connect_timeout": self.connect_timeout_s,
        }


__all__ = ["PostgresConfig", "check_schema", "round_up_ms"]
