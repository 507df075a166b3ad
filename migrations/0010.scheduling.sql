-- durable_graph schema (SPEC §15, issue 27): priorities and kinds of entries, concurrency limits
-- per tenant and per kind, cron schedules. Applied with search_path set to the store's schema:
-- names are unqualified on purpose. The functions are in sql/70_lease.sql (the pick) and
-- sql/72_scheduling.sql.

ALTER TABLE queue_entries ADD COLUMN IF NOT EXISTS priority integer NOT NULL DEFAULT 0,
                          ADD COLUMN IF NOT EXISTS kind text NOT NULL DEFAULT 'default';

-- The head's priority and kind beside its id (_dg_refresh_queue_thread keeps them), so that a
-- lease picks from queue_threads alone. head_priority_key is minus the head's priority: the
-- ascending index order is the lease order (highest priority first, then oldest), and a row
-- comparison (key, head) < (k, h) bounds an index scan.
ALTER TABLE queue_threads ADD COLUMN IF NOT EXISTS head_priority_key integer,
                          ADD COLUMN IF NOT EXISTS head_kind text;
UPDATE queue_threads q
   SET head_priority_key = -e.priority, head_kind = e.kind
  FROM queue_entries e
 WHERE e.entry_id = q.head_entry_id;

-- lease: unleased threads in lease order — any tenant, per tenant, per kind (a lease with
-- both a tenant and kinds walks its kinds' index past other tenants' heads). They replace the
-- version-3 unleased indexes, which ordered by head alone.
CREATE INDEX IF NOT EXISTS queue_threads_lease_idx
    ON queue_threads (head_priority_key, head_entry_id)
    WHERE head_entry_id IS NOT NULL AND lease_expires_at IS NULL;
CREATE INDEX IF NOT EXISTS queue_threads_tenant_lease_idx
    ON queue_threads (head_tenant, head_priority_key, head_entry_id)
    WHERE head_entry_id IS NOT NULL AND lease_expires_at IS NULL;
CREATE INDEX IF NOT EXISTS queue_threads_kind_lease_idx
    ON queue_threads (head_kind, head_priority_key, head_entry_id)
    WHERE head_entry_id IS NOT NULL AND lease_expires_at IS NULL;
DROP INDEX IF EXISTS queue_threads_unleased_idx;
DROP INDEX IF EXISTS queue_threads_tenant_unleased_idx;

-- Concurrency limits: the live leases of a tenant or a kind, counted at lease time (at most
-- max_leases rows read).
CREATE INDEX IF NOT EXISTS queue_entries_leased_tenant_idx
    ON queue_entries (tenant, lease_expires_at)
    WHERE outcome_kind IS NULL AND lease_token IS NOT NULL;
CREATE INDEX IF NOT EXISTS queue_entries_leased_kind_idx
    ON queue_entries (kind, lease_expires_at)
    WHERE outcome_kind IS NULL AND lease_token IS NOT NULL;

-- One row per limit. A lease locks the rows of its candidate's tenant and kind (FOR UPDATE,
-- kind before tenant) before it counts their live leases, so two leases of one tenant never
-- both see room for one more (sql/72_scheduling.sql, _dg_lease_limits).
CREATE TABLE IF NOT EXISTS queue_limits (
    scope      text NOT NULL CHECK (scope IN ('tenant', 'kind')),
    name       text COLLATE "C" NOT NULL,
    max_leases integer NOT NULL CHECK (max_leases >= 0),
    PRIMARY KEY (scope, name)
);

-- Named cron schedules. cron and timezone are checked by the callers' cron library (the SQL
-- checks their shape and that the time zone is known); last_slot is the newest slot submitted
-- (dg_fire_schedule_v1 moves it forward only, so each slot is submitted at most once).
CREATE TABLE IF NOT EXISTS schedules (
    name         text COLLATE "C" PRIMARY KEY,
    cron         text NOT NULL,
    timezone     text NOT NULL,
    thread_id    text COLLATE "C" NOT NULL,
    input        text NOT NULL,          -- canonical JSON text
    kind         text NOT NULL,
    tenant       text,
    priority     integer NOT NULL,
    max_attempts integer NOT NULL CHECK (max_attempts >= 1),
    catch_up     boolean NOT NULL,
    paused       boolean NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL,
    last_slot    timestamptz
);
