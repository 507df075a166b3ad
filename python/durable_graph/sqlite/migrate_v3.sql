-- From schema version 3 to version 4 (issue 17; migrations/0005.queue_listing.sql): the W3C
-- trace context a submission was made in, beside its entry so a worker opening the file in
-- another process continues the submitter's trace. Runs in open's write transaction.
-- Statements are separated by lines holding only ';'.

CREATE TABLE IF NOT EXISTS queue_trace_context (
    entry_id    INTEGER PRIMARY KEY,
    traceparent TEXT NOT NULL,
    tracestate  TEXT
)
