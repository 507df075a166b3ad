-- durable_graph schema, version 16 (issue 38, SPEC §21; D222): a lease writes its entry's row
-- as a HOT update — a new row version on the same page and no index entry — where it wrote one
-- into each of the entry's seven indexes. A lease changes only columns no index of
-- queue_entries reads: what the indexes read of the lease moves to the thread's queue row,
-- which a lease writes anyway, and the queue order stops moving on an attempt.
-- Applied with search_path set to the store's schema: names are unqualified on purpose.
-- IF [NOT] EXISTS: applying it again (sql/install.sql while migration numbers settle) changes
-- nothing.

-- The thread's lease on its queue row (a thread holds at most one lease token: a lease ends
-- every other entry's): which entry holds it, until when, and that entry's kind and tenant, kept
-- by every queue function with the entry's own lease columns (_dg_refresh_queue_thread). The
-- concurrency limits count live leases from here (SPEC §15), and a lease finds the thread's
-- current lease here instead of in an index over the thread's entries.
ALTER TABLE queue_threads ADD COLUMN IF NOT EXISTS lease_entry_id bigint,
                          ADD COLUMN IF NOT EXISTS lease_until timestamptz,
                          ADD COLUMN IF NOT EXISTS lease_kind text,
                          ADD COLUMN IF NOT EXISTS lease_tenant text;
UPDATE queue_threads q
   SET lease_entry_id = l.entry_id, lease_until = l.lease_expires_at, lease_kind = l.kind,
       lease_tenant = l.tenant
  FROM (SELECT DISTINCT ON (e.thread_id) e.thread_id, e.entry_id, e.lease_expires_at, e.kind,
               e.tenant
          FROM queue_entries e
         WHERE e.outcome_kind IS NULL AND e.lease_token IS NOT NULL
         ORDER BY e.thread_id, e.lease_expires_at DESC, e.entry_id DESC) l
 WHERE q.thread_id = l.thread_id AND q.lease_entry_id IS NULL;
-- The live leases of a kind and of a named tenant, counted at lease time for their limits
-- (they replace queue_entries_leased_kind_idx and queue_entries_leased_named_tenant_idx).
CREATE INDEX IF NOT EXISTS queue_threads_leased_kind_idx ON queue_threads (lease_kind, lease_until)
    WHERE lease_until IS NOT NULL;
CREATE INDEX IF NOT EXISTS queue_threads_leased_tenant_idx
    ON queue_threads (lease_tenant, lease_until)
    WHERE lease_until IS NOT NULL AND lease_tenant IS NOT NULL;
DROP INDEX IF EXISTS queue_entries_leased_idx;
DROP INDEX IF EXISTS queue_entries_leased_kind_idx;
DROP INDEX IF EXISTS queue_entries_leased_named_tenant_idx;

-- Queue order (attempted, then INTERRUPT, then the rest) without a rank that moves on every
-- first attempt: queue_rank is now written by the queue functions — 1 for an INTERRUPT, 2 for
-- the rest at submit, 0 when an attempted entry could otherwise be passed (an INTERRUPT
-- submitted behind it, an attempt recorded on an entry that is not the head). An attempted
-- entry is its thread's head (only a head is leased), and only an INTERRUPT can come before an
-- older entry, so the order read is the order the generated column gave.
ALTER TABLE queue_entries ALTER COLUMN queue_rank DROP EXPRESSION IF EXISTS;
ALTER TABLE queue_entries ALTER COLUMN queue_rank SET NOT NULL;
-- INTERRUPT submit's open INTERRUPT entries of the thread: its predicate no longer reads
-- attempt_count (the few attempted ones are filtered at the row).
DROP INDEX IF EXISTS queue_entries_open_interrupt_idx;
CREATE INDEX IF NOT EXISTS queue_entries_open_interrupt_idx ON queue_entries (thread_id, entry_id)
    WHERE outcome_kind IS NULL AND mode = 'interrupt';
-- Room on each page for an entry's next row version, so that a lease's update stays HOT.
ALTER TABLE queue_entries SET (fillfactor = 80);
