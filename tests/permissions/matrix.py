"""The permission table in docs/permissions.md, read as data: (action, role) -> expected cell.

The "Who may do what" page's table is the one source. Its header names the roles and its
first column the actions; both must match the labels below exactly, so a row or column
added to the page without a test (or renamed) fails `test_the_permission_table_is_complete`.
"""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "permissions.md"
MARKER = "<!-- permission-matrix:"

ROLES = {
    "anonymous": "anonymous",
    "outsider": "outsider",
    "requester": "requester",
    "reviewer": "reviewer",
    "`hitl.review_all`": "review_all",
    "`hitl.run_any_thread`": "run_any_thread",
    "bare `is_staff`": "staff",
    "staff + admin perms": "staff_perms",
    "superuser": "superuser",
}

ACTIONS = {
    "start a new thread (page form, v1, /langgraph)": "start_thread",
    "view a thread (page, v1, /langgraph, thread socket)": "view",
    "download its files (page, v1)": "download",
    "find it in lists (inbox threads tab, /langgraph search)": "list_thread",
    "find its pending interrupt (inbox, v1, inbox socket)": "list_interrupt",
    "answer its interrupt (page, v1, /langgraph, /agui)": "answer",
    "start a run on it (v1, /langgraph, /agui)": "run",
    "upload a file into it (v1)": "upload",
    "change its metadata (/langgraph)": "metadata",
    "cancel it (page, v1, /langgraph)": "cancel",
    "open it in admin (admin)": "admin_view",
    "cancel it from admin (admin action)": "admin_cancel",
    "see analytics (page)": "analytics",
    "delete it (/langgraph)": "delete",
    "delete one of its finished runs (/langgraph)": "run_delete",
    "copy it (/langgraph)": "copy",
    "update its state (/langgraph)": "update_state",
    "see its checkpoint history (page, /langgraph)": "history",
    "fork it from an earlier step (page, /langgraph)": "fork",
    "accept its interrupt in bulk (inbox)": "bulk",
    "claim or snooze its interrupt (page)": "claim",
    "undo another reviewer's answer to it (page, v1)": "undo",
    "revoke the requester's API token (page)": "revoke_token",
    "change their own notification settings (page)": "notify_settings",
    "create an assistant (/langgraph)": "assistant_create",
    "change or delete the requester's assistant (/langgraph)": "assistant_change",
    "read or write the store (/langgraph)": "store",
}

CELLS = {"yes", "login", "404", "403", "409", "no"}


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def read_table(text: str | None = None) -> tuple[list[str], list[str], dict[tuple[str, str], str]]:
    """The page's table as (role labels, action labels, {(action key, role key): cell})."""
    text = PAGE.read_text() if text is None else text
    lines = text[text.index(MARKER) :].splitlines()[1:]
    header, rule, *rows = lines
    assert re.fullmatch(r"\|(\s*-+\s*\|)+", rule.strip()), rule
    roles = _cells(header)[1:]
    actions, cells = [], {}
    for line in rows:
        if not line.startswith("|"):
            break
        action, *values = _cells(line)
        actions.append(action)
        assert len(values) == len(roles), f"{action!r}: {len(values)} cells for {len(roles)} roles"
        for role, value in zip(roles, values, strict=True):
            cells[(ACTIONS.get(action, action), ROLES.get(role, role))] = value
    return roles, actions, cells


EXPECTED = read_table()[2]


def expected(action: str, role: str) -> str:
    return EXPECTED[(action, role)]
