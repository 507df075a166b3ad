-- durable_graph schema, version 9 (issue 26 items 1 and 8; D65, D66): each queue entry's fixed
-- listing place, so dg_open_entries_v1 pages neither skip nor repeat an entry while entries close, and
-- read only the page's rows (queue_entries_listing_idx) instead of every open entry.
-- open_since: the id of the entry that opened the thread's current stretch of open entries (NULL:
-- the entry's own id); every open entry of a thread holds the same. list_after: an INTERRUPT
-- submitted while a non-INTERRUPT entry of its thread had recorded an attempt is listed right
-- behind it; this is that entry's anchor (else NULL). Both are written once, at submit.
-- Applied with search_path set to the store's schema: names are unqualified on purpose.
ALTER TABLE queue_entries ADD COLUMN IF NOT EXISTS open_since bigint,
                          ADD COLUMN IF NOT EXISTS list_after bigint;
-- Every open entry of a thread joins the stretch of the thread's first open entry.
UPDATE queue_entries e
   SET open_since = f.first_id
  FROM (SELECT o.thread_id, pg_catalog.min(o.entry_id) AS first_id FROM queue_entries o
         WHERE o.outcome_kind IS NULL GROUP BY o.thread_id) f
 WHERE e.thread_id = f.thread_id AND e.outcome_kind IS NULL AND e.entry_id <> f.first_id;
CREATE INDEX IF NOT EXISTS queue_entries_listing_idx ON queue_entries (
    (coalesce(open_since, entry_id)),
    (CASE WHEN list_after IS NULL AND mode = 'interrupt' THEN 1 ELSE 2 END),
    (coalesce(list_after, entry_id)), (list_after IS NOT NULL), entry_id)
    WHERE outcome_kind IS NULL;
-- retry: the retries of an entry, so a second retry returns the first (D66).
CREATE INDEX IF NOT EXISTS queue_entries_retry_of_idx ON queue_entries (retry_of, entry_id)
    WHERE retry_of IS NOT NULL;
