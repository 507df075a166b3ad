-- durable_graph schema, version 19: the first release, 0.2.0 (SPEC §23; D228).
-- Applied with search_path set to the store's schema: names are unqualified on purpose.
--
-- Before 0.2.0, functions changed signature and result in place (dg_open_entries_v1's result
-- from schema 7 on, among others), so `CREATE OR REPLACE` of today's definitions failed on an
-- earlier schema ("cannot change return type of existing function"), and functions no longer
-- defined stayed behind. This drops every function of the earlier state but the trigger
-- functions (their triggers use them; their signature never changed) and store_now (the
-- testkit may have replaced it); the function files that run next in the same transaction
-- create the released set, and sql/99_privileges.sql grants it again to every role holding
-- USAGE on the schema, as `durable-graph grant` left it. The schema's callers see the old set
-- until the upgrade commits, then the new one, which keeps every function of the last
-- pre-release state with its signature and meaning. From 0.2.0 on a released function never
-- changes (new behaviour is a new _vN+1), so no later migration needs this.
DO $$
DECLARE
    f record;
BEGIN
    FOR f IN
        SELECT pg_catalog.format('%I.%I(%s)', n.nspname, p.proname,
                                 pg_catalog.pg_get_function_identity_arguments(p.oid)) AS sig
          FROM pg_catalog.pg_proc p
          JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname = pg_catalog.current_schema()
           AND (p.proname LIKE 'dg\_%' OR p.proname LIKE '\_dg\_%')
           AND p.prorettype <> 'pg_catalog.trigger'::pg_catalog.regtype
           AND p.proname <> '_dg_meta_reader'  -- the view below depends on it
    LOOP
        EXECUTE 'DROP FUNCTION ' || f.sig;
    END LOOP;
END;
$$;

-- Never backwards, for code that cannot be changed now (SPEC §23.4; D228). Every earlier commit
-- reads its bookkeeping from schema_meta before it does anything, and then "migrates" whatever
-- it finds older or newer than itself. The rows move to schema_bookkeeping, and schema_meta
-- becomes a view of them that answers only a reader naming its release in the setting
-- durable_graph.release (0.2.0 and later set it): any other reader, the code of an earlier
-- commit first, gets an error naming the schema's version and release and what to run
-- (_dg_meta_reader, sql/98_meta.sql; a one-time filter, so an empty table raises too).
-- Superusers are held by it as well (a view, not a row-level policy). The function is created
-- here because the view depends on it; sql/98_meta.sql replaces its body in the same upgrade.
-- Applying it again (a test that sets a schema back) changes nothing.
DO $$
BEGIN
    IF (SELECT c.relkind FROM pg_catalog.pg_class c
         WHERE c.relname = 'schema_meta'
           AND c.relnamespace = pg_catalog.current_schema()::pg_catalog.regnamespace) = 'r' THEN
        ALTER TABLE schema_meta RENAME TO schema_bookkeeping;
        ALTER INDEX schema_meta_pkey RENAME TO schema_bookkeeping_pkey;
        CREATE FUNCTION _dg_meta_reader(p_schema text) RETURNS boolean
        LANGUAGE sql STABLE AS 'SELECT true';
        EXECUTE pg_catalog.format(
            'CREATE VIEW schema_meta AS SELECT b.key, b.value FROM schema_bookkeeping b'
            ' WHERE _dg_meta_reader(%L)', pg_catalog.current_schema());
    END IF;
END;
$$;
