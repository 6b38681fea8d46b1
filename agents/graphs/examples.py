"""Small graphs that pause in each interrupt shape of the contract.

They double as the minimal demo and as fixtures for tests and benchmarks; any
compiled LangGraph graph can be registered the same way.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send, interrupt

from agents.ledger import once


class ApprovalState(TypedDict, total=False):
    request: str
    to: str
    decision: Any
    sent: bool
    result: dict[str, Any]
    # Four-eyes, as the interrupt contract carries it: {"required": 2, ...} (optional).
    approvals: Any


def _propose(state: ApprovalState) -> dict[str, Any]:
    four_eyes = {"approvals": state["approvals"]} if state.get("approvals") else {}
    response = interrupt(
        {
            **four_eyes,
            "action_request": {
                "action": "send_email",
                "args": {
                    "to": state.get("to") or "team@example.com",
                    "subject": f"Re: {state.get('request') or 'weekly report'}",
                    "copies": 1,
                    "urgent": False,
                },
            },
            "config": {
                "allow_accept": True,
                "allow_edit": True,
                "allow_respond": True,
                "allow_ignore": True,
            },
            "description": "The agent wants to **send an email**. Check the recipient.",
            "args_schema": {
                "type": "object",
                "properties": {
                    "to": {"type": "string", "minLength": 3},
                    "subject": {"type": "string"},
                    "copies": {"type": "integer", "minimum": 1, "maximum": 10},
                    "urgent": {"type": "boolean"},
                },
                "required": ["to", "subject"],
                "additionalProperties": False,
            },
        }
    )
    return {"decision": response}


def _finish(state: ApprovalState) -> dict[str, Any]:
    decision = state.get("decision") or {}
    sent = decision.get("type") in ("accept", "edit")
    return {"sent": sent, "result": {"sent": sent, "decision": decision}}


approval_graph = (
    StateGraph(ApprovalState)
    .add_node("propose", _propose)
    .add_node("finish", _finish)
    .add_edge(START, "propose")
    .add_edge("propose", "finish")
    .add_edge("finish", END)
    .compile()
)
"""Asks a reviewer to approve one email (accept, edit its args, answer or ignore), then
reports whether it was sent."""


class ParallelState(TypedDict, total=False):
    files: list[str]
    answers: Annotated[list[dict[str, Any]], operator.add]


def _plan(state: ParallelState) -> dict[str, Any]:
    return {}


def _delete(name: str) -> str:
    """Stands for the real side effect (a file store, an API call)."""
    return f"deleted {name}"


def _fan_out(state: ParallelState) -> list[Send]:
    files = state.get("files") or ["a.txt", "b.txt"]
    return [Send("delete_file", {"files": [name]}) for name in files]


def _delete_file(state: ParallelState, config: RunnableConfig) -> dict[str, Any]:
    name = state["files"][0]
    response = interrupt(
        [
            {
                "action_request": {"action": "delete_file", "args": {"path": name}},
                "config": {
                    "allow_accept": True,
                    "allow_edit": False,
                    "allow_respond": False,
                    "allow_ignore": True,
                },
                "description": f"Delete `{name}`?",
            }
        ]
    )[0]
    deleted = None
    if response.get("type") == "accept":
        # The approved effect in the node that asked: at most once, even when the worker
        # dies between the effect and this node's checkpoint (agents.ledger.once).
        deleted = once(config, lambda: _delete(name), name="delete_file")
    return {"answers": [{"path": name, "response": response, "deleted": deleted}]}


parallel_approval_graph = (
    StateGraph(ParallelState)
    .add_node("plan", _plan)
    .add_node("delete_file", _delete_file)
    .add_edge(START, "plan")
    .add_conditional_edges("plan", _fan_out, ["delete_file"])
    .add_edge("delete_file", END)
    .compile()
)
"""Fans out one deletion per file, each paused for its own approval in parallel."""


class MiddlewareState(TypedDict, total=False):
    decisions: list[dict[str, Any]]
    executed: list[dict[str, Any]]


def _review(state: MiddlewareState) -> dict[str, Any]:
    answer = interrupt(
        {
            "action_requests": [
                {
                    "name": "write_file",
                    "args": {"path": "notes.md", "text": "hello"},
                    "description": "Write notes",
                },
                {"name": "run_shell", "args": {"cmd": "ls"}, "description": "List files"},
            ],
            "review_configs": [
                {"action_name": "write_file", "allowed_decisions": ["approve", "edit", "reject"]},
                {"action_name": "run_shell", "allowed_decisions": ["approve", "reject", "respond"]},
            ],
        }
    )
    decisions = answer["decisions"]
    executed = []
    for name, decision in zip(("write_file", "run_shell"), decisions, strict=True):
        if decision["type"] == "approve":
            executed.append({"name": name})
        elif decision["type"] == "edit":
            executed.append({"name": name, "args": decision["edited_action"]["args"]})
    return {"decisions": decisions, "executed": executed}


middleware_graph = (
    StateGraph(MiddlewareState)
    .add_node("review", _review)
    .add_edge(START, "review")
    .add_edge("review", END)
    .compile()
)
"""Two tool calls reviewed together, as LangChain's HumanInTheLoopMiddleware asks."""


class RawState(TypedDict, total=False):
    answer: Any


def _ask(state: RawState) -> dict[str, Any]:
    return {"answer": interrupt("Which quarter should the report cover?")}


raw_graph = (
    StateGraph(RawState).add_node("ask", _ask).add_edge(START, "ask").add_edge("ask", END).compile()
)
"""Asks a bare question (a plain string interrupt) and keeps the answer."""
