-- durable_graph schema, version 18 (issue 38, SPEC §21; D224): the thread's queue row becomes
-- part of the thread's row. A thread had two rows, each with its lock: its threads row (the
-- checkpointer's: head checkpoint, claim, event count) and its queue_threads row (the run
-- queue's: head entry, lease), and a one-step job wrote the queue row three times (inserted at
-- submit, leased at begin, deleted at finish) beside the thread row's two writes at begin and
-- finish. On one row, begin's claim and lease are one write and finish's head and claim
-- release and the queue head's move are one: a job writes one row version, one index entry and
-- about half a KiB of WAL less, and every queue function takes one lock less. Lock order
-- everywhere becomes: threads row, then queue_entries rows.
-- Applied with search_path set to the store's schema: names are unqualified on purpose.
-- IF [NOT] EXISTS: applying it again (sql/install.sql while migration numbers settle) changes
-- nothing.

-- The queue columns, as queue_threads had them (migrations 0001, 0010, 0016, 0017). head_* name
-- the thread's head *entry* (its queue head; head_entry_id NULL: no open entry), head_id its
-- head checkpoint: the heads of its two histories. head_priority_key is minus the head's
-- priority (lease order); lease_expires_at is when the thread can next be leased: its lease's
-- expiry, or a delayed head's not_before (NULL: now). lease_* are the thread's one lease (a
-- lease ends every other entry's): which entry holds it, until when, its token, holder and
-- ttl, and that entry's kind and tenant (the concurrency limits count them). All NULL when the
-- thread has no open entry: the row is kept, where the queue row was deleted (a thread row is
-- never deleted).
ALTER TABLE threads ADD COLUMN IF NOT EXISTS head_entry_id bigint,
                    ADD COLUMN IF NOT EXISTS head_tenant text,
                    ADD COLUMN IF NOT EXISTS head_priority_key integer,
                    ADD COLUMN IF NOT EXISTS head_kind text,
                    ADD COLUMN IF NOT EXISTS lease_expires_at timestamptz,
                    ADD COLUMN IF NOT EXISTS lease_entry_id bigint,
                    ADD COLUMN IF NOT EXISTS lease_until timestamptz,
                    ADD COLUMN IF NOT EXISTS lease_token bigint,
                    ADD COLUMN IF NOT EXISTS lease_holder text,
                    ADD COLUMN IF NOT EXISTS lease_ttl interval,
                    ADD COLUMN IF NOT EXISTS lease_kind text,
                    ADD COLUMN IF NOT EXISTS lease_tenant text;

-- The queue rows moved onto the thread rows (inserted where the thread had none: a thread
-- submitted to and never leased). Only while queue_threads still exists.
DO $$
BEGIN
    IF pg_catalog.to_regclass('queue_threads') IS NOT NULL THEN
        INSERT INTO threads AS t (thread_id, head_entry_id, head_tenant, head_priority_key,
                                  head_kind, lease_expires_at, lease_entry_id, lease_until,
                                  lease_token, lease_holder, lease_ttl, lease_kind, lease_tenant)
        SELECT q.thread_id, q.head_entry_id, q.head_tenant, q.head_priority_key, q.head_kind,
               q.lease_expires_at, q.lease_entry_id, q.lease_until, q.lease_token,
               q.lease_holder, q.lease_ttl, q.lease_kind, q.lease_tenant
          FROM queue_threads q
         WHERE q.head_entry_id IS NOT NULL
        ON CONFLICT (thread_id) DO UPDATE
           SET head_entry_id = EXCLUDED.head_entry_id, head_tenant = EXCLUDED.head_tenant,
               head_priority_key = EXCLUDED.head_priority_key, head_kind = EXCLUDED.head_kind,
               lease_expires_at = EXCLUDED.lease_expires_at,
               lease_entry_id = EXCLUDED.lease_entry_id, lease_until = EXCLUDED.lease_until,
               lease_token = EXCLUDED.lease_token, lease_holder = EXCLUDED.lease_holder,
               lease_ttl = EXCLUDED.lease_ttl, lease_kind = EXCLUDED.lease_kind,
               lease_tenant = EXCLUDED.lease_tenant;
        DROP TABLE queue_threads;
    END IF;
END;
$$;

-- The queue_threads indexes, on the thread rows (their predicates hold only threads with an
-- open entry, so the checkpointer's threads cost them nothing). lease: unleased threads in
-- lease order — any tenant, per named tenant, per kind. A head of no tenant is in the first
-- only: a lease of the no-tenant namespace alone (tenant=None, not ANY: a worker configured so;
-- every worker and `serve` lease ANY by default) reads it past the named tenants' heads that
-- come first, where queue_threads_tenant_lease_idx held every head (its NULL-tenant entries
-- were most submits' index entry a lease of ANY never reads).
CREATE INDEX IF NOT EXISTS threads_lease_idx ON threads (head_priority_key, head_entry_id)
    WHERE head_entry_id IS NOT NULL AND lease_expires_at IS NULL;
CREATE INDEX IF NOT EXISTS threads_tenant_lease_idx
    ON threads (head_tenant, head_priority_key, head_entry_id)
    WHERE head_entry_id IS NOT NULL AND lease_expires_at IS NULL AND head_tenant IS NOT NULL;
CREATE INDEX IF NOT EXISTS threads_kind_lease_idx
    ON threads (head_kind, head_priority_key, head_entry_id)
    WHERE head_entry_id IS NOT NULL AND lease_expires_at IS NULL;
-- Every lease, by expiry: the pick finds the expired ones here (_dg_due_threads), and the
-- concurrency limits count a kind's live leases here (_dg_limit_full: a walk of the live
-- leases, as many as the store's running attempts). It replaces the expiry index of migration
-- 0003, which also held the delayed heads (so a count over it could walk every delayed entry),
-- and the leased-kind index of migration 0016: a lease writes one index entry where it wrote
-- two.
CREATE INDEX IF NOT EXISTS threads_leases_idx ON threads (lease_until)
    WHERE lease_until IS NOT NULL;
-- The unleased threads whose head is delayed (SPEC §13), by when they come due.
CREATE INDEX IF NOT EXISTS threads_delayed_idx ON threads (lease_expires_at)
    WHERE head_entry_id IS NOT NULL AND lease_until IS NULL AND lease_expires_at IS NOT NULL;
-- The live leases of a named tenant, counted at lease time for its limit (a lease of no tenant,
-- which no limit names, writes no entry here).
CREATE INDEX IF NOT EXISTS threads_leased_tenant_idx ON threads (lease_tenant, lease_until)
    WHERE lease_until IS NOT NULL AND lease_tenant IS NOT NULL;

-- An attempt's foreign key to its entry: its check ran on every attempt (a nested statement and
-- a row lock, a WAL record, on the entry) to guard what the functions already guarantee under
-- the thread row's lock, which every writer of a thread's entries and attempts holds: an
-- attempt is inserted only for an open entry, and an entry with attempts is deleted only by
-- dg_reclaim_v1, which deletes the attempts in the same statement (its ON DELETE CASCADE).
ALTER TABLE queue_attempts DROP CONSTRAINT IF EXISTS queue_attempts_entry_id_fkey;
