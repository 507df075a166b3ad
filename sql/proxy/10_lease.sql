-- lease and begin_attempt on a partition proxy (SPEC §16.2: lease(tenant=ANY) takes the first
-- head of the partition with the first waiting head in lease order — SPEC §15: priority, then
-- age — best effort across partitions, never two leases in one call).

-- _dg_lease_order(any_tenant, tenant, kinds): the partitions to try, the one with the first
-- waiting head of those kinds first (by priority, then submission time, then entry id: the
-- heads' lease order), then those with no waiting head (a
-- submission may land meanwhile; the first of them also checks the call's arguments when
-- nothing waits anywhere). Asks every partition at once (dg_lease_peek_v1, RUN ON ALL); when
-- that fails (a partition down), asks them one by one and leaves out the ones that are down,
-- and raises ProcessingError naming them only when every partition is down. `limited` (the
-- same on every row): whether a partition with a waiting head has concurrency limits.
DROP FUNCTION IF EXISTS _dg_lease_order(boolean, text, text[]);
CREATE OR REPLACE FUNCTION _dg_lease_order(p_any_tenant boolean, p_tenant text, p_kinds text[])
RETURNS TABLE (part integer, limited boolean)
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
    v_limited boolean := false;
BEGIN
    BEGIN
        FOR v_peek IN SELECT x.head_entry_id, x.submitted_at, x.limited
                        FROM _dg_all_lease_peek_v1(p_any_tenant, p_tenant, p_kinds) x
                       ORDER BY x.head_priority_key, x.submitted_at, x.head_entry_id LOOP
            v_seen := v_seen || _dg_entry_part(v_peek.head_entry_id);
            v_limited := v_limited OR v_peek.limited;
        END LOOP;
    EXCEPTION WHEN SQLSTATE 'DG000' THEN
        RAISE;
    WHEN OTHERS THEN
        v_error := SQLERRM;
        v_seen := '{}';
        FOR v_peek IN
            SELECT p.part, x.head_entry_id, x.submitted_at, x.limited
              FROM pg_catalog.generate_series(0, v_n - 1) p(part)
              LEFT JOIN LATERAL _dg_try_lease_peek(p.part, p_any_tenant, p_tenant, p_kinds) x
                     ON true
             ORDER BY x.head_priority_key NULLS LAST, x.submitted_at NULLS LAST, x.head_entry_id
        LOOP
            IF v_peek.submitted_at IS NULL AND v_peek.head_entry_id = -1 THEN
                v_down := v_down || v_peek.part;
            ELSIF v_peek.head_entry_id IS NOT NULL THEN
                v_seen := v_seen || v_peek.part;
                v_limited := v_limited OR v_peek.limited;
            END IF;
        END LOOP;
        IF pg_catalog.cardinality(v_down) = v_n THEN
            PERFORM _dg_unavailable(v_down[1], v_error);
        END IF;
    END;
    RETURN QUERY SELECT u.p, v_limited FROM pg_catalog.unnest(v_seen) WITH ORDINALITY u(p, o)
                  ORDER BY u.o;
    -- Then the others, from a random start, so idle workers spread their empty calls.
    FOR i IN 0 .. v_n - 1 LOOP
        v_part := (v_start + i) % v_n;
        IF v_part <> ALL (v_seen) AND v_part <> ALL (v_down) THEN
            part := v_part;
            limited := v_limited;
            RETURN NEXT;
            RETURN;  -- one empty partition is enough to check the arguments
        END IF;
    END LOOP;
END;
$$;

-- _dg_try_lease_peek(partition, any_tenant, tenant, kinds): that partition's dg_lease_peek_v1
-- row; (-1, NULL, NULL, NULL) when the partition cannot be reached.
DROP FUNCTION IF EXISTS _dg_try_lease_peek(integer, boolean, text, text[]);
CREATE OR REPLACE FUNCTION _dg_try_lease_peek(p_part integer, p_any_tenant boolean, p_tenant text,
                                              p_kinds text[])
RETURNS TABLE (head_entry_id bigint, submitted_at timestamptz, head_priority_key integer,
               limited boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT * FROM _dg_on_lease_peek_v1(p_part, p_any_tenant, p_tenant, p_kinds);
EXCEPTION WHEN SQLSTATE 'DG000' THEN
    RAISE;
WHEN OTHERS THEN
    RETURN QUERY SELECT -1::bigint, NULL::timestamptz, NULL::integer, NULL::boolean;
END;
$$;

-- _dg_limit_live(): the live leases of every concurrency limit summed over the partitions
-- (dg_limit_usage_v1, every partition at once; when that fails, one by one, leaving out the
-- partitions that are down: their leases cannot be renewed or closed while they are), as
-- {"tenant": {name: n}, "kind": {name: n}}. The caller holds the proxy's limit lock.
CREATE OR REPLACE FUNCTION _dg_limit_live() RETURNS json
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_usage jsonb;
BEGIN
    BEGIN
        SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.to_jsonb(a)), '[]') INTO v_usage
          FROM _dg_all_limit_usage_v1() a;
    EXCEPTION WHEN OTHERS THEN
        v_usage := '[]';  -- a partition down: count the others
        FOR p IN 0 .. _dg_partitions() - 1 LOOP
            BEGIN
                v_usage := v_usage || (SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.to_jsonb(a)),
                                                       '[]')
                                         FROM _dg_on_limit_usage_v1(p) a);
            EXCEPTION WHEN OTHERS THEN
                NULL;
            END;
        END LOOP;
    END;
    RETURN (SELECT coalesce(pg_catalog.json_object_agg(s.scope, s.names), '{}'::json)
              FROM (SELECT u.scope, pg_catalog.json_object_agg(u.name, u.live) AS names
                      FROM (SELECT e ->> 'scope' AS scope, e ->> 'name' AS name,
                                   pg_catalog.sum((e ->> 'live')::bigint) AS live
                              FROM pg_catalog.jsonb_array_elements(v_usage) e
                             GROUP BY 1, 2) u
                     GROUP BY 1) s);
END;
$$;

-- _dg_limit_lock(): the proxy's lock serializing the leases counted store-wide (D142): held
-- from the count to the end of the calling lease's transaction, which is after the partition
-- committed the lease, so every such lease counts every other's. A lock of this proxy
-- database: leases through another proxy database of the same partitions do not wait for it.
CREATE OR REPLACE FUNCTION _dg_limit_lock() RETURNS void
LANGUAGE sql VOLATILE
SET search_path FROM CURRENT
AS $$
SELECT pg_catalog.pg_advisory_xact_lock(
    pg_catalog.hashtextextended('durable_graph concurrency limits '
                                || pg_catalog.current_schema(), 0))
$$;

-- dg_lease_v1 on a proxy: dg_lease_v1 of the partitions in _dg_lease_order until one leases;
-- at most one lease. A partition down is skipped when another has work. When the partitions
-- have concurrency limits (SPEC §15), the lease takes the proxy's limit lock, counts every
-- limit's live leases store-wide and leases with that count (dg_lease_limited_v1), so a
-- tenant or kind at limit L holds at most L leases store-wide (D142). Raises what dg_lease_v1
-- raises.
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
    o record;
    v_live json;
BEGIN
    FOR o IN SELECT * FROM _dg_lease_order(p_any_tenant, p_tenant, p_kinds) LOOP
        IF o.limited AND v_live IS NULL THEN
            PERFORM _dg_limit_lock();
            v_live := _dg_limit_live();
        END IF;
        IF v_live IS NULL THEN
            RETURN QUERY SELECT * FROM _dg_on_lease_v1(o.part, p_holder, p_ttl, p_any_tenant,
                                                       p_tenant, p_run_id, p_kinds);
        ELSE
            RETURN QUERY SELECT * FROM _dg_on_lease_limited_v1(o.part, p_holder, p_ttl,
                                                               p_any_tenant, p_tenant, p_run_id,
                                                               p_kinds, v_live);
        END IF;
        IF FOUND THEN
            RETURN;
        END IF;
    END LOOP;
END;
$$;

-- dg_begin_attempt_v1 on a proxy: as dg_lease_v1 above, with dg_begin_attempt_v1 (and
-- dg_begin_attempt_limited_v1 under limits). Deprecated since 0.2.0: use dg_begin_attempt_v2.
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
    o record;
    v_live json;
BEGIN
    FOR o IN SELECT * FROM _dg_lease_order(p_any_tenant, p_tenant, p_kinds) LOOP
        IF o.limited AND v_live IS NULL THEN
            PERFORM _dg_limit_lock();
            v_live := _dg_limit_live();
        END IF;
        IF v_live IS NULL THEN
            RETURN QUERY SELECT * FROM _dg_on_begin_attempt_v1(o.part, p_holder, p_ttl,
                                                               p_claim_ttl, p_any_tenant,
                                                               p_tenant, p_run_id, p_kinds);
        ELSE
            RETURN QUERY SELECT * FROM _dg_on_begin_attempt_limited_v1(
                o.part, p_holder, p_ttl, p_claim_ttl, p_any_tenant, p_tenant, p_run_id,
                p_kinds, v_live);
        END IF;
        IF FOUND THEN
            RETURN;
        END IF;
    END LOOP;
END;
$$;


-- dg_begin_attempt_v2 on a proxy: as dg_lease_v1 above, with dg_begin_attempt_v2 (and
-- dg_begin_attempt_limited_v2 under limits).
CREATE OR REPLACE FUNCTION dg_begin_attempt_v2(
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
               head_seq bigint, head_writes json, priority integer, kind text, plan text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    o record;
    v_live json;
BEGIN
    FOR o IN SELECT * FROM _dg_lease_order(p_any_tenant, p_tenant, p_kinds) LOOP
        IF o.limited AND v_live IS NULL THEN
            PERFORM _dg_limit_lock();
            v_live := _dg_limit_live();
        END IF;
        IF v_live IS NULL THEN
            RETURN QUERY SELECT * FROM _dg_on_begin_attempt_v2(o.part, p_holder, p_ttl,
                                                               p_claim_ttl, p_any_tenant,
                                                               p_tenant, p_run_id, p_kinds);
        ELSE
            RETURN QUERY SELECT * FROM _dg_on_begin_attempt_limited_v2(
                o.part, p_holder, p_ttl, p_claim_ttl, p_any_tenant, p_tenant, p_run_id,
                p_kinds, v_live);
        END IF;
        IF FOUND THEN
            RETURN;
        END IF;
    END LOOP;
END;
$$;
