"""A graph whose node reads and writes its LangGraph ``store`` (long-term memory): it keeps what
the user said under ``("memories", user)`` and answers how many memories it had before."""

from __future__ import annotations

import uuid
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore


class State(TypedDict, total=False):
    user: str
    said: str
    known: int
    found: list[str]


async def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
    namespace = ("memories", state["user"])
    before = await store.asearch(namespace, limit=100)
    await store.aput(namespace, uuid.uuid4().hex, {"said": state["said"]})
    return {"known": len(before), "found": sorted(i.value["said"] for i in before)}


builder = StateGraph(State)
builder.add_node("remember", remember)
builder.add_edge(START, "remember")
builder.add_edge("remember", END)
graph = builder.compile()
