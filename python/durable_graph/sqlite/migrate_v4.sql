-- From schema version 4 to version 5 (issue 23; migrations/0008.task_path.sql): the task path
-- of each pending write, so a checkpoint's writes are read in LangGraph's writes_sort_key order
-- (task_path, task_id, idx). Writes stored before have no path (''), as LangGraph's own savers
-- treat rows predating their column. Runs in open's write transaction. Statements are
-- separated by lines holding only ';'.

ALTER TABLE pending_writes ADD COLUMN task_path TEXT NOT NULL DEFAULT ''
