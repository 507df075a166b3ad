"""The Checkpointer contract (SPEC §4) by concern, one mixin class of tests a module, named like
the SQL file that implements the concern. `..checkpointer_contract` combines them.
"""
