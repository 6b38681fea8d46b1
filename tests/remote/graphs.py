"""Graphs the remote deployments of these tests serve (`langgraph dev`, Aegra).

Self-contained: the servers load this file by path in their own venvs (no Django, no
HITL). No `from __future__ import annotations`: Aegra loads the file under a module
name it does not register, so string annotations could not be resolved there.
"""

from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class ReviewState(TypedDict, total=False):
    request: str
    decision: Any
    sent: dict


def _review(state: ReviewState) -> dict[str, Any]:
    answer = interrupt(
        [
            {
                "action_request": {
                    "action": "send_email",
                    "args": {"to": "team@example.com", "copies": 1},
                },
                "config": {
                    "allow_accept": True,
                    "allow_edit": True,
                    "allow_respond": True,
                    "allow_ignore": True,
                },
                "description": f"Send the email about {state.get('request') or 'it'}?",
            }
        ]
    )
    return {"decision": answer[0] if isinstance(answer, list) and answer else answer}


def _act(state: ReviewState) -> dict[str, Any]:
    decision = state.get("decision") or {}
    kind = decision.get("type") if isinstance(decision, dict) else None
    if kind == "accept":
        return {"sent": {"to": "team@example.com", "copies": 1}}
    if kind == "edit":
        return {"sent": decision["args"]["args"]}
    return {"sent": {}}


review_graph = (
    StateGraph(ReviewState)
    .add_node("review", _review)
    .add_node("act", _act)
    .add_edge(START, "review")
    .add_edge("review", "act")
    .add_edge("act", END)
    .compile()
)


class MiddlewareState(TypedDict, total=False):
    decisions: list


def _approve_tools(state: MiddlewareState) -> dict[str, Any]:
    # The shape langchain's HumanInTheLoopMiddleware interrupts with.
    answer = interrupt(
        {
            "action_requests": [
                {"name": "write_file", "args": {"path": "notes.md"}, "description": "Write"},
                {"name": "run_shell", "args": {"cmd": "ls"}, "description": "List files"},
            ],
            "review_configs": [
                {"action_name": "write_file", "allowed_decisions": ["approve", "edit", "reject"]},
                {"action_name": "run_shell", "allowed_decisions": ["approve", "reject"]},
            ],
        }
    )
    return {"decisions": answer["decisions"]}


middleware_graph = (
    StateGraph(MiddlewareState)
    .add_node("approve_tools", _approve_tools)
    .add_edge(START, "approve_tools")
    .add_edge("approve_tools", END)
    .compile()
)


class RawState(TypedDict, total=False):
    answer: Any


def _ask(state: RawState) -> dict[str, Any]:
    return {"answer": interrupt("Which quarter should the report cover?")}


raw_graph = (
    StateGraph(RawState).add_node("ask", _ask).add_edge(START, "ask").add_edge("ask", END).compile()
)

GRAPHS = {"review": "review_graph", "middleware": "middleware_graph", "raw": "raw_graph"}
