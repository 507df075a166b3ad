-- From schema version 11 to version 12 (SPEC §25.1 store.index; migrations/0022.item_vectors.sql):
-- the vectors of items put with an index, one row per item and field. Runs in open's write
-- transaction. Statements are separated by lines holding only ';'.

-- tenant, namespace, key: the item's (as in items); field: LangGraph's field path ('$', 'text',
-- 'a.b.0'); updated_at: the item's updated_at when the vectors were put (microseconds, UTC): a
-- later plain put_item leaves them stale, and a search by vector ignores them (D296);
-- embedding: a JSON array of numbers.
CREATE TABLE item_vectors (
    tenant     TEXT NOT NULL,
    namespace  TEXT NOT NULL,
    key        TEXT NOT NULL,
    field      TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    embedding  TEXT NOT NULL,
    PRIMARY KEY (tenant, namespace, key, field)
) WITHOUT ROWID
