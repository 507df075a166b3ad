"""The graph the React hook's page talks to (tests/test_browser_hook.py): a messages state and a
chat model that streams its reply a word at a time with a pause between words (so a page sees
tokens arrive, and can be reloaded or stopped mid-reply). ``ask`` interrupts for a name;
``long ...`` replies at length; anything else is echoed, then a few words."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGenerationChunk
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt


class SlowChat(GenericFakeChatModel):
    """A scripted chat model whose stream pauses ``delay`` seconds before each token."""

    delay: float = 0.05

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        for chunk in super()._stream(*args, **kwargs):
            time.sleep(self.delay)
            yield chunk


def reply_to(text: str) -> str:
    words = 120 if text.startswith("long") else 8
    return f"echo {text}: " + " ".join(f"word{i}" for i in range(words))


def chat(state: MessagesState) -> dict[str, list[Any]]:
    content = state["messages"][-1].content if state["messages"] else ""
    text = content if isinstance(content, str) else str(content)
    if text.startswith("ask"):
        name = interrupt("what is your name?")
        return {"messages": [AIMessage(f"hello {name}")]}
    model = SlowChat(messages=iter([AIMessage(reply_to(text))]))
    return {"messages": [model.invoke(state["messages"])]}


builder = StateGraph(MessagesState)
builder.add_node("chat", chat)
builder.add_edge(START, "chat")
builder.add_edge("chat", END)
graph = builder.compile()
