-- Change notifications (SPEC §11; the tables and triggers are migrations/0007.notify.sql).

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
    PERFORM _dg_check(p_listener IS NOT NULL AND octet_length(p_listener) BETWEEN 1 AND 512,
                      'listener must be 1..512 bytes');
    PERFORM _dg_check(p_kinds IS NOT NULL AND p_keys IS NOT NULL
                      AND coalesce(cardinality(p_kinds), 0) = coalesce(cardinality(p_keys), 0),
                      'kinds and keys must be arrays of equal length');
    PERFORM _dg_check(coalesce(cardinality(p_kinds), 0) <= 10000, 'at most 10000 watches');
    PERFORM _dg_check(p_ttl > interval '0' AND p_ttl <= interval '1 hour',
                      'ttl must be positive and at most an hour');
    PERFORM _dg_check(NOT EXISTS (SELECT 1 FROM unnest(p_kinds, p_keys) AS u(kind, key)
                                   WHERE u.kind IS NULL OR u.key IS NULL
                                      OR u.kind NOT IN ('events', 'closed', 'queue')
                                      OR octet_length(u.key) > 512),
                      'each watch must be events, closed or queue with a key of <= 512 bytes');
    v_now := pg_catalog.clock_timestamp();  -- liveness of listeners, not store time
    DELETE FROM watchers w
     WHERE w.expires_at <= v_now
        OR (w.listener = p_listener
            AND (w.kind, w.key) NOT IN (SELECT u.kind, u.key
                                          FROM unnest(p_kinds, p_keys) AS u(kind, key)));
    INSERT INTO watchers (kind, key, listener, expires_at)
    SELECT DISTINCT u.kind, u.key, p_listener, v_now + p_ttl
      FROM unnest(p_kinds, p_keys) AS u(kind, key)
    ON CONFLICT (kind, key, listener) DO UPDATE SET expires_at = EXCLUDED.expires_at;
END;
$$;
