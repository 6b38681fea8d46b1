"""A chat graph that calls tools the client defines (AG-UI frontend tools).

The client offers tools in the run input (`tools`, as AG-UI RunAgentInput sends
them). When the scripted model calls one, the graph pauses with an `interrupt()`
whose value is a HumanInterrupt marked `client_tool` and carrying the
`tool_call_id`; the client runs the tool and its result resumes the graph as a
`response`. The "model" is scripted so the graph runs offline and deterministically:

- `/<tool> {json args}` calls an offered tool with those args;
- after a tool result, it reports the result;
- anything else is echoed back.
"""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt


class ClientToolState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    # AG-UI tools offered by the client: [{name, description, parameters}].
    tools: list[dict[str, Any]]


def _offered(state: ClientToolState) -> dict[str, dict[str, Any]]:
    return {
        tool["name"]: tool
        for tool in state.get("tools") or []
        if isinstance(tool, dict) and isinstance(tool.get("name"), str)
    }


def _text(message: Any) -> str:
    content = getattr(message, "content", "")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content or "")


def _model(state: ClientToolState) -> dict[str, Any]:
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    reply_id = f"msg-{uuid.uuid4()}"
    if isinstance(last, ToolMessage):
        reply = f"The {last.name or 'client'} tool answered: {_text(last)}"
        return {"messages": [AIMessage(id=reply_id, content=reply)]}
    text = _text(last).strip() if isinstance(last, HumanMessage) else ""
    tools = _offered(state)
    if text.startswith("/"):
        name, _, rest = text[1:].partition(" ")
        if name in tools:
            try:
                args = json.loads(rest) if rest.strip() else {}
            except json.JSONDecodeError:
                args = {"input": rest.strip()}
            if not isinstance(args, dict):
                args = {"input": args}
            call = {"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:12]}"}
            return {"messages": [AIMessage(id=reply_id, content="", tool_calls=[call])]}
        offered = ", ".join(sorted(tools)) or "none"
        return {
            "messages": [
                AIMessage(id=reply_id, content=f"There is no tool {name!r}; offered: {offered}.")
            ]
        }
    return {"messages": [AIMessage(id=reply_id, content=f"You said: {text}")]}


def _route(state: ClientToolState) -> str:
    last = (state.get("messages") or [None])[-1]
    if isinstance(last, AIMessage) and last.tool_calls:
        return "client_tools"
    return END


def _client_tools(state: ClientToolState) -> dict[str, Any]:
    last = state["messages"][-1]
    tools = _offered(state)
    results = []
    for call in last.tool_calls:
        tool = tools.get(call["name"], {})
        answer = interrupt(
            {
                "action_request": {"action": call["name"], "args": call["args"]},
                "config": {
                    "allow_accept": False,
                    "allow_edit": False,
                    "allow_respond": True,
                    "allow_ignore": True,
                },
                "description": tool.get("description") or f"Run the client tool `{call['name']}`.",
                "tool_call_id": call["id"],
                "client_tool": True,
            }
        )
        if isinstance(answer, dict) and answer.get("type") == "response":
            content = str(answer.get("args") or "")
        else:
            content = f"The client did not run {call['name']}."
        results.append(
            ToolMessage(
                id=f"tool-{call['id']}", content=content, tool_call_id=call["id"], name=call["name"]
            )
        )
    return {"messages": results}


client_tools_graph = (
    StateGraph(ClientToolState)
    .add_node("model", _model)
    .add_node("client_tools", _client_tools)
    .add_edge(START, "model")
    .add_conditional_edges("model", _route, ["client_tools", END])
    .add_edge("client_tools", "model")
    .compile()
)
