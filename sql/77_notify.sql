-- Change notifications (SPEC §11; the watchers table is migrations/0007.notify.sql, whose
-- comment says what is sent when). The trigger functions are internal helpers, fired by the
-- dg_* functions' writes and by the owner's own maintenance DML (any search_path): each pins the
-- install's search_path (the schema, then pg_temp) with SET ... FROM CURRENT, so `watchers` and
-- `queue_entries` are the schema's own whoever fires them (issue #24).

-- events: one statement trigger over the rows a statement appended (a commit's events and its
-- store.checkpoint are one INSERT: one probe of watchers, SPEC §21, where a row trigger probed
-- once a row).
CREATE OR REPLACE FUNCTION _dg_notify_events() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM watchers w
                WHERE w.kind = 'events' AND w.key IN (SELECT a.thread_id FROM appended a)
                  AND w.expires_at > pg_catalog.now()) THEN
        PERFORM pg_catalog.pg_notify(TG_TABLE_SCHEMA, 'events');
    END IF;
    RETURN NULL;
END;
$$;

-- queue: a submit (or a batch of them) may give idle workers work.
CREATE OR REPLACE FUNCTION _dg_notify_queue() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM watchers w
                WHERE w.kind = 'queue' AND w.expires_at > pg_catalog.now()) THEN
        PERFORM pg_catalog.pg_notify(TG_TABLE_SCHEMA, 'queue');
    END IF;
    RETURN NULL;
END;
$$;

-- An entry closed (await_closed), and with another open entry on its thread idle workers too
-- (the thread's next head may now be leased). Who watches is one probe of watchers (SPEC §21);
-- the thread's other open entries are looked for only when idle workers do.
CREATE OR REPLACE FUNCTION _dg_notify_entry() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_closed boolean;
    v_queue boolean;
BEGIN
    SELECT coalesce(pg_catalog.bool_or(w.kind = 'closed'), false),
           coalesce(pg_catalog.bool_or(w.kind = 'queue'), false)
      INTO v_closed, v_queue
      FROM watchers w
     WHERE w.expires_at > pg_catalog.now()
       AND (w.kind = 'queue'
            OR (w.kind = 'closed' AND w.key = NEW.entry_id::text
                AND NEW.outcome_kind IS NOT NULL));
    IF v_closed THEN
        PERFORM pg_catalog.pg_notify(TG_TABLE_SCHEMA, 'closed');
    END IF;
    IF v_queue THEN
        IF EXISTS (SELECT 1 FROM queue_entries e
                    WHERE e.thread_id = NEW.thread_id AND e.outcome_kind IS NULL) THEN
            PERFORM pg_catalog.pg_notify(TG_TABLE_SCHEMA, 'queue');
        END IF;
    END IF;
    RETURN NULL;
END;
$$;

-- _dg_wake_queue(): wake idle workers (a live 'queue' watcher) when a lease ends on an open
-- entry without a close — dg_release_v1, dg_defer_v1, and a lease ending another entry's
-- expired lease — so the thread's head may be leased again. Called by those functions: the
-- lease lives on the thread's row (migrations 0017, 0018), not on the entry, so no entry trigger
-- sees it end. One probe of watchers; the channel is the schema, as the triggers' (the caller's
-- pinned search_path names it first).
CREATE OR REPLACE FUNCTION _dg_wake_queue() RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM watchers w
                WHERE w.kind = 'queue' AND w.expires_at > pg_catalog.now()) THEN
        PERFORM pg_catalog.pg_notify(pg_catalog.current_schema(), 'queue');
    END IF;
END;
$$;

DROP TRIGGER IF EXISTS events_notify ON events;
CREATE TRIGGER events_notify AFTER INSERT ON events REFERENCING NEW TABLE AS appended
    FOR EACH STATEMENT EXECUTE FUNCTION _dg_notify_events();

CREATE OR REPLACE TRIGGER queue_submitted_notify AFTER INSERT ON queue_entries
    FOR EACH STATEMENT EXECUTE FUNCTION _dg_notify_queue();

-- Closed. (A lease given back while its entry stays open wakes idle workers through
-- _dg_wake_queue, called where the thread row's lease ends.)
CREATE OR REPLACE TRIGGER queue_entry_notify AFTER UPDATE ON queue_entries
    FOR EACH ROW
    WHEN (OLD.outcome_kind IS NULL AND NEW.outcome_kind IS NOT NULL)
    EXECUTE FUNCTION _dg_notify_entry();

-- dg_watch_v1: set what the listener p_listener waits for to exactly the (kind, key) pairs of
-- p_kinds / p_keys (arrays of equal length; kinds 'events' (key: a thread id), 'closed' (an
-- entry id), 'queue' (key '')), each counting for p_ttl of real time (listener liveness, not
-- store time); forgets the listener's other pairs and every expired row. An empty set
-- unregisters. Raises DG000.
CREATE OR REPLACE FUNCTION dg_watch_v1(p_listener text, p_kinds text[], p_keys text[],
                                       p_ttl interval)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_now timestamptz;
BEGIN
    PERFORM _dg_id(p_listener, 'listener');
    PERFORM _dg_check(p_kinds IS NOT NULL AND p_keys IS NOT NULL
                      AND coalesce(pg_catalog.cardinality(p_kinds), 0) = coalesce(pg_catalog.cardinality(p_keys), 0),
                      'kinds and keys must be arrays of equal length');
    PERFORM _dg_check(coalesce(pg_catalog.cardinality(p_kinds), 0) <= 10000, 'at most 10000 watches');
    PERFORM _dg_check(p_ttl > interval '0' AND p_ttl <= interval '1 hour',
                      'ttl must be positive and at most an hour');
    PERFORM _dg_check(NOT EXISTS (SELECT 1 FROM ROWS FROM (pg_catalog.unnest(p_kinds),
                                                           pg_catalog.unnest(p_keys)) AS u(kind, key)
                                   WHERE u.kind IS NULL OR u.key IS NULL
                                      OR u.kind NOT IN ('events', 'closed', 'queue')
                                      OR pg_catalog.octet_length(u.key) > 512),
                      'each watch must be events, closed or queue with a key of <= 512 bytes');
    v_now := pg_catalog.clock_timestamp();  -- liveness of listeners, not store time
    DELETE FROM watchers w
     WHERE w.expires_at <= v_now
        OR (w.listener = p_listener
            AND (w.kind, w.key) NOT IN (SELECT u.kind, u.key
                                          FROM ROWS FROM (pg_catalog.unnest(p_kinds),
                                                          pg_catalog.unnest(p_keys)) AS u(kind, key)));
    INSERT INTO watchers (kind, key, listener, expires_at)
    SELECT DISTINCT u.kind, u.key, p_listener, v_now + p_ttl
      FROM ROWS FROM (pg_catalog.unnest(p_kinds), pg_catalog.unnest(p_keys)) AS u(kind, key)
    ON CONFLICT (kind, key, listener) DO UPDATE SET expires_at = EXCLUDED.expires_at;
END;
$$;
