"""``python -m durable_graph.cli``: the ``durable-graph`` command."""

import sys

from durable_graph.cli.parser import main

sys.exit(main())
