"""The worker registry for the embedded stores, over a `Storage` (as ``sql/86_workers.sql`` on
PostgreSQL; `durable_graph.core.workers`)."""

from __future__ import annotations

from datetime import timedelta

from durable_graph.core.workers import (
    FORGET_AFTER,
    SEEN_WITHIN,
    WorkerBeat,
    WorkerSeen,
    check_beat,
    check_seen_within,
    check_workers_page,
)
from durable_graph.embedded.storage import Storage


class EmbeddedWorkers:
    """`RunQueue.worker_heartbeat` and `RunQueue.workers` of `EmbeddedRunQueue`."""

    _storage: Storage

    def worker_heartbeat(self, beat: WorkerBeat) -> WorkerSeen:
        b = check_beat(beat)
        with self._storage.write() as tx:
            old = tx.worker_row(b.holder)
            row = WorkerSeen(
                b.holder, b.host, b.pid, b.kinds, b.state,
                tx.now if old is None else old.started_at, tx.now,
            )  # fmt: skip
            tx.forget_workers(tx.now - FORGET_AFTER)
            tx.put_worker_row(row)
            return row

    def workers(
        self, seen_within: timedelta = SEEN_WITHIN, after: str | None = None, limit: int = 1000
    ) -> list[WorkerSeen]:
        bound = check_seen_within(seen_within)
        page_after, page_limit = check_workers_page(after, limit)
        with self._storage.read() as tx:
            return tx.worker_rows(tx.now - bound, page_after, page_limit)
