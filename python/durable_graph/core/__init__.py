"""The contract in code: values, errors, argument checks and the two Protocols (SPEC §2-§5, §9).

Everything here is pure: no backend, no I/O. `model` holds the values, `errors` the exception
classes, `validation` the argument checks every backend runs before it writes, `checkpointer` and
`run_queue` the two Protocols (and `plan_attempt`), `async_protocols` their async spelling.
"""
