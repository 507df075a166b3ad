from __future__ import annotations
from dataclasses import dataclass
from typing import Any
@dataclass
class GrowthReport:
    rows: list[Any]
def run(dsn: str, **kw: Any) -> GrowthReport:
    return GrowthReport([])
