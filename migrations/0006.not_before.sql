-- durable_graph schema, version 8 (SPEC §13, issue 16): delayed runs and retry backoff
-- (not_before), retries of closed entries (retry_of), and why each attempt failed (error).
-- Applied with search_path set to the store's schema: names are unqualified on purpose.
--
-- No new index: a delayed head is kept out of lease's way through queue_threads, whose
-- lease_expires_at now holds when the thread can next be leased, the later of its lease's
-- expiry and its head's not_before (_dg_refresh_queue_thread). A delayed thread sits in the
-- expiry index, never in the unleased one, so _dg_lease_pick stays index-bounded unchanged.
ALTER TABLE queue_entries ADD COLUMN IF NOT EXISTS not_before timestamptz,
                          ADD COLUMN IF NOT EXISTS retry_of bigint;
-- error: the attempt's failure reason as a JSON string (JSON text, as outcome_detail: it
-- carries any str, U+0000 included, which a text column cannot).
ALTER TABLE queue_attempts ADD COLUMN IF NOT EXISTS error text;
