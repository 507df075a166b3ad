-- durable_graph schema (SPEC §20.3 "the store"): the item store, LangGraph's long-term memory
-- (durable_graph.langgraph.store.DurableStore), one row per tenant, namespace and key. Applied
-- with search_path set to the store's schema: names are unqualified on purpose. The functions
-- are in sql/74_items.sql.

-- tenant: '' for no tenant (a tenant is 1..512 bytes). value: the JSON object text as put.
-- namespace and key compare in code point order (COLLATE "C"), so a prefix is an index range.
-- ttl: minutes (NULL: never expires).
CREATE TABLE IF NOT EXISTS items (
    tenant     text NOT NULL,
    namespace  text[] COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    value      text NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    expires_at timestamptz,
    ttl        double precision,
    PRIMARY KEY (tenant, namespace, key)
);
-- dg_sweep_items_v1: the expired rows, oldest first.
CREATE INDEX IF NOT EXISTS items_expires_at_idx ON items (expires_at)
    WHERE expires_at IS NOT NULL;
