"""`DurableSaver`: LangGraph's checkpointer over any sync store (SPEC §12).

Written out in ``generated.py`` from `AsyncDurableSaver` (``async_saver.py``, the code to read) by
``tools/generate_stores.py``; this module is where it has always been imported from.
"""

from __future__ import annotations

from durable_graph.langgraph.generated import DurableSaver

__all__ = ["DurableSaver"]
