-- From schema version 1 (tables named after the in-memory rows of before: claims, tombstones,
-- writes, entries, attempts) to version 2 (the names of migrations/0001.tables.sql).
-- Runs in open's write transaction after the version-1 tables were renamed v1_<name> and
-- schema.sql created the new ones: copies every row, then drops the old tables.
-- Statements are separated by lines holding only ';'.

UPDATE counters SET value = (SELECT value FROM v1_counters WHERE name = 'token')
    WHERE name = 'fencing_token_seq'
;
UPDATE counters SET value = (SELECT value FROM v1_counters WHERE name = 'first_commit')
    WHERE name = 'thread_first_commit_seq'
;
INSERT INTO threads (thread_id, live, last_seq, parent_thread_id, head_id, created_at,
                     updated_at, first_commit_order)
    SELECT thread_id, 1, last_seq, parent_thread_id, head_id, created_at, updated_at,
           first_commit_order
    FROM v1_threads
;
INSERT INTO threads (thread_id, live, last_seq) SELECT thread_id, 0, last_seq FROM v1_tombstones
;
INSERT INTO threads (thread_id, claim_token, claim_holder, claim_expires_at, claim_ttl)
    SELECT thread_id, token, holder, expires_at, ttl FROM v1_claims WHERE true
    ON CONFLICT (thread_id) DO UPDATE SET claim_token = excluded.claim_token,
        claim_holder = excluded.claim_holder, claim_expires_at = excluded.claim_expires_at,
        claim_ttl = excluded.claim_ttl
;
INSERT INTO checkpoints (thread_id, checkpoint_id, seq, parent_id, run_id, state, metadata, next,
                         created_at, committed_at)
    SELECT thread_id, checkpoint_id, seq, parent_id, run_id, state, metadata, next, created_at,
           committed_at
    FROM v1_checkpoints
;
INSERT INTO pending_writes (thread_id, checkpoint_id, task_id, channel, idx, value)
    SELECT thread_id, checkpoint_id, task_id, channel, idx, value FROM v1_writes ORDER BY rowid
;
INSERT INTO events SELECT thread_id, seq, kind, payload, run_id, created_at, committed_at
    FROM v1_events
;
INSERT INTO effects SELECT thread_id, key, value, run_id, recorded_at FROM v1_effects
;
INSERT INTO queue_entries (entry_id, tenant, thread_id, key, input, mode, max_attempts,
                           attempt_count, admitted, thread_deleted, submitted_at, lease_token,
                           lease_holder, lease_expires_at, lease_ttl, outcome_kind,
                           outcome_detail, closed_at, closed_at_seq)
    SELECT entry_id, tenant, thread_id, key, input, mode, max_attempts, attempt_count, admitted,
           thread_deleted, submitted_at, lease_token, lease_holder, lease_expires_at, lease_ttl,
           outcome_kind, outcome_detail, closed_at, closed_at_seq
    FROM v1_entries
;
-- Entry ids are never reused: carry the old AUTOINCREMENT high-water mark over.
DELETE FROM sqlite_sequence WHERE name = 'queue_entries'
;
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'queue_entries', max(seq) FROM sqlite_sequence WHERE name = 'v1_entries'
    HAVING count(*) > 0
;
INSERT INTO queue_attempts SELECT entry_id, number, thread_id, run_id, started_at
    FROM v1_attempts
;
INSERT INTO queue_threads (thread_id, head_entry_id, head_tenant, lease_expires_at)
    SELECT t.thread_id,
           (SELECT entry_id FROM queue_entries e
            WHERE e.thread_id = t.thread_id AND e.outcome_kind IS NULL
            ORDER BY e.queue_rank, e.entry_id LIMIT 1),
           (SELECT tenant FROM queue_entries e
            WHERE e.thread_id = t.thread_id AND e.outcome_kind IS NULL
            ORDER BY e.queue_rank, e.entry_id LIMIT 1),
           (SELECT max(lease_expires_at) FROM queue_entries e
            WHERE e.thread_id = t.thread_id AND e.lease_token IS NOT NULL)
    FROM (SELECT DISTINCT thread_id FROM queue_entries) AS t
;
DELETE FROM sqlite_sequence WHERE name = 'v1_entries'
;
DROP TABLE v1_counters
;
DROP TABLE v1_threads
;
DROP TABLE v1_claims
;
DROP TABLE v1_tombstones
;
DROP TABLE v1_checkpoints
;
DROP TABLE v1_writes
;
DROP TABLE v1_events
;
DROP TABLE v1_effects
;
DROP TABLE v1_entries
;
DROP TABLE v1_attempts
