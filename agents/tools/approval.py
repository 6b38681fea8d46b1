"""Tool approval: any tool can be marked as needing a person's decision before it runs.

`require_approval(tool, ...)` marks a tool (ours or a user's); `approval_gate` is the
ToolNode `wrap_tool_call` hook that turns each call of a marked tool into a
HumanInterrupt and acts on the answer:

- accept   -> run with the proposed args
- edit     -> run with the reviewer's args (validated against the tool's schema)
- response -> do not run; the reviewer's text is the tool result
- ignore   -> do not run; the tool result says it was skipped

When an approved call fails. A tool says it failed in one of two ways, and either one
shows on the thread as "the approved action failed" with the tool's message:

- it raises: `ToolException("why")` for an expected failure (with
  `handle_tool_error = True` the agent then gets the message as an error result and
  may go on), any other exception for an unexpected one (the run fails);
- it returns an error result: a `ToolMessage(status="error", content="why")`.

A tool that returns normally has succeeded, whatever its text says.
"""

from __future__ import annotations

import copy
import string
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import jsonschema
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, ToolException
from langchain_core.tools import tool as as_tool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, interrupt
from pydantic import ValidationError

from agents.ledger import LEDGER_KEY, aledger_begin, aledger_finish, interrupt_id_of
from agents.tools.base import escape_md, read_human_response, state_value

APPROVAL_KEY = "hitl_approval"
DEFAULT_DESCRIPTION = "The agent wants to run **{tool}**. Check the arguments before it runs."


# LangGraph's HumanInterruptConfig: the decisions a reviewer may take.
CONFIG_KEYS = ("allow_accept", "allow_edit", "allow_respond", "allow_ignore")


@dataclass(frozen=True)
class ApprovalPolicy:
    allow_accept: bool = True
    allow_edit: bool = True
    allow_respond: bool = True
    allow_ignore: bool = True
    # Markdown; {tool} and {<arg name>} are replaced (values escaped).
    description: str = DEFAULT_DESCRIPTION
    # Args a reviewer may change when editing; None means all of them.
    editable: tuple[str, ...] | None = None
    # Always ask this reviewer group (else the group the agent routed to, else the default).
    reviewer_group: str | None = None
    expires_in: float | None = None

    def config(self) -> dict[str, bool]:
        return {
            "allow_accept": self.allow_accept,
            "allow_edit": self.allow_edit,
            "allow_respond": self.allow_respond,
            "allow_ignore": self.allow_ignore,
        }


def require_approval(
    tool: BaseTool | Callable[..., Any],
    *,
    config: Mapping[str, bool] | None = None,
    description: str = DEFAULT_DESCRIPTION,
    editable: Sequence[str] | None = None,
    reviewer_group: str | None = None,
    expires_in: float | None = None,
) -> BaseTool:
    """Return a copy of `tool` that needs a reviewer's decision before each call.

    `config` is LangGraph's HumanInterruptConfig, or the part of it that differs from
    allowing every decision (`{"allow_edit": False}`).
    """
    base = tool if isinstance(tool, BaseTool) else as_tool(tool)
    allowed = {name: True for name in CONFIG_KEYS}
    unknown = sorted(set(config or {}) - set(CONFIG_KEYS))
    if unknown:
        raise ValueError(f"Unknown approval config key(s) {', '.join(unknown)}; use {CONFIG_KEYS}.")
    allowed.update({name: bool(value) for name, value in (config or {}).items()})
    if not any(allowed.values()):
        raise ValueError(f"Approval for {base.name!r} must allow at least one decision.")
    fields = set(_args_schema(base).get("properties", {}))
    unknown = [name for name in editable or () if name not in fields]
    if unknown:
        raise ValueError(f"{base.name!r} has no argument(s) {', '.join(unknown)} to edit.")
    policy = ApprovalPolicy(
        **allowed,
        description=description,
        editable=tuple(editable) if editable is not None else None,
        reviewer_group=reviewer_group,
        expires_in=expires_in,
    )
    # Metadata holds plain data only: it travels with callbacks and traces.
    return base.model_copy(
        update={"metadata": {**(base.metadata or {}), APPROVAL_KEY: asdict(policy)}}
    )


def approval_policy(tool: BaseTool | None) -> ApprovalPolicy | None:
    data = (getattr(tool, "metadata", None) or {}).get(APPROVAL_KEY)
    if not isinstance(data, dict):
        return None
    data = dict(data)
    if data.get("editable") is not None:
        data["editable"] = tuple(data["editable"])
    return ApprovalPolicy(**data)


def _args_schema(tool: BaseTool) -> dict[str, Any]:
    """The JSON schema of the args the model proposes (injected args excluded)."""
    schema = tool.tool_call_schema
    if isinstance(schema, dict):
        schema = copy.deepcopy(schema.get("parameters", schema))
    else:
        schema = schema.model_json_schema()
    schema.pop("title", None)
    schema.pop("description", None)
    return schema


def edit_schema(tool: BaseTool, policy: ApprovalPolicy, args: dict[str, Any]) -> dict[str, Any]:
    """The schema a reviewer's edit must match: the tool's, pinned where not editable.

    Nothing is required: an argument left out of an edit keeps its proposed value, so a
    form that only sends the editable fields works as well as one that sends them all.
    """
    schema = _args_schema(tool)
    schema.setdefault("type", "object")
    schema["additionalProperties"] = False
    schema.pop("required", None)
    properties = schema.setdefault("properties", {})
    if policy.editable is not None:
        for name in list(properties):
            if name in policy.editable:
                continue
            # Not editable: must stay as proposed (or stay absent).
            properties[name] = {"const": args[name]} if name in args else False
    return schema


def call_problem(tool: BaseTool, args: dict[str, Any]) -> str | None:
    """Why the model's args would not pass the tool's own validation, if they would not."""
    schema = tool.tool_call_schema
    if isinstance(schema, dict):
        error = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(_args_schema(tool)).iter_errors(args)
        )
        if error is None:
            return None
        return f"{'/'.join(str(p) for p in error.path) or 'args'}: {error.message}"
    try:
        schema.model_validate(args)
    except ValidationError as exc:
        first = exc.errors()[0]
        return f"{'/'.join(str(p) for p in first['loc']) or 'args'}: {first['msg']}"
    return None


class _Template(string.Formatter):
    def get_value(self, key: Any, args: Any, kwargs: Any) -> Any:
        if isinstance(key, str) and key in kwargs:
            return kwargs[key]
        return "{" + str(key) + "}"

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        # No attribute or index lookups: templates only name arguments.
        return self.get_value(field_name, args, kwargs), field_name


def render_description(template: str, tool_name: str, args: dict[str, Any]) -> str:
    values = {k: escape_md(v) for k, v in args.items()}
    values["tool"] = escape_md(tool_name)
    try:
        return _Template().vformat(template, (), values)
    except (ValueError, IndexError):
        return template


def approval_request(
    tool: BaseTool,
    policy: ApprovalPolicy,
    call: dict[str, Any],
    *,
    reviewer_group: str | None = None,
) -> dict[str, Any]:
    """The HumanInterrupt a marked tool call pauses with."""
    args = dict(call.get("args") or {})
    value: dict[str, Any] = {
        "action_request": {"action": tool.name, "args": args},
        "config": policy.config(),
        "description": render_description(policy.description, tool.name, args),
        "args_schema": edit_schema(tool, policy, args),
        "tool_call_id": call.get("id"),
    }
    group = policy.reviewer_group or reviewer_group
    if group:
        value["reviewer_group"] = group
    if policy.expires_in:
        value["expires_in"] = policy.expires_in
    return value


def _result(call: dict[str, Any], content: str, *, review: str, status: str = "success"):
    return ToolMessage(
        content=content,
        name=call["name"],
        tool_call_id=call["id"],
        status=status,
        artifact={"review": review, "executed": False},
    )


def _ledger_key(request: ToolCallRequest) -> tuple[Any, dict[str, str]]:
    config = getattr(request.runtime, "config", None) or {}
    ledger = (config.get("configurable") or {}).get(LEDGER_KEY)
    call = request.tool_call
    return ledger, {
        "interrupt_id": interrupt_id_of(config),
        "tool_call_id": str(call.get("id") or ""),
    }


def _earlier_result(call: dict[str, Any], earlier: dict[str, Any]) -> ToolMessage:
    """What a call the ledger shows as begun before answers instead of running again."""
    if earlier.get("status") == "done" and earlier.get("result"):
        result = earlier["result"]
        return ToolMessage(
            content=result.get("content", ""),
            name=call["name"],
            tool_call_id=call["id"],
            status=result.get("status", "success"),
            artifact={"review": "replayed", "executed": True},
        )
    # The worker stopped while the call ran: it may have happened; never repeat it.
    return _result(
        call,
        f"{call['name']} was approved and started, but the worker stopped before it "
        "reported back; it was not run again. Check its effect before retrying.",
        review="unknown",
        status="error",
    )


def _outcome_record(call: dict[str, Any], outcome: Any) -> dict[str, Any]:
    if isinstance(outcome, ToolMessage):
        return {"content": outcome.content, "status": outcome.status}
    # A Command: its state update is checkpointed; remember only that it ran.
    return {"content": f"{call['name']} ran.", "status": "success"}


def _failure_record(exc: Exception) -> dict[str, Any]:
    return {"content": f"{type(exc).__name__}: {exc}"[:2000], "status": "error"}


def _execute_once(
    request: ToolCallRequest, execute: Callable[[ToolCallRequest], ToolMessage | Command]
) -> ToolMessage | Command:
    """Run an approved call unless the ledger shows this decision was already carried out."""
    ledger, key = _ledger_key(request)
    if ledger is None:
        return execute(request)
    call = request.tool_call
    earlier = ledger.begin(tool=call["name"], **key)
    if earlier is not None:
        return _earlier_result(call, earlier)
    try:
        outcome = execute(request)
    except GraphBubbleUp:
        raise  # an interrupt inside the tool, not a failure
    except Exception as exc:
        # Unexpected: the run fails, but the ledger records that the approved action did.
        ledger.finish(result=_failure_record(exc), **key)
        raise
    ledger.finish(result=_outcome_record(call, outcome), **key)
    return outcome


async def _aexecute_once(
    request: ToolCallRequest,
    execute: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command]],
) -> ToolMessage | Command:
    """_execute_once for async tool execution: the ledger's writes run off the loop."""
    ledger, key = _ledger_key(request)
    if ledger is None:
        return await execute(request)
    call = request.tool_call
    earlier = await aledger_begin(ledger, tool=call["name"], **key)
    if earlier is not None:
        return _earlier_result(call, earlier)
    try:
        outcome = await execute(request)
    except GraphBubbleUp:
        raise
    except Exception as exc:
        await aledger_finish(ledger, result=_failure_record(exc), **key)
        raise
    await aledger_finish(ledger, result=_outcome_record(call, outcome), **key)
    return outcome


def _review(request: ToolCallRequest) -> ToolMessage | ToolCallRequest | None:
    """Ask the reviewer about a call: None when the tool needs no approval, the request to
    run (as proposed or as edited) when approved, else the result that stands for it."""
    policy = approval_policy(request.tool)
    if request.tool is None or policy is None:
        return None
    call = request.tool_call
    # Malformed calls go back to the model; a reviewer only sees calls that could run.
    problem = call_problem(request.tool, call.get("args") or {})
    if problem:
        return _result(
            call,
            f"Invalid arguments for {call['name']} ({problem}); fix them and call the tool again.",
            review="none",
            status="error",
        )
    value = approval_request(
        request.tool,
        policy,
        call,
        reviewer_group=state_value(request.state, "reviewer_group"),
    )
    # On resume the node runs again from the top and interrupt() returns the answer;
    # nothing above has side effects, so the tool itself runs at most once.
    answer = interrupt(value)
    try:
        kind, args = read_human_response(answer)
    except ToolException as exc:
        return _result(call, str(exc), review="unknown", status="error")
    allowed = {
        "accept": policy.allow_accept,
        "edit": policy.allow_edit,
        "response": policy.allow_respond,
        "ignore": policy.allow_ignore,
    }
    if not allowed.get(kind):
        return _result(
            call,
            f"The answer {kind!r} is not allowed for {call['name']}; the tool was not run.",
            review=kind,
            status="error",
        )
    if kind == "accept":
        return request
    if kind == "edit":
        edited = args.get("args") if isinstance(args, dict) and "args" in args else args
        if not isinstance(edited, dict):
            return _result(
                call,
                "The reviewer's edit had no arguments; the tool was not run.",
                review=kind,
                status="error",
            )
        edited = {**(call.get("args") or {}), **edited}  # left out: keeps the proposed value
        error = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(value["args_schema"]).iter_errors(edited)
        )
        if error is not None:
            where = "/".join(str(p) for p in error.path) or "args"
            return _result(
                call,
                f"The reviewer's edit does not fit {call['name']} ({where}: {error.message}); "
                "the tool was not run.",
                review=kind,
                status="error",
            )
        return request.override(tool_call={**call, "args": edited})
    if kind == "response":
        return _result(call, str(args or ""), review=kind)
    return _result(
        call,
        f"The reviewer skipped this call: {call['name']} was not run. Go on without it.",
        review=kind,
    )


def approval_gate(
    request: ToolCallRequest, execute: Callable[[ToolCallRequest], ToolMessage | Command]
) -> ToolMessage | Command:
    """ToolNode wrap_tool_call hook: ask before running a tool marked with require_approval."""
    reviewed = _review(request)
    if reviewed is None:
        return execute(request)
    if isinstance(reviewed, ToolMessage):
        return reviewed
    return _execute_once(reviewed, execute)


async def aapproval_gate(
    request: ToolCallRequest,
    execute: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command]],
) -> ToolMessage | Command:
    """ToolNode awrap_tool_call hook: approval_gate when the graph runs async (astream).

    Async-only tools (a coroutine and no function) run here, and approved calls go
    through the ledger as in the sync gate.
    """
    reviewed = _review(request)
    if reviewed is None:
        return await execute(request)
    if isinstance(reviewed, ToolMessage):
        return reviewed
    return await _aexecute_once(reviewed, execute)


def approval_tool_node(tools: Sequence[BaseTool | Callable[..., Any]], **kwargs: Any) -> ToolNode:
    """A ToolNode that asks before running tools marked with require_approval."""
    return ToolNode(tools, wrap_tool_call=approval_gate, awrap_tool_call=aapproval_gate, **kwargs)
