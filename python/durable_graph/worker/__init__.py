"""The worker (SPEC §5, §11), written once, async (`attempt_async`, `aio`); its public names are
the generated sync worker's (`sync`, threads)."""

from durable_graph.worker.sync import *  # noqa: F403
from durable_graph.worker.sync import __all__ as __all__
