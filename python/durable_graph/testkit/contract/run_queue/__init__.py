"""The RunQueue contract (SPEC §5) by concern, one mixin class of tests a module, named like the
SQL file that implements the concern. `..run_queue_contract` combines them.
"""
