-- From schema version 5 to version 6 (issue 26 items 1, 8; migrations/0009.listing_place.sql):
-- each entry's fixed listing place, so open_entries pages neither skip nor repeat an entry
-- while entries close, and read only their rows. Runs in open's write transaction.
-- Statements are separated by lines holding only ';'. Then fill_open_since.sql fills it in.

ALTER TABLE queue_entries ADD COLUMN open_since INTEGER
;
ALTER TABLE queue_entries ADD COLUMN list_after INTEGER
;
CREATE INDEX IF NOT EXISTS queue_entries_listing_idx ON queue_entries (
    coalesce(open_since, entry_id),
    CASE WHEN list_after IS NULL AND mode = 'interrupt' THEN 1 ELSE 2 END,
    coalesce(list_after, entry_id), list_after IS NOT NULL, entry_id)
    WHERE outcome_kind IS NULL
;
-- retry: the retries of an entry (a second retry returns the first; schema version 5).
CREATE INDEX IF NOT EXISTS queue_entries_retry_of_idx ON queue_entries (retry_of)
    WHERE retry_of IS NOT NULL
