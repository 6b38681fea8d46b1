"""The demo report agent as LangChain v1 builds agents: `create_agent` with
`HumanInTheLoopMiddleware`, so it pauses in the format today's chat UIs render with
decision buttons (`action_requests` + `review_configs`, answered with `decisions`:
approve / edit / reject / respond).

The same story as the `demo` graph, shorter: write the quarter's sales table, then ask
to email it (the middleware pauses before `send_email`), then say what happened. With
the default HITL_MODEL ("scripted") a deterministic script drives the tools.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware, before_agent
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langgraph.graph.message import add_messages

from agents.graphs.demo import DEFAULT_REQUEST, RECIPIENT, send_email, write_sales_table
from agents.models import get_model, reply, tool_results

QUARTER = "Q4 2025"
PROMPT = (
    f"You prepare sales reports. Write the sales table for {QUARTER} with write_sales_table, "
    f"then send_email it to {RECIPIENT} (a person approves the email first), then say what "
    "happened."
)

INTERRUPT_ON = {
    "send_email": {
        "allowed_decisions": ["approve", "edit", "reject", "respond"],
        "description": "The agent wants to send the sales report by email.",
    }
}


def v1_script(messages: list[BaseMessage], tools: list[str]) -> AIMessage:
    results = tool_results(messages)
    table = results.get("write_sales_table")
    if table is None:
        return reply(
            f"Building the sales table for {QUARTER}.",
            ("write_sales_table", {"quarter": QUARTER}),
        )
    csv_path = (table.artifact or {}).get("path")
    email = results.get("send_email")
    if email is None:
        return reply(
            f"Asking for approval to email the report to {RECIPIENT}.",
            (
                "send_email",
                {
                    "to": RECIPIENT,
                    "subject": f"Sales report {QUARTER}",
                    "body": f"Hello,\n\nattached are the sales figures for {QUARTER}.",
                    "attachments": [csv_path] if csv_path else [],
                },
            ),
        )
    outcome = email.artifact or {}
    if outcome.get("sent"):
        return reply(f"Sent the {QUARTER} sales report to {outcome['to']} ({outcome['subject']}).")
    if email.status == "error":
        return reply(f"The email was not sent: {email.text}")
    return reply(f"The email was not sent; the reviewer answered: {email.text}")


class V1State(AgentState):
    """create_agent's state, whose input may leave out `messages` (as `demo`'s may)."""

    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]


@before_agent
def default_request(state: V1State, runtime: Any) -> dict[str, Any] | None:
    """A run started with no message asks for the report, as `demo` does."""
    if state.get("messages"):
        return None
    return {"messages": [HumanMessage(DEFAULT_REQUEST)]}


def build_agent_v1(model: Any = None, *, checkpointer: Any = None):
    return create_agent(
        model if model is not None else get_model(script=v1_script),
        [write_sales_table, send_email],
        system_prompt=PROMPT,
        middleware=[default_request, HumanInTheLoopMiddleware(interrupt_on=INTERRUPT_ON)],
        state_schema=V1State,
        checkpointer=checkpointer,
        name="demo_v1",
    )


agent_v1_graph = build_agent_v1()
