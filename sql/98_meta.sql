-- dg_schema_meta_v1(): the schema's bookkeeping rows (version, functions_digest), for a runtime
-- role, which cannot read the schema_meta table itself (SPEC §10.5): `verify` and `open` use it
-- to tell a current schema from one that needs `durable-graph migrate`. Raises nothing.
CREATE OR REPLACE FUNCTION dg_schema_meta_v1() RETURNS TABLE (key text, value text)
LANGUAGE sql STABLE
SET search_path FROM CURRENT
AS $$ SELECT m.key, m.value FROM schema_meta m ORDER BY m.key $$;
