"""Graphs only the tests register: real langchain agents and a graph slow in a known place.

Workers load them through HITL_EXTRA_GRAPHS (see WORKER_GRAPHS); in-process tests
add them to the registry with `register_in_process`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, TypedDict

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import ToolException, tool
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from agents.models import get_model, latest_request, reply, tool_results
from agents.react import build_react_agent
from agents.tools import require_approval

TARGETS = {
    "agent_batched": "tests.graphs:batched_agent",
    "agent_per_call": "tests.graphs:per_call_agent",
    "slow_side_effect": "tests.graphs:slow_side_effect_graph",
    "failing": "tests.graphs:failing_graph",
    "strict_answer": "tests.graphs:strict_answer_graph",
    "failing_tool": "tests.graphs:failing_tool_agent",
}
WORKER_GRAPHS = ",".join(f"{name}={target}" for name, target in TARGETS.items())


def register_in_process(monkeypatch) -> None:
    """Add the test graphs to this process's registry (built from settings at import)."""
    from hitl.core.registry import registry

    for name, target in TARGETS.items():
        monkeypatch.setitem(registry.targets, name, target)


# --- a real create_agent + HumanInTheLoopMiddleware, with a scripted model ------------


class ScriptedModel(BaseChatModel):
    """Asks for send_email and delete_file, then reports the tool results it got.

    Decides from the messages alone (no counter), so one instance serves any thread.
    """

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        if isinstance(messages[-1], ToolMessage):
            results = sorted(str(m.content) for m in messages if isinstance(m, ToolMessage))
            message = AIMessage(content=" | ".join(results))
        else:
            message = AIMessage(
                content="",
                tool_calls=[
                    {
                        "name": "send_email",
                        "args": {"to": "bob@example.com", "copies": 1},
                        "id": "call_send",
                        "type": "tool_call",
                    },
                    {
                        "name": "delete_file",
                        "args": {"path": "old.txt"},
                        "id": "call_delete",
                        "type": "tool_call",
                    },
                ],
            )
        return ChatResult(generations=[ChatGeneration(message=message)])


@tool
def send_email(to: str, copies: int) -> str:
    """Send an email."""
    return f"sent to {to} x{copies!r}"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def _agent(mode: str):
    return create_agent(
        ScriptedModel(),
        tools=[send_email, delete_file],
        middleware=[
            HumanInTheLoopMiddleware(
                interrupt_on={
                    "send_email": True,
                    "delete_file": {"allowed_decisions": ["approve", "reject"]},
                },
                interrupt_mode=mode,
            )
        ],
    )


batched_agent = _agent("batched")
per_call_agent = _agent("per_call")


# --- slow in a known place, with a side effect before it --------------------------------


class SlowState(TypedDict, total=False):
    dir: str
    decision: Any


def _side_effect(state: SlowState) -> dict[str, Any]:
    with (Path(state["dir"]) / "side_effects.log").open("a") as fh:
        fh.write(f"{os.getpid()}\n")
    return {}


def _slow(state: SlowState) -> dict[str, Any]:
    """Announce this process, then wait for the test to release it (or kill it)."""
    folder = Path(state["dir"])
    (folder / f"slow-{os.getpid()}").touch()
    deadline = time.monotonic() + 60
    while not (folder / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return {}


def _approve(state: SlowState) -> dict[str, Any]:
    decision = interrupt(
        {
            "action_request": {"action": "publish", "args": {"copies": 1}},
            "config": {
                "allow_accept": True,
                "allow_edit": True,
                "allow_respond": True,
                "allow_ignore": True,
            },
            "description": "Publish?",
        }
    )
    return {"decision": decision}


def _act(state: SlowState) -> dict[str, Any]:
    if state["decision"]["type"] in ("accept", "edit"):
        with (Path(state["dir"]) / "published.log").open("a") as fh:
            fh.write(f"{os.getpid()}\n")
    return {}


slow_side_effect_graph = (
    StateGraph(SlowState)
    .add_node("side_effect", _side_effect)
    .add_node("slow", _slow)
    .add_node("approve", _approve)
    .add_node("act", _act)
    .add_edge(START, "side_effect")
    .add_edge("side_effect", "slow")
    .add_edge("slow", "approve")
    .add_edge("approve", "act")
    .add_edge("act", END)
    .compile()
)


# --- fails in a node --------------------------------------------------------------------


class FailingState(TypedDict, total=False):
    fail: bool
    done: bool


def _maybe_fail(state: FailingState) -> dict[str, Any]:
    if state.get("fail", True):
        raise RuntimeError("the tool exploded")
    return {"done": True}


failing_graph = (
    StateGraph(FailingState)
    .add_node("work", _maybe_fail)
    .add_edge(START, "work")
    .add_edge("work", END)
    .compile()
)


# --- a HumanInterrupt whose response_schema is stricter than its config ------------------


class StrictState(TypedDict, total=False):
    answer: Any


def _ask_briefly(state: StrictState) -> dict[str, Any]:
    answer = interrupt(
        {
            "action_request": {"action": "name_the_quarter", "args": {}},
            "config": {"allow_respond": True, "allow_ignore": True},
            "description": "Which quarter? (at most 5 characters)",
        },
        response_schema={
            "type": "object",
            "properties": {
                "type": {"enum": ["response", "ignore"]},
                "args": {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 5}]},
            },
            "required": ["type"],
        },
    )
    return {"answer": answer}


strict_answer_graph = (
    StateGraph(StrictState)
    .add_node("ask", _ask_briefly)
    .add_edge(START, "ask")
    .add_edge("ask", END)
    .compile()
)


# --- an approved tool that fails: by ToolException (an error result) or by crashing -------


@tool
def notify_customer(to: str, text: str) -> str:
    """Send a notice to a customer."""
    if "crash" in to:
        raise RuntimeError(f"SMTP connection to {to.split('@')[-1]} reset by peer")
    raise ToolException(f"The mail server refused {to}: mailbox full.")


notify_customer.handle_tool_error = True


def _notify_script(messages, tools):
    if "notify_customer" in tool_results(messages):
        return reply("I could not notify the customer.")
    to = (
        "ann@crash.example.com" if "crash" in latest_request(messages) else "ann@bounce.example.com"
    )
    return reply("Notifying the customer.", ("notify_customer", {"to": to, "text": "Shipped."}))


failing_tool_agent = build_react_agent(
    get_model(script=_notify_script),
    [require_approval(notify_customer, description="Notify {to}?")],
    builtin_tools=False,
    name="notify",
)
