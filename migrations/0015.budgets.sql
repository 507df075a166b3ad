-- durable_graph schema, version 15 (issue 38, SPEC §21): no index entry a reader does not use.
-- Applied with search_path set to the store's schema: names are unqualified on purpose.
-- IF EXISTS: applying it again (sql/install.sql while migration numbers settle) changes nothing.

-- queue_threads_head_idx (head_entry_id, migration 0001): no statement reads it any more — the
-- lease picks from the lease-order indexes of migration 0010 and the expiry index, and
-- open_entries walks queue_entries_listing_idx (migration 0009) — yet every submit to an idle
-- thread and every lease wrote an entry into it: two a job.
DROP INDEX IF EXISTS queue_threads_head_idx;
