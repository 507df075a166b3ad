"""Alias of `durable_graph.core.model`, where the values live: this import path stays for users."""

from durable_graph.core.model import *  # noqa: F403
from durable_graph.core.model import __all__ as __all__
