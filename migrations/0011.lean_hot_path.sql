-- durable_graph schema, version 11 (issue 25, SPEC §18.2): no index entry a reader does not use.
-- Applied with search_path set to the store's schema: names are unqualified on purpose.
-- IF [NOT] EXISTS: applying it again (sql/install.sql while migration numbers settle) changes
-- nothing.

-- queue_threads_tenant_head_idx (head_tenant, head_entry_id, migration 0001): no statement
-- reads it — lease(tenant=...) picks from queue_threads_tenant_lease_idx (migration 0010) and
-- the expiry index, open_entries walks queue_threads_head_idx — yet every head or lease move of
-- a thread wrote an entry into it. (0010 already replaced the version-3 unleased indexes with
-- its lease-order ones; those are read by every lease and stay.)
DROP INDEX IF EXISTS queue_threads_tenant_head_idx;

-- One checkpoint index by run instead of two. (run_id, thread_id, seq) serves every reader of
-- the two it replaces: latest_of_runs' backward probe per run id (run_id = r AND thread_id = t
-- ORDER BY seq DESC), the attempt verdict's "run id names a checkpoint of the thread"
-- (RunIdTaken), retract_turn, and delete_runs by run id alone (its leading column; migration
-- 0004's reason). Each commit writes one entry into it, where it wrote one into each of two.
CREATE INDEX IF NOT EXISTS checkpoints_run_thread_idx ON checkpoints (run_id, thread_id, seq);
DROP INDEX IF EXISTS checkpoints_run_idx;
DROP INDEX IF EXISTS checkpoints_run_only_idx;

-- The live leases of a tenant, counted at lease time for its concurrency limit (migration 0010),
-- only ever for a named tenant (a limit names one: _dg_limit_full reads tenant = name), so the
-- index leaves out the entries of no tenant: a lease of one of those writes no entry into it.
CREATE INDEX IF NOT EXISTS queue_entries_leased_named_tenant_idx
    ON queue_entries (tenant, lease_expires_at)
    WHERE outcome_kind IS NULL AND lease_token IS NOT NULL AND tenant IS NOT NULL;
DROP INDEX IF EXISTS queue_entries_leased_tenant_idx;
