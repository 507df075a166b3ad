"""The fixtures both contract suites share: a backend's test class overrides ``harness``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.testkit.harness import ClockControl, Harness


class StoreFixtures:
    """``store`` and ``clock`` from the ``harness`` a backend's test class provides."""

    @pytest.fixture
    def harness(self) -> Iterator[Harness]:
        raise NotImplementedError("override `harness` to yield a Harness with a fresh store")

    @pytest.fixture
    def store(self, harness: Harness) -> Checkpointer:
        return harness.store

    @pytest.fixture
    def clock(self, harness: Harness) -> ClockControl:
        return harness.clock
