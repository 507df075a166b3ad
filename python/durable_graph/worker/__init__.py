"""The worker (SPEC §5, §11): `attempt_async` is one attempt (its sync twin generated), `sync`
and `aio` run attempts in threads or tasks.

The package's public names are the sync worker's (`durable_graph.worker.sync.__all__`, listed
there once).
"""

from durable_graph.worker.sync import *  # noqa: F403
from durable_graph.worker.sync import __all__ as __all__
