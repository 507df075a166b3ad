-- durable_graph schema, version 3 (issue 12): per-call cost that stays flat as a store grows,
-- and durations stored as exact elapsed time.
-- Applied with search_path set to the store's schema: names are unqualified on purpose.

-- threads(): only live rows, so rows left by a claim with no commit or by a delete (tombstones)
-- are never walked.
CREATE INDEX threads_live_idx ON threads (thread_id) WHERE live;

-- lease: threads with an open entry and no lease, by head, so a lease never walks past the
-- threads holding a live lease; and leased threads by expiry, to find the expired ones.
CREATE INDEX queue_threads_unleased_idx ON queue_threads (head_entry_id)
    WHERE head_entry_id IS NOT NULL AND lease_expires_at IS NULL;
CREATE INDEX queue_threads_tenant_unleased_idx ON queue_threads (head_tenant, head_entry_id)
    WHERE head_entry_id IS NOT NULL AND lease_expires_at IS NULL;
CREATE INDEX queue_threads_expiry_idx ON queue_threads (lease_expires_at)
    WHERE head_entry_id IS NOT NULL AND lease_expires_at IS NOT NULL;

-- The thread's lease expiry (_dg_refresh_queue_thread's max, lease's live-lease check): only
-- the leased open entries, not the thread's whole backlog.
CREATE INDEX queue_entries_leased_idx ON queue_entries (thread_id, lease_expires_at)
    WHERE outcome_kind IS NULL AND lease_token IS NOT NULL;

-- INTERRUPT submit closes the thread's open INTERRUPT entries with no attempt: only those.
CREATE INDEX queue_entries_open_interrupt_idx ON queue_entries (thread_id, entry_id)
    WHERE outcome_kind IS NULL AND mode = 'interrupt' AND attempt_count = 0;

-- Durations taken before version 3 as calendar intervals ('1 day') become exact elapsed time.
UPDATE threads SET claim_ttl = make_interval(secs => extract(epoch FROM claim_ttl))
 WHERE claim_ttl IS NOT NULL;
UPDATE queue_entries SET lease_ttl = make_interval(secs => extract(epoch FROM lease_ttl))
 WHERE lease_ttl IS NOT NULL;
