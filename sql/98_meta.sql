-- dg_schema_meta_v1(): the schema's bookkeeping rows (release, version, functions_digest), for a
-- runtime role, which cannot read the bookkeeping itself (SPEC §10.5): `verify` and `open`
-- use it to tell a current schema from one that needs `durable-graph migrate`, and from one newer
-- than their code (SPEC §23.4). Raises nothing.
CREATE OR REPLACE FUNCTION dg_schema_meta_v1() RETURNS TABLE (key text, value text)
LANGUAGE sql STABLE
SET search_path FROM CURRENT
AS $$ SELECT b.key, b.value FROM schema_bookkeeping b ORDER BY b.key $$;

-- _dg_meta_reader(schema): true for a reader of the schema_meta view that names its release in
-- durable_graph.release (durable-graph 0.2.0 and later); for any other, the code of an earlier
-- commit first, raises SQLSTATE 55000 naming the schema's version and release: such code reads
-- schema_meta before anything else and would otherwise try to "migrate" the newer schema
-- (migration 0019, D228). Reads the rows from schema_bookkeeping, schema-qualified: it pins no
-- search_path.
CREATE OR REPLACE FUNCTION _dg_meta_reader(p_schema text) RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_release text;
    v_version text;
BEGIN
    IF coalesce(pg_catalog.current_setting('durable_graph.release', true), '') <> '' THEN
        RETURN true;
    END IF;
    EXECUTE pg_catalog.format(
        'SELECT pg_catalog.max(b.value) FILTER (WHERE b.key = ''release''),'
        '       pg_catalog.max(b.value) FILTER (WHERE b.key = ''version'')'
        '  FROM %I.schema_bookkeeping b', p_schema) INTO v_release, v_version;
    RAISE EXCEPTION 'schema % is at version % (durable-graph %), newer than this code, which '
        'was released before it (before 0.2.0, schema version 18 or lower): older code never '
        'opens or migrates a newer schema, and nothing was changed', p_schema,
        coalesce(v_version, '?'), coalesce(v_release, '?')
        USING ERRCODE = '55000',
              HINT = pg_catalog.format('Run durable-graph %s or later against this schema; a '
                                       'person reads its bookkeeping with SELECT * FROM '
                                       '%I.dg_schema_meta_v1()', v_release, p_schema);
END;
$$;

-- _dg_schema_meta_guard(): never backwards (SPEC §23.4; D228). The install bookkeeping of
-- schema_bookkeeping (release, version, functions_digest) changes only by code that names its
-- own release in durable_graph.release (migrate and sql/install.sql of 0.2.0 and later set it
-- for their transaction), and only to a release and version at least the
-- stored ones. Code released before this guard never sets it: when such code, or an older
-- release's, tries to "migrate" a newer schema (auto_migrate re-installing its own function
-- bodies), this raises, and its whole transaction, functions included, rolls back. Other keys
-- (a partition's number) pass. Reads the table through TG_TABLE_SCHEMA: it pins no search_path.
CREATE OR REPLACE FUNCTION _dg_schema_meta_guard() RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_installing text := pg_catalog.current_setting('durable_graph.release', true);
    v_release    text;
    v_version    text;
    v_key        text := CASE WHEN TG_OP = 'DELETE' THEN OLD.key ELSE NEW.key END;
    v_tried      text;
    v_ours       integer[];
    v_stored     integer[];
BEGIN
    IF v_key NOT IN ('release', 'version', 'functions_digest') THEN
        RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    END IF;
    EXECUTE pg_catalog.format(
        'SELECT pg_catalog.max(m.value) FILTER (WHERE m.key = ''release''),'
        '       pg_catalog.max(m.value) FILTER (WHERE m.key = ''version'')'
        '  FROM %I.schema_bookkeeping m',
        TG_TABLE_SCHEMA) INTO v_release, v_version;
    v_tried := CASE WHEN TG_OP = 'DELETE' THEN 'delete ' || v_key
                    ELSE pg_catalog.format('set %s to %s', v_key, NEW.value) END;
    IF coalesce(v_installing, '') = '' THEN
        RAISE EXCEPTION 'schema % is at version % (durable-graph %), newer than the code that '
            'tried to % (code released before 0.2.0): older code never migrates a newer schema '
            'backwards, and nothing was changed', TG_TABLE_SCHEMA, coalesce(v_version, '?'),
            coalesce(v_release, 'before 0.2.0'), v_tried
            USING ERRCODE = '55000',
                  HINT = pg_catalog.format('Run durable-graph %s or later against this schema.',
                                           coalesce(v_release, '0.2.0'));
    END IF;
    -- Releases compare as integer arrays ({0,2,0} < {0,10,0}); a malformed one is refused.
    v_ours := CASE WHEN v_installing ~ '^[0-9]{1,6}(\.[0-9]{1,6}){0,3}$'
                   THEN pg_catalog.string_to_array(v_installing, '.')::integer[] END;
    v_stored := CASE WHEN v_release ~ '^[0-9]{1,6}(\.[0-9]{1,6}){0,3}$'
                     THEN pg_catalog.string_to_array(v_release, '.')::integer[] END;
    IF v_ours IS NULL OR v_ours < v_stored
       OR (v_key = 'version' AND TG_OP <> 'DELETE' AND v_version ~ '^[0-9]{1,9}$'
           AND NEW.value ~ '^[0-9]{1,9}$' AND NEW.value::integer < v_version::integer) THEN
        RAISE EXCEPTION 'schema % is at version % (durable-graph %), newer than durable-graph % '
            'that tried to %: older code never migrates a newer schema backwards, and nothing '
            'was changed', TG_TABLE_SCHEMA, coalesce(v_version, '?'),
            coalesce(v_release, 'before 0.2.0'), v_installing, v_tried
            USING ERRCODE = '55000',
                  HINT = pg_catalog.format('Run durable-graph %s or later against this schema.',
                                           coalesce(v_release, v_installing));
    END IF;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END;
$$;

CREATE OR REPLACE TRIGGER schema_meta_guard
    BEFORE INSERT OR UPDATE OR DELETE ON schema_bookkeeping
    FOR EACH ROW EXECUTE FUNCTION _dg_schema_meta_guard();
