"""The interrupt contract: what a graph asks, what a reviewer may answer, what goes back.

Every LangGraph interrupt value is normalized into one or more `Request`s (one per
action a reviewer decides on). A reviewer's `HumanResponse` is checked against the
request's config and schema, and once every request of an interrupt is answered,
`resume_value` builds the answer in the shape the graph asked in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema

from agents.coerce import coerce_edit

ResponseType = Literal["accept", "ignore", "response", "edit"]
RESPONSE_TYPES: tuple[str, ...] = ("accept", "ignore", "response", "edit")

KIND_HUMAN_INTERRUPT = "human_interrupt"
KIND_HUMAN_INTERRUPT_LIST = "human_interrupt_list"
KIND_HITL_REQUEST = "hitl_request"
KIND_TOOL_APPROVAL = "tool_approval"
KIND_RAW = "raw"

# langchain HumanInTheLoopMiddleware decision names -> our response types.
_DECISION_TO_TYPES = {
    "approve": ("accept",),
    "edit": ("edit",),
    "reject": ("ignore", "response"),
    "respond": ("response",),
}


class ContractError(ValueError):
    """A reviewer's answer that the interrupt does not accept; the message says why."""


def response_types(item: Any) -> list[str]:
    """The response types an item's `allow_*` flags permit, in the contract's order (a
    request here, or a stored HumanInterrupt row)."""
    flags = [
        (item.allow_accept, "accept"),
        (item.allow_edit, "edit"),
        (item.allow_respond, "response"),
        (item.allow_ignore, "ignore"),
    ]
    return [name for allowed, name in flags if allowed]


@dataclass
class Request:
    """One reviewable action inside an interrupt value."""

    position: int
    action: str
    args: dict[str, Any]
    description: str = ""
    allow_accept: bool = False
    allow_edit: bool = False
    allow_respond: bool = False
    allow_ignore: bool = False
    args_schema: dict[str, Any] | None = None
    reviewer_group: str | None = None
    expires_in: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Answered with a middleware decision, whose `reject` may say why: an ignore keeps it.
    decided: bool = False

    @property
    def allowed_types(self) -> list[str]:
        return response_types(self)


def is_human_interrupt(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("action_request"), dict)
        and isinstance(value["action_request"].get("action"), str)
    )


def is_hitl_request(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("action_requests"), list)
        and isinstance(value.get("review_configs"), list)
        and all(isinstance(r, dict) for r in value["action_requests"])
    )


def is_tool_approval(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("type") == "tool_approval"
        and isinstance(value.get("name"), str)
    )


def classify(value: Any) -> str:
    """Name the schema an interrupt value follows."""
    if is_human_interrupt(value):
        return KIND_HUMAN_INTERRUPT
    if isinstance(value, list) and value and all(is_human_interrupt(v) for v in value):
        return KIND_HUMAN_INTERRUPT_LIST
    if is_hitl_request(value):
        return KIND_HITL_REQUEST
    if is_tool_approval(value):
        return KIND_TOOL_APPROVAL
    return KIND_RAW


def _from_human_interrupt(position: int, value: dict[str, Any]) -> Request:
    action_request = value["action_request"]
    config = value.get("config")
    config = config if isinstance(config, dict) else {}
    args = action_request.get("args")
    return Request(
        position=position,
        action=action_request["action"],
        args=args if isinstance(args, dict) else {"value": args},
        description=str(value.get("description") or ""),
        allow_accept=bool(config.get("allow_accept")),
        allow_edit=bool(config.get("allow_edit")),
        allow_respond=bool(config.get("allow_respond")),
        allow_ignore=bool(config.get("allow_ignore")),
        args_schema=value.get("args_schema")
        if isinstance(value.get("args_schema"), dict)
        else None,
        reviewer_group=value.get("reviewer_group")
        if isinstance(value.get("reviewer_group"), str)
        else None,
        expires_in=_number_or_none(value.get("expires_in")),
        extra={k: v for k, v in value.items() if k in ("clarification", "tool_call_id")},
    )


def _number_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _flags_from_decisions(allowed: list[str]) -> dict[str, bool]:
    types = {t for decision in allowed for t in _DECISION_TO_TYPES.get(decision, ())}
    return {
        "allow_accept": "accept" in types,
        "allow_edit": "edit" in types,
        "allow_respond": "response" in types,
        "allow_ignore": "ignore" in types,
    }


def _resolve(schema: dict[str, Any], node: Any) -> Any:
    """Follow a local "#/$defs/Name" reference (what pydantic's JSON schemas use)."""
    ref = node.get("$ref") if isinstance(node, dict) else None
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return (schema.get("$defs") or {}).get(ref[len("#/$defs/") :])
    return node


def _decision_branches(schema: Any) -> dict[str, dict[str, Any]]:
    """The decision objects a per-call response_schema admits, by their `type` constant.

    Only the top-level alternatives count: a tool argument that happens to be named
    `type` (inside the edit branch) must not add decisions.
    """
    if not isinstance(schema, dict):
        return {}
    branches: dict[str, dict[str, Any]] = {}
    for branch in schema.get("oneOf") or schema.get("anyOf") or [schema]:
        branch = _resolve(schema, branch)
        if not isinstance(branch, dict):
            continue
        type_prop = (branch.get("properties") or {}).get("type")
        if not isinstance(type_prop, dict):
            continue
        consts = [type_prop["const"]] if "const" in type_prop else type_prop.get("enum") or []
        for const in consts:
            if const in _DECISION_TO_TYPES:
                branches.setdefault(const, branch)
    return branches


def decisions_in_schema(schema: Any) -> list[str]:
    """The middleware decision types a response_schema admits."""
    return list(_decision_branches(schema))


def edit_args_schema(schema: Any) -> dict[str, Any] | None:
    """The tool's argument schema inside a per-call response_schema's edit decision."""
    edit = _decision_branches(schema).get("edit")
    if edit is None:
        return None
    action = _resolve(schema, (edit.get("properties") or {}).get("edited_action"))
    args = _resolve(schema, ((action or {}).get("properties") or {}).get("args"))
    if not isinstance(args, dict) or args == {"type": "object"}:
        return None  # no tool schema: any object (the middleware's fallback)
    # Nested models still refer to the response_schema's $defs.
    return {**args, "$defs": schema["$defs"]} if schema.get("$defs") else args


def requests_for(value: Any, response_schema: Any = None) -> tuple[str, list[Request]]:
    """Normalize an interrupt value into its kind and its reviewable requests."""
    kind = classify(value)
    if kind == KIND_HUMAN_INTERRUPT:
        return kind, [_from_human_interrupt(0, value)]
    if kind == KIND_HUMAN_INTERRUPT_LIST:
        return kind, [_from_human_interrupt(i, v) for i, v in enumerate(value)]
    if kind == KIND_HITL_REQUEST:
        configs = {c.get("action_name"): c for c in value["review_configs"] if isinstance(c, dict)}
        requests = []
        for i, action_request in enumerate(value["action_requests"]):
            name = str(action_request.get("name", ""))
            config = configs.get(name, {})
            args = action_request.get("args")
            requests.append(
                Request(
                    position=i,
                    action=name,
                    args=args if isinstance(args, dict) else {},
                    description=str(action_request.get("description") or ""),
                    args_schema=config.get("args_schema")
                    if isinstance(config.get("args_schema"), dict)
                    else None,
                    decided=True,
                    **_flags_from_decisions(list(config.get("allowed_decisions") or [])),
                )
            )
        return kind, requests
    if kind == KIND_TOOL_APPROVAL:
        args = value.get("args")
        allowed = decisions_in_schema(response_schema) or list(_DECISION_TO_TYPES)
        return kind, [
            Request(
                position=0,
                action=value["name"],
                args=args if isinstance(args, dict) else {},
                description=str(value.get("description") or ""),
                args_schema=edit_args_schema(response_schema),
                extra={"tool_call_id": value.get("tool_call_id"), "decisions": allowed},
                decided=True,
                **_flags_from_decisions(allowed),
            )
        ]
    return kind, [
        Request(
            position=0,
            action="",
            args={},
            description=value if isinstance(value, str) else "",
            allow_respond=True,
            allow_ignore=True,
        )
    ]


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def check_response(
    request: Request, response_type: str, args: Any, *, lenient: bool = False
) -> Any:
    """Validate a reviewer's answer to one request; return the normalized args.

    `lenient` reads an edit's string values as the types the schema asks for (clients
    such as the Agent Inbox send every edited field as text). Raises ContractError
    with a message meant for the reviewer.
    """
    if response_type not in RESPONSE_TYPES:
        raise ContractError(
            f"Unknown decision type {response_type!r}; expected one of {', '.join(RESPONSE_TYPES)}."
        )
    if response_type not in request.allowed_types:
        allowed = ", ".join(request.allowed_types) or "nothing"
        raise ContractError(
            f"This interrupt does not allow {response_type!r} (allowed: {allowed})."
        )
    if response_type == "accept":
        return None
    if response_type == "ignore":
        # A middleware `reject` may say why: kept, and given back with the rejection.
        reason = request.decided and isinstance(args, str) and args.strip()
        return args if reason else None
    if response_type == "response":
        if not isinstance(args, str) or not args.strip():
            raise ContractError("A response needs a non-empty text.")
        return args
    return _check_edit(request, args, lenient=lenient)


def _check_edit(request: Request, args: Any, *, lenient: bool = False) -> dict[str, Any]:
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError as exc:
            raise ContractError(
                f"Edit is not valid JSON: {exc.msg} at position {exc.pos}."
            ) from None
    if not isinstance(args, dict):
        raise ContractError("An edit must be an object {action, args}.")
    action = args.get("action", request.action)
    edited = args.get("args")
    if action != request.action:
        raise ContractError(f"An edit cannot change the action ({request.action!r} to {action!r}).")
    if not isinstance(edited, dict):
        raise ContractError("An edit needs 'args' as a JSON object.")
    if lenient:
        edited = coerce_edit(edited, request.args_schema, request.args)
    if request.args_schema:
        validator = jsonschema.Draft202012Validator(request.args_schema)
        errors = sorted(validator.iter_errors(edited), key=lambda e: list(e.path))
        if errors:
            where = "/".join(str(p) for p in errors[0].path) or "args"
            raise ContractError(
                f"Edited args do not match the tool's schema at {where}: {errors[0].message}"
            )
    else:
        # No schema: edits keep the proposed keys and their JSON types.
        for key, value in edited.items():
            if key not in request.args:
                raise ContractError(
                    f"Unknown argument {key!r}; the action takes {', '.join(request.args) or 'none'}."
                )
            proposed = request.args[key]
            if proposed is not None and _json_type(value) != _json_type(proposed):
                raise ContractError(
                    f"Argument {key!r} must stay a {_json_type(proposed)}, got a {_json_type(value)}."
                )
    return {"action": request.action, "args": edited}


def _human_response(response_type: str, args: Any) -> dict[str, Any]:
    return {"type": response_type, "args": args}


def _decision(
    request_action: str, response_type: str, args: Any, allow_respond_decision: bool
) -> dict[str, Any]:
    if response_type == "accept":
        return {"type": "approve"}
    if response_type == "edit":
        return {"type": "edit", "edited_action": {"name": request_action, "args": args["args"]}}
    if response_type == "ignore":
        return {"type": "reject", "message": args} if isinstance(args, str) else {"type": "reject"}
    if allow_respond_decision:
        return {"type": "respond", "message": args}
    return {"type": "reject", "message": args}


def resume_value(kind: str, raw_value: Any, answers: list[tuple[Request, str, Any]]) -> Any:
    """Build the resume value for one interrupt from its answered requests, in order."""
    answers = sorted(answers, key=lambda a: a[0].position)
    if kind == KIND_HUMAN_INTERRUPT:
        _, response_type, args = answers[0]
        return _human_response(response_type, args)
    if kind == KIND_HUMAN_INTERRUPT_LIST:
        return [_human_response(t, a) for _, t, a in answers]
    if kind == KIND_HITL_REQUEST:
        configs = {
            c.get("action_name"): c
            for c in raw_value.get("review_configs", [])
            if isinstance(c, dict)
        }
        decisions = []
        for request, response_type, args in answers:
            allowed = configs.get(request.action, {}).get("allowed_decisions") or []
            decisions.append(_decision(request.action, response_type, args, "respond" in allowed))
        return {"decisions": decisions}
    if kind == KIND_TOOL_APPROVAL:
        request, response_type, args = answers[0]
        allowed = request.extra.get("decisions") or list(_DECISION_TO_TYPES)
        return _decision(request.action, response_type, args, "respond" in allowed)
    _, response_type, args = answers[0]
    return args if response_type == "response" else None


def check_resume_schema(schema: dict[str, Any] | None, value: Any) -> None:
    """Check a resume value against the interrupt's response_schema, if it has one."""
    if not schema:
        return
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "answer"
        raise ContractError(f"The graph does not accept this answer ({where}): {error.message}")
