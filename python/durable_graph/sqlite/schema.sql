-- durable_graph SQLite schema, version 2 (PRAGMA user_version): the tables and columns of
-- migrations/0001.tables.sql, in SQLite's types. Timestamps and durations are integer
-- microseconds (since the epoch); JSON values are text; booleans are 0/1.
-- Statements are separated by lines holding only ';'.

-- SQLite has no sequences: fencing_token_seq (claims and leases, D3) and
-- thread_first_commit_seq (the order children are listed in) are rows here.
CREATE TABLE counters (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID
;
INSERT INTO counters (name, value) VALUES ('fencing_token_seq', 0), ('thread_first_commit_seq', 0)
;
-- One row per thread id ever claimed, committed or deleted. The row survives delete_thread as a
-- tombstone: last_seq keeps counting, live goes 0.
CREATE TABLE threads (
    thread_id          TEXT PRIMARY KEY,
    live               INTEGER NOT NULL DEFAULT 0,
    last_seq           INTEGER NOT NULL DEFAULT 0,
    parent_thread_id   TEXT,
    head_id            TEXT,
    created_at         INTEGER,
    updated_at         INTEGER,
    first_commit_order INTEGER,
    claim_token        INTEGER,
    claim_holder       TEXT,
    claim_expires_at   INTEGER,
    claim_ttl          INTEGER
) WITHOUT ROWID
;
CREATE INDEX threads_children_idx ON threads (parent_thread_id, first_commit_order)
    WHERE live AND parent_thread_id IS NOT NULL
;
CREATE TABLE checkpoints (
    thread_id     TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    seq           INTEGER NOT NULL,
    parent_id     TEXT,
    run_id        TEXT NOT NULL,
    state         TEXT NOT NULL,
    metadata      TEXT NOT NULL,
    next          TEXT NOT NULL,    -- JSON array (PostgreSQL: text[])
    created_at    INTEGER NOT NULL,
    committed_at  INTEGER NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_id)
) WITHOUT ROWID
;
CREATE UNIQUE INDEX checkpoints_seq_idx ON checkpoints (thread_id, seq)
;
CREATE INDEX checkpoints_run_idx ON checkpoints (thread_id, run_id, seq)
;
-- written_order keeps the order of ties of (task_id, idx) (rule 12).
CREATE TABLE pending_writes (
    thread_id     TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    task_id       TEXT NOT NULL,
    channel       TEXT NOT NULL,
    idx           INTEGER NOT NULL,
    value         TEXT NOT NULL,
    written_order INTEGER PRIMARY KEY,
    -- LangGraph's task_path (schema version 5): reads order by (task_path, task_id, idx).
    task_path     TEXT NOT NULL DEFAULT '',
    UNIQUE (thread_id, checkpoint_id, task_id, channel, idx)
)
;
CREATE TABLE events (
    thread_id    TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    payload      TEXT NOT NULL,
    run_id       TEXT,
    created_at   INTEGER NOT NULL,
    committed_at INTEGER NOT NULL,
    PRIMARY KEY (thread_id, seq)
) WITHOUT ROWID
;
CREATE INDEX events_committed_idx ON events (thread_id, committed_at)
;
CREATE TABLE effects (
    thread_id   TEXT NOT NULL,
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    run_id      TEXT,
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (thread_id, key)
) WITHOUT ROWID
;
-- Run queue. AUTOINCREMENT: an entry id is never reused, even after reclaim.
CREATE TABLE queue_entries (
    entry_id         INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant           TEXT,
    thread_id        TEXT NOT NULL,
    key              TEXT,
    input            TEXT NOT NULL,
    mode             TEXT NOT NULL CHECK (mode IN ('enqueue', 'reject', 'interrupt')),
    max_attempts     INTEGER NOT NULL CHECK (max_attempts >= 1),
    attempt_count    INTEGER NOT NULL DEFAULT 0,
    admitted         INTEGER NOT NULL DEFAULT 0,
    thread_deleted   INTEGER NOT NULL DEFAULT 0,
    submitted_at     INTEGER NOT NULL,
    lease_token      INTEGER,
    lease_holder     TEXT,
    lease_expires_at INTEGER,
    lease_ttl        INTEGER,
    outcome_kind     TEXT,
    outcome_detail   TEXT,
    closed_at        INTEGER,
    closed_at_seq    INTEGER,
    not_before       INTEGER,  -- no lease before (delayed run, backoff; schema version 3)
    retry_of         INTEGER,
    -- Queue order inside a thread: attempted first, then INTERRUPT, then the rest (by entry id).
    queue_rank       INTEGER GENERATED ALWAYS AS (
                         CASE WHEN attempt_count > 0 THEN 0
                              WHEN mode = 'interrupt' THEN 1
                              ELSE 2 END) STORED
)
;
CREATE INDEX queue_entries_open_idx ON queue_entries (thread_id, queue_rank, entry_id)
    WHERE outcome_kind IS NULL
;
-- submit: the key of a kept entry, per tenant (not UNIQUE: SQLite's NULLs are distinct).
CREATE INDEX queue_entries_key_idx ON queue_entries (key, tenant) WHERE key IS NOT NULL
;
CREATE INDEX queue_entries_closed_idx ON queue_entries (closed_at, entry_id)
    WHERE outcome_kind IS NOT NULL
;
CREATE INDEX queue_entries_thread_idx ON queue_entries (thread_id, entry_id)
;
-- lease: the one entry of a thread holding a lease (live or expired), found without a scan.
CREATE INDEX queue_entries_lease_idx ON queue_entries (thread_id) WHERE lease_token IS NOT NULL
;
CREATE TABLE queue_attempts (
    entry_id   INTEGER NOT NULL,
    number     INTEGER NOT NULL,
    thread_id  TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    error      TEXT,
    PRIMARY KEY (entry_id, number)
) WITHOUT ROWID
;
CREATE INDEX queue_attempts_run_idx ON queue_attempts (thread_id, run_id)
;
-- One row per thread that ever had an entry: its current head and lease, kept up to date by
-- every queue write. lease reads only this table (and the head row it picks).
CREATE TABLE queue_threads (
    thread_id        TEXT PRIMARY KEY,
    head_entry_id    INTEGER,
    head_tenant      TEXT,
    lease_expires_at INTEGER
) WITHOUT ROWID
;
CREATE INDEX queue_threads_head_idx ON queue_threads (head_entry_id)
    WHERE head_entry_id IS NOT NULL
;
CREATE INDEX queue_threads_tenant_head_idx ON queue_threads (head_tenant, head_entry_id)
    WHERE head_entry_id IS NOT NULL
;
-- The W3C trace context a submission was made in (issue 17; same table as PostgreSQL's
-- migrations/0005.queue_listing.sql). Removed with its entry (reclaim).
CREATE TABLE queue_trace_context (
    entry_id    INTEGER PRIMARY KEY,
    traceparent TEXT NOT NULL,
    tracestate  TEXT
)
