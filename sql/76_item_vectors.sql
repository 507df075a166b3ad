-- The item store's vectors (SPEC §25.1 store.index; python/durable_graph/core/items.py; D296-D298):
-- an item put with an index keeps one embedding per indexed field (item_vectors), and a search
-- by vector ranks the live items by their best field's cosine similarity to the query vector,
-- computed here by an exact scan over double precision arrays (pgvector is not required), the
-- items without vectors after them. Only an item's current vectors count: those put with its
-- current updated_at.

-- _dg_vector_numbers(value, name): DG000 unless every number of value (an array of any shape)
-- is 0 or of magnitude 1e-150..1e150, so no product or sum of a scan overflows or underflows.
CREATE OR REPLACE FUNCTION _dg_vector_numbers(p_value double precision[], p_name text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.unnest(p_value) AS u(x)
                WHERE x IS NULL OR NOT (x = 0 OR pg_catalog.abs(x) BETWEEN 1e-150 AND 1e150)) THEN
        RAISE EXCEPTION '% must hold numbers that are 0 or of magnitude 1e-150..1e150', p_name
            USING ERRCODE = 'DG000';
    END IF;
END;
$$;

-- _dg_cosine(a, b): the cosine similarity of two vectors of one length; 0 when either is zero
-- (as durable_graph.core.items.cosine).
CREATE OR REPLACE FUNCTION _dg_cosine(p_a double precision[], p_b double precision[])
RETURNS double precision
LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE WHEN s.norms = 0 THEN 0 ELSE s.dot / s.norms END
      FROM (SELECT pg_catalog.sum(p_a[g.i] * p_b[g.i]) AS dot,
                   pg_catalog.sqrt(pg_catalog.sum(p_a[g.i] * p_a[g.i]))
                   * pg_catalog.sqrt(pg_catalog.sum(p_b[g.i] * p_b[g.i])) AS norms
              FROM pg_catalog.generate_subscripts(p_a, 1) AS g(i)) s
$$;

-- _dg_item_vector_page(tenant, prefix, vector, filter, limit, offset, now): the page of a search
-- by vector (checked arguments) over the live items of tenant under prefix that pass filter:
-- first those with current vectors of vector's length, each with its best vector's cosine
-- similarity to vector as score, highest first; then the others, score NULL (D298); each run
-- then newest updated_at, namespace, key; offset skipped, limit at most.
CREATE OR REPLACE FUNCTION _dg_item_vector_page(p_tenant text, p_prefix text[],
                                                p_vector double precision[], p_filter jsonb,
                                                p_limit integer, p_offset integer,
                                                p_now timestamptz)
RETURNS TABLE (namespace text[], key text, score double precision)
LANGUAGE sql STABLE
AS $$
    SELECT s.namespace, s.key, s.score
      FROM (SELECT i.namespace::text[] AS namespace, i.key::text AS key, i.updated_at,
                   pg_catalog.max(_dg_cosine(v.embedding, p_vector)) AS score
              FROM items i
              LEFT JOIN item_vectors v
                ON v.tenant = i.tenant AND v.namespace = i.namespace AND v.key = i.key
               AND v.updated_at = i.updated_at
               AND pg_catalog.cardinality(v.embedding) = pg_catalog.cardinality(p_vector)
             WHERE i.tenant = p_tenant
               AND (pg_catalog.cardinality(p_prefix) = 0
                    OR (i.namespace >= p_prefix
                        AND i.namespace[1:pg_catalog.cardinality(p_prefix)] = p_prefix))
               AND (i.expires_at IS NULL OR i.expires_at > p_now)
               AND _dg_item_matches(i.value, p_filter)
             GROUP BY i.namespace, i.key, i.updated_at) s
     ORDER BY s.score DESC NULLS LAST, s.updated_at DESC, s.namespace COLLATE "C",
              s.key COLLATE "C"
     LIMIT p_limit OFFSET p_offset
$$;

-- dg_put_indexed_item_v1: dg_put_item_v1, and in the same transaction the item's vectors become
-- p_vectors (a two-dimensional array, one row per field of p_fields, each an identifier;
-- '{}' and '{}': none): at most 1000 fields of 1..16000 numbers each (every number 0 or of
-- magnitude 1e-150..1e150). Returns the item. Raises DG000 for bad arguments.
CREATE OR REPLACE FUNCTION dg_put_indexed_item_v1(p_namespace text[], p_key text, p_value text,
                                                  p_fields text[],
                                                  p_vectors double precision[],
                                                  p_ttl double precision, p_tenant text)
RETURNS TABLE (namespace text[], key text, value text, created_at timestamptz,
               updated_at timestamptz, expires_at timestamptz, ttl double precision)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_n integer;
    v_item record;
BEGIN
    PERFORM _dg_not_null(p_fields IS NOT NULL, 'fields');
    PERFORM _dg_not_null(p_vectors IS NOT NULL, 'vectors');
    PERFORM _dg_check(pg_catalog.array_ndims(p_fields) IS NULL
                      OR pg_catalog.array_ndims(p_fields) = 1,
                      'fields must be a one-dimensional array');
    v_n := pg_catalog.cardinality(p_fields);
    PERFORM _dg_check(v_n <= 1000, 'vectors must have at most 1000 fields');
    IF v_n = 0 THEN
        PERFORM _dg_check(pg_catalog.cardinality(p_vectors) = 0,
                          'vectors must have one row per field');
    ELSE
        PERFORM _dg_check(pg_catalog.array_ndims(p_vectors) = 2
                          AND pg_catalog.array_length(p_vectors, 1) = v_n
                          AND pg_catalog.array_lower(p_vectors, 1) = 1
                          AND pg_catalog.array_lower(p_vectors, 2) = 1,
                          'vectors must have one row per field');
        PERFORM _dg_check(pg_catalog.array_length(p_vectors, 2) BETWEEN 1 AND 16000,
                          'vectors must have 1..16000 numbers each');
        FOR i IN 1..v_n LOOP
            PERFORM _dg_id(p_fields[i], 'vectors field');
        END LOOP;
        PERFORM _dg_check((SELECT pg_catalog.count(DISTINCT f) FROM pg_catalog.unnest(p_fields) f)
                          = v_n, 'vectors fields must be distinct');
        PERFORM _dg_vector_numbers(p_vectors, 'vectors');
    END IF;
    SELECT * INTO v_item
      FROM dg_put_item_v1(p_namespace, p_key, p_value, p_ttl, p_tenant) AS p;
    DELETE FROM item_vectors v
     WHERE v.tenant = COALESCE(p_tenant, '') AND v.namespace = p_namespace AND v.key = p_key;
    INSERT INTO item_vectors (tenant, namespace, key, field, updated_at, embedding)
    SELECT COALESCE(p_tenant, ''), p_namespace, p_key, p_fields[i], v_item.updated_at,
           ARRAY(SELECT pg_catalog.unnest(p_vectors[i:i]))
      FROM pg_catalog.generate_series(1, v_n) AS g(i);
    RETURN QUERY SELECT v_item.namespace, v_item.key, v_item.value, v_item.created_at,
                        v_item.updated_at, v_item.expires_at, v_item.ttl;
END;
$$;

-- dg_search_items_by_vector_v1: the live items of p_tenant under p_prefix ('{}': every
-- namespace) that pass p_filter (as dg_search_items_v1's): first those with current vectors of
-- p_vector's length (1..16000 numbers, each 0 or of magnitude 1e-150..1e150), each with score:
-- its best vector's cosine similarity to p_vector, highest first; then the others, score NULL;
-- each run then newest updated_at, namespace, key; p_offset skipped, p_limit (1..1000) at most. p_refresh: the returned items
-- with a ttl expire ttl minutes from store-now. Raises DG000 for bad arguments.
CREATE OR REPLACE FUNCTION dg_search_items_by_vector_v1(p_prefix text[],
                                                        p_vector double precision[],
                                                        p_filter text, p_limit integer,
                                                        p_offset integer, p_refresh boolean,
                                                        p_tenant text)
RETURNS TABLE (namespace text[], key text, value text, created_at timestamptz,
               updated_at timestamptz, expires_at timestamptz, ttl double precision,
               score double precision)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := store_now();
    v_tenant text := COALESCE(p_tenant, '');
    v_filter jsonb;
BEGIN
    PERFORM _dg_labels(p_prefix, 'prefix', 0);
    PERFORM _dg_not_null(p_vector IS NOT NULL, 'vector');
    PERFORM _dg_check(pg_catalog.array_ndims(p_vector) = 1
                      AND pg_catalog.cardinality(p_vector) BETWEEN 1 AND 16000,
                      'vector must have 1..16000 numbers');
    PERFORM _dg_vector_numbers(p_vector, 'vector');
    PERFORM _dg_item_filter(p_filter, (_dg_limits()).max_value_bytes);
    PERFORM _dg_item_page(p_limit, p_offset);
    PERFORM _dg_not_null(p_refresh IS NOT NULL, 'refresh_ttl');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    IF p_filter IS NOT NULL THEN
        v_filter := _dg_item_jsonb(p_filter);
        IF v_filter = '{}'::jsonb THEN
            v_filter := NULL;
        END IF;
    END IF;
    -- As dg_search_items_v1: the page refreshed first (a refresh moves no item's place), its
    -- rows locked in key order.
    IF p_refresh THEN
        UPDATE items u
           SET expires_at = v_now + pg_catalog.round(u.ttl * 60000000)::bigint
                                    * interval '1 microsecond'
          FROM (SELECT l.namespace, l.key
                  FROM items l
                 WHERE l.tenant = v_tenant AND l.ttl IS NOT NULL AND (l.namespace, l.key) IN (
                       SELECT p.namespace, p.key
                         FROM _dg_item_vector_page(v_tenant, p_prefix, p_vector, v_filter,
                                                   p_limit, p_offset, v_now) p)
                 ORDER BY l.namespace, l.key
                   FOR UPDATE) AS k
         WHERE u.tenant = v_tenant AND u.namespace = k.namespace AND u.key = k.key;
    END IF;
    RETURN QUERY
    SELECT i.namespace::text[], i.key::text, i.value, i.created_at, i.updated_at, i.expires_at,
           i.ttl, p.score
      FROM _dg_item_vector_page(v_tenant, p_prefix, p_vector, v_filter, p_limit, p_offset,
                                v_now) p
      JOIN items i ON i.tenant = v_tenant AND i.namespace = p.namespace AND i.key = p.key
     ORDER BY p.score DESC NULLS LAST, i.updated_at DESC, i.namespace, i.key;
END;
$$;
