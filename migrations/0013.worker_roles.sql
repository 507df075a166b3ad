-- durable_graph schema (issue 37 item 9): the worker registry records which login role wrote
-- each row, so a role changes only its own workers' rows, and is read page by page.
-- Applied with search_path set to the store's schema: names are unqualified on purpose.
-- IF [NOT] EXISTS: applying it again changes nothing.

-- role: the session_user of the beat that created the row (NULL on the rows of an older
-- version, which any role's next beat of that holder takes over; they are gone within a day).
ALTER TABLE workers ADD COLUMN IF NOT EXISTS role text;

-- dg_workers_v1 returned every live row in one read; dg_workers_v2 (sql/86_workers.sql) pages.
DROP FUNCTION IF EXISTS dg_workers_v1(interval);
