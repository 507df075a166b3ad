from __future__ import annotations
from typing import Any
def render(results: list[Any], **kw: Any) -> str:
    return "\n".join(repr(r) for r in results)
def docs_page(text: str) -> str:
    return text
