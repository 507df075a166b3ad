-- durable_graph schema, version 21: thread TTLs (SPEC §24.1, issue 47; D259-D261).
-- Applied with search_path set to the store's schema: names are unqualified on purpose. The
-- functions over it are in sql/48_thread_ttl.sql.
--
-- A table of its own, not columns of threads: the hot path (commit, submit, lease, close)
-- never writes it (a row's due_at is a lower bound the sweep moves on), and a threads row's
-- HOT updates stay as they were. first_commit_order names the incarnation of the thread the
-- TTL was set on: a deleted and re-made thread has another, so its old row is void without
-- the delete touching it. Idempotent (IF NOT EXISTS), as each migration an install re-reads.
CREATE TABLE IF NOT EXISTS thread_ttls (
    thread_id          text COLLATE "C" PRIMARY KEY,
    minutes            double precision NOT NULL,
    strategy           text NOT NULL CHECK (strategy IN ('delete', 'keep_latest')),
    first_commit_order bigint NOT NULL,
    set_at             timestamptz NOT NULL,
    due_at             timestamptz NOT NULL,
    swept_at           timestamptz
);
-- dg_sweep_threads_v1: the due rows, soonest first.
CREATE INDEX IF NOT EXISTS thread_ttls_due_idx ON thread_ttls (due_at, thread_id);
