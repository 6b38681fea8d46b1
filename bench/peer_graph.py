"""The graph every system of bench/peers.py serves: plan -> review (interrupt) -> act.

Django-free on purpose: `langgraph dev`, Aegra and HITL import this same file
(HITL through HITL_EXTRA_GRAPHS="cycle=bench.peer_graph:graph"). Compiled without a
checkpointer; each server binds its own.

No `from __future__ import annotations`: Aegra loads this file with
spec_from_file_location under a module name it does not register, so string
annotations of the state could not be resolved there.
"""

from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class CycleState(TypedDict, total=False):
    request: str
    plan: dict[str, Any]
    decision: Any
    done: bool


def plan(state: CycleState) -> dict[str, Any]:
    return {"plan": {"action": "send_email", "args": {"to": "team@example.com", "n": 1}}}


def review(state: CycleState) -> dict[str, Any]:
    planned = state.get("plan") or {}
    answer = interrupt(
        [
            {
                "action_request": {
                    "action": planned.get("action", "send_email"),
                    "args": planned.get("args", {}),
                },
                "config": {
                    "allow_accept": True,
                    "allow_edit": True,
                    "allow_respond": True,
                    "allow_ignore": True,
                },
                "description": f"Send the email for {state.get('request') or 'bench'}?",
            }
        ]
    )
    # langgraph's own servers hand back the resume value as sent (a list of one
    # HumanResponse); be lenient about a bare response too.
    if isinstance(answer, list) and answer:
        answer = answer[0]
    return {"decision": answer}


def act(state: CycleState) -> dict[str, Any]:
    decision = state.get("decision") or {}
    return {"done": isinstance(decision, dict) and decision.get("type") in ("accept", "edit")}


graph = (
    StateGraph(CycleState)
    .add_node("plan", plan)
    .add_node("review", review)
    .add_node("act", act)
    .add_edge(START, "plan")
    .add_edge("plan", "review")
    .add_edge("review", "act")
    .add_edge("act", END)
    .compile()
)
