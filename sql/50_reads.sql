-- Checkpointer reads (SPEC §4 reads; rules 14-15; D15: reads include
-- pending writes). Each is one STABLE PL/pgSQL function:
-- one snapshot, never waiting for writers; PL/pgSQL so that its plans are cached per session
-- (a LANGUAGE sql function with SET is planned again on every call). Unknown and deleted
-- threads give no rows. A checkpoint's writes come from _dg_writes (sql/00_clock.sql), which the
-- planner inlines as a per-row subquery.

-- dg_get_v1: the checkpoint p_checkpoint_id of the thread, or its head when NULL. Raises DG000.
CREATE OR REPLACE FUNCTION dg_get_v1(p_thread_id text, p_checkpoint_id text)
RETURNS TABLE (thread_id text, checkpoint_id text, parent_id text, run_id text, state text,
               metadata text, next text[], created_at timestamptz, committed_at timestamptz,
               seq bigint, writes json)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    -- One inline test (no statement: SPEC §21); the helpers name the bad argument.
    IF (pg_catalog.octet_length(p_thread_id) BETWEEN 1 AND 512
        AND coalesce(pg_catalog.octet_length(p_checkpoint_id) BETWEEN 1 AND 512, true))
       IS NOT TRUE THEN
        PERFORM _dg_id(p_thread_id, 'thread_id');
        PERFORM _dg_opt_id(p_checkpoint_id, 'checkpoint_id');
    END IF;
    RETURN QUERY
    SELECT c.thread_id::text, c.checkpoint_id, c.parent_id, c.run_id, c.state, c.metadata,
           c.next, c.created_at, c.committed_at, c.seq, w.writes
      FROM threads t
      JOIN checkpoints c ON c.thread_id = t.thread_id
     CROSS JOIN LATERAL _dg_writes(c.thread_id, c.checkpoint_id) w
     WHERE t.thread_id = p_thread_id AND t.live
       AND c.checkpoint_id = coalesce(p_checkpoint_id, t.head_id);
END;
$$;

-- dg_history_v1: the thread's checkpoints newest first (by seq), strictly before checkpoint
-- p_before (NULL = from the head; an unknown p_before gives no rows), at most p_limit (1..100000)
-- and at most max_page_bytes (state + metadata + writes), but always at least one row when one
-- exists: continue with p_before = the last checkpoint id returned. Raises DG000.
CREATE OR REPLACE FUNCTION dg_history_v1(p_thread_id text, p_before text, p_limit integer)
RETURNS TABLE (thread_id text, checkpoint_id text, parent_id text, run_id text, state text,
               metadata text, next text[], created_at timestamptz, committed_at timestamptz,
               seq bigint, writes json)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_before bigint := 9223372036854775807;
    v_page bigint;
BEGIN
    PERFORM _dg_id(p_thread_id, 'thread_id');
    PERFORM _dg_opt_id(p_before, 'before');
    PERFORM _dg_count(p_limit, 'limit', 100000);
    v_page := (_dg_limits()).max_page_bytes;
    IF p_before IS NOT NULL THEN
        SELECT b.seq INTO v_before FROM checkpoints b
         WHERE b.thread_id = p_thread_id AND b.checkpoint_id = p_before;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    -- A row is in the page when the rows before it hold fewer than max_page_bytes.
    RETURN QUERY
    SELECT x.thread_id, x.checkpoint_id, x.parent_id, x.run_id, x.state, x.metadata, x.next,
           x.created_at, x.committed_at, x.seq, x.writes
      FROM (SELECT r.*, pg_catalog.sum(r.size) OVER (ORDER BY r.seq DESC ROWS UNBOUNDED PRECEDING)
                        - r.size AS before_bytes
              FROM (SELECT c.thread_id::text AS thread_id, c.checkpoint_id, c.parent_id,
                           c.run_id, c.state, c.metadata, c.next, c.created_at,
                           c.committed_at, c.seq, w.writes,
                           pg_catalog.octet_length(c.state) + pg_catalog.octet_length(c.metadata)
                           + pg_catalog.octet_length(w.writes::text) AS size
                      FROM threads t
                      JOIN checkpoints c ON c.thread_id = t.thread_id
                     CROSS JOIN LATERAL _dg_writes(c.thread_id, c.checkpoint_id) w
                     WHERE t.thread_id = p_thread_id AND t.live AND c.seq < v_before
                     ORDER BY c.seq DESC
                     LIMIT p_limit) r) x
     WHERE x.before_bytes < v_page
     ORDER BY x.seq DESC;
END;
$$;

-- dg_latest_of_runs_v1: the newest checkpoint (highest seq) of the thread whose run id is one of
-- p_run_ids; no row when none. One backward index probe per run id (checkpoints_run_thread_idx,
-- migration 0011), then the newest of those (a generic plan: left to choose, PL/pgSQL would plan
-- this statement again on every call, the array's length changing its estimates). Raises DG000.
CREATE OR REPLACE FUNCTION dg_latest_of_runs_v1(p_thread_id text, p_run_ids text[])
RETURNS TABLE (thread_id text, checkpoint_id text, parent_id text, run_id text, state text,
               metadata text, next text[], created_at timestamptz, committed_at timestamptz,
               seq bigint, writes json)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    PERFORM _dg_id(p_thread_id, 'thread_id');
    PERFORM _dg_not_null(p_run_ids IS NOT NULL, 'run_ids');
    PERFORM _dg_ids(p_run_ids, 'run_ids', 100000);
    RETURN QUERY
    SELECT c.thread_id::text, c.checkpoint_id, c.parent_id, c.run_id, c.state, c.metadata,
           c.next, c.created_at, c.committed_at, c.seq, w.writes
      FROM threads t
     CROSS JOIN LATERAL (
            SELECT l.* FROM pg_catalog.unnest(p_run_ids) AS r(run_id)
             CROSS JOIN LATERAL (SELECT * FROM checkpoints c0
                                  WHERE c0.thread_id = p_thread_id AND c0.run_id = r.run_id
                                  ORDER BY c0.seq DESC LIMIT 1) l
             ORDER BY l.seq DESC LIMIT 1) c
     CROSS JOIN LATERAL _dg_writes(c.thread_id, c.checkpoint_id) w
     WHERE t.thread_id = p_thread_id AND t.live;
END;
$$;

-- dg_thread_v1: the thread's info; no row for a never-committed or deleted thread.
-- Raises DG000.
CREATE OR REPLACE FUNCTION dg_thread_v1(p_thread_id text)
RETURNS TABLE (thread_id text, parent_thread_id text, head_id text, last_seq bigint,
               created_at timestamptz, updated_at timestamptz, claim_holder text,
               claim_expires_at timestamptz)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    PERFORM _dg_id(p_thread_id, 'thread_id');
    RETURN QUERY
    SELECT t.thread_id, t.parent_thread_id, t.head_id, t.last_seq, t.created_at, t.updated_at,
           t.claim_holder, t.claim_expires_at
      FROM threads t
     WHERE t.thread_id = p_thread_id AND t.live;
END;
$$;

-- _dg_thread_row_bytes(ids...): what a threads() row weighs against max_page_bytes: its ids'
-- bytes, plus 64 for its numbers and timestamps.
CREATE OR REPLACE FUNCTION _dg_thread_row_bytes(p_thread_id text, p_parent text, p_head text,
                                                p_holder text) RETURNS bigint
LANGUAGE sql IMMUTABLE
AS $$
    SELECT 64 + pg_catalog.octet_length(p_thread_id)::bigint
           + coalesce(pg_catalog.octet_length(p_parent), 0)
           + coalesce(pg_catalog.octet_length(p_head), 0)
           + coalesce(pg_catalog.octet_length(p_holder), 0)
$$;

-- dg_threads_v1: existing threads in id byte order (COLLATE "C"), after p_after (NULL = from
-- the first), at most p_limit (1..100000; a row is at most ~2 KiB, so no byte bound).
-- Raises DG000.
CREATE OR REPLACE FUNCTION dg_threads_v1(p_after text, p_limit integer)
RETURNS TABLE (thread_id text, parent_thread_id text, head_id text, last_seq bigint,
               created_at timestamptz, updated_at timestamptz, claim_holder text,
               claim_expires_at timestamptz)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_page bigint;
BEGIN
    PERFORM _dg_opt_id(p_after, 'after');
    PERFORM _dg_count(p_limit, 'limit', 100000);
    v_page := (_dg_limits()).max_page_bytes;
    -- Two statements, so that each plan walks the live-thread index from its own start. A row
    -- is in the page when the rows before it hold fewer than max_page_bytes (its ids, plus 64
    -- bytes for the rest), so a page always has at least one row when one exists.
    IF p_after IS NULL THEN
        RETURN QUERY
        SELECT x.thread_id, x.parent_thread_id, x.head_id, x.last_seq, x.created_at,
               x.updated_at, x.claim_holder, x.claim_expires_at
          FROM (SELECT r.*, pg_catalog.sum(r.bytes) OVER (ORDER BY r.thread_id
                                                          ROWS UNBOUNDED PRECEDING)
                            - r.bytes AS before_bytes
                  FROM (SELECT t.thread_id, t.parent_thread_id, t.head_id, t.last_seq,
                               t.created_at, t.updated_at, t.claim_holder, t.claim_expires_at,
                               _dg_thread_row_bytes(t.thread_id, t.parent_thread_id, t.head_id,
                                                    t.claim_holder) AS bytes
                          FROM threads t
                         WHERE t.live
                         ORDER BY t.thread_id
                         LIMIT p_limit) r) x
         WHERE x.before_bytes < v_page
         ORDER BY x.thread_id;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT x.thread_id, x.parent_thread_id, x.head_id, x.last_seq, x.created_at, x.updated_at,
           x.claim_holder, x.claim_expires_at
      FROM (SELECT r.*, pg_catalog.sum(r.bytes) OVER (ORDER BY r.thread_id
                                                      ROWS UNBOUNDED PRECEDING)
                        - r.bytes AS before_bytes
              FROM (SELECT t.thread_id, t.parent_thread_id, t.head_id, t.last_seq, t.created_at,
                           t.updated_at, t.claim_holder, t.claim_expires_at,
                           _dg_thread_row_bytes(t.thread_id, t.parent_thread_id, t.head_id,
                                                t.claim_holder) AS bytes
                      FROM threads t
                     WHERE t.live AND t.thread_id > p_after
                     ORDER BY t.thread_id
                     LIMIT p_limit) r) x
     WHERE x.before_bytes < v_page
     ORDER BY x.thread_id;
END;
$$;

-- dg_children_v1: existing threads whose first commit named p_thread_id as parent, in the order
-- their first commits landed, after the child p_after (NULL = from the first; a p_after that is
-- not an existing child gives no rows), at most p_limit (1..100000) and max_page_bytes (always
-- at least one row when one exists); no rows when p_thread_id does not exist. Raises DG000.
CREATE OR REPLACE FUNCTION dg_children_v1(p_thread_id text, p_after text DEFAULT NULL,
                                          p_limit integer DEFAULT 1000)
RETURNS TABLE (thread_id text)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_after bigint := 0::bigint;
    v_page bigint;
BEGIN
    PERFORM _dg_id(p_thread_id, 'thread_id');
    PERFORM _dg_opt_id(p_after, 'after');
    PERFORM _dg_count(p_limit, 'limit', 100000);
    v_page := (_dg_limits()).max_page_bytes;
    IF p_after IS NOT NULL THEN
        SELECT a.first_commit_order INTO v_after FROM threads a
         WHERE a.thread_id = p_after AND a.live AND a.parent_thread_id = p_thread_id;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    RETURN QUERY
    SELECT x.thread_id
      FROM (SELECT r.thread_id, r.o,
                   pg_catalog.sum(pg_catalog.octet_length(r.thread_id)) OVER (ORDER BY r.o ROWS UNBOUNDED PRECEDING)
                   - pg_catalog.octet_length(r.thread_id) AS before_bytes
              FROM (SELECT k.thread_id::text AS thread_id, k.first_commit_order AS o
                      FROM threads p
                      JOIN threads k ON k.parent_thread_id = p.thread_id AND k.live
                     WHERE p.thread_id = p_thread_id AND p.live
                       AND k.first_commit_order > v_after
                     ORDER BY k.first_commit_order
                     LIMIT p_limit) r) x
     WHERE x.before_bytes < v_page
     ORDER BY x.o;
END;
$$;

-- dg_events_after_v1: the thread's events with seq > p_after_seq (>= 0), ascending, at most
-- p_limit (1..100000) and max_page_bytes (kind + payload + run id), but always at least one
-- row when one exists: continue with p_after_seq = the last seq returned. Raises DG000.
CREATE OR REPLACE FUNCTION dg_events_after_v1(p_thread_id text, p_after_seq bigint,
                                              p_limit integer)
RETURNS TABLE (thread_id text, seq bigint, kind text, payload text, run_id text,
               created_at timestamptz, committed_at timestamptz)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_page bigint;
BEGIN
    PERFORM _dg_id(p_thread_id, 'thread_id');
    PERFORM _dg_check(p_after_seq >= 0, 'after_seq must be >= 0');
    PERFORM _dg_count(p_limit, 'limit', 100000);
    v_page := (_dg_limits()).max_page_bytes;
    RETURN QUERY
    SELECT x.thread_id, x.seq, x.kind, x.payload, x.run_id, x.created_at, x.committed_at
      FROM (SELECT r.*, pg_catalog.sum(r.size) OVER (ORDER BY r.seq ROWS UNBOUNDED PRECEDING)
                        - r.size AS before_bytes
              FROM (SELECT e.thread_id::text AS thread_id, e.seq, e.kind, e.payload, e.run_id,
                           e.created_at, e.committed_at,
                           pg_catalog.octet_length(e.kind) + pg_catalog.octet_length(e.payload)
                           + coalesce(pg_catalog.octet_length(e.run_id), 0) AS size
                      FROM events e
                     WHERE e.thread_id = p_thread_id AND e.seq > p_after_seq
                     ORDER BY e.seq
                     LIMIT p_limit) r) x
     WHERE x.before_bytes < v_page
     ORDER BY x.seq;
END;
$$;

-- dg_get_effect_v1: the effect recorded under p_key on the thread, with existing = true (D12);
-- no row when none. Raises DG000.
CREATE OR REPLACE FUNCTION dg_get_effect_v1(p_thread_id text, p_key text)
RETURNS TABLE (thread_id text, key text, value text, run_id text, recorded_at timestamptz,
               existing boolean)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
BEGIN
    PERFORM _dg_id(p_thread_id, 'thread_id');
    PERFORM _dg_id(p_key, 'key');
    RETURN QUERY
    SELECT x.thread_id, x.key, x.value, x.run_id, x.recorded_at, true
      FROM effects x
     WHERE x.thread_id = p_thread_id AND x.key = p_key;
END;
$$;
