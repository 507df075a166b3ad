-- Queue listing and trace context (SPEC §13, sql/92_queue_listing.sql). IF NOT EXISTS: applying it
-- again (sql/install.sql while migration numbers settle) changes nothing.

-- entries(state => closed outcome or open, newest first): entries by outcome, then id. A NULL
-- outcome_kind is indexed too, so the open/running pages use it as well.
CREATE INDEX IF NOT EXISTS queue_entries_state_idx ON queue_entries (outcome_kind, entry_id);

-- The W3C trace context (https://www.w3.org/TR/trace-context/) a submission was made in, so that
-- the attempts' spans join the submitter's trace (sql/92_queue_listing.sql). Kept beside the
-- entry, not in it: the entry row and the dg_*_v1 signatures stay as they are. Removed with
-- its entry (reclaim).
CREATE TABLE IF NOT EXISTS queue_trace_context (
    entry_id    bigint PRIMARY KEY REFERENCES queue_entries (entry_id) ON DELETE CASCADE,
    traceparent text NOT NULL,
    tracestate  text
);
