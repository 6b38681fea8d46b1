"""ask_clarification: pause the graph and ask a person; the answer is the tool result."""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.tools import ToolException, tool
from langgraph.prebuilt import ToolRuntime
from langgraph.types import interrupt
from pydantic import BaseModel, Field, WithJsonSchema

from agents.tools.base import escape_md, parse_string_list, read_human_response, state_value

CLARIFICATION_TYPES = (
    "missing_info",
    "ambiguous_requirement",
    "approach_choice",
    "risk_confirmation",
    "suggestion",
)
RISK_OPTIONS = ("Confirm", "Decline")
SUGGESTION_OPTIONS = ("Yes, do that", "No, thanks")
_TITLES = {
    "missing_info": "The agent needs information",
    "ambiguous_requirement": "The agent found an ambiguous requirement",
    "approach_choice": "The agent asks you to choose an approach",
    "risk_confirmation": "The agent asks you to confirm a risky step",
    "suggestion": "The agent has a suggestion",
}


class ClarificationArgs(BaseModel):
    question: str = Field(description="The question for the person, one or two sentences.")
    clarification_type: Annotated[
        str, WithJsonSchema({"type": "string", "enum": list(CLARIFICATION_TYPES)})
    ] = Field(
        description=(
            "missing_info: you lack a fact; ambiguous_requirement: the request can be read "
            "several ways; approach_choice: pick one of your options; risk_confirmation: "
            "confirm before an irreversible or risky step; suggestion: propose something."
        )
    )
    context: str | None = Field(None, description="Why you ask; what you already know.")
    # Shown to the model as a list; a JSON-encoded string is accepted and parsed.
    options: Annotated[
        list[str] | str | None,
        WithJsonSchema({"type": "array", "items": {"type": "string"}}),
    ] = Field(None, description="Answers the person can pick with one click.")


def clarification_request(
    *,
    question: str,
    clarification_type: str,
    context: str | None,
    options: list[str] | None,
    reviewer_group: str | None = None,
    tool_call_id: str | None = None,
) -> dict[str, Any]:
    """The HumanInterrupt a clarification pauses with (plus the UI's "clarification" key)."""
    if clarification_type == "risk_confirmation" and not options:
        options = list(RISK_OPTIONS)
    lines = [f"**{_TITLES[clarification_type]}**", "", escape_md(question)]
    if context:
        lines += ["", f"_Context:_ {escape_md(context)}"]
    if options:
        lines += ["", "Options:"] + [f"- {escape_md(o)}" for o in options]
    value: dict[str, Any] = {
        "action_request": {
            "action": "ask_clarification",
            "args": {
                "question": question,
                "clarification_type": clarification_type,
                "context": context,
                "options": options or [],
            },
        },
        "config": {
            # Accepting means "confirmed" and only makes sense for a risk confirmation.
            "allow_accept": clarification_type == "risk_confirmation",
            "allow_edit": False,
            "allow_respond": True,
            "allow_ignore": True,
        },
        "description": "\n".join(lines),
        "clarification": {
            "type": clarification_type,
            "question": question,
            "context": context,
            "options": options or [],
            "free_text": True,
            "accept_label": "Confirm" if clarification_type == "risk_confirmation" else None,
        },
    }
    if tool_call_id:
        value["tool_call_id"] = tool_call_id
    if reviewer_group:
        value["reviewer_group"] = reviewer_group
    return value


def answer_text(clarification_type: str, answer: Any) -> tuple[str, dict[str, Any]]:
    """Turn a reviewer's answer into the tool result (content, artifact)."""
    kind, args = read_human_response(answer)
    if kind == "response":
        text = str(args or "").strip()
        if text:
            return text, {"answered": True, "answer": text}
        kind = "ignore"
    if kind == "accept":
        return "Confirmed by the reviewer; go ahead.", {"answered": True, "answer": "Confirm"}
    if kind == "ignore":
        text = (
            "The person skipped this question. Go on with your best judgment and say "
            "which assumption you made."
        )
        if clarification_type == "risk_confirmation":
            text += (
                " This was a risk confirmation: without a confirmation, do not take the risky step."
            )
        return text, {"answered": False}
    raise ToolException(f"A clarification cannot be answered with {kind!r}.")


@tool("ask_clarification", args_schema=ClarificationArgs, response_format="content_and_artifact")
def ask_clarification(
    question: str,
    clarification_type: str,
    runtime: ToolRuntime,
    context: str | None = None,
    options: Any = None,
) -> tuple[str, dict[str, Any]]:
    """Ask the person who reviews this task a question and wait for the answer.

    Use it when information is missing, the request is ambiguous, you must choose
    between approaches, or before a risky step. The answer comes back as this tool's
    result. Ask one question at a time; offer options when there are clear choices.
    """
    if clarification_type not in CLARIFICATION_TYPES:
        raise ToolException(
            f"Unknown clarification_type {clarification_type!r}; use one of "
            f"{', '.join(CLARIFICATION_TYPES)}."
        )
    if not isinstance(question, str) or not question.strip():
        raise ToolException("`question` must be a non-empty text.")
    parsed = parse_string_list(options, field="options")
    if clarification_type == "approach_choice" and not parsed:
        raise ToolException("An approach_choice question needs `options`: the choices to offer.")
    if clarification_type == "suggestion" and not parsed:
        parsed = list(SUGGESTION_OPTIONS)
    request = clarification_request(
        question=question.strip(),
        clarification_type=clarification_type,
        context=(context or "").strip() or None,
        options=parsed,
        reviewer_group=state_value(runtime.state, "reviewer_group"),
        tool_call_id=runtime.tool_call_id,
    )
    answer = interrupt(request)
    content, artifact = answer_text(clarification_type, answer)
    return content, {**artifact, "clarification_type": clarification_type}


ask_clarification.handle_tool_error = True
