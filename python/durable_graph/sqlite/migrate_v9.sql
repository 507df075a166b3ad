-- From schema version 9 to version 10 (issue 46, D241; migrations/0020.thread_incarnation.sql):
-- when a thread id was last deleted (microseconds, the store clock), kept on its tombstone row.
-- A schedule never fires into a thread deleted at or after the schedule was made. Runs in
-- open's write transaction, after schema.sql on a new file. Statements are separated by lines
-- holding only ';'.
ALTER TABLE threads ADD COLUMN deleted_at INTEGER
;
-- The tombstones of before this version (a thread that had events and is not live was deleted):
-- deleted at the upgrade, the latest they can have been.
UPDATE threads SET deleted_at = CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
 WHERE NOT live AND last_seq > 0 AND deleted_at IS NULL
;
-- The crons `serve` stored before this version kept their record beside the run request, which
-- a worker read as a plain graph input (issue 46 item 5, D242): the record moves into the
-- request's service part. Only schedules of that exact shape.
UPDATE schedules
   SET input = json_set(json_remove(input, '$.cron'), '$.langgraph.service.cron',
                        json(json_extract(input, '$.cron')))
 WHERE name LIKE 'cron:%'
   AND json_type(input) = 'object'
   AND (SELECT count(*) FROM json_each(schedules.input)) = 2
   AND json_type(input, '$.cron') = 'object'
   AND json_type(input, '$.langgraph.service') = 'object'
;
