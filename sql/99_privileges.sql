-- Least privilege (SPEC §10.5), applied last by every install and upgrade (migrate and
-- sql/install.sql) to every function of the schema, so functions added by other files or later
-- versions are covered without a list to keep up to date. Runs with search_path set to the
-- store's schema (current_schema()). Only builtins of pg_catalog are called, qualified.
--
-- - The schema's owner (the role running the install) keeps everything; the install refuses a
--   schema owned by another role, and CREATE on the schema is left to nobody else.
-- - Every public dg_* function is SECURITY DEFINER with search_path pinned to the schema, then
--   pg_temp last (so a caller's temporary objects can shadow nothing), and PUBLIC cannot execute
--   it: a runtime role needs USAGE on the schema and EXECUTE on them, nothing more
--   (`durable-graph grant`). Roles holding USAGE on the schema (granted runtime roles) get
--   EXECUTE on every dg_* function here, so a new function of an upgrade reaches them too.
-- - Tables, sequences, store_now() and the internal _dg_* helpers are private to the owner. The
--   helpers keep no SECURITY DEFINER and (but the _dg_notify_* trigger functions, which pin the
--   install's search_path themselves: the owner's own DML fires them too) no SET clause: they run
--   inside a dg_* function, as the owner, under its pinned search_path, and the SQL ones stay
--   inlinable.
-- - Per-schema default privileges cannot take back PUBLIC's global EXECUTE default (PostgreSQL
--   adds them to the global ones), hence the explicit REVOKEs here on every install.
DO $$
DECLARE
    v_schema   text := pg_catalog.current_schema();
    v_ns       oid;
    v_owner    oid;
    v_grantees oid[];
    f          record;
    r          record;
BEGIN
    SELECT n.oid, n.nspowner INTO v_ns, v_owner
      FROM pg_catalog.pg_namespace n WHERE n.nspname = v_schema;
    IF v_owner IS DISTINCT FROM (SELECT u.oid FROM pg_catalog.pg_roles u
                                  WHERE u.rolname = pg_catalog.current_user()) THEN
        RAISE EXCEPTION 'schema % is owned by role %, not by %: install it as its owner',
            v_schema, pg_catalog.pg_get_userbyid(v_owner), pg_catalog.current_user()
            USING ERRCODE = '42501';
    END IF;

    -- CREATE on the schema: the owner only.
    FOR r IN
        SELECT DISTINCT a.grantee
          FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
         WHERE n.oid = v_ns AND a.privilege_type = 'CREATE' AND a.grantee <> v_owner
    LOOP
        EXECUTE pg_catalog.format('REVOKE CREATE ON SCHEMA %I FROM %s', v_schema,
            CASE WHEN r.grantee = 0 THEN 'PUBLIC'
                 ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(r.grantee)) END);
    END LOOP;

    -- The runtime roles: whoever holds USAGE on the schema, besides the owner.
    SELECT coalesce(pg_catalog.array_agg(DISTINCT a.grantee), '{}') INTO v_grantees
      FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
     WHERE n.oid = v_ns AND a.privilege_type = 'USAGE' AND a.grantee NOT IN (v_owner, 0);

    -- Tables and sequences: private to the owner.
    FOR r IN
        SELECT c.relname, a.grantee
          FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
         WHERE c.relnamespace = v_ns AND a.grantee <> v_owner
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON %I.%I FROM %s', v_schema, r.relname,
            CASE WHEN r.grantee = 0 THEN 'PUBLIC'
                 ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(r.grantee)) END);
    END LOOP;

    FOR f IN
        SELECT p.oid, p.proname,
               pg_catalog.format('%I.%I(%s)', v_schema, p.proname,
                                 pg_catalog.pg_get_function_identity_arguments(p.oid)) AS sig
          FROM pg_catalog.pg_proc p WHERE p.pronamespace = v_ns
    LOOP
        -- PUBLIC has EXECUTE on every new function by default: take it back, and any other
        -- grant but the runtime roles' EXECUTE on dg_* functions (kept, not revoked and
        -- granted again, so that a repeated install leaves the ACLs as they were).
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f.sig);
        FOR r IN
            SELECT DISTINCT a.grantee FROM pg_catalog.pg_proc p,
                   pg_catalog.aclexplode(p.proacl) a
             WHERE p.oid = f.oid AND a.grantee NOT IN (v_owner, 0)
               AND NOT (f.proname LIKE 'dg\_%' AND f.proname NOT LIKE 'dg\_admin\_%'
                        AND a.grantee = ANY (v_grantees))
        LOOP
            EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM %I', f.sig,
                                      pg_catalog.pg_get_userbyid(r.grantee));
        END LOOP;
        -- dg_admin_* functions are the owner's (a DBA's): caller's rights, granted to nobody.
        IF f.proname LIKE 'dg\_%' AND f.proname NOT LIKE 'dg\_admin\_%' THEN
            EXECUTE pg_catalog.format(
                'ALTER FUNCTION %s SECURITY DEFINER SET search_path = %I, pg_temp',
                f.sig, v_schema);
            FOR r IN SELECT u.g FROM pg_catalog.unnest(v_grantees) AS u(g) LOOP  -- no-op if held
                EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', f.sig,
                                          pg_catalog.pg_get_userbyid(r.g));
            END LOOP;
        END IF;
    END LOOP;
END;
$$;
