-- durable_graph schema, version 1: every table, sequence and index of a store.
-- Applied with search_path set to the store's schema: names are unqualified on purpose.
-- DDL only; the functions that read and write these tables live in sql/ (see sql/README.md).

-- Fencing tokens of claims and leases: one counter for the whole store, never reused (D3).
CREATE SEQUENCE fencing_token_seq AS bigint START WITH 1 INCREMENT BY 1 NO CYCLE;

-- The order in which threads made their first commit (children are listed in it).
CREATE SEQUENCE thread_first_commit_seq AS bigint START WITH 1 INCREMENT BY 1 NO CYCLE;

-- One row per thread id ever claimed, committed, submitted to or deleted. The row survives
-- delete_thread as a tombstone: last_seq keeps counting, live goes false.
CREATE TABLE threads (
    thread_id          text COLLATE "C" PRIMARY KEY,
    live               boolean NOT NULL DEFAULT false,  -- has a commit, not deleted since
    last_seq           bigint NOT NULL DEFAULT 0,        -- last event number (kept on delete)
    parent_thread_id   text COLLATE "C",                 -- from the first commit
    head_id            text,                             -- NULL when all were retracted
    created_at         timestamptz,                      -- store time of the first commit
    updated_at         timestamptz,                      -- store time last_seq last moved
    first_commit_order bigint,                           -- thread_first_commit_seq
    claim_token        bigint,                           -- current claim; NULL when none
    claim_holder       text,
    claim_expires_at   timestamptz,
    claim_ttl          interval
);
-- children(thread_id): live threads by parent, in first-commit order.
CREATE INDEX threads_children_idx ON threads (parent_thread_id, first_commit_order)
    WHERE live AND parent_thread_id IS NOT NULL;

CREATE TABLE checkpoints (
    thread_id     text COLLATE "C" NOT NULL,
    checkpoint_id text NOT NULL,
    seq           bigint NOT NULL,      -- number of its store.checkpoint event
    parent_id     text,
    run_id        text NOT NULL,
    state         text NOT NULL,        -- JSON text
    metadata      text NOT NULL,        -- JSON text
    next          text[] NOT NULL,
    created_at    timestamptz NOT NULL,
    committed_at  timestamptz NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_id)
);
-- head / history (newest first) / keep_last: by (thread, seq).
CREATE UNIQUE INDEX checkpoints_seq_idx ON checkpoints (thread_id, seq);
-- latest_of_runs, RunIdTaken, evidence: by (thread, run_id, seq).
CREATE INDEX checkpoints_run_idx ON checkpoints (thread_id, run_id, seq);

CREATE TABLE pending_writes (
    thread_id     text COLLATE "C" NOT NULL,
    checkpoint_id text NOT NULL,
    task_id       text COLLATE "C" NOT NULL,
    channel       text COLLATE "C" NOT NULL,
    idx           integer NOT NULL,     -- position in the put_writes call
    value         text NOT NULL,        -- JSON text
    written_order bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (thread_id, checkpoint_id, task_id, channel, idx)
);

CREATE TABLE events (
    thread_id    text COLLATE "C" NOT NULL,
    seq          bigint NOT NULL,
    kind         text NOT NULL,
    payload      text NOT NULL,         -- JSON text
    run_id       text,
    created_at   timestamptz NOT NULL,
    committed_at timestamptz NOT NULL,
    PRIMARY KEY (thread_id, seq)
);
-- retention by age.
CREATE INDEX events_committed_idx ON events (thread_id, committed_at);

CREATE TABLE effects (
    thread_id   text COLLATE "C" NOT NULL,
    key         text NOT NULL,
    value       text NOT NULL,          -- JSON text
    run_id      text,
    recorded_at timestamptz NOT NULL,
    PRIMARY KEY (thread_id, key)
);

-- Run queue ----------------------------------------------------------------------------------

CREATE TABLE queue_entries (
    entry_id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant           text,
    thread_id        text COLLATE "C" NOT NULL,
    key              text,
    input            text NOT NULL,     -- canonical JSON text (sorted keys)
    mode             text NOT NULL CHECK (mode IN ('enqueue', 'reject', 'interrupt')),
    max_attempts     integer NOT NULL CHECK (max_attempts >= 1),
    attempt_count    integer NOT NULL DEFAULT 0,
    admitted         boolean NOT NULL DEFAULT false,
    thread_deleted   boolean NOT NULL DEFAULT false,
    submitted_at     timestamptz NOT NULL,
    lease_token      bigint,            -- current lease; NULL when none
    lease_holder     text,
    lease_expires_at timestamptz,
    lease_ttl        interval,
    outcome_kind     text CHECK (outcome_kind IN ('completed', 'failed', 'cancelled', 'interrupted')),
    outcome_detail   text,              -- JSON text
    closed_at        timestamptz,
    closed_at_seq    bigint,
    -- Queue order inside a thread: attempted first, then INTERRUPT, then the rest (by entry id).
    queue_rank       smallint GENERATED ALWAYS AS (
                         CASE WHEN attempt_count > 0 THEN 0
                              WHEN mode = 'interrupt' THEN 1
                              ELSE 2 END) STORED
);
-- A thread's open entries in queue order (its head first).
CREATE INDEX queue_entries_open_idx ON queue_entries (thread_id, queue_rank, entry_id)
    WHERE outcome_kind IS NULL;
-- submit: the key of a kept entry, per tenant (NULL tenant is a tenant of its own).
CREATE UNIQUE INDEX queue_entries_key_idx ON queue_entries (tenant, key) NULLS NOT DISTINCT
    WHERE key IS NOT NULL;
-- reclaim: closed entries by closing time.
CREATE INDEX queue_entries_closed_idx ON queue_entries (closed_at, entry_id)
    WHERE outcome_kind IS NOT NULL;
-- delete_thread marks / cancel scans: every entry of a thread.
CREATE INDEX queue_entries_thread_idx ON queue_entries (thread_id, entry_id);

CREATE TABLE queue_attempts (
    entry_id   bigint NOT NULL REFERENCES queue_entries (entry_id) ON DELETE CASCADE,
    number     integer NOT NULL,
    thread_id  text COLLATE "C" NOT NULL,
    run_id     text NOT NULL,
    started_at timestamptz NOT NULL,
    PRIMARY KEY (entry_id, number)
);
-- RunIdTaken, commit's admission marks and RunOfDeletedThread: attempts of a thread by run id.
CREATE INDEX queue_attempts_run_idx ON queue_attempts (thread_id, run_id);

-- One row per thread that ever had an entry: its current head and lease, kept up to date by
-- every queue function (under this row's lock). lease selection reads only this table.
CREATE TABLE queue_threads (
    thread_id        text COLLATE "C" PRIMARY KEY,
    head_entry_id    bigint,            -- NULL when no open entry
    head_tenant      text,
    lease_expires_at timestamptz        -- expiry of the thread's current lease, if any
);
-- lease(tenant=ANY) and open_entries: threads by their head's entry id.
CREATE INDEX queue_threads_head_idx ON queue_threads (head_entry_id)
    WHERE head_entry_id IS NOT NULL;
-- lease(tenant=...): per tenant.
CREATE INDEX queue_threads_tenant_head_idx ON queue_threads (head_tenant, head_entry_id)
    WHERE head_entry_id IS NOT NULL;

-- Bookkeeping of durable_graph.postgres.migrations: version and digest of the functions.
CREATE TABLE schema_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);
