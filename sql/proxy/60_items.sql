-- The item store (SPEC §20.3) on a partition proxy: it lives on partition 0 alone (D202), as the
-- worker registry does. An item names no thread, and a search or a namespace listing reads one
-- tenant's items in one order: on one partition, one call each, never merged across partitions.

-- dg_put_item_v1 on a proxy: on partition 0.
CREATE OR REPLACE FUNCTION dg_put_item_v1(p_namespace text[], p_key text, p_value text,
                                          p_ttl double precision, p_tenant text)
RETURNS TABLE (namespace text[], key text, value text, created_at timestamptz,
               updated_at timestamptz, expires_at timestamptz, ttl double precision)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT * FROM _dg_on_put_item_v1(0, p_namespace, p_key, p_value, p_ttl, p_tenant);
END;
$$;

-- dg_get_item_v1 on a proxy: on partition 0.
CREATE OR REPLACE FUNCTION dg_get_item_v1(p_namespace text[], p_key text, p_refresh boolean,
                                          p_tenant text)
RETURNS TABLE (namespace text[], key text, value text, created_at timestamptz,
               updated_at timestamptz, expires_at timestamptz, ttl double precision)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT * FROM _dg_on_get_item_v1(0, p_namespace, p_key, p_refresh, p_tenant);
END;
$$;

-- dg_delete_item_v1 on a proxy: on partition 0.
CREATE OR REPLACE FUNCTION dg_delete_item_v1(p_namespace text[], p_key text, p_tenant text)
RETURNS TABLE (removed boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT * FROM _dg_on_delete_item_v1(0, p_namespace, p_key, p_tenant);
END;
$$;

-- dg_search_items_v1 on a proxy: on partition 0.
CREATE OR REPLACE FUNCTION dg_search_items_v1(p_prefix text[], p_filter text, p_limit integer,
                                              p_offset integer, p_refresh boolean,
                                              p_tenant text)
RETURNS TABLE (namespace text[], key text, value text, created_at timestamptz,
               updated_at timestamptz, expires_at timestamptz, ttl double precision)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT * FROM _dg_on_search_items_v1(0, p_prefix, p_filter, p_limit, p_offset, p_refresh, p_tenant);
END;
$$;

-- dg_item_namespaces_v1 on a proxy: on partition 0.
CREATE OR REPLACE FUNCTION dg_item_namespaces_v1(p_prefix text[], p_suffix text[],
                                                 p_max_depth integer, p_limit integer,
                                                 p_offset integer, p_tenant text)
RETURNS TABLE (namespace text[])
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT * FROM _dg_on_item_namespaces_v1(0, p_prefix, p_suffix, p_max_depth, p_limit, p_offset, p_tenant);
END;
$$;

-- dg_sweep_items_v1 on a proxy: on partition 0.
CREATE OR REPLACE FUNCTION dg_sweep_items_v1(p_batch integer)
RETURNS TABLE (swept integer)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT * FROM _dg_on_sweep_items_v1(0, p_batch);
END;
$$;

-- dg_put_indexed_item_v1 on a proxy: on partition 0.
CREATE OR REPLACE FUNCTION dg_put_indexed_item_v1(p_namespace text[], p_key text, p_value text,
                                                  p_fields text[],
                                                  p_vectors double precision[],
                                                  p_ttl double precision, p_tenant text)
RETURNS TABLE (namespace text[], key text, value text, created_at timestamptz,
               updated_at timestamptz, expires_at timestamptz, ttl double precision)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY SELECT * FROM _dg_on_put_indexed_item_v1(0, p_namespace, p_key, p_value, p_fields, p_vectors, p_ttl, p_tenant);
END;
$$;

-- dg_search_items_by_vector_v1 on a proxy: on partition 0.
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
BEGIN
    RETURN QUERY SELECT * FROM _dg_on_search_items_by_vector_v1(0, p_prefix, p_vector, p_filter, p_limit, p_offset, p_refresh, p_tenant);
END;
$$;
