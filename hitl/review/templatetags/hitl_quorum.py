"""Four-eyes progress on cards and inbox rows (one query, only for rows that need it)."""

from __future__ import annotations

from typing import Any

from django import template

from hitl.core.decisions import quorum
from hitl.review.rendering import pretty_json

register = template.Library()


@register.simple_tag
def approval_progress(row) -> dict[str, Any] | None:
    if getattr(row, "approvals_required", 1) <= 1:
        return None
    progress = quorum.approvals_progress(row)
    progress["text"] = f"{progress['approvals']} of {progress['required']} approvals"
    if row.approval_args is not None:
        progress["edited_json"] = pretty_json(row.approval_args)
    return progress
