-- The queue listing (SPEC §13; the rules of durable_graph/listing.py). States are exclusive:
-- open (not closed, no live lease), running (not closed, live lease: store_now() < the lease's
-- expiry, lease_until on its thread row, migrations 0017, 0018), and the closed outcomes
-- completed, failed, cancelled, interrupted. Reads are STABLE: one snapshot, never waiting for
-- writers.

-- dg_entries_v1: one page of entries, newest first (entry id descending): those in p_state
-- (NULL = every state), of the wanted tenant (p_any_tenant, or tenant IS NOT DISTINCT FROM
-- p_tenant), on p_thread_id (NULL = every thread), with entry_id < p_after (NULL = from the
-- newest), at most p_limit (1..1000) and max_page_bytes (the rows before the last are below
-- it). Raises DG000 naming the bad argument.
CREATE OR REPLACE FUNCTION dg_entries_v1(p_state text, p_any_tenant boolean, p_tenant text,
                                         p_thread_id text, p_after bigint, p_limit integer)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint, not_before timestamptz, retry_of bigint,
               priority integer, kind text)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz;
    v_page bigint;
BEGIN
    PERFORM _dg_check(p_state IS NULL OR p_state IN ('open', 'running', 'completed', 'failed',
                                                     'cancelled', 'interrupted'),
                      'state must be None or one of open, running, completed, failed, '
                      'cancelled, interrupted');
    PERFORM _dg_not_null(p_any_tenant IS NOT NULL, 'any_tenant');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    PERFORM _dg_opt_id(p_thread_id, 'thread_id');
    PERFORM _dg_check(p_after IS NULL OR p_after >= 1, 'after must be >= 1');
    PERFORM _dg_count(p_limit, 'limit', 1000);
    v_page := (_dg_limits()).max_page_bytes;
    v_now := store_now();
    RETURN QUERY
    SELECT x.entry_id, x.tenant, x.thread_id, x.key, x.input, x.mode, x.max_attempts,
           x.attempts, x.admitted, x.thread_deleted, x.submitted_at, x.lease_holder,
           x.lease_expires_at, x.outcome_kind, x.outcome_detail, x.closed_at, x.closed_at_seq,
           x.not_before, x.retry_of, x.priority, x.kind
      FROM (SELECT r.*, pg_catalog.sum(r.size) OVER (ORDER BY r.entry_id DESC
                                          ROWS UNBOUNDED PRECEDING) - r.size AS before_bytes
              FROM (SELECT e.entry_id, e.tenant, e.thread_id::text AS thread_id, e.key,
                           e.input, e.mode, e.max_attempts, a.attempts, e.admitted,
                           e.thread_deleted, e.submitted_at, e.lease_holder,
                           e.lease_until AS lease_expires_at, e.outcome_kind, e.outcome_detail,
                           e.closed_at,
                           e.closed_at_seq, e.not_before, e.retry_of, e.priority, e.kind,
                           pg_catalog.octet_length(e.input) + pg_catalog.octet_length(a.attempts::text)
                           + coalesce(pg_catalog.octet_length(e.key), 0)
                           + coalesce(pg_catalog.octet_length(e.outcome_detail), 0) AS size
                      FROM (SELECT q.*, l.lease_holder, l.lease_until FROM queue_entries q
                              -- The entry's lease, its thread row's (migrations 0017, 0018).
                              LEFT JOIN threads l
                                ON l.thread_id = q.thread_id AND l.lease_entry_id = q.entry_id
                             WHERE (p_state IS NULL
                                    OR (p_state = 'open' AND q.outcome_kind IS NULL
                                        AND (l.lease_until IS NULL OR l.lease_until <= v_now))
                                    OR (p_state = 'running' AND q.outcome_kind IS NULL
                                        AND l.lease_until > v_now)
                                    OR q.outcome_kind = p_state)
                               AND (p_any_tenant OR q.tenant IS NOT DISTINCT FROM p_tenant)
                               AND (p_thread_id IS NULL OR q.thread_id = p_thread_id)
                               AND (p_after IS NULL OR q.entry_id < p_after)
                             ORDER BY q.entry_id DESC
                             LIMIT p_limit) e
                     CROSS JOIN LATERAL _dg_attempts(e.entry_id) a) r) x
     WHERE x.before_bytes < v_page
     ORDER BY x.entry_id DESC;
END;
$$;

-- dg_queue_stats_v1: the count of entries in each state, of the wanted tenant (as in
-- dg_entries_v1), and the age of the oldest open entry at store_now() (NULL when none is
-- open), then waiting_by_kind (SPEC §15, added at the end): a JSON object of the open entries'
-- counts by kind, kinds with none left out. Raises DG000.
CREATE OR REPLACE FUNCTION dg_queue_stats_v1(p_any_tenant boolean, p_tenant text)
RETURNS TABLE (open bigint, running bigint, completed bigint, failed bigint, cancelled bigint,
               interrupted bigint, oldest_waiting_age interval, waiting_by_kind json)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz;
BEGIN
    PERFORM _dg_not_null(p_any_tenant IS NOT NULL, 'any_tenant');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    v_now := store_now();
    RETURN QUERY
    WITH wanted AS (
        SELECT coalesce(q.outcome_kind,
                        CASE WHEN l.lease_until > v_now THEN 'running' ELSE 'open' END)
                   AS state,
               q.submitted_at, q.kind
          FROM queue_entries q
          -- The entry's lease, its thread row's (migrations 0017, 0018).
          LEFT JOIN threads l
            ON l.thread_id = q.thread_id AND l.lease_entry_id = q.entry_id
         WHERE p_any_tenant OR q.tenant IS NOT DISTINCT FROM p_tenant
    ), by_kind AS (
        SELECT coalesce(pg_catalog.json_object_agg(k.kind, k.n ORDER BY k.kind COLLATE "C"), '{}'::json) AS kinds
          FROM (SELECT w.kind, pg_catalog.count(*) AS n FROM wanted w
                 WHERE w.state = 'open' GROUP BY w.kind) k
    ), counted AS (
        SELECT pg_catalog.count(*) FILTER (WHERE w.state = 'open') AS open,
               pg_catalog.count(*) FILTER (WHERE w.state = 'running') AS running,
               pg_catalog.count(*) FILTER (WHERE w.state = 'completed') AS completed,
               pg_catalog.count(*) FILTER (WHERE w.state = 'failed') AS failed,
               pg_catalog.count(*) FILTER (WHERE w.state = 'cancelled') AS cancelled,
               pg_catalog.count(*) FILTER (WHERE w.state = 'interrupted') AS interrupted,
               pg_catalog.min(w.submitted_at) FILTER (WHERE w.state = 'open') AS oldest
          FROM wanted w
    )
    -- A producer clock ahead of the store's never shows a negative age.
    SELECT c.open, c.running, c.completed, c.failed, c.cancelled, c.interrupted,
           CASE WHEN c.oldest IS NULL THEN NULL
                ELSE greatest(v_now - c.oldest, interval '0') END,
           b.kinds
      FROM counted c CROSS JOIN by_kind b;
END;
$$;

-- _dg_check_trace_context: DG000 unless p_traceparent is a W3C version 00 traceparent (lower-case
-- hex, ids not all zero) and p_tracestate NULL or at most 512 printable ASCII characters.
CREATE OR REPLACE FUNCTION _dg_check_trace_context(p_traceparent text, p_tracestate text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    PERFORM _dg_check(p_traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
                      AND pg_catalog.substr(p_traceparent, 4, 32) <> pg_catalog.repeat('0', 32)
                      AND pg_catalog.substr(p_traceparent, 37, 16) <> pg_catalog.repeat('0', 16),
                      'traceparent must be a W3C version 00 traceparent');
    PERFORM _dg_check(p_tracestate IS NULL
                      OR (pg_catalog.length(p_tracestate) <= 512 AND p_tracestate ~ '^[\x20-\x7e]*$'),
                      'tracestate must be at most 512 printable ASCII characters');
END;
$$;

-- dg_set_trace_context_v2: remember the W3C trace context an entry of p_tenant (NULL: the
-- no-tenant namespace) was submitted in (_dg_check_trace_context). The first context set for an
-- entry is kept: a deduplicated submit does not move it. Returns whether this call set it: false
-- too for an entry that is unknown, reclaimed or another tenant's, exactly as for an id that
-- never existed (SPEC §10.6: no oracle, no way to set another tenant's first). Raises DG000 for a
-- malformed argument.
CREATE OR REPLACE FUNCTION dg_set_trace_context_v2(p_entry_id bigint, p_tenant text,
                                                   p_traceparent text, p_tracestate text)
RETURNS TABLE (stored boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_rows integer;
BEGIN
    PERFORM _dg_not_null(p_entry_id IS NOT NULL, 'entry_id');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    PERFORM _dg_check_trace_context(p_traceparent, p_tracestate);
    INSERT INTO queue_trace_context (entry_id, traceparent, tracestate)
    SELECT q.entry_id, p_traceparent, p_tracestate
      FROM queue_entries q
     WHERE q.entry_id = p_entry_id AND q.tenant IS NOT DISTINCT FROM p_tenant
    ON CONFLICT (entry_id) DO NOTHING;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    RETURN QUERY SELECT v_rows = 1;
END;
$$;

-- dg_trace_context_v2: the trace context set for an entry of p_tenant (NULL: the no-tenant
-- namespace); no row when none was set or the entry is unknown, reclaimed or another tenant's.
-- Raises DG000 for a malformed argument.
CREATE OR REPLACE FUNCTION dg_trace_context_v2(p_entry_id bigint, p_tenant text)
RETURNS TABLE (traceparent text, tracestate text)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    PERFORM _dg_not_null(p_entry_id IS NOT NULL, 'entry_id');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    RETURN QUERY
    SELECT t.traceparent, t.tracestate
      FROM queue_trace_context t JOIN queue_entries q ON q.entry_id = t.entry_id
     WHERE t.entry_id = p_entry_id AND q.tenant IS NOT DISTINCT FROM p_tenant;
END;
$$;

-- dg_set_trace_context_v1 and dg_trace_context_v1 (their _v2 for the no-tenant namespace) are
-- deprecated: sql/96_deprecated.sql (D233).
