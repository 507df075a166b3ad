"""A graph whose node searches its LangGraph ``store`` by meaning (``store.index``): it notes
what the user said under ``("notes", user)`` and answers the notes nearest ``query`` before it,
with their scores."""

from __future__ import annotations

import uuid
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore


class State(TypedDict, total=False):
    user: str
    said: str
    query: str
    found: list[list[Any]]


async def recall(state: State, *, store: BaseStore) -> dict[str, Any]:
    namespace = ("notes", state["user"])
    before = await store.asearch(namespace, query=state["query"], limit=10)
    await store.aput(namespace, uuid.uuid4().hex, {"text": state["said"]})
    return {"found": [[i.value["text"], i.score] for i in before]}


builder = StateGraph(State)
builder.add_node("recall", recall)
builder.add_edge(START, "recall")
builder.add_edge("recall", END)
graph = builder.compile()
