-- durable_graph schema (issue 26 item 13): the worker registry, one row per worker holder,
-- written by its heartbeats (dg_worker_heartbeat_v1) and read by dg_workers_v1, so a worker
-- that holds no lease can be seen. Applied with search_path set to the store's schema: names are
-- unqualified on purpose. The functions are in sql/86_workers.sql.

-- kinds: the kinds the worker serves (NULL: every kind). Times at the store's clock.
CREATE TABLE IF NOT EXISTS workers (
    holder     text PRIMARY KEY,
    host       text NOT NULL,
    pid        integer NOT NULL,
    kinds      text[],
    state      text NOT NULL CHECK (state IN ('idle', 'busy', 'stopped')),
    started_at timestamptz NOT NULL,
    last_seen  timestamptz NOT NULL
);
-- dg_workers_v1: the rows seen since a bound; a beat drops the rows not seen for a day.
CREATE INDEX IF NOT EXISTS workers_last_seen_idx ON workers (last_seen);
