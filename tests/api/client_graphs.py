"""Graphs the third-party client tests register (HITL_EXTRA_GRAPHS=CLIENT_GRAPHS).

`typed_email` asks to send an email whose arguments are typed (an integer, a boolean)
and written in a deliberate, non-alphabetical key order. `two_approvals` pauses on two
interrupts at once (parallel branches), so a client can answer only one of them.
"""

from __future__ import annotations

import operator
import time
from typing import Annotated, Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from typing_extensions import TypedDict

TARGETS = {
    "ticker": "tests.api.client_graphs:ticker_graph",
    "typed_email": "tests.api.client_graphs:typed_email_graph",
    "two_approvals": "tests.api.client_graphs:two_approvals_graph",
    "nested": "tests.api.client_graphs:nested_graph",
    "react_streaming": "tests.api.client_graphs:react_streaming_graph",
    "configured": "tests.api.client_graphs:configured_graph",
    "chatter": "tests.api.client_graphs:chatter_graph",
}
CLIENT_GRAPHS = ",".join(f"{name}={target}" for name, target in TARGETS.items())

# Written in this order on purpose: neither alphabetical nor by key length (jsonb's).
EMAIL_ARGS = {"to": "ops@example.com", "subject": "Q3 report", "copies": 2, "urgent": False}
EMAIL_SCHEMA = {
    "type": "object",
    "properties": {
        "to": {"type": "string"},
        "subject": {"type": "string"},
        "copies": {"type": "integer", "minimum": 1},
        "urgent": {"type": "boolean"},
        "cc": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
        "ratio": {"type": "number"},
        "extra": {"type": "object"},
    },
    "required": ["to", "subject", "copies", "urgent"],
    "additionalProperties": False,
}


class EmailState(TypedDict, total=False):
    request: str
    decision: Any
    sent: dict[str, Any]


def _ask(state: EmailState) -> dict[str, Any]:
    get_stream_writer()({"progress": "drafted", "request": state.get("request")})
    decision = interrupt(
        {
            "action_request": {"action": "send_email", "args": dict(EMAIL_ARGS)},
            "config": {
                "allow_accept": True,
                "allow_edit": True,
                "allow_respond": True,
                "allow_ignore": True,
            },
            "description": "Send the **Q3 report**?",
            "args_schema": EMAIL_SCHEMA,
        }
    )
    return {"decision": decision}


def _send(state: EmailState) -> dict[str, Any]:
    decision = state.get("decision")
    if isinstance(decision, list):  # the Agent Inbox's list form answers in a list
        decision = decision[0]
    if decision.get("type") == "edit":
        return {"sent": decision["args"]["args"]}
    if decision.get("type") == "accept":
        return {"sent": dict(EMAIL_ARGS)}
    return {"sent": {}}


_email = StateGraph(EmailState)
_email.add_node("ask", _ask)
_email.add_node("send", _send)
_email.add_edge(START, "ask")
_email.add_edge("ask", "send")
_email.add_edge("send", END)
typed_email_graph = _email.compile()


class TwoState(TypedDict, total=False):
    request: str
    answers: Annotated[list[str], operator.add]


def _approver(name: str):
    def node(state: TwoState) -> dict[str, Any]:
        answer = interrupt(
            {
                "action_request": {"action": f"approve_{name}", "args": {"item": name}},
                "config": {
                    "allow_accept": True,
                    "allow_edit": False,
                    "allow_respond": True,
                    "allow_ignore": True,
                },
                "description": f"Approve {name}?",
            }
        )
        return {"answers": [f"{name}:{answer.get('type') if isinstance(answer, dict) else answer}"]}

    return node


_two = StateGraph(TwoState)
_two.add_node("left", _approver("left"))
_two.add_node("right", _approver("right"))
_two.add_edge(START, "left")
_two.add_edge(START, "right")
_two.add_edge("left", END)
_two.add_edge("right", END)
two_approvals_graph = _two.compile()


class TickState(TypedDict, total=False):
    ticks: int
    pause: float


def _tick(state: TickState) -> dict[str, Any]:
    """Write TICKS custom chunks, `pause` seconds apart (a stream to cut in the middle)."""
    write = get_stream_writer()
    for i in range(TICKS):
        write({"tick": i})
        time.sleep(state.get("pause", 0.4))
    return {"ticks": TICKS}


TICKS = 24
_ticker = StateGraph(TickState)
_ticker.add_node("tick", _tick)
_ticker.add_edge(START, "tick")
_ticker.add_edge("tick", END)
ticker_graph = _ticker.compile()


# --- a graph with a subgraph: stream modes and subgraph namespaces ------------------


class NestedState(TypedDict, total=False):
    request: str
    steps: Annotated[list[str], operator.add]
    notes: Annotated[list[str], operator.add]
    decision: Any


class InnerState(TypedDict, total=False):
    request: str
    notes: Annotated[list[str], operator.add]
    decision: Any


def _draft(state: InnerState) -> dict[str, Any]:
    get_stream_writer()({"drafting": state.get("request")})
    # A chat model inside the subgraph: its tokens stream as `messages|<namespace>`.
    model = GenericFakeChatModel(messages=iter([AIMessage(content="draft for the board")]))
    reply = model.invoke(f"Draft {state.get('request')}")
    return {"notes": [reply.content]}


def _approve(state: InnerState) -> dict[str, Any]:
    decision = interrupt(
        {
            "action_request": {"action": "publish", "args": {"request": state.get("request")}},
            "config": {
                "allow_accept": True,
                "allow_edit": False,
                "allow_respond": True,
                "allow_ignore": True,
            },
            "description": "Publish it?",
        }
    )
    return {"notes": ["approved"], "decision": decision}


_inner = StateGraph(InnerState)
_inner.add_node("draft", _draft)
_inner.add_node("approve", _approve)
_inner.add_edge(START, "draft")
_inner.add_edge("draft", "approve")
_inner.add_edge("approve", END)


def _prepare(state: NestedState) -> dict[str, Any]:
    get_stream_writer()({"preparing": state.get("request")})
    return {"steps": ["prepare"]}


def _finish(state: NestedState) -> dict[str, Any]:
    return {"steps": ["finish"]}


_outer = StateGraph(NestedState)
_outer.add_node("prepare", _prepare)
_outer.add_node("review", _inner.compile())
_outer.add_node("finish", _finish)
_outer.add_edge(START, "prepare")
_outer.add_edge("prepare", "review")
_outer.add_edge("review", "finish")
_outer.add_edge("finish", END)
nested_graph = _outer.compile()


# --- a graph that reports the config and context it ran with, pausing once ---------


class ConfiguredState(TypedDict, total=False):
    seen: list[dict[str, Any]]
    answer: Any
    pause: float


def _report(config: RunnableConfig, runtime: Runtime) -> dict[str, Any]:
    return {
        "configurable": {
            k: v
            for k, v in (config.get("configurable") or {}).items()
            if not k.startswith(("__", "hitl_", "checkpoint")) and isinstance(v, (str, int))
        },
        "recursion_limit": config.get("recursion_limit"),
        "tags": [t for t in config.get("tags") or [] if not t.startswith("graph:")],
        "context": runtime.context,
    }


def _configured_before(state: ConfiguredState, config: RunnableConfig, runtime: Runtime):
    time.sleep(state.get("pause") or 0)
    return {"seen": [*(state.get("seen") or []), _report(config, runtime)]}


def _configured_ask(state: ConfiguredState, config: RunnableConfig, runtime: Runtime):
    answer = interrupt(
        {
            "action_request": {"action": "go_on", "args": {}},
            "config": {
                "allow_accept": True,
                "allow_edit": False,
                "allow_respond": True,
                "allow_ignore": True,
            },
            "description": "Go on?",
        }
    )
    return {"answer": answer, "seen": [*(state.get("seen") or []), _report(config, runtime)]}


_configured = StateGraph(ConfiguredState)
_configured.add_node("before", _configured_before)
_configured.add_node("ask", _configured_ask)
_configured.add_edge(START, "before")
_configured.add_edge("before", "ask")
_configured.add_edge("ask", END)
configured_graph = _configured.compile()


# --- a root-level chat model, then ticks: messages and custom chunks over time -----


def _chat(state: TickState) -> dict[str, Any]:
    model = GenericFakeChatModel(messages=iter([AIMessage(content="one two three four five")]))
    model.invoke("Say five words")
    write = get_stream_writer()
    for i in range(CHATTER_TICKS):
        write({"tick": i})
        time.sleep(state.get("pause", 0.2))
    return {"ticks": CHATTER_TICKS}


CHATTER_TICKS = 8
_chatter = StateGraph(TickState)
_chatter.add_node("chat", _chat)
_chatter.add_edge(START, "chat")
_chatter.add_edge("chat", END)
chatter_graph = _chatter.compile()


# --- the built-in ReAct agent on a scripted model that streams its reply ------------


def react_streaming(checkpointer: Any = None) -> Any:
    """The ReAct agent whose scripted model streams its words over 0.3 s (as a real
    model's tokens come), then its `finish` call."""
    from agents.models import ScriptedChatModel
    from agents.react import build_react_agent

    return build_react_agent(
        ScriptedChatModel(delay=0.3), builtin_tools=False, checkpointer=checkpointer
    )


react_streaming_graph = react_streaming()
