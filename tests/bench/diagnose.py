from __future__ import annotations
from dataclasses import dataclass
from typing import Any
@dataclass
class Diagnosis:
    rows: list[Any]
def run(dsn: str, growth: Any, **kw: Any) -> Diagnosis:
    return Diagnosis([])
