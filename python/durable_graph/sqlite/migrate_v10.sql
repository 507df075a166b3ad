-- From schema version 10 to version 11 (SPEC §24.1; migrations 0021.thread_ttl.sql): a thread's
-- TTL, one row per thread that has one. Runs in open's write transaction. Statements are
-- separated by lines holding only ';'.

-- first_commit_order: the incarnation of the thread the TTL was set on (a deleted and re-made
-- thread has another, so the row is void); times in microseconds (UTC); minutes REAL.
CREATE TABLE thread_ttls (
    thread_id          TEXT PRIMARY KEY,
    minutes            REAL NOT NULL,
    strategy           TEXT NOT NULL,
    first_commit_order INTEGER NOT NULL,
    set_at             INTEGER NOT NULL,
    due_at             INTEGER NOT NULL,
    swept_at           INTEGER
) WITHOUT ROWID
;
-- sweep_threads: the due rows, soonest first.
CREATE INDEX thread_ttls_due_idx ON thread_ttls (due_at, thread_id)
