"""PostgreSQL specifics of delayed runs (SPEC §13, D60): a delayed thread is kept where lease's
index-bounded pick never walks it, and a backoff is one SQL function call."""

from __future__ import annotations

from datetime import timedelta

import psycopg
from psycopg import sql

from durable_graph import Submission
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig

TTL = timedelta(seconds=30)


def test_delayed_threads_stay_out_of_the_unleased_index_until_due(
    pg_dsn: str, pg_schema: str
) -> None:
    store = PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=pg_schema))
    try:
        queue = store.run_queue
        probe = queue.submit(Submission("probe", None)).entry_id
        start = queue.entry(probe).submitted_at  # type: ignore[union-attr]
        queue.cancel(probe)
        for i in range(50):
            queue.submit(Submission(f"later-{i}", i, not_before=start + timedelta(hours=1)))
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_schema)))
            # The predicate of threads_lease_idx: no delayed thread is in it ...
            unleased = conn.execute(
                "SELECT count(*) FROM threads"
                " WHERE head_entry_id IS NOT NULL AND lease_expires_at IS NULL"
            ).fetchone()
            # ... and each sits in threads_delayed_idx at its head's not_before, where the
            # pick's range scan (lease_expires_at <= now) stops before it.
            due = conn.execute(
                "SELECT count(*) FROM threads q JOIN queue_entries e"
                " ON e.entry_id = q.head_entry_id WHERE q.lease_expires_at = e.not_before"
                " AND q.lease_until IS NULL"
            ).fetchone()
        assert unleased == (0,) and due == (50,)
        assert queue.lease("w", TTL) is None
        now = queue.submit(Submission("now", "go")).entry_id
        lease = queue.lease("w", TTL, run_id="run-1")
        assert lease is not None and lease.entry.entry_id == now
        # A backoff is one call; the thread goes back to the expiry index until then.
        deferred = queue.defer(lease, timedelta(minutes=10), error="boom")
        assert deferred.not_before is not None and deferred.attempts[0].error == "boom"
        assert queue.lease("w", TTL) is None
    finally:
        store.close()
