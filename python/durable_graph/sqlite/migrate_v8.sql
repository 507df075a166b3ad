-- From schema version 8 to version 9 (SPEC §20.3; migrations/0014.items.sql): the item store,
-- LangGraph's long-term memory, one row per tenant, namespace and key. Runs in open's write
-- transaction, after schema.sql on a new file. Statements are separated by lines holding only ';'.

-- tenant: '' for no tenant; namespace: the labels as a compact JSON array (a prefix's text is the
-- start of its namespaces' text, up to the ',' or ']' after it); value: JSON object text; times
-- in microseconds (UTC); ttl in minutes (NULL: never expires).
CREATE TABLE items (
    tenant     TEXT NOT NULL,
    namespace  TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    expires_at INTEGER,
    ttl        REAL,
    PRIMARY KEY (tenant, namespace, key)
) WITHOUT ROWID
;
-- sweep_items: the expired rows, oldest first.
CREATE INDEX items_expires_at_idx ON items (expires_at) WHERE expires_at IS NOT NULL
