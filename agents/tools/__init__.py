"""Built-in tools for HITL agents (see DESIGN.md, "Built-in tools")."""

from agents.tools.approval import (
    ApprovalPolicy,
    approval_gate,
    approval_policy,
    approval_request,
    approval_tool_node,
    require_approval,
)
from agents.tools.clarification import CLARIFICATION_TYPES, ask_clarification
from agents.tools.control import make_finish_tool, make_route_tool
from agents.tools.files import (
    list_files,
    make_view_image,
    present_files,
    read_file,
    view_image,
    write_file,
)

BUILTIN_TOOLS = [ask_clarification, present_files, view_image, list_files, read_file, write_file]

__all__ = [
    "BUILTIN_TOOLS",
    "CLARIFICATION_TYPES",
    "ApprovalPolicy",
    "approval_gate",
    "approval_policy",
    "approval_request",
    "approval_tool_node",
    "ask_clarification",
    "list_files",
    "make_finish_tool",
    "make_route_tool",
    "make_view_image",
    "present_files",
    "read_file",
    "require_approval",
    "view_image",
    "write_file",
]
