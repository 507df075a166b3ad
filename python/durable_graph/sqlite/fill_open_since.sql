-- open_since of the open entries of a migrated file (to version 6): every open entry of a
-- thread joins the stretch of the thread's first open entry. Statements are separated by lines
-- holding only ';'.

UPDATE queue_entries
   SET open_since = (SELECT min(o.entry_id) FROM queue_entries o
                      WHERE o.thread_id = queue_entries.thread_id AND o.outcome_kind IS NULL)
 WHERE outcome_kind IS NULL
;
