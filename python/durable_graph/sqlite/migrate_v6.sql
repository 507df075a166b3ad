-- From schema version 6 to version 7 (SPEC §15, issue 27; migrations/0010.scheduling.sql):
-- priorities and kinds of entries, concurrency limits, cron schedules. Runs in open's write
-- transaction, after schema.sql on a new file. Statements are separated by lines holding only ';'.

ALTER TABLE queue_entries ADD COLUMN priority INTEGER NOT NULL DEFAULT 0
;
ALTER TABLE queue_entries ADD COLUMN kind TEXT NOT NULL DEFAULT 'default'
;
-- The head's priority (as minus it: ascending order is the lease order, as on PostgreSQL) and
-- kind beside its id: lease reads only queue_threads to pick.
ALTER TABLE queue_threads ADD COLUMN head_priority_key INTEGER
;
ALTER TABLE queue_threads ADD COLUMN head_kind TEXT
;
UPDATE queue_threads SET head_priority_key = 0, head_kind = 'default'
 WHERE head_entry_id IS NOT NULL
;
-- lease: heads by priority (highest first), then entry id; per tenant too.
CREATE INDEX queue_threads_lease_idx ON queue_threads (head_priority_key, head_entry_id)
    WHERE head_entry_id IS NOT NULL
;
CREATE INDEX queue_threads_tenant_lease_idx
    ON queue_threads (head_tenant, head_priority_key, head_entry_id)
    WHERE head_entry_id IS NOT NULL
;
-- Concurrency limits: a tenant's or a kind's live leases, counted at lease time.
CREATE INDEX queue_entries_leased_tenant_idx ON queue_entries (tenant, lease_expires_at)
    WHERE lease_token IS NOT NULL
;
CREATE INDEX queue_entries_leased_kind_idx ON queue_entries (kind, lease_expires_at)
    WHERE lease_token IS NOT NULL
;
CREATE TABLE queue_limits (
    scope      TEXT NOT NULL CHECK (scope IN ('tenant', 'kind')),
    name       TEXT NOT NULL,
    max_leases INTEGER NOT NULL CHECK (max_leases >= 0),
    PRIMARY KEY (scope, name)
) WITHOUT ROWID
;
CREATE TABLE schedules (
    name         TEXT PRIMARY KEY,
    cron         TEXT NOT NULL,
    timezone     TEXT NOT NULL,
    thread_id    TEXT NOT NULL,
    input        TEXT NOT NULL,  -- canonical JSON
    kind         TEXT NOT NULL,
    tenant       TEXT,
    priority     INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    catch_up     INTEGER NOT NULL,
    paused       INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,  -- store time, microseconds
    last_slot    INTEGER            -- the newest submitted slot, microseconds
) WITHOUT ROWID
