"""A graph with a subgraph, for the JavaScript SDK's ``streamSubgraphs`` check: the parent's
``plan`` node, then the subgraph ``review`` (two nodes of its own), each writing a step."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    steps: Annotated[list[str], operator.add]


def plan(state: State) -> dict[str, list[str]]:
    return {"steps": ["plan"]}


def draft(state: State) -> dict[str, list[str]]:
    return {"steps": ["draft"]}


def check(state: State) -> dict[str, list[str]]:
    return {"steps": ["check"]}


inner = StateGraph(State)
inner.add_node("draft", draft)
inner.add_node("check", check)
inner.add_edge(START, "draft")
inner.add_edge("draft", "check")
inner.add_edge("check", END)

outer = StateGraph(State)
outer.add_node("plan", plan)
outer.add_node("review", inner.compile())
outer.add_edge(START, "plan")
outer.add_edge("plan", "review")
outer.add_edge("review", END)
graph = outer.compile()
