-- durable_graph schema, version 20 (issue 46, D241): when a thread id was last deleted. A
-- thread's crons belong to the incarnation they were made for: dg_fire_schedule_v1 submits
-- nothing into a thread deleted after the schedule was made (deleted and gone, or deleted and
-- made again by anyone), so a schedule never re-creates its deleted thread nor runs in the next
-- one of that id. deleted_at is the store time of the last delete_thread of a live thread with
-- this id (the tombstone row keeps it, as it keeps last_seq); NULL when it never was deleted.
-- Applied with search_path set to the store's schema: names are unqualified on purpose.
-- IF NOT EXISTS and the NULL guard: applying it again changes nothing.
ALTER TABLE threads ADD COLUMN IF NOT EXISTS deleted_at timestamptz;

-- The tombstones of before this version (a thread that had events and is not live was
-- deleted): deleted at the upgrade, the latest it can have been, so a schedule made before the
-- upgrade never fires into them; one made after it does as for any deleted id.
UPDATE threads SET deleted_at = pg_catalog.clock_timestamp()
 WHERE NOT live AND last_seq > 0 AND deleted_at IS NULL;

-- The crons `serve` stored before this version kept their record beside the run request
-- ({"langgraph": ..., "cron": ...}), which a worker read as a plain graph input (issue 46 item
-- 5, D242): the record moves into the request's service part, so their next slots run the
-- cron's input, config, context, interrupts and graph. Only schedules of that exact shape.
UPDATE schedules
   SET input = pg_catalog.jsonb_set(input::jsonb - 'cron', '{langgraph,service,cron}',
                                    input::jsonb -> 'cron')::text
 WHERE name LIKE 'cron:%'
   -- jsonb refuses a NUL (its JSON text \u0000) that the text column holds: such an input is
   -- left as it is (CASE: read before any cast).
   AND CASE WHEN pg_catalog.strpos(input, '\u0000') > 0 THEN false
            WHEN pg_catalog.jsonb_typeof(input::jsonb) <> 'object' THEN false
            ELSE (SELECT pg_catalog.array_agg(k ORDER BY k)
                    FROM pg_catalog.jsonb_object_keys(input::jsonb) k)
                 = ARRAY['cron', 'langgraph']
                 AND pg_catalog.jsonb_typeof(input::jsonb -> 'cron') = 'object'
                 AND pg_catalog.jsonb_typeof(input::jsonb #> '{langgraph,service}') = 'object'
       END;
