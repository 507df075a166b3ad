-- Run claims (SPEC §4 claim / renew_claim / release_claim; rule 9; D1-D3: live, current,
-- one token counter).

-- dg_claim_v1: take the thread's run claim with a new fencing token, expiring at store-now + ttl.
-- Creates nothing visible. Raises DG001 ("thread has a live claim") while any claim is live,
-- DG000 for a bad argument (identifiers: 1..512 UTF-8 bytes; ttl).
CREATE OR REPLACE FUNCTION dg_claim_v1(p_thread_id text, p_holder text, p_ttl interval)
RETURNS TABLE (thread_id text, holder text, token bigint, expires_at timestamptz, ttl interval)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    t threads;
    v_now timestamptz;
    v_token bigint;
BEGIN
    PERFORM _dg_id(p_thread_id, 'thread_id');
    PERFORM _dg_id(p_holder, 'holder');
    PERFORM _dg_not_null(p_ttl IS NOT NULL, 'ttl');
    p_ttl := _dg_duration(p_ttl, 'ttl', false);
    t := _dg_lock_thread(p_thread_id);
    v_now := store_now();
    IF t.claim_token IS NOT NULL AND v_now < t.claim_expires_at THEN
        RAISE EXCEPTION 'thread has a live claim' USING ERRCODE = 'DG001';
    END IF;
    v_token := pg_catalog.nextval('fencing_token_seq');
    UPDATE threads
       SET claim_token = v_token, claim_holder = p_holder,
           claim_expires_at = v_now + p_ttl, claim_ttl = p_ttl
     WHERE threads.thread_id = p_thread_id;
    RETURN QUERY SELECT p_thread_id, p_holder, v_token, v_now + p_ttl, p_ttl;
END;
$$;

-- dg_renew_claim_v1: push the current claim's expiry to store-now + the ttl it was taken with,
-- keeping its token (works after expiry until another claim is issued). Raises DG002 when the
-- token is not the thread's current claim.
CREATE OR REPLACE FUNCTION dg_renew_claim_v1(p_thread_id text, p_token bigint)
RETURNS TABLE (thread_id text, holder text, token bigint, expires_at timestamptz, ttl interval)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    t threads;
    v_now timestamptz;
BEGIN
    PERFORM _dg_id(p_thread_id, 'thread_id');
    PERFORM _dg_not_null(p_token IS NOT NULL, 'token');
    SELECT * INTO t FROM threads WHERE threads.thread_id = p_thread_id FOR UPDATE;
    IF NOT FOUND OR NOT coalesce(t.claim_token = p_token, false) THEN
        RAISE EXCEPTION 'claim is not current on thread' USING ERRCODE = 'DG002';
    END IF;
    v_now := store_now();
    UPDATE threads SET claim_expires_at = v_now + t.claim_ttl
     WHERE threads.thread_id = p_thread_id;
    RETURN QUERY SELECT p_thread_id, t.claim_holder, t.claim_token, v_now + t.claim_ttl,
                        t.claim_ttl;
END;
$$;

-- dg_release_claim_v1: end the thread's current claim. Raises DG002 when the token is not
-- current.
CREATE OR REPLACE FUNCTION dg_release_claim_v1(p_thread_id text, p_token bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    t threads;
BEGIN
    PERFORM _dg_id(p_thread_id, 'thread_id');
    PERFORM _dg_not_null(p_token IS NOT NULL, 'token');
    SELECT * INTO t FROM threads WHERE thread_id = p_thread_id FOR UPDATE;
    IF NOT FOUND OR NOT coalesce(t.claim_token = p_token, false) THEN
        RAISE EXCEPTION 'claim is not current on thread' USING ERRCODE = 'DG002';
    END IF;
    UPDATE threads
       SET claim_token = NULL, claim_holder = NULL, claim_expires_at = NULL, claim_ttl = NULL
     WHERE thread_id = p_thread_id;
END;
$$;
