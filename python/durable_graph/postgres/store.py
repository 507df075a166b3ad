"""`PostgresCheckpointer` and `PostgresRunQueue`: the sync PostgreSQL stores (SPEC §4-§6).

Each public method builds one `SqlCall` (`durable_graph.postgres.calls`: validation, the SQL
function call, the decoder) and runs it with the store's `Executor`
(`durable_graph.postgres.connection`: pooled connection, autocommit, time bound, error mapping).
The logic — locking, ordering, fencing, time — lives in the SQL functions (``sql/``, documented in
``sql/README.md``).

The one-call methods are written out in `durable_graph.postgres.generated` (``CheckpointerSql``,
``RunQueueSql``: ``return self._x.run(calls.commit(self._config, claim, commit))``, generated
from the Protocols and the builders by ``tools/generate_stores.py``). Written here by hand:
``prune_all``, which may issue several calls (one per batch of threads, each batch its own
transaction, SPEC §8 rule 16); ``submit_many`` (an empty list issues none);
``await_events_after``, ``subscribe`` and ``await_closed``, which poll, woken early by
LISTEN/NOTIFY (`durable_graph.postgres.notify`: one listener connection per store).

What the sync and the async store (`durable_graph.postgres.async_store`) share is here once: the
argument checks of ``open`` and ``create``, the pool settings, `PruneAll`'s batches, and
`StoreParts` / `CheckpointerParts` (the constructor, ``config`` and ``changes``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any, Generic, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from durable_graph.core.checkpointer import ClosedOnExit
from durable_graph.core.errors import ProcessingError, StoreError, ValidationError
from durable_graph.core.model import (
    Event,
    PruneResult,
    QueueEntry,
    RetentionPolicy,
    Submission,
    Ticket,
    WatchPolicy,
)
from durable_graph.core.polling import follow, poll
from durable_graph.core.validation import (
    check_await_closed,
    check_await_events,
    check_prune_all,
    check_subscribe,
)
from durable_graph.postgres import calls
from durable_graph.postgres.calls import SqlCall
from durable_graph.postgres.config import PostgresConfig
from durable_graph.postgres.connection import Executor, PoolState
from durable_graph.postgres.generated import CheckpointerSql, RunQueueSql
from durable_graph.postgres.notify import Listener

AWAIT_CLOSED_POLL = timedelta(milliseconds=100)
"""How often `await_closed` reads the entry."""

_NOT_LIBPQ = {"autocommit", "prepare_threshold", "row_factory", "cursor_factory", "context"}


def _check_config(config: object) -> PostgresConfig:
    """``config`` checked; the default config for None."""
    if config is None:
        return PostgresConfig()
    if not isinstance(config, PostgresConfig):
        raise ValidationError(f"config must be a PostgresConfig, got {type(config).__name__}")
    return config


def _check_open(dsn: object, config: object) -> PostgresConfig:
    """`open`'s arguments (sync and async store), checked in that order: the config to use."""
    checked = _check_config(config)
    if not isinstance(dsn, str):
        raise ValidationError(f"dsn must be a str, got {type(dsn).__name__}")
    return checked


def _check_create(pool: object, config: object, pool_class: type) -> PostgresConfig:
    """`create`'s arguments (``pool_class``: the sync or the async pool), config first."""
    checked = _check_config(config)
    if not isinstance(pool, pool_class):
        raise ValidationError(
            f"pool must be a psycopg_pool.{pool_class.__name__}, got {type(pool).__name__}"
        )
    return checked


def pool_options(config: PostgresConfig, name: str) -> dict[str, Any]:
    """The settings of a pool the store opens itself (sync or async), named ``name:schema``."""
    return {
        "min_size": 1,
        "max_size": config.max_pool_size,
        "kwargs": config.connection_kwargs(),
        "timeout": config.connection_timeout.total_seconds(),
        "name": f"{name}:{config.schema}",
    }


class PruneAll:
    """`prune_all`'s batches, without I/O (the sync and the async store run them): each
    `next_call` is one batch, its own transaction (rule 16), until it returns None; `record`
    takes the batch's outcome; `result` is the running total."""

    def __init__(self, config: PostgresConfig, policy: object, batch: object) -> None:
        _, self._size = check_prune_all(policy, batch)
        self._config = config
        self._policy = policy
        self._after: str | None = None
        self._done = False
        self.result = PruneResult(0, 0)

    def next_call(self) -> SqlCall[calls.PruneBatch] | None:
        if self._done:
            return None
        return calls.prune_batch(self._config, self._policy, self._size, self._after)

    def record(self, step: calls.PruneBatch) -> None:
        self.result = PruneResult(
            self.result.checkpoints_removed + step.result.checkpoints_removed,
            self.result.events_removed + step.result.events_removed,
        )
        if step.threads_seen < self._size:
            self._done = True
        elif step.last_thread_id is not None:
            # A step that ran out of its row budget inside its first thread resumes there.
            self._after = step.last_thread_id


def _prepare_schema(dsn: str, config: PostgresConfig) -> bool:
    """Migrate (auto_migrate) or verify the schema (SPEC §8 rule 28) before the store opens;
    True on a partition proxy (SPEC §16.3: verified with its partitions, never migrated)."""
    from durable_graph.postgres import migrations

    try:
        return migrations.prepare(dsn, config)
    except StoreError:
        raise
    except Exception as exc:
        raise ProcessingError(f"could not prepare schema {config.schema!r}: {exc}") from exc


def _pool_dsn(pool: ConnectionPool[Any]) -> str:
    kwargs = pool.kwargs() if callable(pool.kwargs) else pool.kwargs
    conninfo = pool.conninfo() if callable(pool.conninfo) else pool.conninfo
    extra = {k: v for k, v in (kwargs or {}).items() if k not in _NOT_LIBPQ}
    return psycopg.conninfo.make_conninfo(conninfo, **extra)


ExecutorT = TypeVar("ExecutorT", bound=PoolState[Any])
ListenerT = TypeVar("ListenerT")
QueueT = TypeVar("QueueT")


class StoreParts(Generic[ExecutorT, ListenerT]):
    """What a PostgreSQL store and its run queue hold, sync or async: the executor that runs the
    calls, its config, and the store's listener (None: waiters poll)."""

    def __init__(self, executor: ExecutorT, changes: ListenerT | None = None) -> None:
        self._x = executor
        self._config = executor.config
        self._changes = changes


class CheckpointerParts(StoreParts[ExecutorT, ListenerT], Generic[ExecutorT, ListenerT, QueueT]):
    """A PostgreSQL Checkpointer's construction and properties, sync or async: the class names
    its listener's class and its run queue's (``_listener_class``, ``_queue_class``)."""

    _listener_class: Callable[[str, PostgresConfig], ListenerT]
    _queue_class: Callable[[ExecutorT, ListenerT | None], QueueT]

    def __init__(self, executor: ExecutorT, conninfo: str | None = None) -> None:
        """Use `open` or `create`. ``conninfo``: where the notification listener connects
        (None: no notifications, waiters poll)."""
        listener = None if conninfo is None else self._listener_class(conninfo, executor.config)
        super().__init__(executor, listener)
        self._run_queue = self._queue_class(executor, listener)

    @property
    def changes(self) -> ListenerT | None:
        """The store's LISTEN/NOTIFY listener (SPEC §11), for waiters and idle workers."""
        return self._changes

    @property
    def config(self) -> PostgresConfig:
        return self._config


class PostgresRunQueue(RunQueueSql, StoreParts[Executor, Listener]):
    """The run queue of a `PostgresCheckpointer`, in the same schema (SPEC §5)."""

    def submit_many(self, submissions: Sequence[Submission]) -> list[Ticket]:
        call = calls.submit_many(self._config, submissions)
        return [] if call is None else self._x.run(call)

    def await_closed(
        self, entry_id: int, timeout: timedelta, tenant: str | None = None
    ) -> QueueEntry | None:
        """Poll the entry every 100 ms, at once when notified it closed (SPEC §11); None if open
        at the wall-clock timeout (D21, rule 23)."""
        check_await_closed(entry_id, timeout, tenant)
        found = poll(
            lambda: self._x.run(calls.entry(self._config, entry_id, tenant)),
            lambda e: e is None or e.closed,
            timeout,
            AWAIT_CLOSED_POLL.total_seconds(),
            self._changes,
            ("closed", str(entry_id)),
        )
        return found if found is not None and found.closed else None


class PostgresCheckpointer(
    CheckpointerSql, CheckpointerParts[Executor, Listener, PostgresRunQueue], ClosedOnExit
):
    """The PostgreSQL Checkpointer: one SQL function call per method (SPEC §4, §6)."""

    _listener_class = Listener
    _queue_class = PostgresRunQueue

    @classmethod
    def open(cls, dsn: str, config: PostgresConfig | None = None) -> PostgresCheckpointer:
        """A store with its own pool on ``dsn``; migrates the schema, or verifies it."""
        config = _check_open(dsn, config)
        proxy = _prepare_schema(dsn, config)
        try:
            pool: ConnectionPool[Any] = ConnectionPool(
                dsn, **pool_options(config, "durable_graph"), open=True
            )
        except Exception as exc:
            raise ProcessingError(f"could not open a connection pool: {exc}") from exc
        try:
            # Its first connection made before the first call: a call that waited for it would
            # make the pool open a second one, and a pool hands its connections out in turn, so
            # one client's calls would alternate between two server processes (issue 38).
            pool.wait(config.connection_timeout.total_seconds())
        except Exception as exc:
            pool.close()
            raise ProcessingError(f"could not open a connection pool: {exc}") from exc
        # On a proxy nothing is notified (the partitions notify): waiters and idle workers poll.
        return cls(Executor(pool, config, owns_pool=True), None if proxy else dsn)

    @classmethod
    def create(
        cls, pool: ConnectionPool[Any], config: PostgresConfig | None = None
    ) -> PostgresCheckpointer:
        """A store on the caller's pool, which it never closes (SPEC §8 rule 29).

        The calls are bounded by the pool's own timeout (waiting for a connection) and by
        ``call_timeout`` on the client; for the server-side bound, create the pool with
        ``kwargs=config.connection_kwargs()``.
        """
        config = _check_create(pool, config, ConnectionPool)
        proxy = False
        if config.auto_migrate:
            proxy = _prepare_schema(_pool_dsn(pool), config)
        else:
            from durable_graph.postgres import migrations

            try:
                with pool.connection() as conn:
                    migrations.verify(conn, config.schema)
                    proxy = migrations.kind(conn, config.schema) == "proxy"
            except StoreError:
                raise
            except Exception as exc:
                raise ProcessingError(f"could not verify schema {config.schema!r}: {exc}") from exc
        return cls(Executor(pool, config, owns_pool=False), None if proxy else _pool_dsn(pool))

    @property
    def run_queue(self) -> PostgresRunQueue:
        return self._run_queue

    def prune_all(self, policy: RetentionPolicy, batch: int = 1000) -> PruneResult:
        """Prune every thread, ``batch`` threads per transaction (rule 16); the totals."""
        batches = PruneAll(self._config, policy, batch)
        while (call := batches.next_call()) is not None:
            batches.record(self._x.run(call))
        return batches.result

    def await_events_after(
        self,
        thread_id: str,
        after_seq: int,
        timeout: timedelta,
        watch: WatchPolicy = WatchPolicy(),
    ) -> list[Event]:
        """Events as soon as there are some: read every ``watch.poll_interval``, and at once when
        notified (SPEC §11); ``[]`` at the wall-clock timeout (D21)."""
        check_await_events(thread_id, after_seq, timeout, watch)
        return poll(
            lambda: self.events_after(thread_id, after_seq),
            bool,
            timeout,
            watch.poll_interval.total_seconds(),
            self._changes,
            ("events", thread_id),
        )

    def subscribe(
        self, thread_id: str, after_seq: int = 0, watch: WatchPolicy = WatchPolicy()
    ) -> Iterator[Event]:
        """Every event after ``after_seq``, forever, polling when caught up (rule 8 on close)."""
        check_subscribe(thread_id, after_seq, watch)
        every = watch.poll_interval.total_seconds()
        self._x.check_open()
        return follow(
            lambda seq: self.events_after(thread_id, seq),
            after_seq,
            every,
            self._x.check_open,
            self._changes,
            thread_id,
        )

    # --- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Close the store (and its own pool, never a caller's); idempotent (rule 8)."""
        if self._changes is not None:
            self._changes.close()
        self._x.close()


__all__ = [
    "CheckpointerParts",
    "PostgresCheckpointer",
    "PostgresRunQueue",
    "PruneAll",
    "StoreParts",
]
