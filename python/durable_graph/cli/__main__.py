"""``python -m durable_graph.cli``: the ``durable-graph`` command."""

import sys

from .parser import main

sys.exit(main())
