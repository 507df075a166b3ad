-- From schema version 2 to version 3 (SPEC §13, issue 16; migrations/0006.not_before.sql):
-- delayed runs and backoff (not_before), retries (retry_of), and why each attempt
-- failed (error). Runs in open's write transaction. Statements are separated by lines holding
-- only ';'.

ALTER TABLE queue_entries ADD COLUMN not_before INTEGER
;
ALTER TABLE queue_entries ADD COLUMN retry_of INTEGER
;
ALTER TABLE queue_attempts ADD COLUMN error TEXT
;
