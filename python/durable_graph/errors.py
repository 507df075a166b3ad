"""Alias of `durable_graph.core.errors`, where the errors live: this import path stays for users."""

from durable_graph.core.errors import *  # noqa: F403
from durable_graph.core.errors import __all__ as __all__
