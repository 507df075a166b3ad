-- durable_graph schema: change notifications (SPEC §11). A store's waiters — idle workers,
-- await_events_after, subscribe, await_closed — LISTEN on the channel named like the schema
-- and read the store again when woken; they still poll at their interval, so a notification
-- lost or never sent only delays them.
--
-- Coalesced: a change notifies only while someone waits for it. Each store's listener keeps
-- its waiters' interests in `watchers` (dg_watch_v1): 'events' of a thread, 'closed' of an
-- entry, 'queue' (idle workers). A write whose change nobody watches sends nothing, so under
-- load NOTIFY (whose commit-time lock would serialise the writers' WAL flushes) is not paid;
-- and PostgreSQL sends one notification per distinct (channel, payload) per transaction. The
-- payload is the kind alone — 'events', 'queue' or 'closed' — never a thread, entry or tenant.
-- The trigger functions and triggers are in sql/77_notify.sql (functions are installed, and
-- verified, from sql/). Applied with search_path set to the store's schema: names are
-- unqualified on purpose.

-- What the listeners of this schema wait for. Unlogged: a registration is not worth an fsync
-- and a crash forgets it (listeners register again within a heartbeat). A row counts until
-- expires_at: a listener that dies stops counting by itself.
CREATE UNLOGGED TABLE watchers (
    kind       text NOT NULL CHECK (kind IN ('events', 'closed', 'queue')),
    key        text COLLATE "C" NOT NULL,  -- thread id, entry id, '' for the queue
    listener   text NOT NULL,              -- the registering store's listener (a random id)
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (kind, key, listener)
);
