"""A ReAct agent in the create_react_agent shape, with HITL's built-in tools.

    START -> intake -> [pre_model_hook] -> agent -> [post_model_hook] -> tools -> ...
                                              \\-> END (no tool calls, or `finish` ran)

The agent node calls the model; each tool call goes to the ToolNode as its own task
(Send), so parallel calls that pause each get their own interrupt. Tools marked with
`require_approval` pause for a reviewer first. `finish` (the completion tool, shaped by
`response_format`) stores the structured final result and ends the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypedDict, Unpack

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langgraph._internal._runnable import RunnableCallable
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from pydantic import BaseModel

from agents.paths import FileAccessError, files_from_config
from agents.state import AgentState, input_schema_of
from agents.tools import BUILTIN_TOOLS, approval_tool_node, make_finish_tool, make_route_tool
from agents.tools.files import transient_image_message

Prompt = str | SystemMessage | Callable[[dict[str, Any]], list[BaseMessage]]


class InvalidAgentInput(ValueError):
    pass


def _messages(state: Any, key: str = "messages") -> list[AnyMessage]:
    return list((state.get(key) if isinstance(state, dict) else getattr(state, key, None)) or [])


def _with_prompt(prompt: Prompt | None, state: dict[str, Any], messages: list[BaseMessage]):
    if prompt is None:
        return messages
    if isinstance(prompt, str):
        return [SystemMessage(content=prompt), *messages]
    if isinstance(prompt, SystemMessage):
        return [prompt, *messages]
    return list(prompt({**state, "messages": messages}))


class AgentOptions(TypedDict, total=False):
    """What shapes a ReAct agent besides its model and tools (all optional).

    - `pre_model_hook` runs before every model call and may return
      {"llm_input_messages": [...]} to send the model other messages than the history
      (e.g. trimmed); `post_model_hook` runs after every model call (guardrails).
    - `response_format`: a pydantic model for the structured final result (the
      `finish` tool takes it as its arguments).
    - `reviewer_groups`: the allow-list the agent may route its interrupts to.
    - `builtin_tools`: add the built-in tools (default True).
    - `default_request`: the user message when a run starts with no input at all.
    """

    prompt: Prompt | None
    pre_model_hook: Callable[..., Any] | Runnable | None
    post_model_hook: Callable[..., Any] | Runnable | None
    response_format: type[BaseModel] | None
    reviewer_groups: Sequence[str] | None
    builtin_tools: bool
    default_request: str | None
    state_schema: type
    name: str
    checkpointer: Any


def build_react_agent(
    model: BaseChatModel,
    tools: Sequence[BaseTool | Callable[..., Any]] = (),
    **options: Unpack[AgentOptions],
):
    """Build and compile the agent graph (see AgentOptions)."""
    unknown = sorted(set(options) - set(AgentOptions.__annotations__))
    if unknown:
        raise TypeError(f"build_react_agent() got unknown option(s): {', '.join(unknown)}")
    prompt = options.get("prompt")
    pre_model_hook = options.get("pre_model_hook")
    post_model_hook = options.get("post_model_hook")
    response_format = options.get("response_format")
    reviewer_groups = options.get("reviewer_groups")
    builtin_tools = options.get("builtin_tools", True)
    default_request = options.get("default_request")
    state_schema = options.get("state_schema", AgentState)
    name = options.get("name", "agent")
    checkpointer = options.get("checkpointer")
    all_tools: list[BaseTool | Callable[..., Any]] = [
        *(BUILTIN_TOOLS if builtin_tools else []),
        *tools,
    ]
    if reviewer_groups:
        all_tools.append(make_route_tool(reviewer_groups))
    all_tools.append(make_finish_tool(response_format))
    tool_node = approval_tool_node(all_tools)
    tool_names = [getattr(t, "name", None) or getattr(t, "__name__", "") for t in all_tools]
    duplicates = sorted({n for n in tool_names if tool_names.count(n) > 1})
    if duplicates:
        raise ValueError(f"Tool names must be unique; duplicated: {', '.join(duplicates)}.")
    bound_model = model.bind_tools(list(tool_node.tools_by_name.values()))
    return_direct = {t.name for t in tool_node.tools_by_name.values() if t.return_direct}
    entry = "pre_model_hook" if pre_model_hook is not None else "agent"

    def intake(state: dict[str, Any]) -> dict[str, Any]:
        """Turn {"request": "..."} into the next user message; a new request resets the result."""
        request = state.get("request")
        if isinstance(request, str) and request.strip():
            return {
                "messages": [HumanMessage(content=request.strip())],
                "request": None,
                "final_result": None,
            }
        messages = _messages(state)
        if not messages:
            if default_request:
                return {"messages": [HumanMessage(content=default_request)], "final_result": None}
            raise InvalidAgentInput(
                'Start the agent with {"request": "..."} or {"messages": [...]}.'
            )
        if isinstance(messages[-1], HumanMessage) and state.get("final_result") is not None:
            return {"final_result": None}
        return {}

    def model_input(state: dict[str, Any], config: RunnableConfig) -> list[BaseMessage]:
        history = _messages(state)
        messages = _messages(state, "llm_input_messages") or history
        model_input = _with_prompt(prompt, state, messages)
        try:
            image = transient_image_message(files_from_config(config), history)
        except FileAccessError:
            image = None
        if image is not None:
            # Sent with this call only; never returned as an update, never checkpointed.
            model_input = [*model_input, image]
        return model_input

    def model_output(state: dict[str, Any], response: BaseMessage) -> dict[str, Any]:
        remaining = state.get("remaining_steps")
        if (
            isinstance(response, AIMessage)
            and response.tool_calls
            and remaining is not None
            and remaining < 2
        ):
            response = AIMessage(
                id=response.id,
                content="I ran out of steps before finishing; start a new run to continue.",
            )
        return {"messages": [response]}

    def call_model(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return model_output(state, bound_model.invoke(model_input(state, config), config))

    async def acall_model(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        # What the worker runs (astream): the call is awaited on the run engine's loop,
        # and a streaming model's tokens reach the `messages` mode as they come.
        last = (_messages(state) or [None])[-1]
        if isinstance(last, ToolMessage) and last.name == "view_image":
            # Reading the image from the thread's files blocks: not on the loop.
            messages = await asyncio.to_thread(model_input, state, config)
        else:
            messages = model_input(state, config)
        response = await bound_model.ainvoke(messages, config)
        return model_output(state, response)

    def tool_sends(calls: list[dict[str, Any]]) -> list[Send]:
        # One task per call: parallel calls that pause get one interrupt each, and only
        # the paused call runs again on resume.
        return [Send("tools", [call]) for call in calls]

    def after_model(state: dict[str, Any]) -> str | list[Send]:
        last = _messages(state)[-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            return "post_model_hook" if post_model_hook is not None else tool_sends(last.tool_calls)
        return "post_model_hook" if post_model_hook is not None else END

    def after_post_hook(state: dict[str, Any]) -> str | list[Send]:
        messages = _messages(state)
        answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        last_ai = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        pending = [c for c in (last_ai.tool_calls if last_ai else []) if c["id"] not in answered]
        if pending:
            return tool_sends(pending)
        if messages and isinstance(messages[-1], ToolMessage):
            return entry
        return END

    def after_tools(state: dict[str, Any]) -> str:
        # Each tool task sees its own result only; the task that ran a return_direct
        # tool decides (success ends the run, an error goes back to the model).
        messages = _messages(state)
        own: list[ToolMessage] = []
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                break
            own.append(message)
        if any(m.name in return_direct and m.status != "error" for m in own):
            return END
        if any(m.name in return_direct for m in own):
            return entry
        last_ai = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        if last_ai and any(c["name"] in return_direct for c in last_ai.tool_calls):
            return END
        return entry

    class ModelInput(state_schema):  # type: ignore[misc, valid-type]
        llm_input_messages: list[AnyMessage]

    graph = StateGraph(state_schema, input_schema=input_schema_of(state_schema))
    graph.add_node("intake", intake)
    graph.add_node(
        "agent",
        # Both ways, as create_react_agent does: `invoke`/`stream` call the model with
        # `invoke`, `ainvoke`/`astream` await it.
        RunnableCallable(call_model, acall_model),
        input_schema=ModelInput if pre_model_hook is not None else state_schema,
    )
    graph.add_node("tools", tool_node)
    graph.add_edge(START, "intake")
    graph.add_edge("intake", entry)
    if pre_model_hook is not None:
        graph.add_node("pre_model_hook", pre_model_hook)
        graph.add_edge("pre_model_hook", "agent")
    if post_model_hook is not None:
        graph.add_node("post_model_hook", post_model_hook)
        graph.add_edge("agent", "post_model_hook")
        graph.add_conditional_edges("post_model_hook", after_post_hook, [entry, "tools", END])
    else:
        graph.add_conditional_edges("agent", after_model, ["tools", END])
    graph.add_conditional_edges("tools", after_tools, [entry, END])
    return graph.compile(checkpointer=checkpointer, name=name)
