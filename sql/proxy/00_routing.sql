-- The routing of a partition proxy (SPEC §16.1; the hash is documented in
-- durable_graph.postgres.partitions.routing). Installed by `durable-graph partitions init` and
-- `partitions migrate` into the proxy database's schema, after the generated
-- _dg_partitions() (N) and before the generated routing stubs, which call these in RUN ON.

-- _dg_root(thread_id): the thread id up to its first U+001F (a tree's root). NULL for NULL.
CREATE OR REPLACE FUNCTION _dg_root(p_thread_id text) RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path FROM CURRENT
AS $$ SELECT pg_catalog.split_part(p_thread_id, pg_catalog.chr(31), 1) $$;

-- _dg_thread_part(thread_id): the partition of the thread's root: the first 4 bytes of the MD5
-- of its UTF-8 bytes as a signed big-endian int4, & (N - 1). NULL routes to partition 0, whose
-- function then raises DG000 naming the argument.
CREATE OR REPLACE FUNCTION _dg_thread_part(p_thread_id text) RETURNS integer
LANGUAGE sql IMMUTABLE
SET search_path FROM CURRENT
AS $$
SELECT coalesce(('x' || pg_catalog.left(pg_catalog.md5(_dg_root(p_thread_id)), 8))::bit(32)::int4
                & (_dg_partitions() - 1), 0)
$$;

-- _dg_entry_part(entry_id): the partition of an entry: entry_id & (N - 1) (ids count in steps of
-- N from the partition's number). NULL routes to partition 0 (which raises DG000).
CREATE OR REPLACE FUNCTION _dg_entry_part(p_entry_id bigint) RETURNS integer
LANGUAGE sql IMMUTABLE
SET search_path FROM CURRENT
AS $$ SELECT coalesce((p_entry_id & (_dg_partitions() - 1))::integer, 0) $$;

-- _dg_same_part(thread_id, other, name): the thread's partition; DG000 naming the argument when
-- other (a parent, a fence's thread, a copy's target) is not NULL and lives on another partition
-- (SPEC §16.2: a child must share its root's partition: name it root U+001F suffix).
CREATE OR REPLACE FUNCTION _dg_same_part(p_thread_id text, p_other text, p_name text)
RETURNS integer
LANGUAGE plpgsql IMMUTABLE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_part integer := _dg_thread_part(p_thread_id);
BEGIN
    IF p_other IS NOT NULL AND p_thread_id IS NOT NULL
       AND _dg_thread_part(p_other) <> v_part THEN
        RAISE EXCEPTION '% % is on partition % and thread % on partition %: in a partitioned '
            'store a thread tree shares its root''s partition (name a child root U+001F suffix)',
            p_name, pg_catalog.quote_literal(p_other), _dg_thread_part(p_other),
            pg_catalog.quote_literal(p_thread_id), v_part
            USING ERRCODE = 'DG000';
    END IF;
    RETURN v_part;
END;
$$;

-- _dg_unavailable(partition, error): the ProcessingError of a call that could not reach a
-- partition, naming it (SQLSTATE 58000: not a DGxxx code, so clients map it to their
-- processing error). Partitions raising a DGxxx error pass it through unchanged.
CREATE OR REPLACE FUNCTION _dg_unavailable(p_part integer, p_error text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path FROM CURRENT
AS $$
BEGIN
    RAISE EXCEPTION 'partition % is unavailable: %', p_part, p_error USING ERRCODE = '58000';
END;
$$;
