-- Queue listing (SPEC §13, sql/92_queue_listing.sql).

-- entries(state => closed outcome or open, newest first): entries by outcome, then id. A NULL
-- outcome_kind is indexed too, so the open/running pages use it as well.
CREATE INDEX queue_entries_state_idx ON queue_entries (outcome_kind, entry_id);
