-- lease and begin_attempt on a partition proxy (SPEC §16.2: lease(tenant=ANY) takes the first
-- head of the partition with the first waiting head in lease order — SPEC §15: priority, then
-- age — best effort across partitions, never two leases in one call).

-- _dg_lease_order(any_tenant, tenant, kinds): the partitions to try, the one with the first
-- waiting head of those kinds first (by priority, then submission time, then entry id: the
-- heads' lease order), then those with no waiting head (a
-- submission may land meanwhile; the first of them also checks the call's arguments when
-- nothing waits anywhere). Asks every partition at once (dg_lease_peek_v1, RUN ON ALL); when
-- that fails (a partition down), asks them one by one and leaves out the ones that are down,
-- and raises ProcessingError naming them only when every partition is down.
CREATE OR REPLACE FUNCTION _dg_lease_order(p_any_tenant boolean, p_tenant text, p_kinds text[])
RETURNS SETOF integer
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_n integer := _dg_partitions();
    v_peek record;
    v_seen integer[] := '{}';
    v_down integer[] := '{}';
    v_error text;
    v_start integer := (pg_catalog.random() * v_n)::integer % v_n;
    v_part integer;
BEGIN
    BEGIN
        FOR v_peek IN SELECT x.head_entry_id, x.submitted_at
                        FROM _dg_all_lease_peek_v1(p_any_tenant, p_tenant, p_kinds) x
                       ORDER BY x.head_priority_key, x.submitted_at, x.head_entry_id LOOP
            v_seen := v_seen || _dg_entry_part(v_peek.head_entry_id);
        END LOOP;
    EXCEPTION WHEN SQLSTATE 'DG000' THEN
        RAISE;
    WHEN OTHERS THEN
        v_error := SQLERRM;
        v_seen := '{}';
        FOR v_peek IN
            SELECT p.part, x.head_entry_id, x.submitted_at
              FROM pg_catalog.generate_series(0, v_n - 1) p(part)
              LEFT JOIN LATERAL _dg_try_lease_peek(p.part, p_any_tenant, p_tenant, p_kinds) x
                     ON true
             ORDER BY x.head_priority_key NULLS LAST, x.submitted_at NULLS LAST, x.head_entry_id
        LOOP
            IF v_peek.submitted_at IS NULL AND v_peek.head_entry_id = -1 THEN
                v_down := v_down || v_peek.part;
            ELSIF v_peek.head_entry_id IS NOT NULL THEN
                v_seen := v_seen || v_peek.part;
            END IF;
        END LOOP;
        IF pg_catalog.cardinality(v_down) = v_n THEN
            PERFORM _dg_unavailable(v_down[1], v_error);
        END IF;
    END;
    RETURN QUERY SELECT pg_catalog.unnest(v_seen);
    -- Then the others, from a random start, so idle workers spread their empty calls.
    FOR i IN 0 .. v_n - 1 LOOP
        v_part := (v_start + i) % v_n;
        IF v_part <> ALL (v_seen) AND v_part <> ALL (v_down) THEN
            RETURN NEXT v_part;
            RETURN;  -- one empty partition is enough to check the arguments
        END IF;
    END LOOP;
END;
$$;

-- _dg_try_lease_peek(partition, any_tenant, tenant, kinds): that partition's dg_lease_peek_v1
-- row; (-1, NULL, NULL) when the partition cannot be reached.
CREATE OR REPLACE FUNCTION _dg_try_lease_peek(p_part integer, p_any_tenant boolean, p_tenant text,
                                              p_kinds text[])
RETURNS TABLE (head_entry_id bigint, submitted_at timestamptz, head_priority_key integer)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT * FROM _dg_on_lease_peek_v1(p_part, p_any_tenant, p_tenant, p_kinds);
EXCEPTION WHEN SQLSTATE 'DG000' THEN
    RAISE;
WHEN OTHERS THEN
    RETURN QUERY SELECT -1::bigint, NULL::timestamptz, NULL::integer;
END;
$$;

-- dg_lease_v1 on a proxy: dg_lease_v1 of the partitions in _dg_lease_order until one leases;
-- at most one lease. A partition down is skipped when another has work. Raises what
-- dg_lease_v1 raises. A concurrency limit (SPEC §15) is set on every partition and each enforces
-- it on its own leases (a proxy gap: docs/scaling.md).
CREATE OR REPLACE FUNCTION dg_lease_v1(
    p_holder text, p_ttl interval, p_any_tenant boolean, p_tenant text, p_run_id text,
    p_kinds text[] DEFAULT NULL)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint,
               token bigint, holder text, expires_at timestamptz, ttl interval,
               attempt_kind text, attempt_number integer,
               not_before timestamptz, retry_of bigint, priority integer, kind text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_part integer;
BEGIN
    FOR v_part IN SELECT * FROM _dg_lease_order(p_any_tenant, p_tenant, p_kinds) LOOP
        RETURN QUERY SELECT * FROM _dg_on_lease_v1(v_part, p_holder, p_ttl, p_any_tenant,
                                                   p_tenant, p_run_id, p_kinds);
        IF FOUND THEN
            RETURN;
        END IF;
    END LOOP;
END;
$$;

-- dg_begin_attempt_v1 on a proxy: as dg_lease_v1 above, with dg_begin_attempt_v1.
CREATE OR REPLACE FUNCTION dg_begin_attempt_v1(
    p_holder text, p_ttl interval, p_claim_ttl interval, p_any_tenant boolean, p_tenant text,
    p_run_id text, p_kinds text[] DEFAULT NULL)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint, token bigint, holder text, expires_at timestamptz,
               ttl interval, attempt_kind text, attempt_number integer, claim_token bigint,
               claim_expires_at timestamptz, claim_ttl interval, latest_checkpoint_id text,
               latest_parent_id text, latest_run_id text, latest_state text,
               latest_metadata text, latest_next text[], latest_created_at timestamptz,
               latest_committed_at timestamptz, latest_seq bigint, latest_writes json,
               not_before timestamptz, retry_of bigint, head_checkpoint_id text,
               head_parent_id text, head_run_id text, head_state text, head_metadata text,
               head_next text[], head_created_at timestamptz, head_committed_at timestamptz,
               head_seq bigint, head_writes json, priority integer, kind text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_part integer;
BEGIN
    FOR v_part IN SELECT * FROM _dg_lease_order(p_any_tenant, p_tenant, p_kinds) LOOP
        RETURN QUERY SELECT * FROM _dg_on_begin_attempt_v1(v_part, p_holder, p_ttl, p_claim_ttl,
                                                           p_any_tenant, p_tenant, p_run_id,
                                                           p_kinds);
        IF FOUND THEN
            RETURN;
        END IF;
    END LOOP;
END;
$$;
