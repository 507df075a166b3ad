-- Deprecated functions (SPEC §23.1, D232-D233): names other stacks called before 0.2.0 whose
-- successor replaced them, kept with their last signature, result shape and meaning as thin
-- wrappers over the successor, which checks every argument (DG000, naming it) and raises as it
-- does. Deprecated in 0.2.0 (sql/api.json: deprecated, successor), kept at least until 0.3.0;
-- a removal is a CHANGELOG.md entry. New code calls the successor. SECURITY DEFINER and the
-- pinned search_path come from 99_privileges.sql, as for every dg_* function.

-- dg_put_writes_v1: dg_put_writes_v2 without task paths (every write's task path '').
-- Raises DG002, DG404, DG000 as dg_put_writes_v2.
CREATE OR REPLACE FUNCTION dg_put_writes_v1(
    p_thread_id text, p_token bigint, p_checkpoint_id text,
    p_task_ids text[], p_channels text[], p_values text[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    PERFORM dg_put_writes_v2(p_thread_id, p_token, p_checkpoint_id, p_task_ids, p_channels,
                             p_values, NULL);
END;
$$;

-- dg_put_writes_fenced_v1: dg_put_writes_fenced_v2 without task paths. Raises DG002 (the claim,
-- then the fence), DG404, DG000 as dg_put_writes_fenced_v2.
CREATE OR REPLACE FUNCTION dg_put_writes_fenced_v1(
    p_thread_id text, p_token bigint, p_checkpoint_id text,
    p_task_ids text[], p_channels text[], p_values text[],
    p_fence_thread_id text, p_fence_token bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    PERFORM dg_put_writes_fenced_v2(p_thread_id, p_token, p_checkpoint_id, p_task_ids,
                                    p_channels, p_values, NULL, p_fence_thread_id,
                                    p_fence_token);
END;
$$;

-- dg_put_writes_and_commit_v1: dg_put_writes_and_commit_v2 without task paths: the writes to
-- p_writes_checkpoint_id, then dg_commit_v1, in one transaction. Returns the committed
-- checkpoint. Raises what dg_put_writes_and_commit_v2 raises.
CREATE OR REPLACE FUNCTION dg_put_writes_and_commit_v1(
    p_thread_id text, p_token bigint, p_writes_checkpoint_id text,
    p_task_ids text[], p_channels text[], p_values text[],
    p_checkpoint_id text, p_parent_id text, p_run_id text,
    p_state text, p_metadata text, p_next text[],
    p_event_kinds text[], p_event_payloads text[], p_event_created_at timestamptz[],
    p_created_at timestamptz, p_parent_thread_id text,
    p_fence_thread_id text, p_fence_token bigint)
RETURNS TABLE (thread_id text, checkpoint_id text, parent_id text, run_id text, state text,
               metadata text, next text[], created_at timestamptz, committed_at timestamptz,
               seq bigint, writes json)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY
    SELECT c.thread_id, c.checkpoint_id, c.parent_id, c.run_id, c.state, c.metadata, c.next,
           c.created_at, c.committed_at, c.seq, c.writes
      FROM dg_put_writes_and_commit_v2(
               p_thread_id, p_token, p_writes_checkpoint_id, p_task_ids, p_channels, p_values,
               NULL, p_checkpoint_id, p_parent_id, p_run_id, p_state, p_metadata, p_next,
               p_event_kinds, p_event_payloads, p_event_created_at, p_created_at,
               p_parent_thread_id, p_fence_thread_id, p_fence_token) c;
END;
$$;

-- dg_finish_attempt_v1: dg_finish_attempt_v2 without a checkpoint: close the entry
-- (dg_close_v1's checks and errors) and release the claim p_claim_token on the entry's thread if
-- it is still the thread's current claim (left alone otherwise, and when NULL), in one
-- transaction. Returns dg_close_v1's row. Raises DG103, DG102, DG000 as dg_finish_attempt_v2.
CREATE OR REPLACE FUNCTION dg_finish_attempt_v1(p_entry_id bigint, p_token bigint,
                                                p_outcome_kind text, p_outcome_detail text,
                                                p_claim_token bigint, p_tenant text)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint, not_before timestamptz, retry_of bigint,
               priority integer, kind text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY
    SELECT f.entry_id, f.tenant, f.thread_id, f.key, f.input, f.mode, f.max_attempts,
           f.attempts, f.admitted, f.thread_deleted, f.submitted_at, f.lease_holder,
           f.lease_expires_at, f.outcome_kind, f.outcome_detail, f.closed_at, f.closed_at_seq,
           f.not_before, f.retry_of, f.priority, f.kind
      FROM dg_finish_attempt_v2(p_entry_id, p_token, p_outcome_kind, p_outcome_detail, NULL,
                                p_claim_token, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                NULL, NULL, NULL, NULL, NULL, p_tenant) f;
END;
$$;

-- dg_entry_v2: dg_entry_v1 under its earlier name (0 or 1 row). Raises DG000 as dg_entry_v1.
CREATE OR REPLACE FUNCTION dg_entry_v2(p_entry_id bigint, p_tenant text)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint, not_before timestamptz, retry_of bigint,
               priority integer, kind text)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY
    SELECT e.entry_id, e.tenant, e.thread_id, e.key, e.input, e.mode, e.max_attempts,
           e.attempts, e.admitted, e.thread_deleted, e.submitted_at, e.lease_holder,
           e.lease_expires_at, e.outcome_kind, e.outcome_detail, e.closed_at, e.closed_at_seq,
           e.not_before, e.retry_of, e.priority, e.kind
      FROM dg_entry_v1(p_entry_id, p_tenant) e;
END;
$$;

-- dg_set_trace_context_v1: dg_set_trace_context_v2 in the no-tenant namespace (D83): remember the
-- trace context an entry without a tenant was submitted in; the first one set is kept. Returns
-- whether this call set it. Raises DG000 as dg_set_trace_context_v2, then DG404 when the entry
-- is unknown, reclaimed or a tenant's (as for an id that never existed).
CREATE OR REPLACE FUNCTION dg_set_trace_context_v1(p_entry_id bigint, p_traceparent text,
                                                   p_tracestate text)
RETURNS TABLE (stored boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_stored boolean;
BEGIN
    SELECT s.stored INTO v_stored
      FROM dg_set_trace_context_v2(p_entry_id, NULL, p_traceparent, p_tracestate) s;
    IF NOT v_stored AND NOT EXISTS (SELECT 1 FROM queue_entries q
                                     WHERE q.entry_id = p_entry_id AND q.tenant IS NULL) THEN
        RAISE EXCEPTION 'entry % not found', p_entry_id USING ERRCODE = 'DG404';
    END IF;
    RETURN QUERY SELECT v_stored;
END;
$$;

-- dg_trace_context_v1: dg_trace_context_v2 in the no-tenant namespace (D83): the trace context
-- set for an entry without a tenant; no row when none was set or the entry is unknown,
-- reclaimed or a tenant's. Raises DG000 as dg_trace_context_v2.
CREATE OR REPLACE FUNCTION dg_trace_context_v1(p_entry_id bigint)
RETURNS TABLE (traceparent text, tracestate text)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY
    SELECT t.traceparent, t.tracestate FROM dg_trace_context_v2(p_entry_id, NULL) t;
END;
$$;

-- dg_workers_v1: every page of dg_workers_v2: the workers whose latest beat is within
-- p_seen_within of store-now and is not 'stopped', by holder (byte order), all in one read.
-- Raises DG000 as dg_workers_v2. (On a partition proxy: sql/proxy/96_deprecated.sql.)
CREATE OR REPLACE FUNCTION dg_workers_v1(p_seen_within interval)
RETURNS TABLE (holder text, host text, pid integer, kinds text[], state text,
               started_at timestamptz, last_seen timestamptz)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_after text;
    v_rows integer;
BEGIN
    LOOP
        v_rows := 0;
        FOR holder, host, pid, kinds, state, started_at, last_seen IN
            SELECT * FROM dg_workers_v2(p_seen_within, v_after, 1000)
        LOOP
            v_rows := v_rows + 1;
            v_after := holder;
            RETURN NEXT;
        END LOOP;
        EXIT WHEN v_rows < 1000;
    END LOOP;
END;
$$;
