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
