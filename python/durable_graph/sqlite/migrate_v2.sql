-- From schema version 2 to version 3 (SPEC §13, issue 16): delayed runs and backoff
-- (not_before, and the head's copy that lease reads), retries (retry_of), and why each attempt
-- failed (error). Runs in open's write transaction. Statements are separated by lines holding
-- only ';'.

ALTER TABLE queue_entries ADD COLUMN not_before INTEGER
;
ALTER TABLE queue_entries ADD COLUMN retry_of INTEGER
;
ALTER TABLE queue_attempts ADD COLUMN error TEXT
;
ALTER TABLE queue_threads ADD COLUMN head_not_before INTEGER
;
