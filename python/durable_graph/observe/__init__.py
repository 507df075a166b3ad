"""Observability (SPEC §13): the observer and store wrapper (`observer`), `tracing`, `metrics`.

The package's public names are the observer's (`durable_graph.observe.observer.__all__`, listed
there once), re-exported as `durable_graph.worker` re-exports the sync worker's.
"""

from durable_graph.observe.observer import *  # noqa: F403
from durable_graph.observe.observer import __all__ as __all__
