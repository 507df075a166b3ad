-- durable_graph schema: the task path of each pending write (SPEC §14.1, issue 23). LangGraph's
-- savers must return a checkpoint's writes in its writes_sort_key order, (task_path, task_id,
-- idx): the order live execution applies a step's writes in. Writes stored before this
-- migration have no path (''), and sort first, as LangGraph's own savers treat rows predating
-- their column. Reads order by it (sql/00_clock.sql `_dg_writes`); the writes take it from
-- dg_put_writes_v2 and its fenced and fused forms (sql/30, sql/47). Applied with search_path set
-- to the store's schema: names are unqualified on purpose. Compared by bytes (COLLATE "C"), as
-- Python compares the code points of LangGraph's path strings.
ALTER TABLE pending_writes ADD COLUMN task_path text COLLATE "C" NOT NULL DEFAULT '';
