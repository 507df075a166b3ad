"""`PostgresCheckpointer` and `PostgresRunQueue`: the sync PostgreSQL stores (SPEC §4-§6).

Each public method builds one `Call` (`durable_graph.postgres.calls`: validation, the SQL function
call, the decoder) and runs it with the store's `Executor` (`durable_graph.postgres.connection`:
pooled connection, autocommit, time bound, error mapping). The logic — locking, ordering,
fencing, time — lives in the SQL functions (``sql/``, documented in ``sql/README.md``).

The one-call methods are derived, not written out: ``commit = sql_call(Checkpointer.commit,
calls.commit)`` takes its signature from the Protocol (`durable_graph.surface`) and its work
from the builder. Written by hand: ``prune_all``, which may issue several calls (one per batch
of threads, each batch its own transaction, SPEC §8 rule 16); ``submit_many`` (an empty list
issues none); ``await_events_after``, ``subscribe`` and ``await_closed``, which poll, woken
early by LISTEN/NOTIFY (`durable_graph.postgres.notify`: one listener connection per store).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Protocol, Self, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from ..checkpointer import Checkpointer
from ..errors import ProcessingError, StoreError, ValidationError
from ..model import Event, PruneResult, QueueEntry, RetentionPolicy, Submission, Ticket, WatchPolicy
from ..polling import follow, poll
from ..run_queue import RunQueue
from ..surface import TraceContexts, arguments_of, derived
from ..validation import (
    check_duration,
    check_identifier,
    check_int,
    check_optional_identifier,
    check_watch,
)
from . import calls, operating
from .calls import Call
from .config import PostgresConfig
from .connection import Executor
from .notify import Listener

P = ParamSpec("P")
R = TypeVar("R")

AWAIT_CLOSED_POLL = timedelta(milliseconds=100)
"""How often `await_closed` reads the entry."""

_NOT_LIBPQ = {"autocommit", "prepare_threshold", "row_factory", "cursor_factory", "context"}


class _SqlStore(Protocol):
    _x: Executor
    _config: PostgresConfig


def sql_call(
    method: Callable[Concatenate[Any, P], R], build: Callable[..., Call[R]]
) -> Callable[Concatenate[_SqlStore, P], R]:
    """The Protocol's ``method`` as one SQL function call: its builder ``build`` (called with
    the config and every argument, in order, defaults applied), run by the store's executor."""
    complete = arguments_of(method)

    def call(self: _SqlStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._x.run(build(self._config, *complete(args, kwargs)))

    return derived(call, method, build)


def sql_parts(method: Callable[..., Any]) -> tuple[Callable[..., Any], Callable[..., Call[Any]]]:
    """The Protocol method and the builder a `sql_call` method was derived from (the async
    store derives its own from them: `durable_graph.aio.postgres.async_sql_call`)."""
    return vars(method)["__wrapped__"], vars(method)["sql_builder"]


def _check_config(config: object) -> PostgresConfig:
    if not isinstance(config, PostgresConfig):
        raise ValidationError(f"config must be a PostgresConfig, got {type(config).__name__}")
    return config


def _prepare_schema(dsn: str, config: PostgresConfig) -> None:
    """Migrate (auto_migrate) or verify the schema (SPEC §8 rule 28) before the store opens."""
    from . import migrations

    try:
        if config.auto_migrate:
            migrations.migrate(dsn, config.schema, config)
        else:
            try:
                conn = psycopg.connect(dsn, **config.connection_kwargs())
            except psycopg.OperationalError as exc:  # unreachable, refused login, bad password
                raise ProcessingError(f"could not connect to PostgreSQL: {exc}") from exc
            with conn:
                migrations.verify(conn, config.schema)
    except StoreError:
        raise
    except Exception as exc:
        raise ProcessingError(f"could not prepare schema {config.schema!r}: {exc}") from exc


def _pool_dsn(pool: ConnectionPool[Any]) -> str:
    kwargs = pool.kwargs() if callable(pool.kwargs) else pool.kwargs
    conninfo = pool.conninfo() if callable(pool.conninfo) else pool.conninfo
    extra = {k: v for k, v in (kwargs or {}).items() if k not in _NOT_LIBPQ}
    return psycopg.conninfo.make_conninfo(conninfo, **extra)


class PostgresRunQueue:
    """The run queue of a `PostgresCheckpointer`, in the same schema (SPEC §5)."""

    def __init__(self, executor: Executor, changes: Listener | None = None) -> None:
        self._x = executor
        self._config = executor.config
        self._changes = changes

    submit = sql_call(RunQueue.submit, calls.submit)

    def submit_many(self, submissions: Sequence[Submission]) -> list[Ticket]:
        call = calls.submit_many(self._config, submissions)
        return [] if call is None else self._x.run(call)

    lease = sql_call(RunQueue.lease, calls.lease)
    renew = sql_call(RunQueue.renew, calls.renew)
    release = sql_call(RunQueue.release, calls.release)
    record_attempt = sql_call(RunQueue.record_attempt, calls.record_attempt)
    close = sql_call(RunQueue.close, calls.close)
    cancel = sql_call(RunQueue.cancel, calls.cancel)
    defer = sql_call(RunQueue.defer, operating.defer)
    retry = sql_call(RunQueue.retry, operating.retry)
    entry = sql_call(RunQueue.entry, calls.entry)
    open_entries = sql_call(RunQueue.open_entries, calls.open_entries)
    entries = sql_call(RunQueue.entries, calls.entries)
    stats = sql_call(RunQueue.stats, calls.stats)
    set_trace_context = sql_call(TraceContexts.set_trace_context, calls.set_trace_context)
    trace_context = sql_call(TraceContexts.trace_context, calls.trace_context)
    reclaim = sql_call(RunQueue.reclaim, calls.reclaim)

    def await_closed(
        self, entry_id: int, timeout: timedelta, tenant: str | None = None
    ) -> QueueEntry | None:
        """Poll the entry every 100 ms, at once when notified it closed (SPEC §11); None if open
        at the wall-clock timeout (D21, rule 23)."""
        check_int("entry_id", entry_id, minimum=0)
        check_duration("timeout", timeout, allow_zero=True)
        check_optional_identifier("tenant", tenant)
        found = poll(
            lambda: self._x.run(calls.entry(self._config, entry_id, tenant)),
            lambda e: e is None or e.closed,
            timeout,
            AWAIT_CLOSED_POLL.total_seconds(),
            self._changes,
            ("closed", str(entry_id)),
        )
        return found if found is not None and found.closed else None


class PostgresCheckpointer:
    """The PostgreSQL Checkpointer: one SQL function call per method (SPEC §4, §6)."""

    def __init__(self, executor: Executor, conninfo: str | None = None) -> None:
        """Use `open` or `create`. ``conninfo``: where the notification listener connects
        (None: no notifications, waiters poll)."""
        self._x = executor
        self._config = executor.config
        self._changes = None if conninfo is None else Listener(conninfo, executor.config)
        self._run_queue = PostgresRunQueue(executor, self._changes)

    @property
    def changes(self) -> Listener | None:
        """The store's LISTEN/NOTIFY listener (SPEC §11), for waiters and idle workers."""
        return self._changes

    @classmethod
    def open(cls, dsn: str, config: PostgresConfig | None = None) -> PostgresCheckpointer:
        """A store with its own pool on ``dsn``; migrates the schema, or verifies it."""
        config = _check_config(PostgresConfig() if config is None else config)
        if not isinstance(dsn, str):
            raise ValidationError(f"dsn must be a str, got {type(dsn).__name__}")
        _prepare_schema(dsn, config)
        try:
            pool: ConnectionPool[Any] = ConnectionPool(
                dsn,
                min_size=1,
                max_size=config.max_pool_size,
                kwargs=config.connection_kwargs(),
                timeout=config.connection_timeout.total_seconds(),
                name=f"durable_graph:{config.schema}",
                open=True,
            )
        except Exception as exc:
            raise ProcessingError(f"could not open a connection pool: {exc}") from exc
        return cls(Executor(pool, config, owns_pool=True), dsn)

    @classmethod
    def create(
        cls, pool: ConnectionPool[Any], config: PostgresConfig | None = None
    ) -> PostgresCheckpointer:
        """A store on the caller's pool, which it never closes (SPEC §8 rule 29).

        The calls are bounded by the pool's own timeout (waiting for a connection) and by
        ``call_timeout`` on the client; for the server-side bound, create the pool with
        ``kwargs=config.connection_kwargs()``.
        """
        config = _check_config(PostgresConfig() if config is None else config)
        if not isinstance(pool, ConnectionPool):
            raise ValidationError(
                f"pool must be a psycopg_pool.ConnectionPool, got {type(pool).__name__}"
            )
        if config.auto_migrate:
            _prepare_schema(_pool_dsn(pool), config)
        else:
            from . import migrations

            try:
                with pool.connection() as conn:
                    migrations.verify(conn, config.schema)
            except StoreError:
                raise
            except Exception as exc:
                raise ProcessingError(f"could not verify schema {config.schema!r}: {exc}") from exc
        return cls(Executor(pool, config, owns_pool=False), _pool_dsn(pool))

    @property
    def config(self) -> PostgresConfig:
        return self._config

    @property
    def run_queue(self) -> PostgresRunQueue:
        return self._run_queue

    claim = sql_call(Checkpointer.claim, calls.claim)
    renew_claim = sql_call(Checkpointer.renew_claim, calls.renew_claim)
    release_claim = sql_call(Checkpointer.release_claim, calls.release_claim)
    begin_attempt = sql_call(Checkpointer.begin_attempt, calls.begin_attempt)
    renew_attempt = sql_call(Checkpointer.renew_attempt, calls.renew_attempt)
    finish_attempt = sql_call(Checkpointer.finish_attempt, calls.finish_attempt)
    commit = sql_call(Checkpointer.commit, calls.commit)
    put_writes = sql_call(Checkpointer.put_writes, calls.put_writes)
    append_events = sql_call(Checkpointer.append_events, calls.append_events)
    record_effect = sql_call(Checkpointer.record_effect, calls.record_effect)
    retract_turn = sql_call(Checkpointer.retract_turn, calls.retract_turn)
    prune = sql_call(Checkpointer.prune, calls.prune)
    delete_thread = sql_call(Checkpointer.delete_thread, calls.delete_thread)
    put_writes_fenced = sql_call(Checkpointer.put_writes_fenced, calls.put_writes_fenced)
    put_writes_and_commit = sql_call(
        Checkpointer.put_writes_and_commit, calls.put_writes_and_commit
    )
    delete_runs = sql_call(Checkpointer.delete_runs, calls.delete_runs)
    copy_thread = sql_call(Checkpointer.copy_thread, calls.copy_thread)
    get = sql_call(Checkpointer.get, calls.get)
    history = sql_call(Checkpointer.history, calls.history)
    latest_of_runs = sql_call(Checkpointer.latest_of_runs, calls.latest_of_runs)
    search = sql_call(Checkpointer.search, calls.search)
    thread = sql_call(Checkpointer.thread, calls.thread)
    threads = sql_call(Checkpointer.threads, calls.threads)
    children = sql_call(Checkpointer.children, calls.children)
    events_after = sql_call(Checkpointer.events_after, calls.events_after)
    get_effect = sql_call(Checkpointer.get_effect, calls.get_effect)
    effects = sql_call(Checkpointer.effects, calls.effects)

    def prune_all(self, policy: RetentionPolicy, batch: int = 1000) -> PruneResult:
        """Prune every thread, ``batch`` threads per transaction (rule 16); the totals."""
        _, size = calls.check_prune_all(policy, batch)
        checkpoints = events = 0
        after: str | None = None
        while True:
            step = self._x.run(calls.prune_batch(self._config, policy, size, after))
            checkpoints += step.result.checkpoints_removed
            events += step.result.events_removed
            if step.threads_seen < size:
                return PruneResult(checkpoints, events)
            # A step that ran out of its row budget inside its first thread resumes there.
            if step.last_thread_id is not None:
                after = step.last_thread_id

    def await_events_after(
        self,
        thread_id: str,
        after_seq: int,
        timeout: timedelta,
        watch: WatchPolicy = WatchPolicy(),
    ) -> list[Event]:
        """Events as soon as there are some: read every ``watch.poll_interval``, and at once when
        notified (SPEC §11); ``[]`` at the wall-clock timeout (D21)."""
        check_identifier("thread_id", thread_id)
        calls.check_after_seq(after_seq)
        check_duration("timeout", timeout, allow_zero=True)
        return poll(
            lambda: self.events_after(thread_id, after_seq),
            bool,
            timeout,
            check_watch(watch).poll_interval.total_seconds(),
            self._changes,
            ("events", thread_id),
        )

    def subscribe(
        self, thread_id: str, after_seq: int = 0, watch: WatchPolicy = WatchPolicy()
    ) -> Iterator[Event]:
        """Every event after ``after_seq``, forever, polling when caught up (rule 8 on close)."""
        check_identifier("thread_id", thread_id)
        calls.check_after_seq(after_seq)
        every = check_watch(watch).poll_interval.total_seconds()
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

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = ["PostgresCheckpointer", "PostgresRunQueue"]
