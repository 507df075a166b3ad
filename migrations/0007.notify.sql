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
-- Applied with search_path set to the store's schema: names are unqualified on purpose.

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

-- events: one row trigger; a commit appending several events notifies once (dedup).
CREATE OR REPLACE FUNCTION _dg_notify_events() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM watchers w
                WHERE w.kind = 'events' AND w.key = NEW.thread_id
                  AND w.expires_at > pg_catalog.now()) THEN
        PERFORM pg_catalog.pg_notify(TG_TABLE_SCHEMA, 'events');
    END IF;
    RETURN NULL;
END;
$$;

-- queue: a submit (or a batch of them) may give idle workers work.
CREATE OR REPLACE FUNCTION _dg_notify_queue() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM watchers w
                WHERE w.kind = 'queue' AND w.expires_at > pg_catalog.now()) THEN
        PERFORM pg_catalog.pg_notify(TG_TABLE_SCHEMA, 'queue');
    END IF;
    RETURN NULL;
END;
$$;

-- An entry closed (await_closed), or closed or released with another open entry on its thread
-- (idle workers: the thread's next head may now be leased).
CREATE OR REPLACE FUNCTION _dg_notify_entry() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF NEW.outcome_kind IS NOT NULL
       AND EXISTS (SELECT 1 FROM watchers w
                    WHERE w.kind = 'closed' AND w.key = NEW.entry_id::text
                      AND w.expires_at > pg_catalog.now()) THEN
        PERFORM pg_catalog.pg_notify(TG_TABLE_SCHEMA, 'closed');
    END IF;
    IF EXISTS (SELECT 1 FROM watchers w
                WHERE w.kind = 'queue' AND w.expires_at > pg_catalog.now())
       AND (NEW.outcome_kind IS NULL
            OR EXISTS (SELECT 1 FROM queue_entries e
                        WHERE e.thread_id = NEW.thread_id AND e.outcome_kind IS NULL)) THEN
        PERFORM pg_catalog.pg_notify(TG_TABLE_SCHEMA, 'queue');
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION _dg_notify_events();

CREATE TRIGGER queue_submitted_notify AFTER INSERT ON queue_entries
    FOR EACH STATEMENT EXECUTE FUNCTION _dg_notify_queue();

-- Closed, or its lease given back while open (release; an expired lease ended by a lease).
CREATE TRIGGER queue_entry_notify AFTER UPDATE ON queue_entries
    FOR EACH ROW
    WHEN ((OLD.outcome_kind IS NULL AND NEW.outcome_kind IS NOT NULL)
          OR (NEW.outcome_kind IS NULL AND OLD.lease_token IS NOT NULL
              AND NEW.lease_token IS NULL))
    EXECUTE FUNCTION _dg_notify_entry();
