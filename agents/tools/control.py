"""Routing and completion: who answers the agent's interrupts, and how it finishes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.prebuilt import ToolRuntime
from langgraph.types import Command
from pydantic import BaseModel, Field, ValidationError, WithJsonSchema

ROUTE_TOOL = "route_to_reviewers"
FINISH_TOOL = "finish"
DEFAULT_GROUP = "default"


def make_route_tool(allowed: Sequence[str]) -> BaseTool:
    """A tool that addresses the agent's next interrupts to a group from `allowed`."""
    groups = [g for g in dict.fromkeys(allowed) if g]
    if not groups:
        raise ValueError("A routing tool needs at least one reviewer group.")
    choices = [*groups, DEFAULT_GROUP]

    class RouteArgs(BaseModel):
        group: Annotated[str, WithJsonSchema({"type": "string", "enum": choices})] = Field(
            description=f"One of: {', '.join(choices)} ('{DEFAULT_GROUP}' undoes the routing)."
        )
        reason: str = Field("", description="Why this group should decide.")

    def route(group: str, runtime: ToolRuntime, reason: str = "") -> Command:
        if group not in choices:
            raise ToolException(
                f"Unknown reviewer group {group!r}; choose one of: {', '.join(choices)}."
            )
        target = None if group == DEFAULT_GROUP else group
        text = (
            f"From now on your questions and approvals go to the {group!r} reviewers."
            if target
            else "From now on your questions and approvals go to the default reviewers."
        )
        return Command(
            update={
                "reviewer_group": target,
                "messages": [
                    ToolMessage(
                        content=text,
                        artifact={"reviewer_group": target, "reason": reason},
                        name=ROUTE_TOOL,
                        tool_call_id=runtime.tool_call_id or "",
                    )
                ],
            }
        )

    return StructuredTool.from_function(
        route,
        name=ROUTE_TOOL,
        description=(
            "Choose which reviewer group answers your next questions and approvals, e.g. "
            f"when a decision needs their expertise. Allowed: {', '.join(groups)}."
        ),
        args_schema=RouteArgs,
        handle_tool_error=True,
    )


class FinishArgs(BaseModel):
    summary: str = Field(description="What you did and the outcome, for the person.")
    result: dict[str, Any] = Field(
        default_factory=dict, description="Structured data about the outcome."
    )


def make_finish_tool(response_format: type[BaseModel] | None = None) -> BaseTool:
    """The completion tool: its arguments become the run's structured final result.

    With `response_format` (a pydantic model) the final result follows that schema; the
    tool is the structured final response of the agent. Calling it ends the run.
    """
    schema = response_format or FinishArgs

    def finish(runtime: ToolRuntime, **kwargs: Any) -> Command:
        try:
            data = schema.model_validate(kwargs).model_dump(mode="json")
        except ValidationError as exc:
            raise ToolException(f"The final result does not fit its schema: {exc}") from None
        return Command(
            update={
                "final_result": data,
                "messages": [
                    ToolMessage(
                        content="Final result recorded; the task is complete.",
                        artifact=data,
                        name=FINISH_TOOL,
                        tool_call_id=runtime.tool_call_id or "",
                    )
                ],
            }
        )

    return StructuredTool.from_function(
        finish,
        name=FINISH_TOOL,
        description=(
            "Finish the task with its final result. Call it once, as your last action, "
            "when the work is done (or cannot be done)."
        ),
        args_schema=schema,
        return_direct=True,
        handle_tool_error=True,
    )
