"""`PostgresCheckpointer` and `PostgresRunQueue`: the sync PostgreSQL stores (SPEC §4-§6).

Each public method builds one `Call` (`durable_graph.postgres.calls`: validation, the SQL function
call, the decoder) and runs it with the store's `Executor` (`durable_graph.postgres.connection`:
pooled connection, autocommit, time bound, error mapping). The logic — locking, ordering,
fencing, time — lives in the SQL functions (``sql/``, documented in ``sql/README.md``).

Only ``prune_all`` may issue several calls: one per batch of threads, each batch its own
transaction (SPEC §8 rule 16). ``await_events_after``, ``subscribe`` and ``await_closed`` poll,
woken early by LISTEN/NOTIFY (`durable_graph.postgres.notify`: one listener connection per store).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Self

import psycopg
from psycopg_pool import ConnectionPool

from ..errors import ProcessingError, StoreError, ValidationError
from ..listing import EntryState
from ..model import (
    ANY,
    AttemptBegun,
    AttemptStart,
    Checkpoint,
    Claim,
    ClaimPolicy,
    Commit,
    EffectRecord,
    EntryOutcome,
    Event,
    EventIn,
    Lease,
    PendingWrite,
    PruneResult,
    QueueEntry,
    QueueStats,
    RetentionPolicy,
    Submission,
    TenantFilter,
    ThreadInfo,
    Ticket,
    WatchPolicy,
)
from ..observe import TraceContext
from ..polling import follow, poll
from ..validation import (
    check_duration,
    check_identifier,
    check_int,
    check_optional_identifier,
    check_watch,
)
from . import calls, operating
from .config import PostgresConfig
from .connection import Executor
from .notify import Listener

AWAIT_CLOSED_POLL = timedelta(milliseconds=100)
"""How often `await_closed` reads the entry."""

_NOT_LIBPQ = {"autocommit", "prepare_threshold", "row_factory", "cursor_factory", "context"}


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

    def submit(self, submission: Submission) -> Ticket:
        return self._x.run(calls.submit(self._config, submission))

    def submit_many(self, submissions: Sequence[Submission]) -> list[Ticket]:
        call = calls.submit_many(self._config, submissions)
        return [] if call is None else self._x.run(call)

    def lease(
        self,
        holder: str,
        ttl: timedelta,
        tenant: TenantFilter = ANY,
        run_id: str | None = None,
    ) -> Lease | None:
        return self._x.run(calls.lease(self._config, holder, ttl, tenant, run_id))

    def renew(self, lease: Lease, ttl: timedelta | None = None) -> Lease:
        return self._x.run(calls.renew(self._config, lease, ttl))

    def release(self, lease: Lease) -> None:
        self._x.run(calls.release(self._config, lease))

    def record_attempt(self, lease: Lease, run_id: str) -> AttemptStart:
        return self._x.run(calls.record_attempt(self._config, lease, run_id))

    def close(self, lease: Lease, outcome: EntryOutcome) -> QueueEntry:
        return self._x.run(calls.close(self._config, lease, outcome))

    def cancel(self, entry_id: int, tenant: str | None = None) -> QueueEntry:
        return self._x.run(calls.cancel(self._config, entry_id, tenant))

    def defer(self, lease: Lease, delay: timedelta, error: str | None = None) -> QueueEntry:
        return self._x.run(operating.defer(self._config, lease, delay, error))

    def retry(self, entry_id: int, tenant: str | None = None) -> Ticket:
        return self._x.run(operating.retry(self._config, entry_id, tenant))

    def entry(self, entry_id: int, tenant: str | None = None) -> QueueEntry | None:
        return self._x.run(calls.entry(self._config, entry_id, tenant))

    def open_entries(
        self,
        tenant: TenantFilter = None,
        thread_id: str | None = None,
        after: int | None = None,
        limit: int = 1000,
    ) -> list[QueueEntry]:
        return self._x.run(calls.open_entries(self._config, tenant, thread_id, after, limit))

    def entries(
        self,
        state: EntryState | None = None,
        tenant: TenantFilter = ANY,
        thread_id: str | None = None,
        after: int | None = None,
        limit: int = 100,
    ) -> list[QueueEntry]:
        return self._x.run(calls.entries(self._config, state, tenant, thread_id, after, limit))

    def stats(self, tenant: TenantFilter = ANY) -> QueueStats:
        return self._x.run(calls.stats(self._config, tenant))

    def set_trace_context(self, entry_id: int, context: TraceContext) -> bool:
        """Remember the trace ``context`` ``entry_id`` was submitted in (the first one stays)."""
        return self._x.run(calls.set_trace_context(self._config, entry_id, context))

    def trace_context(self, entry_id: int) -> TraceContext | None:
        return self._x.run(calls.trace_context(self._config, entry_id))

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

    def reclaim(self, older_than: timedelta, batch: int = 1000) -> int:
        """Remove at most ``batch`` closed entries, oldest closed first, in one transaction."""
        return self._x.run(calls.reclaim(self._config, older_than, batch))


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

    # --- claims ---------------------------------------------------------------------------

    def claim(self, thread_id: str, holder: str, policy: ClaimPolicy = ClaimPolicy()) -> Claim:
        return self._x.run(calls.claim(self._config, thread_id, holder, policy))

    def renew_claim(self, claim: Claim) -> Claim:
        return self._x.run(calls.renew_claim(self._config, claim))

    def release_claim(self, claim: Claim) -> None:
        self._x.run(calls.release_claim(self._config, claim))

    # --- the worker fast path (SPEC §11): one SQL function call each -------------------------

    def begin_attempt(
        self,
        holder: str,
        ttl: timedelta,
        *,
        run_id: str,
        claim_policy: ClaimPolicy = ClaimPolicy(),
        tenant: TenantFilter = ANY,
    ) -> AttemptBegun | None:
        return self._x.run(
            calls.begin_attempt(self._config, holder, ttl, run_id, claim_policy, tenant)
        )

    def renew_attempt(self, lease: Lease, claim: Claim) -> tuple[Lease, Claim]:
        return self._x.run(calls.renew_attempt(self._config, lease, claim))

    def finish_attempt(self, lease: Lease, outcome: EntryOutcome, claim: Claim) -> QueueEntry:
        return self._x.run(calls.finish_attempt(self._config, lease, outcome, claim))

    # --- writes ---------------------------------------------------------------------------

    def commit(self, claim: Claim, commit: Commit) -> Checkpoint:
        return self._x.run(calls.commit(self._config, claim, commit))

    def put_writes(self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite]) -> None:
        self._x.run(calls.put_writes(self._config, claim, checkpoint_id, writes))

    def append_events(
        self, claim: Claim, events: Sequence[EventIn], run_id: str | None = None
    ) -> list[Event]:
        return self._x.run(calls.append_events(self._config, claim, events, run_id))

    def record_effect(
        self, claim: Claim, key: str, value: object, run_id: str | None = None
    ) -> EffectRecord:
        return self._x.run(calls.record_effect(self._config, claim, key, value, run_id))

    def retract_turn(self, claim: Claim) -> Checkpoint | None:
        return self._x.run(calls.retract_turn(self._config, claim))

    def prune(self, thread_id: str, policy: RetentionPolicy) -> PruneResult:
        return self._x.run(calls.prune(self._config, thread_id, policy))

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

    def delete_thread(self, thread_id: str, fence: Claim | None = None) -> bool:
        return self._x.run(calls.delete_thread(self._config, thread_id, fence))

    def put_writes_fenced(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite], fence: Claim
    ) -> None:
        self._x.run(calls.put_writes_fenced(self._config, claim, checkpoint_id, writes, fence))

    def search(
        self,
        thread_id: str,
        metadata: dict[str, object],
        before: str | None = None,
        limit: int = 100,
    ) -> list[Checkpoint]:
        return self._x.run(calls.search(self._config, thread_id, metadata, before, limit))

    def put_writes_and_commit(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite], commit: Commit
    ) -> Checkpoint:
        return self._x.run(
            calls.put_writes_and_commit(self._config, claim, checkpoint_id, writes, commit)
        )

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        return self._x.run(calls.delete_runs(self._config, run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> bool:
        return self._x.run(calls.copy_thread(self._config, source_thread_id, target_thread_id))

    # --- reads ----------------------------------------------------------------------------

    def get(self, thread_id: str, checkpoint_id: str | None = None) -> Checkpoint | None:
        return self._x.run(calls.get(self._config, thread_id, checkpoint_id))

    def history(
        self, thread_id: str, before: str | None = None, limit: int = 100
    ) -> list[Checkpoint]:
        return self._x.run(calls.history(self._config, thread_id, before, limit))

    def latest_of_runs(self, thread_id: str, run_ids: Sequence[str]) -> Checkpoint | None:
        return self._x.run(calls.latest_of_runs(self._config, thread_id, run_ids))

    def thread(self, thread_id: str) -> ThreadInfo | None:
        return self._x.run(calls.thread(self._config, thread_id))

    def threads(self, after: str | None = None, limit: int = 100) -> list[ThreadInfo]:
        return self._x.run(calls.threads(self._config, after, limit))

    def children(self, thread_id: str, after: str | None = None, limit: int = 1000) -> list[str]:
        return self._x.run(calls.children(self._config, thread_id, after, limit))

    def events_after(self, thread_id: str, after_seq: int, limit: int = 1000) -> list[Event]:
        return self._x.run(calls.events_after(self._config, thread_id, after_seq, limit))

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

    def get_effect(self, thread_id: str, key: str) -> EffectRecord | None:
        return self._x.run(calls.get_effect(self._config, thread_id, key))

    def effects(
        self, thread_id: str, after: str | None = None, limit: int = 100
    ) -> list[EffectRecord]:
        return self._x.run(calls.effects(self._config, thread_id, after, limit))

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
