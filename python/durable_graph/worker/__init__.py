"""The worker (SPEC §5, §11): `attempt_async` is one attempt and `aio` runs attempts as tasks,
both written once; their sync twins, `attempt_generated` and `sync` (threads), are generated.

The package's public names are the sync worker's (`durable_graph.worker.sync.__all__`, listed
there once).
"""

from durable_graph.worker.sync import *  # noqa: F403
from durable_graph.worker.sync import __all__ as __all__
