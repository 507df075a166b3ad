-- Queue listing and trace context (SPEC §13, sql/92_queue_listing.sql).
--
-- No IF NOT EXISTS, on purpose (changed after release, issue #24): this migration runs once, when
-- the installed version is below 5, and a store table or index that already exists then was put
-- there by someone else. `CREATE TABLE IF NOT EXISTS` would adopt such a planted table — with
-- its owner's triggers, run as the installing role by the first dg_submit_v1 — and exit 0; plain
-- CREATE fails the install instead (and the installers refuse beforehand a schema holding
-- another role's objects: sql/install.sql, durable_graph.postgres.migrations.foreign_objects).

-- entries(state => closed outcome or open, newest first): entries by outcome, then id. A NULL
-- outcome_kind is indexed too, so the open/running pages use it as well.
CREATE INDEX queue_entries_state_idx ON queue_entries (outcome_kind, entry_id);

-- The W3C trace context (https://www.w3.org/TR/trace-context/) a submission was made in, so that
-- the attempts' spans join the submitter's trace (sql/92_queue_listing.sql). Kept beside the
-- entry, not in it: the entry row and the dg_*_v1 signatures stay as they are. Removed with
-- its entry (reclaim).
CREATE TABLE queue_trace_context (
    entry_id    bigint PRIMARY KEY REFERENCES queue_entries (entry_id) ON DELETE CASCADE,
    traceparent text NOT NULL,
    tracestate  text
);
