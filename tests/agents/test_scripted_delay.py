"""The scripted model's configurable delay (HITL_SCRIPTED_DELAY)."""

from __future__ import annotations

import time

import pytest
from langchain_core.messages import HumanMessage

from agents.models import ModelConfigError, get_model


def test_the_scripted_model_takes_the_configured_delay(monkeypatch):
    monkeypatch.setenv("HITL_SCRIPTED_DELAY", "0.3")
    model = get_model("scripted")
    started = time.monotonic()
    reply = model.invoke([HumanMessage("hi")])
    assert time.monotonic() - started >= 0.3
    assert "You said: hi" in reply.text


def test_no_delay_by_default(monkeypatch):
    monkeypatch.delenv("HITL_SCRIPTED_DELAY", raising=False)
    assert get_model("scripted").delay == 0


@pytest.mark.parametrize("value", ["slow", "-1", "nan", "601", "inf"])
def test_a_bad_delay_fails_loudly(monkeypatch, value):
    monkeypatch.setenv("HITL_SCRIPTED_DELAY", value)
    with pytest.raises(ModelConfigError, match="HITL_SCRIPTED_DELAY"):
        get_model("scripted")


def test_a_slowed_model_streams_its_reply_a_word_at_a_time(monkeypatch):
    from langgraph.graph import END, START, MessagesState, StateGraph

    monkeypatch.setenv("HITL_SCRIPTED_DELAY", "0.4")
    model = get_model("scripted")
    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    graph = builder.compile()
    arrivals, texts = [], []
    for chunk, _ in graph.stream({"messages": [HumanMessage("hi there")]}, stream_mode="messages"):
        if chunk.content:
            arrivals.append(time.monotonic())
            texts.append(chunk.content)
    final = graph.invoke({"messages": [HumanMessage("hi there")]})["messages"][-1]
    # Token by token over the delay, adding up to the same reply.
    assert len(texts) >= 5 and "".join(texts) == final.text
    assert arrivals[-1] - arrivals[0] >= 0.2


def test_a_slowed_model_streams_its_tool_calls_whole(monkeypatch):
    monkeypatch.setenv("HITL_SCRIPTED_DELAY", "0.1")
    bound = get_model("scripted").bind_tools(
        [{"name": "finish", "description": "done", "parameters": {"type": "object"}}]
    )
    chunks = list(bound.stream([HumanMessage("q3")]))
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged += chunk
    (call,) = merged.tool_calls
    assert call["name"] == "finish" and call["args"]["result"] == {"request": "q3"}
    assert len([c for c in chunks if c.content]) > 3


def test_without_a_delay_the_reply_comes_in_one_piece(monkeypatch):
    monkeypatch.delenv("HITL_SCRIPTED_DELAY", raising=False)
    texts = [
        c.content for c in get_model("scripted").stream([HumanMessage("hi there")]) if c.content
    ]
    assert len(texts) == 1 and "You said: hi there" in texts[0]
