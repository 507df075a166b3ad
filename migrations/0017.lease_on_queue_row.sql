-- durable_graph schema, version 17 (issue 38, SPEC §21; D223): a lease writes nothing to its
-- entry's row. The thread's queue row, which a lease writes anyway, becomes the lease's one
-- home: its token, holder and ttl join what migration 0016 put there (which entry holds it,
-- until when, its kind and tenant); a thread holds at most one lease token (a lease ends every
-- other entry's), so the lease of entry E is the queue row's lease when lease_entry_id = E. An
-- entry's attempt count is the number of its last attempt (queue_attempts, a backward probe of
-- its primary key). A job writes one row version less: the entry's HOT lease update.
-- Applied with search_path set to the store's schema: names are unqualified on purpose.
-- IF [NOT] EXISTS: applying it again (sql/install.sql while migration numbers settle) changes
-- nothing.

ALTER TABLE queue_threads ADD COLUMN IF NOT EXISTS lease_token bigint,
                          ADD COLUMN IF NOT EXISTS lease_holder text,
                          ADD COLUMN IF NOT EXISTS lease_ttl interval;

-- The lease the entry columns held, moved (lease_entry_id already names its entry: migration
-- 0016, kept by every queue function since). Only while the entry columns still exist.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                WHERE a.attrelid = 'queue_entries'::regclass AND a.attname = 'lease_token'
                  AND NOT a.attisdropped) THEN
        UPDATE queue_threads q
           SET lease_token = e.lease_token, lease_holder = e.lease_holder,
               lease_ttl = e.lease_ttl, lease_until = e.lease_expires_at
          FROM queue_entries e
         WHERE e.entry_id = q.lease_entry_id AND e.outcome_kind IS NULL
           AND e.lease_token IS NOT NULL;
        -- A queue row naming an entry that no longer holds a token holds no lease.
        UPDATE queue_threads q
           SET lease_entry_id = NULL, lease_until = NULL, lease_kind = NULL,
               lease_tenant = NULL
         WHERE q.lease_entry_id IS NOT NULL AND q.lease_token IS NULL;
    END IF;
END;
$$;

-- Dropped, so that a reader left behind fails loudly instead of reading a stale copy. The entry
-- trigger's condition read lease_token: sql/77_notify.sql creates it again without it (a lease
-- ended without a close wakes idle workers from the functions that end it).
DROP TRIGGER IF EXISTS queue_entry_notify ON queue_entries;
ALTER TABLE queue_entries DROP COLUMN IF EXISTS lease_token,
                          DROP COLUMN IF EXISTS lease_holder,
                          DROP COLUMN IF EXISTS lease_expires_at,
                          DROP COLUMN IF EXISTS lease_ttl,
                          DROP COLUMN IF EXISTS attempt_count;
