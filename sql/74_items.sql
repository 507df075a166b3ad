-- The item store (SPEC §20.3 "the store"; python/durable_graph/core/items.py): LangGraph's
-- long-term memory, items of JSON objects under a namespace (text[] of labels) and a key, of one
-- tenant (NULL: no tenant; stored as ''). Another tenant's items are as unknown as missing ones
-- (SPEC §5 rule 9). An item whose expires_at is at or before store-now is expired: no read
-- returns it, dg_sweep_items_v1 deletes it (D200). Times at the store's clock (store_now()).

-- _dg_labels(value, name, min): DG000 unless value is min..20 labels, each an identifier
-- (_dg_id) without '.'. The message names the bad label 0-based, as Python does: name[i].
CREATE OR REPLACE FUNCTION _dg_labels(p_value text[], p_name text, p_min integer) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_n integer;
BEGIN
    IF p_value IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', p_name USING ERRCODE = 'DG000';
    END IF;
    IF pg_catalog.array_ndims(p_value) > 1 THEN
        RAISE EXCEPTION '% must be a one-dimensional array', p_name USING ERRCODE = 'DG000';
    END IF;
    v_n := pg_catalog.cardinality(p_value);
    IF v_n < p_min OR v_n > 20 THEN
        RAISE EXCEPTION '% must have %..20 labels, got %', p_name, p_min, v_n
            USING ERRCODE = 'DG000';
    END IF;
    FOR i IN 1..v_n LOOP
        PERFORM _dg_id(p_value[i], p_name || '[' || (i - 1) || ']');
        IF pg_catalog.strpos(p_value[i], '.') > 0 THEN
            RAISE EXCEPTION '%[%] must not contain ''.''', p_name, i - 1 USING ERRCODE = 'DG000';
        END IF;
    END LOOP;
END;
$$;

-- _dg_item_page(limit, offset): DG000 unless limit is 1..1000 and offset 0..1000000.
CREATE OR REPLACE FUNCTION _dg_item_page(p_limit integer, p_offset integer) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    PERFORM _dg_not_null(p_limit IS NOT NULL, 'limit');
    PERFORM _dg_check(p_limit BETWEEN 1 AND 1000, 'limit must be between 1 and 1000');
    PERFORM _dg_not_null(p_offset IS NOT NULL, 'offset');
    PERFORM _dg_check(p_offset BETWEEN 0 AND 1000000, 'offset must be between 0 and 1000000');
END;
$$;

-- _dg_item_filter(filter, max_bytes): DG000 unless filter is NULL or JSON object text (_dg_json)
-- of at most 100 keys, each an identifier, each value a JSON value (equality) or, when it is an
-- object with a key starting with '$', exactly one of $eq $ne $gt $gte $lt $lte.
CREATE OR REPLACE FUNCTION _dg_item_filter(p_filter text, p_max_bytes bigint) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v jsonb;
    v_key text;
    v_cond jsonb;
BEGIN
    IF p_filter IS NULL THEN
        RETURN;
    END IF;
    PERFORM _dg_json(p_filter, 'filter', p_max_bytes);
    PERFORM _dg_check(p_filter ~ '^[ \t\n\r]*\{', 'filter must be a JSON object');
    v := _dg_item_jsonb(p_filter);
    PERFORM _dg_check((SELECT pg_catalog.count(*) FROM pg_catalog.jsonb_object_keys(v)) <= 100,
                      'filter must have at most 100 keys');
    FOR v_key, v_cond IN SELECT e.key, e.value FROM pg_catalog.jsonb_each(v) AS e LOOP
        PERFORM _dg_id(v_key, 'filter key');
        IF pg_catalog.jsonb_typeof(v_cond) = 'object'
           AND EXISTS (SELECT 1 FROM pg_catalog.jsonb_object_keys(v_cond) AS k(k)
                        WHERE pg_catalog.left(k.k, 1) = '$')
           AND NOT (_dg_item_operator(v_cond) IS NOT NULL) THEN
            RAISE EXCEPTION 'filter[%] must be a JSON value or one of {op: value} with op one of '
                '$eq, $ne, $gt, $gte, $lt, $lte', pg_catalog.quote_literal(v_key)
                USING ERRCODE = 'DG000';
        END IF;
    END LOOP;
END;
$$;

-- _dg_item_jsonb(text): JSON text (checked) as jsonb; a \u0000 (which jsonb cannot hold) read
-- as a space, as _dg_json_problem reads it.
CREATE OR REPLACE FUNCTION _dg_item_jsonb(p_text text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF pg_catalog.strpos(p_text, '\u0000') > 0 THEN
        RETURN pg_catalog.replace(p_text, '\u0000', '\u0020')::jsonb;
    END IF;
    RETURN p_text::jsonb;
END;
$$;

-- _dg_item_operator(cond): the operator of a condition {op: value} (one key, one of the six),
-- else NULL (an equality with cond itself).
CREATE OR REPLACE FUNCTION _dg_item_operator(p_cond jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_op text;
BEGIN
    IF pg_catalog.jsonb_typeof(p_cond) <> 'object' THEN
        RETURN NULL;
    END IF;
    IF (SELECT pg_catalog.count(*) FROM pg_catalog.jsonb_object_keys(p_cond)) <> 1 THEN
        RETURN NULL;
    END IF;
    SELECT k.k INTO v_op FROM pg_catalog.jsonb_object_keys(p_cond) AS k(k);
    IF v_op IN ('$eq', '$ne', '$gt', '$gte', '$lt', '$lte') THEN
        RETURN v_op;
    END IF;
    RETURN NULL;
END;
$$;

-- _dg_item_matches(value, filter): whether the value (JSON object text) passes the filter (jsonb,
-- checked by _dg_item_filter; NULL passes all): every key present, and equal (jsonb equality) or
-- in the operator's relation; $gt $gte $lt $lte hold between two numbers or two strings (code
-- point order) only (D201).
CREATE OR REPLACE FUNCTION _dg_item_matches(p_value text, p_filter jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v jsonb;
    v_key text;
    v_cond jsonb;
    v_got jsonb;
    v_want jsonb;
    v_op text;
    v_cmp integer;
BEGIN
    IF p_filter IS NULL THEN
        RETURN true;
    END IF;
    v := _dg_item_jsonb(p_value);
    FOR v_key, v_cond IN SELECT e.key, e.value FROM pg_catalog.jsonb_each(p_filter) AS e LOOP
        IF NOT v ? v_key THEN
            RETURN false;
        END IF;
        v_got := v -> v_key;
        v_op := _dg_item_operator(v_cond);
        IF v_op IS NULL THEN
            v_op := '$eq';
            v_want := v_cond;
        ELSE
            v_want := v_cond -> v_op;
        END IF;
        IF v_op = '$eq' THEN
            IF NOT v_got = v_want THEN RETURN false; END IF;
        ELSIF v_op = '$ne' THEN
            IF v_got = v_want THEN RETURN false; END IF;
        ELSE
            IF pg_catalog.jsonb_typeof(v_got) = 'number'
               AND pg_catalog.jsonb_typeof(v_want) = 'number' THEN
                v_cmp := pg_catalog.sign((v_got #>> '{}')::numeric
                                         - (v_want #>> '{}')::numeric)::integer;
            ELSIF pg_catalog.jsonb_typeof(v_got) = 'string'
                  AND pg_catalog.jsonb_typeof(v_want) = 'string' THEN
                v_cmp := CASE WHEN (v_got #>> '{}') COLLATE "C" < (v_want #>> '{}') COLLATE "C"
                              THEN -1
                              WHEN (v_got #>> '{}') = (v_want #>> '{}') THEN 0
                              ELSE 1 END;
            ELSE
                RETURN false;
            END IF;
            IF NOT (CASE v_op WHEN '$gt' THEN v_cmp > 0 WHEN '$gte' THEN v_cmp >= 0
                              WHEN '$lt' THEN v_cmp < 0 ELSE v_cmp <= 0 END) THEN
                RETURN false;
            END IF;
        END IF;
    END LOOP;
    RETURN true;
END;
$$;

-- _dg_labels_match(labels, pattern, from_end): whether labels start (from_end: end) with the
-- pattern's labels, a pattern label '*' matching any label.
CREATE OR REPLACE FUNCTION _dg_labels_match(p_labels text[], p_pattern text[], p_from_end boolean)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_n integer := pg_catalog.cardinality(p_labels);
    v_m integer := pg_catalog.cardinality(p_pattern);
    v_at integer := CASE WHEN p_from_end THEN v_n - v_m ELSE 0 END;
BEGIN
    IF v_m > v_n THEN
        RETURN false;
    END IF;
    FOR i IN 1..v_m LOOP
        IF p_pattern[i] <> '*' AND p_pattern[i] <> p_labels[v_at + i] THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END;
$$;

-- dg_put_item_v1: put the item p_namespace / p_key of p_tenant (NULL: no tenant): p_value, JSON
-- object text of at most max_value_bytes; p_ttl minutes from store-now it expires (NULL: never;
-- else more than 0, at most a century). A live item put again keeps its created_at. Returns the
-- item. Raises DG000 for bad arguments.
CREATE OR REPLACE FUNCTION dg_put_item_v1(p_namespace text[], p_key text, p_value text,
                                          p_ttl double precision, p_tenant text)
RETURNS TABLE (namespace text[], key text, value text, created_at timestamptz,
               updated_at timestamptz, expires_at timestamptz, ttl double precision)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := store_now();
BEGIN
    PERFORM _dg_labels(p_namespace, 'namespace', 1);
    PERFORM _dg_id(p_key, 'key');
    PERFORM _dg_json(p_value, 'value', (_dg_limits()).max_value_bytes);
    PERFORM _dg_check(p_value ~ '^[ \t\n\r]*\{', 'value must be a JSON object');
    PERFORM _dg_check(p_ttl IS NULL OR (p_ttl > 0 AND p_ttl <= 52560000),
                      'ttl must be more than 0 and at most 52560000 minutes');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    RETURN QUERY
    INSERT INTO items AS i (tenant, namespace, key, value, created_at, updated_at, expires_at, ttl)
    VALUES (COALESCE(p_tenant, ''), p_namespace, p_key, p_value, v_now, v_now,
            v_now + pg_catalog.round(p_ttl * 60000000)::bigint * interval '1 microsecond', p_ttl)
    ON CONFLICT (tenant, namespace, key) DO UPDATE
       SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at,
           expires_at = EXCLUDED.expires_at, ttl = EXCLUDED.ttl,
           created_at = CASE WHEN i.expires_at IS NULL OR i.expires_at > v_now
                             THEN i.created_at ELSE EXCLUDED.created_at END
    RETURNING i.namespace::text[], i.key::text, i.value, i.created_at, i.updated_at,
              i.expires_at, i.ttl;
END;
$$;

-- dg_get_item_v1: the live item p_namespace / p_key of p_tenant: one row, or none (missing,
-- expired, another tenant's). p_refresh: a live item with a ttl expires ttl minutes from
-- store-now (the row returned shows it). Raises DG000 for bad arguments.
CREATE OR REPLACE FUNCTION dg_get_item_v1(p_namespace text[], p_key text, p_refresh boolean,
                                          p_tenant text)
RETURNS TABLE (namespace text[], key text, value text, created_at timestamptz,
               updated_at timestamptz, expires_at timestamptz, ttl double precision)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := store_now();
BEGIN
    PERFORM _dg_labels(p_namespace, 'namespace', 1);
    PERFORM _dg_id(p_key, 'key');
    PERFORM _dg_not_null(p_refresh IS NOT NULL, 'refresh_ttl');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    IF p_refresh THEN
        UPDATE items i
           SET expires_at = v_now + pg_catalog.round(i.ttl * 60000000)::bigint
                                    * interval '1 microsecond'
         WHERE i.tenant = COALESCE(p_tenant, '') AND i.namespace = p_namespace
           AND i.key = p_key AND i.ttl IS NOT NULL AND i.expires_at > v_now;
    END IF;
    RETURN QUERY
    SELECT i.namespace::text[], i.key::text, i.value, i.created_at, i.updated_at, i.expires_at,
           i.ttl
      FROM items i
     WHERE i.tenant = COALESCE(p_tenant, '') AND i.namespace = p_namespace
       AND i.key = p_key AND (i.expires_at IS NULL OR i.expires_at > v_now);
END;
$$;

-- dg_delete_item_v1: delete the item p_namespace / p_key of p_tenant (expired or not); one row,
-- removed: whether there was one. Raises DG000 for bad arguments.
CREATE OR REPLACE FUNCTION dg_delete_item_v1(p_namespace text[], p_key text, p_tenant text)
RETURNS TABLE (removed boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    PERFORM _dg_labels(p_namespace, 'namespace', 1);
    PERFORM _dg_id(p_key, 'key');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    DELETE FROM items i
     WHERE i.tenant = COALESCE(p_tenant, '') AND i.namespace = p_namespace
       AND i.key = p_key;
    RETURN QUERY SELECT FOUND;
END;
$$;

-- dg_search_items_v1: the live items of p_tenant under p_prefix ('{}': every namespace) that
-- pass p_filter (NULL: all; _dg_item_filter), newest updated_at first, then namespace and key;
-- p_offset skipped, p_limit (1..1000) at most. p_refresh: the returned items with a ttl expire
-- ttl minutes from store-now. Raises DG000 for bad arguments.
CREATE OR REPLACE FUNCTION dg_search_items_v1(p_prefix text[], p_filter text, p_limit integer,
                                              p_offset integer, p_refresh boolean,
                                              p_tenant text)
RETURNS TABLE (namespace text[], key text, value text, created_at timestamptz,
               updated_at timestamptz, expires_at timestamptz, ttl double precision)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := store_now();
    v_tenant text := COALESCE(p_tenant, '');
    v_filter jsonb;
    v_n integer;
BEGIN
    PERFORM _dg_labels(p_prefix, 'prefix', 0);
    PERFORM _dg_item_filter(p_filter, (_dg_limits()).max_value_bytes);
    PERFORM _dg_item_page(p_limit, p_offset);
    PERFORM _dg_not_null(p_refresh IS NOT NULL, 'refresh_ttl');
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    v_n := pg_catalog.cardinality(p_prefix);
    IF p_filter IS NOT NULL THEN
        v_filter := _dg_item_jsonb(p_filter);
        IF v_filter = '{}'::jsonb THEN
            v_filter := NULL;
        END IF;
    END IF;
    -- The page, refreshed first when asked: a refresh changes no row's place (updated_at),
    -- and a refreshed item stays live, so the page read after it is the same. Its rows are
    -- locked in key order, so concurrent refreshing searches never deadlock.
    IF p_refresh THEN
        UPDATE items u
           SET expires_at = v_now + pg_catalog.round(u.ttl * 60000000)::bigint
                                    * interval '1 microsecond'
          FROM (SELECT l.namespace, l.key
                  FROM items l
                 WHERE l.tenant = v_tenant AND l.ttl IS NOT NULL AND (l.namespace, l.key) IN (
                       SELECT i.namespace, i.key
                         FROM items i
                        WHERE i.tenant = v_tenant
                          AND (v_n = 0 OR (i.namespace >= p_prefix
                                           AND i.namespace[1:v_n] = p_prefix))
                          AND (i.expires_at IS NULL OR i.expires_at > v_now)
                          AND _dg_item_matches(i.value, v_filter)
                        ORDER BY i.updated_at DESC, i.namespace, i.key
                        LIMIT p_limit OFFSET p_offset)
                 ORDER BY l.namespace, l.key
                   FOR UPDATE) AS k
         WHERE u.tenant = v_tenant AND u.namespace = k.namespace AND u.key = k.key;
    END IF;
    RETURN QUERY
    SELECT i.namespace::text[], i.key::text, i.value, i.created_at, i.updated_at, i.expires_at,
           i.ttl
      FROM items i
     WHERE i.tenant = v_tenant
       AND (v_n = 0 OR (i.namespace >= p_prefix AND i.namespace[1:v_n] = p_prefix))
       AND (i.expires_at IS NULL OR i.expires_at > v_now)
       AND _dg_item_matches(i.value, v_filter)
     ORDER BY i.updated_at DESC, i.namespace, i.key
     LIMIT p_limit OFFSET p_offset;
END;
$$;

-- dg_item_namespaces_v1: the distinct namespaces of p_tenant's live items, each cut to
-- p_max_depth labels (NULL: whole; else 1..20), that start with p_prefix and end with p_suffix
-- (NULL or '{}': any; a label '*' matches any label), in label order (code points); p_offset
-- skipped, p_limit (1..1000) at most. Raises DG000 for bad arguments.
CREATE OR REPLACE FUNCTION dg_item_namespaces_v1(p_prefix text[], p_suffix text[],
                                                 p_max_depth integer, p_limit integer,
                                                 p_offset integer, p_tenant text)
RETURNS TABLE (namespace text[])
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := store_now();
BEGIN
    IF p_prefix IS NOT NULL THEN
        PERFORM _dg_labels(p_prefix, 'prefix', 0);
    END IF;
    IF p_suffix IS NOT NULL THEN
        PERFORM _dg_labels(p_suffix, 'suffix', 0);
    END IF;
    PERFORM _dg_check(p_max_depth IS NULL OR p_max_depth BETWEEN 1 AND 20,
                      'max_depth must be between 1 and 20');
    PERFORM _dg_item_page(p_limit, p_offset);
    PERFORM _dg_opt_id(p_tenant, 'tenant');
    RETURN QUERY
    SELECT d.ns
      FROM (SELECT DISTINCT CASE WHEN p_max_depth IS NULL THEN i.namespace
                                 ELSE i.namespace[1:p_max_depth] END AS ns
              FROM items i
             WHERE i.tenant = COALESCE(p_tenant, '')
               AND (i.expires_at IS NULL OR i.expires_at > v_now)
               AND (p_prefix IS NULL OR _dg_labels_match(i.namespace, p_prefix, false))
               AND (p_suffix IS NULL OR _dg_labels_match(i.namespace, p_suffix, true))) d
     ORDER BY d.ns
     LIMIT p_limit OFFSET p_offset;
END;
$$;

-- dg_sweep_items_v1: delete up to p_batch (1..100000) items, of every tenant, expired at
-- store-now, oldest expiry first; one row, swept: how many. Raises DG000 for bad arguments.
CREATE OR REPLACE FUNCTION dg_sweep_items_v1(p_batch integer)
RETURNS TABLE (swept integer)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_now timestamptz := store_now();
    v_swept integer;
BEGIN
    PERFORM _dg_not_null(p_batch IS NOT NULL, 'batch');
    PERFORM _dg_check(p_batch BETWEEN 1 AND 100000, 'batch must be between 1 and 100000');
    -- SKIP LOCKED: a row another call holds (a refreshing read) waits for the next sweep.
    DELETE FROM items i
     WHERE (i.tenant, i.namespace, i.key) IN (
           SELECT o.tenant, o.namespace, o.key FROM items o
            WHERE o.expires_at IS NOT NULL AND o.expires_at <= v_now
            ORDER BY o.expires_at LIMIT p_batch
              FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS v_swept = ROW_COUNT;
    RETURN QUERY SELECT v_swept;
END;
$$;
