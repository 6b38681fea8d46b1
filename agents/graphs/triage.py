"""A graph with a typed input: file a support ticket, a person confirms its routing.

Its input is a plain `typing.TypedDict` with strings, numbers, a boolean, an enum and a
list of strings, so "New thread" shows a form for it (see agents/schema.py).
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

Priority = Literal["low", "normal", "high", "urgent"]


class TicketInput(TypedDict):
    summary: str
    customer: str
    priority: Priority
    seats: int
    contract_value: float
    tags: list[str]
    notify_customer: bool


class TicketState(TicketInput, total=False):
    queue: str
    decision: Any


def _route(state: TicketState) -> dict[str, Any]:
    queue = "escalations" if state.get("priority") in ("high", "urgent") else "support"
    decision = interrupt(
        {
            "action_request": {
                "action": "route_ticket",
                "args": {
                    "summary": state.get("summary", ""),
                    "customer": state.get("customer", ""),
                    "queue": queue,
                    "tags": list(state.get("tags") or []),
                },
            },
            "config": {
                "allow_accept": True,
                "allow_edit": True,
                "allow_respond": True,
                "allow_ignore": True,
            },
            "description": f"Route this **{state.get('priority', 'normal')}** ticket to `{queue}`?",
        }
    )
    return {"queue": queue, "decision": decision}


triage_graph = (
    StateGraph(TicketState, input_schema=TicketInput)
    .add_node("route", _route)
    .add_edge(START, "route")
    .add_edge("route", END)
    .compile()
)
