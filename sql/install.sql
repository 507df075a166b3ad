-- durable_graph: install or upgrade a store's schema with psql alone (SPEC §10.7).
--
--     psql -v schema=app -f sql/install.sql
--
-- Run it as the role that owns the schema (or will: it is created when missing, which needs
-- CREATE on the database), best a dedicated non-superuser role (sql/README.md "Privileges"). It
-- refuses, before creating anything, a schema owned by another role, a schema holding an object
-- another role owns, and a schema on which another role (or PUBLIC) holds CREATE: any of them
-- could run code as the installing role. Idempotent, in one transaction (SPEC §23.3: a failed
-- or killed run leaves the previous version whole; run it again): on a current schema the
-- catalog stays as it was (the function files run inside a savepoint that is rolled back when
-- they changed nothing); on an earlier version it applies the missing migrations of
-- ../migrations, then every function file of sql/, exactly as `durable-graph migrate` does, and
-- holds the same advisory lock, so the two never race. A schema newer than this script (a
-- higher version or a later release) is refused, naming both versions (SPEC §23.4).
-- `durable-graph sql --schema S` prints this script with every included file inlined.
-- Every migration and function file is listed below, in order (a test checks the lists).
\set ON_ERROR_STOP on
\if :{?schema}
\else
\set schema ''
\endif
\set dg_required_version 22
\set dg_release 0.2.0

BEGIN;
-- Warnings and errors only: one transaction, so on an error nothing was changed (rerun it).
SET LOCAL client_min_messages = warning;
SELECT pg_catalog.set_config('durable_graph.schema', :'schema', true) AS dg_schema_set \gset
-- The release this install records: schema_meta's guard (sql/98_meta.sql) refuses bookkeeping
-- written without it, or by an older release.
SELECT pg_catalog.set_config('durable_graph.release', :'dg_release', true),
       pg_catalog.set_config('durable_graph.required_version', :'dg_required_version', true)
       AS dg_release_set \gset

-- Check the name, wait for a concurrent migrate, refuse a foreign-owned schema or one where
-- another role planted objects or may create them, create a missing one, and read the installed
-- version (0: none).
DO $$
DECLARE
    v_schema  text := pg_catalog.current_setting('durable_graph.schema');
    v_owner   oid;
    v_version text;
    v_release text;
    v_yoyo    integer := 0;
    v_foreign text[];
BEGIN
    IF v_schema !~ '^[a-z_][a-z0-9_]{0,62}$' OR v_schema LIKE 'pg\_%' THEN
        RAISE EXCEPTION 'schema % must match ^[a-z_][a-z0-9_]{0,62}$ and not start with pg_ '
            '(give it with psql -v schema=NAME)', pg_catalog.quote_literal(v_schema)
            USING ERRCODE = '22023';
    END IF;
    -- The key of durable_graph.postgres.migrations.lock_key: the first 8 bytes of a sha256.
    PERFORM pg_catalog.pg_advisory_xact_lock(('x' || pg_catalog.left(pg_catalog.encode(
        pg_catalog.sha256(pg_catalog.convert_to('durable_graph.migrate:' || v_schema, 'UTF8')),
        'hex'), 16))::bit(64)::bigint);
    SELECT n.nspowner INTO v_owner FROM pg_catalog.pg_namespace n WHERE n.nspname = v_schema;
    IF NOT FOUND THEN
        EXECUTE pg_catalog.format('CREATE SCHEMA %I', v_schema);
    ELSIF v_owner <> (SELECT u.oid FROM pg_catalog.pg_roles u
                       WHERE u.rolname = pg_catalog.current_user()) THEN
        -- Another role could have planted objects that shadow builtins (nextval(text), ...).
        RAISE EXCEPTION 'schema % is owned by role %, not by %: run this script as its owner',
            v_schema, pg_catalog.pg_get_userbyid(v_owner), pg_catalog.current_user()
            USING ERRCODE = '42501';
    ELSE
        -- What another role put in the schema runs as us once a statement here resolves a name to
        -- it: a table of ours with a trigger of theirs, an overload of a builtin. And a role
        -- holding CREATE could plant one while this transaction runs. `durable-graph migrate`
        -- runs this very query (read from here, between the two marks).
        -- dg:foreign-objects
        SELECT pg_catalog.array_agg(f.what ORDER BY f.what) INTO v_foreign FROM (
            SELECT pg_catalog.format('relation %s of role %s', c.relname,
                                     pg_catalog.pg_get_userbyid(c.relowner)) AS what
              FROM pg_catalog.pg_class c WHERE c.relnamespace = (
                   SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = v_schema)
               AND c.relowner <> v_owner
            UNION ALL
            SELECT pg_catalog.format('function %s(%s) of role %s', p.proname,
                                     pg_catalog.pg_get_function_identity_arguments(p.oid),
                                     pg_catalog.pg_get_userbyid(p.proowner))
              FROM pg_catalog.pg_proc p WHERE p.pronamespace = (
                   SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = v_schema)
               AND p.proowner <> v_owner
            UNION ALL
            SELECT pg_catalog.format('type %s of role %s', t.typname,
                                     pg_catalog.pg_get_userbyid(t.typowner))
              FROM pg_catalog.pg_type t WHERE t.typnamespace = (
                   SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = v_schema)
               AND t.typowner <> v_owner AND t.typrelid = 0 AND t.typcategory <> 'A'
            UNION ALL
            SELECT pg_catalog.format('operator %s of role %s', o.oprname,
                                     pg_catalog.pg_get_userbyid(o.oprowner))
              FROM pg_catalog.pg_operator o WHERE o.oprnamespace = (
                   SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = v_schema)
               AND o.oprowner <> v_owner
            UNION ALL
            SELECT pg_catalog.format('collation %s of role %s', l.collname,
                                     pg_catalog.pg_get_userbyid(l.collowner))
              FROM pg_catalog.pg_collation l WHERE l.collnamespace = (
                   SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = v_schema)
               AND l.collowner <> v_owner
            UNION ALL
            SELECT pg_catalog.format('conversion %s of role %s', v.conname,
                                     pg_catalog.pg_get_userbyid(v.conowner))
              FROM pg_catalog.pg_conversion v WHERE v.connamespace = (
                   SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = v_schema)
               AND v.conowner <> v_owner
            UNION ALL
            SELECT pg_catalog.format('trigger %s on %s calling %s of role %s', g.tgname,
                                     c.relname, p.proname, pg_catalog.pg_get_userbyid(p.proowner))
              FROM pg_catalog.pg_trigger g
              JOIN pg_catalog.pg_class c ON c.oid = g.tgrelid
              JOIN pg_catalog.pg_proc p ON p.oid = g.tgfoid
             WHERE c.relnamespace = (
                   SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = v_schema)
               AND p.proowner <> v_owner AND NOT g.tgisinternal
               AND p.pronamespace <> 'pg_catalog'::pg_catalog.regnamespace
            UNION ALL
            SELECT pg_catalog.format('CREATE on the schema held by %s', CASE a.grantee
                       WHEN 0 THEN 'PUBLIC' ELSE 'role ' || pg_catalog.pg_get_userbyid(a.grantee) END)
              FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
             WHERE n.nspname = v_schema AND a.privilege_type = 'CREATE' AND a.grantee <> v_owner
        ) f;
        -- end dg:foreign-objects
        IF v_foreign IS NOT NULL THEN
            RAISE EXCEPTION 'schema % is not safe to install into: %', v_schema,
                pg_catalog.array_to_string(v_foreign, '; ')
                USING ERRCODE = '42501',
                      HINT = 'Drop the objects other roles own there (or install into a new '
                             'schema) and REVOKE CREATE ON SCHEMA from every role but its owner, '
                             'then run this script again; nothing was created.';
        END IF;
    END IF;
    IF pg_catalog.to_regclass(pg_catalog.format('%I.schema_meta', v_schema)) IS NOT NULL THEN
        EXECUTE pg_catalog.format(
            'SELECT pg_catalog.max(m.value) FILTER (WHERE m.key = ''version''),'
            '       pg_catalog.max(m.value) FILTER (WHERE m.key = ''release'')'
            '  FROM %I.schema_meta m', v_schema)
            INTO v_version, v_release;
    END IF;
    -- Never backwards (SPEC §23.4): a schema of a higher version or a later release is newer
    -- than this script, which changes nothing there.
    IF coalesce(v_version, '0')::integer
           > pg_catalog.current_setting('durable_graph.required_version')::integer
       OR pg_catalog.string_to_array(coalesce(v_release, '0'), '.')::integer[]
           > pg_catalog.string_to_array(
                 pg_catalog.current_setting('durable_graph.release'), '.')::integer[]
    THEN
        RAISE EXCEPTION 'schema % is at version % (durable-graph %), newer than this install '
            'script of durable-graph % (schema version %): older code never migrates a newer '
            'schema backwards, and nothing was changed', v_schema, v_version, v_release,
            pg_catalog.current_setting('durable_graph.release'),
            pg_catalog.current_setting('durable_graph.required_version')
            USING ERRCODE = '55000',
                  HINT = 'Run the install script of that release or a later one.';
    END IF;
    -- Migrations an earlier, non-atomic `durable-graph migrate` committed before failing on the
    -- functions are in yoyo's table, not in schema_meta: they are not applied twice.
    IF pg_catalog.to_regclass(pg_catalog.format('%I._yoyo_migration', v_schema)) IS NOT NULL THEN
        EXECUTE pg_catalog.format('SELECT pg_catalog.count(*) FROM %I._yoyo_migration y'
                                  ' WHERE y.migration_id ~ ''^[0-9]{4}\.''', v_schema)
            INTO v_yoyo;
    END IF;
    PERFORM pg_catalog.set_config('durable_graph.version',
        GREATEST(coalesce(v_version, '0')::integer, v_yoyo)::text, true);
END;
$$;
SET LOCAL search_path TO :"schema", pg_temp;
SELECT pg_catalog.current_setting('durable_graph.version')::integer AS dg_version \gset

-- Migrations: each applied once, when the installed version is below its number.
SELECT :dg_version >= 1 AS dg_has_0001 \gset
\if :dg_has_0001
\else
\ir ../migrations/0001.tables.sql
\endif
SELECT :dg_version >= 2 AS dg_has_0002 \gset
\if :dg_has_0002
\else
\ir ../migrations/0002.limits.sql
\endif
SELECT :dg_version >= 3 AS dg_has_0003 \gset
\if :dg_has_0003
\else
\ir ../migrations/0003.growth.sql
\endif
SELECT :dg_version >= 4 AS dg_has_0004 \gset
\if :dg_has_0004
\else
\ir ../migrations/0004.checkpoints_run_index.sql
\endif
SELECT :dg_version >= 5 AS dg_has_0005 \gset
\if :dg_has_0005
\else
\ir ../migrations/0005.queue_listing.sql
\endif
SELECT :dg_version >= 6 AS dg_has_0006 \gset
\if :dg_has_0006
\else
\ir ../migrations/0006.not_before.sql
\endif
SELECT :dg_version >= 7 AS dg_has_0007 \gset
\if :dg_has_0007
\else
\ir ../migrations/0007.notify.sql
\endif
SELECT :dg_version >= 8 AS dg_has_0008 \gset
\if :dg_has_0008
\else
\ir ../migrations/0008.task_path.sql
\endif
SELECT :dg_version >= 9 AS dg_has_0009 \gset
\if :dg_has_0009
\else
\ir ../migrations/0009.listing_place.sql
\endif
SELECT :dg_version >= 10 AS dg_has_0010 \gset
\if :dg_has_0010
\else
\ir ../migrations/0010.scheduling.sql
\endif
SELECT :dg_version >= 11 AS dg_has_0011 \gset
\if :dg_has_0011
\else
\ir ../migrations/0011.lean_hot_path.sql
\endif
SELECT :dg_version >= 12 AS dg_has_0012 \gset
\if :dg_has_0012
\else
\ir ../migrations/0012.workers.sql
\endif
SELECT :dg_version >= 13 AS dg_has_0013 \gset
\if :dg_has_0013
\else
\ir ../migrations/0013.worker_roles.sql
\endif
SELECT :dg_version >= 14 AS dg_has_0014 \gset
\if :dg_has_0014
\else
\ir ../migrations/0014.items.sql
\endif
SELECT :dg_version >= 15 AS dg_has_0015 \gset
\if :dg_has_0015
\else
\ir ../migrations/0015.budgets.sql
\endif
SELECT :dg_version >= 16 AS dg_has_0016 \gset
\if :dg_has_0016
\else
\ir ../migrations/0016.hot_lease.sql
\endif
SELECT :dg_version >= 17 AS dg_has_0017 \gset
\if :dg_has_0017
\else
\ir ../migrations/0017.lease_on_queue_row.sql
\endif
SELECT :dg_version >= 18 AS dg_has_0018 \gset
\if :dg_has_0018
\else
\ir ../migrations/0018.queue_on_thread_row.sql
\endif
SELECT :dg_version >= 19 AS dg_has_0019 \gset
\if :dg_has_0019
\else
\ir ../migrations/0019.release.sql
\endif
SELECT :dg_version >= 20 AS dg_has_0020 \gset
\if :dg_has_0020
\else
\ir ../migrations/0020.thread_incarnation.sql
\endif
SELECT :dg_version >= 21 AS dg_has_0021 \gset
\if :dg_has_0021
\else
\ir ../migrations/0021.thread_ttl.sql
\endif
SELECT :dg_version >= 22 AS dg_has_0022 \gset
\if :dg_has_0022
\else
\ir ../migrations/0022.item_vectors.sql
\endif

-- Functions: every file, every time, inside a savepoint that is rolled back when they left the
-- schema's functions, triggers and privileges as they were (CREATE OR REPLACE writes a new row
-- version even of an identical function: a run on a current schema must change nothing). The
-- fingerprint's query is a psql variable, run before and after.
SELECT $dg$
SELECT pg_catalog.md5(pg_catalog.concat_ws(E'\x1e',
    (SELECT pg_catalog.string_agg(pg_catalog.concat_ws(E'\x1f', p.proname,
                pg_catalog.pg_get_function_identity_arguments(p.oid),
                pg_catalog.pg_get_function_result(p.oid), p.prosrc, p.proconfig::text,
                p.prosecdef::text, p.provolatile::text, p.proacl::text),
            E'\x1e' ORDER BY p.proname COLLATE "C",
                pg_catalog.pg_get_function_identity_arguments(p.oid) COLLATE "C")
       FROM pg_catalog.pg_proc p WHERE p.pronamespace = n.oid),
    (SELECT pg_catalog.string_agg(pg_catalog.pg_get_triggerdef(g.oid) || g.tgenabled::text,
                                  E'\x1e' ORDER BY g.tgname COLLATE "C", g.tgrelid)
       FROM pg_catalog.pg_trigger g JOIN pg_catalog.pg_class c ON c.oid = g.tgrelid
      WHERE c.relnamespace = n.oid AND NOT g.tgisinternal),
    (SELECT pg_catalog.string_agg(c.relname || coalesce(c.relacl::text, ''), E'\x1e'
                                  ORDER BY c.relname COLLATE "C")
       FROM pg_catalog.pg_class c WHERE c.relnamespace = n.oid),
    n.nspacl::text)) AS fingerprint
  FROM pg_catalog.pg_namespace n
 WHERE n.nspname = pg_catalog.current_setting('durable_graph.schema')
$dg$ AS dg_fingerprint_sql \gset
:dg_fingerprint_sql \gset dg_before_
SAVEPOINT dg_functions;
\ir 00_clock.sql
\ir 01_checks.sql
\ir 10_claims.sql
\ir 20_commit.sql
\ir 30_writes_events_effects.sql
\ir 40_retract_prune_delete.sql
\ir 47_runs_copy.sql
\ir 48_thread_ttl.sql
\ir 50_reads.sql
\ir 52_effects.sql
\ir 55_queue_common.sql
\ir 60_submit.sql
\ir 70_lease.sql
\ir 72_scheduling.sql
\ir 74_items.sql
\ir 75_fast_path.sql
\ir 76_item_vectors.sql
\ir 77_notify.sql
\ir 80_attempts_close.sql
\ir 85_operating.sql
\ir 86_workers.sql
\ir 90_queue_reads.sql
\ir 92_queue_listing.sql
\ir 93_partitions.sql
\ir 96_deprecated.sql
\ir 98_meta.sql
\ir 99_privileges.sql
:dg_fingerprint_sql \gset dg_after_
SELECT :'dg_before_fingerprint' = :'dg_after_fingerprint' AS dg_functions_unchanged \gset
\if :dg_functions_unchanged
ROLLBACK TO SAVEPOINT dg_functions;
\else
RELEASE SAVEPOINT dg_functions;
\endif

-- Bookkeeping, as migrate writes it: the release, the version and the digest of the installed
-- bodies (rows that hold these values already are left as they are).
INSERT INTO schema_bookkeeping (key, value)
SELECT 'release', :'dg_release'
UNION ALL
SELECT 'version', :'dg_required_version'
UNION ALL
SELECT 'functions_digest', pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(coalesce(
           pg_catalog.string_agg(p.proname || E'\x1f' || p.prosrc, E'\x1e'
                                 ORDER BY p.proname COLLATE "C", p.prosrc COLLATE "C"),
           ''), 'UTF8')), 'hex')
  FROM pg_catalog.pg_proc p
 WHERE p.pronamespace = (SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = :'schema')
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value
 WHERE schema_bookkeeping.value IS DISTINCT FROM EXCLUDED.value;
COMMIT;
