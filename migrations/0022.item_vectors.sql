-- durable_graph schema, version 22: the vectors of items put with an index, LangGraph's
-- store.index (SPEC §25.1, issue 48; D296-D298). Applied with search_path set to the store's
-- schema: names are unqualified on purpose. The functions over it are in
-- sql/76_item_vectors.sql.
--
-- One row per item and indexed field, as LangGraph's store_vectors. updated_at is the item's
-- updated_at when the vectors were put: a later plain put (dg_put_item_v1, which does not know
-- this table) leaves them stale, and a search by vector reads only an item's current ones. The
-- rows go with their item (ON DELETE CASCADE: a delete, a sweep). embedding: double precision
-- values, compared by an exact scan in SQL (pgvector is not required). Idempotent (IF NOT
-- EXISTS), as each migration an install re-reads.
CREATE TABLE IF NOT EXISTS item_vectors (
    tenant     text NOT NULL,
    namespace  text[] COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    field      text COLLATE "C" NOT NULL,
    updated_at timestamptz NOT NULL,
    embedding  double precision[] NOT NULL,
    PRIMARY KEY (tenant, namespace, key, field),
    FOREIGN KEY (tenant, namespace, key) REFERENCES items (tenant, namespace, key)
        ON DELETE CASCADE
);
