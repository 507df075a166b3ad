"""D13 retention on one thread for the embedded stores (``prune``, ``prune_all``, and the TTL
sweep's ``keep_latest``): ``sql/40_retract_prune_delete.sql``'s prune of one thread over a
storage's `Tx`, in the caller's write transaction."""

from __future__ import annotations

from durable_graph.core.model import PruneResult, RetentionPolicy
from durable_graph.embedded.storage import Tx


def prune_thread(tx: Tx, thread_id: str, policy: RetentionPolicy) -> PruneResult:
    """D13 (keep the head, evidence, keep_last and the young) on one thread, in the caller's
    transaction."""
    thread = tx.thread(thread_id)
    if thread is None:
        return PruneResult(0, 0)
    cutoff = None if policy.max_age is None else tx.now - policy.max_age
    newest_first = tx.checkpoints_newest_first(thread_id)
    keep = {thread.head_id}
    if policy.keep_last is not None:
        keep.update(r.checkpoint_id for r in newest_first[: policy.keep_last])
    # Evidence: for each run id an open entry of the thread recorded, that run's newest checkpoint.
    runs = tx.open_attempt_runs(thread_id)
    evidence: dict[str, str] = {}
    for row in newest_first:
        if row.run_id in runs and row.run_id not in evidence:
            evidence[row.run_id] = row.checkpoint_id
    keep.update(evidence.values())
    removed = [
        r
        for r in newest_first
        if r.checkpoint_id not in keep and (cutoff is None or r.committed_at < cutoff)
    ]
    for row in removed:
        tx.remove_checkpoint(thread_id, row.checkpoint_id)
    if removed:  # a kept checkpoint whose parent was removed has none (SPEC §14.1)
        tx.orphan(thread_id, [r.checkpoint_id for r in removed])
    events_removed = 0 if cutoff is None else tx.drop_events_before(thread_id, cutoff)
    return PruneResult(len(removed), events_removed)


__all__ = ["prune_thread"]
