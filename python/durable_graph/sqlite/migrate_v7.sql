-- From schema version 7 to version 8 (issue 26 item 13; migrations/0012.workers.sql): the worker
-- registry, one row per worker holder, written by its heartbeats. Runs in open's write
-- transaction, after schema.sql on a new file. Statements are separated by lines holding only ';'.

-- kinds: a JSON array of the kinds served, NULL for every kind; times in microseconds (UTC).
CREATE TABLE workers (
    holder     TEXT PRIMARY KEY,
    host       TEXT NOT NULL,
    pid        INTEGER NOT NULL,
    kinds      TEXT,
    state      TEXT NOT NULL CHECK (state IN ('idle', 'busy', 'stopped')),
    started_at INTEGER NOT NULL,
    last_seen  INTEGER NOT NULL
) WITHOUT ROWID
;
-- workers(): the rows seen since a bound; a beat drops the rows not seen for a day.
CREATE INDEX workers_last_seen_idx ON workers (last_seen)
