"""The graph the service tests serve (as a LangGraph team would write it): a messages state, a
chat model that streams tokens, a conditional edge, an ``async def`` node, ``interrupt()`` asking
for input (at once, or after a pause), and a slow path for busy threads. Served by ``durable-graph serve --config
langgraph.json``."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Literal

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

REPLY = "I am a durable agent, streaming one token at a time"
model = GenericFakeChatModel(messages=itertools.cycle([AIMessage(REPLY)]))


def _last(state: MessagesState) -> str:
    content = state["messages"][-1].content if state["messages"] else ""
    return content if isinstance(content, str) else ""


def route(
    state: MessagesState,
) -> Literal["ask", "pause", "slow", "chat", "lookup", "weather", "flaky"]:
    text = _last(state)
    if text.startswith("pause"):
        return "pause"
    if text.startswith("flaky"):
        return "flaky"
    if text.startswith("lookup"):
        return "lookup"
    if text.startswith("weather"):
        return "weather"
    if text.startswith("ask"):
        return "ask"
    if text.startswith("slow"):
        return "slow"
    return "chat"


def chat(state: MessagesState) -> dict[str, list[AIMessage]]:
    return {"messages": [model.invoke(state["messages"])]}


def ask(state: MessagesState) -> dict[str, list[AIMessage]]:
    name = interrupt("what is your name?")
    return {"messages": [AIMessage(f"hello {name}")]}


def pause(state: MessagesState) -> dict[str, list[AIMessage]]:
    """``pause <seconds>``: the step's checkpoint is written, then the node asks once the
    seconds have passed (an open stream hears the one before the other)."""
    time.sleep(float(_last(state).split()[1]))
    name = interrupt("what is your name?")
    return {"messages": [AIMessage(f"hello {name}")]}


def slow(state: MessagesState) -> dict[str, list[AIMessage]]:
    seconds = float(_last(state).split()[1]) if len(_last(state).split()) > 1 else 2.0
    time.sleep(seconds)
    return {"messages": [AIMessage(f"slept {seconds}")]}


async def lookup(state: MessagesState) -> dict[str, list[AIMessage]]:
    """An ``async def`` node, as most real agents have (an awaited tool or API call)."""
    await asyncio.sleep(0.01)
    return {"messages": [AIMessage(f"looked up {_last(state).removeprefix('lookup').strip()}")]}


def weather(state: MessagesState) -> dict[str, list[AIMessage]]:
    """A tool that fails: ``weather <place>`` raises, as a backend without the place would."""
    place = _last(state).removeprefix("weather").strip()
    raise ValueError(f"weather backend has no station for {place!r}")


FAILED_ONCE: set[str] = set()


def flaky(state: MessagesState) -> dict[str, list[AIMessage]]:
    """A tool that fails the first time it is asked ``flaky <key>`` in this process."""
    key = _last(state)
    if key not in FAILED_ONCE:
        FAILED_ONCE.add(key)
        raise ConnectionError("the tool's backend did not answer")
    return {"messages": [AIMessage("recovered")]}


def after_slow(state: MessagesState) -> dict[str, list[AIMessage]]:
    return {"messages": [AIMessage("done")]}


builder = StateGraph(MessagesState)
builder.add_node("chat", chat)
builder.add_node("ask", ask)
builder.add_node("pause", pause)
builder.add_node("slow", slow)
builder.add_node("after_slow", after_slow)
builder.add_node("lookup", lookup)
builder.add_node("weather", weather)
builder.add_node("flaky", flaky)
builder.add_conditional_edges(START, route)
builder.add_edge("chat", END)
builder.add_edge("ask", END)
builder.add_edge("pause", END)
builder.add_edge("lookup", END)
builder.add_edge("weather", END)
builder.add_edge("flaky", END)
builder.add_edge("slow", "after_slow")
builder.add_edge("after_slow", END)
graph = builder.compile()
