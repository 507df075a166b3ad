-- Helpers shared by the run-queue functions (SPEC §5). Lock order everywhere:
-- queue_threads row -> threads row -> queue_entries rows.

-- _dg_attempt_json(number, run_id, started_at, error): one attempt as _dg_attempts lists it.
CREATE OR REPLACE FUNCTION _dg_attempt_json(p_number integer, p_run_id text,
                                            p_started_at timestamptz, p_error text) RETURNS json
LANGUAGE sql STABLE
AS $$
    SELECT pg_catalog.json_build_object('number', p_number, 'run_id', p_run_id,
                                        'started_at', _dg_iso(p_started_at),
                                        'error', p_error::json)
$$;

-- _dg_attempts(entry_id): one row, the entry's attempts as a json array
-- [{"number", "run_id", "started_at", "error"}] by number ("error": the stored JSON string). _dg_attempts and _dg_entry are STABLE SQL
-- set-returning functions without SET, so that the planner inlines them into the calling
-- statement (whose plan PL/pgSQL caches). (_dg_attempts replaces the scalar _dg_attempts_json
-- of earlier versions, which was planned on every call.)
DROP FUNCTION IF EXISTS _dg_attempts_json(bigint);
CREATE OR REPLACE FUNCTION _dg_attempts(p_entry_id bigint) RETURNS TABLE (attempts json)
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(pg_catalog.json_agg(_dg_attempt_json(a.number, a.run_id, a.started_at, a.error)
                                        ORDER BY a.number),
                    '[]'::json)
      FROM queue_attempts a WHERE a.entry_id = p_entry_id
$$;

-- _dg_last_attempt(entry_id): one row, the number of the entry's last attempt (0 when none):
-- its attempt count (attempts are numbered 1, 2, ... and never removed while the entry is kept;
-- migration 0017), one backward probe of queue_attempts' primary key. Set-returning, so that it
-- is inlined into the calling statement (CROSS JOIN LATERAL), as _dg_run_taken is.
CREATE OR REPLACE FUNCTION _dg_last_attempt(p_entry_id bigint) RETURNS TABLE (number integer)
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(pg_catalog.max(a.number), 0) FROM queue_attempts a
     WHERE a.entry_id = p_entry_id
$$;

-- _dg_entry(entry_id): the entry row of sql/README.md (no row when unknown). not_before and
-- retry_of (SPEC §13), then priority and kind (SPEC §15) come last: columns added at the end keep
-- positional readers working. lease_holder and lease_expires_at are the thread's queue row's
-- lease when it is this open entry's (migration 0017: the lease's one home), else NULL.
DROP FUNCTION IF EXISTS _dg_entry(bigint);
CREATE OR REPLACE FUNCTION _dg_entry(p_entry_id bigint)
RETURNS TABLE (entry_id bigint, tenant text, thread_id text, key text, input text, mode text,
               max_attempts integer, attempts json, admitted boolean, thread_deleted boolean,
               submitted_at timestamptz, lease_holder text, lease_expires_at timestamptz,
               outcome_kind text, outcome_detail text, closed_at timestamptz,
               closed_at_seq bigint, not_before timestamptz, retry_of bigint,
               priority integer, kind text)
LANGUAGE sql STABLE
AS $$
    SELECT e.entry_id, e.tenant, e.thread_id, e.key, e.input, e.mode, e.max_attempts,
           a.attempts, e.admitted, e.thread_deleted, e.submitted_at,
           l.lease_holder, l.lease_until, e.outcome_kind, e.outcome_detail, e.closed_at,
           e.closed_at_seq, e.not_before, e.retry_of, e.priority, e.kind
      FROM queue_entries e
      LEFT JOIN queue_threads l
        ON l.thread_id = e.thread_id AND l.lease_entry_id = e.entry_id AND e.outcome_kind IS NULL
     CROSS JOIN LATERAL _dg_attempts(e.entry_id) a
     WHERE e.entry_id = p_entry_id
$$;

-- _dg_lock_queue_thread(thread_id): lock the thread's queue_threads row FOR UPDATE, inserting
-- it first when missing. A thread with no open entry may have no row (_dg_refresh_queue_thread
-- deletes it), and a row may be deleted while this waits for its lock: then it is inserted
-- again, so the caller always returns holding the row.
CREATE OR REPLACE FUNCTION _dg_lock_queue_thread(p_thread_id text) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    LOOP
        PERFORM 1 FROM queue_threads WHERE thread_id = p_thread_id FOR UPDATE;
        IF FOUND THEN
            RETURN;
        END IF;
        -- A row this transaction inserted is as good as locked: others wait on it.
        INSERT INTO queue_threads (thread_id) VALUES (p_thread_id) ON CONFLICT DO NOTHING;
        IF FOUND THEN
            RETURN;
        END IF;
    END LOOP;
END;
$$;

-- _dg_share_thread(thread_id): lock the thread's row FOR SHARE (inserting it when missing), so
-- that no commit or delete of the thread runs while an attempt is being recorded.
CREATE OR REPLACE FUNCTION _dg_share_thread(p_thread_id text) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    PERFORM 1 FROM threads WHERE thread_id = p_thread_id FOR SHARE;
    IF NOT FOUND THEN
        -- A row this transaction inserted is as good as locked: others wait on it.
        INSERT INTO threads (thread_id) VALUES (p_thread_id) ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
            PERFORM 1 FROM threads WHERE thread_id = p_thread_id FOR SHARE;
        END IF;
    END IF;
END;
$$;

-- _dg_list_place(thread_id, mode): (open_since, list_after) of an entry of p_mode submitted to
-- the thread now (D65, migrations/0009.listing_place.sql): the stretch of the thread's open
-- entries goes on, and an INTERRUPT goes right behind an attempted non-INTERRUPT head; both NULL
-- when the thread has no open entry. One step down queue_entries_open_idx. The caller holds the
-- thread's lock.
CREATE OR REPLACE FUNCTION _dg_list_place(p_thread_id text, p_mode text,
                                          OUT open_since bigint, OUT list_after bigint)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    SELECT coalesce(h.open_since, h.entry_id),
           CASE WHEN p_mode = 'interrupt'
                     AND EXISTS (SELECT 1 FROM queue_attempts a WHERE a.entry_id = h.entry_id)
                     AND (h.list_after IS NOT NULL OR h.mode <> 'interrupt')
                THEN coalesce(h.list_after, h.entry_id) END
      INTO open_since, list_after
      FROM queue_entries h
     WHERE h.thread_id = p_thread_id AND h.outcome_kind IS NULL
     ORDER BY h.queue_rank, h.entry_id LIMIT 1;
END;
$$;

-- _dg_refresh_queue_thread(thread_id, end_lease): recompute the thread's head (queue order over
-- every tenant) and when it can next be leased in queue_threads.lease_expires_at: the later of
-- its current lease expiry and the head's not_before (a delayed head holds its thread back, SPEC
-- §13); the row is left alone when nothing moved. The caller holds that row's lock.
-- SPEC §15: also the head's priority (as head_priority_key = -priority) and kind, lease's order.
-- The thread's lease lives on this row (D222, D223; migrations 0016, 0017): lease_entry_id (the
-- entry holding the thread's one lease token: a lease ends every other entry's), lease_token,
-- lease_holder, lease_ttl, lease_until (its expiry), lease_kind and lease_tenant. A lease writes
-- them; here they are kept, expired or not, unless p_end_lease (release, defer: the lease ends
-- without a close) or the lease's entry is closed (a close ends its lease), and then all set to
-- NULL, in the same write.
-- When no open entry is left the row is deleted instead (issue 25): a row with no head is read
-- by nobody (every reader wants a head), and a delete writes no index entry where setting the
-- head to NULL wrote a new row version; the next submit inserts the row again with its head.
DROP FUNCTION IF EXISTS _dg_refresh_queue_thread(text);
CREATE OR REPLACE FUNCTION _dg_refresh_queue_thread(p_thread_id text,
                                                    p_end_lease boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM queue_entries e
                    WHERE e.thread_id = p_thread_id AND e.outcome_kind IS NULL) THEN
        DELETE FROM queue_threads q WHERE q.thread_id = p_thread_id;
        RETURN;
    END IF;
    UPDATE queue_threads q
       SET head_entry_id = n.entry_id, head_tenant = n.tenant, lease_expires_at = n.expires,
           head_priority_key = -n.priority, head_kind = n.kind,
           lease_entry_id = n.lease_entry_id, lease_until = n.lease_until,
           lease_kind = n.lease_kind, lease_tenant = n.lease_tenant,
           lease_token = n.lease_token, lease_holder = n.lease_holder, lease_ttl = n.lease_ttl
      FROM (SELECT h.entry_id, h.tenant, h.priority, h.kind,
                   l.lease_entry_id, l.lease_until, l.lease_kind, l.lease_tenant,
                   l.lease_token, l.lease_holder, l.lease_ttl,
                   greatest(l.lease_until, CASE WHEN h.not_before > store_now()
                                                THEN h.not_before END) AS expires
              FROM (SELECT) one
              LEFT JOIN queue_threads l
                ON l.thread_id = p_thread_id AND NOT p_end_lease
               AND EXISTS (SELECT 1 FROM queue_entries le
                            WHERE le.entry_id = l.lease_entry_id AND le.outcome_kind IS NULL)
              LEFT JOIN LATERAL (SELECT e.entry_id, e.tenant, e.not_before, e.priority, e.kind
                                   FROM queue_entries e
                                  WHERE e.thread_id = p_thread_id AND e.outcome_kind IS NULL
                                  ORDER BY e.queue_rank, e.entry_id LIMIT 1) h ON true) n
     WHERE q.thread_id = p_thread_id
       AND (q.head_entry_id, q.head_tenant, q.lease_expires_at, q.head_priority_key, q.head_kind,
            q.lease_entry_id, q.lease_until)
           IS DISTINCT FROM (n.entry_id, n.tenant, n.expires, -n.priority, n.kind,
                             n.lease_entry_id, n.lease_until);
END;
$$;

-- _dg_queue_rank(mode): an entry's place in queue order at submit (migration 0016): 1 for an
-- INTERRUPT, 2 for the rest; 0 (attempted) is written by the functions that can otherwise let
-- an entry pass an attempted one (dg_submit_v1's INTERRUPT, dg_record_attempt_v1). Inlined.
CREATE OR REPLACE FUNCTION _dg_queue_rank(p_mode text) RETURNS smallint
LANGUAGE sql IMMUTABLE
AS $$ SELECT CASE WHEN p_mode = 'interrupt' THEN 1 ELSE 2 END::smallint $$;

-- _dg_close_entry(entry_id, kind, detail, now): close once: outcome, closed_at, closed_at_seq
-- (the thread's last event number, a tombstone's after a delete, 0 when none; D20). The lease
-- ends with it (D19): the caller holds the entry's lock and refreshes queue_threads, which drops
-- the lease of a closed entry (migration 0017: the lease lives on the queue row).
CREATE OR REPLACE FUNCTION _dg_close_entry(
    p_entry_id bigint, p_kind text, p_detail text, p_now timestamptz) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    UPDATE queue_entries e
       SET outcome_kind = p_kind, outcome_detail = p_detail, closed_at = p_now,
           closed_at_seq = coalesce((SELECT t.last_seq FROM threads t
                                      WHERE t.thread_id = e.thread_id), 0)
     WHERE e.entry_id = p_entry_id;
END;
$$;

-- _dg_run_taken(thread_id, run_id): one row, whether the run id names a checkpoint of the thread
-- or an attempt of one of its entries (rule 20's 'taken'); false for no run id. A STABLE SQL
-- set-returning function without SET, so that the planner inlines it into the statement that
-- locks the head (sql/70_lease.sql; a scalar SQL function holding a sub-select is not inlined).
DROP FUNCTION IF EXISTS _dg_run_taken(text, text);
CREATE OR REPLACE FUNCTION _dg_run_taken(p_thread_id text, p_run_id text)
RETURNS TABLE (taken boolean)
LANGUAGE sql STABLE
AS $$
    SELECT p_run_id IS NOT NULL
           AND (EXISTS (SELECT 1 FROM checkpoints c
                         WHERE c.run_id = p_run_id AND c.thread_id = p_thread_id)
                OR EXISTS (SELECT 1 FROM queue_attempts a
                            WHERE a.thread_id = p_thread_id AND a.run_id = p_run_id))
$$;

-- _dg_attempt_verdict(entry, attempts, taken): rule 20's decision, after the lease checks, for
-- an entry whose queue_threads row, thread row and own row the caller holds, attempts being its
-- attempt count (_dg_last_attempt) and taken _dg_run_taken(entry's thread, run id), both read
-- under those locks; writes nothing: 'thread_deleted' (delete-marked: the caller closes it
-- cancelled("thread_deleted")), 'exhausted' (max_attempts recorded), 'taken' (the run id names a
-- checkpoint of the thread or an attempt of a kept entry of the thread), else 'started' (the
-- caller records attempt attempts + 1).
DROP FUNCTION IF EXISTS _dg_attempt_verdict(queue_entries, text);
DROP FUNCTION IF EXISTS _dg_attempt_verdict(queue_entries, boolean);
CREATE OR REPLACE FUNCTION _dg_attempt_verdict(e queue_entries, p_attempts integer,
                                               p_taken boolean) RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE WHEN e.thread_deleted THEN 'thread_deleted'
                WHEN p_attempts >= e.max_attempts THEN 'exhausted'
                WHEN p_taken THEN 'taken'
                ELSE 'started' END
$$;

-- (_dg_record_attempt_locked of earlier versions: dg_record_attempt_v1 and dg_lease_v1 now act
-- on _dg_attempt_verdict themselves.)
DROP FUNCTION IF EXISTS _dg_record_attempt_locked(bigint, text, timestamptz);

-- _dg_lock_lease(entry_id, token, share_thread, tenant): lock the entry of a lease call (its
-- queue_threads row, optionally its thread row FOR SHARE, then the entry) and check rule 21:
-- closed, reclaimed or another tenant's entry (the tenant of the caller's lease; SPEC §10 rule
-- 6: answered exactly as an id that never existed) -> DG103, then token not the entry's current
-- lease -> DG102. Returns the entry (o_entry), its lease from the queue row (o_token, o_holder,
-- o_ttl: the lease's one home, migration 0017) and its attempt count (o_attempts,
-- _dg_last_attempt), read in the statement that locks the entry, under the queue row's lock.
DROP FUNCTION IF EXISTS _dg_lock_lease(bigint, bigint, boolean);
DROP FUNCTION IF EXISTS _dg_lock_lease(bigint, bigint, boolean, text);
CREATE OR REPLACE FUNCTION _dg_lock_lease(
    p_entry_id bigint, p_token bigint, p_share_thread boolean, p_tenant text,
    OUT o_entry queue_entries, OUT o_token bigint, OUT o_holder text, OUT o_ttl interval,
    OUT o_attempts integer)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_thread text;
    r record;
BEGIN
    SELECT thread_id INTO v_thread FROM queue_entries
     WHERE entry_id = p_entry_id AND tenant IS NOT DISTINCT FROM p_tenant;
    IF FOUND THEN
        PERFORM _dg_lock_queue_thread(v_thread);
        IF p_share_thread THEN
            PERFORM _dg_share_thread(v_thread);
        END IF;
        SELECT x AS entry, q.lease_token, q.lease_holder, q.lease_ttl, n.number INTO r
          FROM queue_entries x
          LEFT JOIN queue_threads q
            ON q.thread_id = x.thread_id AND q.lease_entry_id = x.entry_id
         CROSS JOIN LATERAL _dg_last_attempt(x.entry_id) n
         WHERE x.entry_id = p_entry_id
           FOR UPDATE OF x;
        o_entry := r.entry;
    END IF;
    IF (o_entry).entry_id IS NULL OR (o_entry).outcome_kind IS NOT NULL
       OR (o_entry).tenant IS DISTINCT FROM p_tenant THEN
        RAISE EXCEPTION 'entry % is closed', p_entry_id USING ERRCODE = 'DG103';
    END IF;
    IF NOT coalesce(r.lease_token = p_token, false) THEN
        RAISE EXCEPTION 'lease is not the current lease of entry %', p_entry_id
            USING ERRCODE = 'DG102';
    END IF;
    o_token := r.lease_token;
    o_holder := r.lease_holder;
    o_ttl := r.lease_ttl;
    o_attempts := r.number;
END;
$$;
