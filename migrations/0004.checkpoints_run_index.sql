-- durable_graph schema: an index on checkpoints' run id alone, for dg_delete_runs_v1 (LangGraph's
-- delete_for_runs names runs, not threads). DDL only, unqualified names (see 0001).
CREATE INDEX checkpoints_run_only_idx ON checkpoints (run_id);
