"""The executable contracts: `checkpointer/` (SPEC §4) and `run_queue/` (SPEC §5), one module per
concern named like its SQL file; each folder's `suite` combines its concern classes."""
