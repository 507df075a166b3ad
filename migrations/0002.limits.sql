-- durable_graph schema, version 2: the limits every SQL function enforces (SPEC §10 rule 2).
-- One row; the install sets the defaults, a DBA changes them with dg_set_limit_v1 (sql/README.md
-- "Limits"). They live in the schema so that every language meets the same ones.
CREATE TABLE limits (
    one             boolean PRIMARY KEY DEFAULT true CHECK (one),
    -- one JSON value (state, metadata, input, payload, write, effect, outcome detail), bytes
    max_value_bytes bigint NOT NULL DEFAULT 67108864 CHECK (max_value_bytes >= 1),
    -- everything one call writes (the sum of its arguments' sizes), bytes
    max_call_bytes  bigint NOT NULL DEFAULT 134217728 CHECK (max_call_bytes >= 1),
    -- one read page (events_after, history, open_entries, children, threads): a page stops
    -- after the row that reaches this many bytes, so it always holds at least one row
    max_page_bytes  bigint NOT NULL DEFAULT 16777216 CHECK (max_page_bytes >= 1)
);
INSERT INTO limits DEFAULT VALUES;

-- Open entries submitted before the functions checked their arguments (version 1) whose input
-- no reader can decode (issue #11: not JSON, or nested too deep to parse) would burn their
-- attempts and fail every reader: close them failed, with the reason, keep their input as a JSON
-- string holding the original text (so that every reader can read the entry), and move their
-- threads' heads on, once, here.
DO $$
DECLARE
    e record;
    v_bad bigint[] := '{}'::bigint[];
BEGIN
    FOR e IN SELECT q.entry_id, q.input FROM queue_entries q WHERE q.outcome_kind IS NULL LOOP
        BEGIN
            PERFORM e.input::json;
        EXCEPTION WHEN OTHERS THEN
            v_bad := v_bad || e.entry_id;
        END;
    END LOOP;
    IF pg_catalog.cardinality(v_bad) = 0 THEN
        RETURN;
    END IF;
    UPDATE queue_entries q
       SET input = pg_catalog.to_json(q.input)::text,
           outcome_kind = 'failed',
           outcome_detail = '"input is not valid JSON (closed by migration 0002)"',
           closed_at = pg_catalog.clock_timestamp(),
           closed_at_seq = coalesce((SELECT t.last_seq FROM threads t
                                      WHERE t.thread_id = q.thread_id), 0),
           lease_token = NULL, lease_holder = NULL, lease_expires_at = NULL, lease_ttl = NULL
     WHERE q.entry_id = ANY (v_bad);
    -- The heads and lease expiries of the touched threads, as _dg_refresh_queue_thread computes.
    UPDATE queue_threads q
       SET head_entry_id = n.entry_id, head_tenant = n.tenant, lease_expires_at = n.expires
      FROM (SELECT t.thread_id, h.entry_id, h.tenant, l.expires
              FROM (SELECT DISTINCT b.thread_id FROM queue_entries b
                     WHERE b.entry_id = ANY (v_bad)) t
             CROSS JOIN LATERAL (SELECT max(o.lease_expires_at) AS expires
                                   FROM queue_entries o
                                  WHERE o.thread_id = t.thread_id AND o.outcome_kind IS NULL
                                    AND o.lease_token IS NOT NULL) l
              LEFT JOIN LATERAL (SELECT o.entry_id, o.tenant FROM queue_entries o
                                  WHERE o.thread_id = t.thread_id AND o.outcome_kind IS NULL
                                  ORDER BY o.queue_rank, o.entry_id LIMIT 1) h ON true) n
     WHERE q.thread_id = n.thread_id;
END;
$$;
