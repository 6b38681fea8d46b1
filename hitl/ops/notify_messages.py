"""What a notification says: the action, a short escaped summary of its args, a deep link.

Only the interrupt's own action and args are shown (never the graph's state), values are
cut short, and arguments whose names look like credentials are masked.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.template.loader import render_to_string
from django.urls import reverse

from hitl.core.access.links import link_token
from hitl.core.models import HumanInterrupt, Notification

SECRET_NAME = re.compile(
    r"pass|secret|token|api[_-]?key|apikey|auth|credential|cookie|session|private", re.I
)
MAX_ARGS = 4
MAX_VALUE = 80
MAX_LISTED = 50


@dataclass
class Item:
    action: str
    group: str
    summary: list[tuple[str, str]]
    link: str
    expires_at: Any
    escalated: bool


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def args_summary(args: Any) -> list[tuple[str, str]]:
    """Up to MAX_ARGS (name, short value) pairs; credentials masked."""
    if not isinstance(args, dict):
        return [("value", _short(args))] if args not in (None, "", {}) else []
    pairs = []
    for name, value in list(args.items())[:MAX_ARGS]:
        shown = "[hidden]" if SECRET_NAME.search(str(name)) else _short(value)
        pairs.append((_short(str(name)), shown))
    if len(args) > MAX_ARGS:
        pairs.append(("…", f"{len(args) - MAX_ARGS} more"))
    return pairs


def deep_link(interrupt_id: Any) -> str:
    return settings.HITL_PUBLIC_URL + reverse("notify-open", args=[link_token(interrupt_id)])


def _item(row: HumanInterrupt) -> Item:
    action = row.action or (row.description.splitlines()[0] if row.description else "") or row.kind
    return Item(
        action=_short(action),
        group=row.reviewer_group.name if row.reviewer_group else "",
        summary=args_summary(row.args if row.action else row.raw_value),
        link=deep_link(row.pk),
        expires_at=row.expires_at,
        escalated=row.escalation_count > 0,
    )


def _subject(kind: str, items: list[Item], total: int) -> str:
    if kind == Notification.Kind.REMINDER:
        first = items[0]
        return f"[HITL] Reminder: {first.action} expires soon" + (
            f" (+{total - 1} more)" if total > 1 else ""
        )
    if total == 1:
        prefix = "Escalated to you" if items[0].escalated else "Waiting for review"
        return f"[HITL] {prefix}: {items[0].action}"
    return f"[HITL] {total} items waiting for review"


def _slack_escape(text: str) -> str:
    # Slack's mrkdwn control characters (its documented escaping).
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_body(subject: str, items: list[Item], total: int, inbox: str) -> dict[str, Any]:
    lines = [f"*{_slack_escape(subject)}*"]
    for item in items:
        args = ", ".join(f"{_slack_escape(k)}: {_slack_escape(v)}" for k, v in item.summary)
        line = f"• <{item.link}|{_slack_escape(item.action)}>"
        if item.group:
            line += f" ({_slack_escape(item.group)})"
        lines.append(line + (f" — `{args}`" if args else ""))
    if total > len(items):
        lines.append(f"… and {total - len(items)} more: <{inbox}|open the inbox>")
    text = "\n".join(lines)
    return {
        "text": subject,
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text[:2900]}}],
    }


def render(
    notification: Notification, rows: list[HumanInterrupt]
) -> tuple[str, str, dict[str, Any]]:
    """(subject, plain text, payload) for the still-pending rows it lists."""
    items = [_item(row) for row in rows[:MAX_LISTED]]
    total = len(rows)
    subject = _subject(notification.kind, items, total)
    inbox = settings.HITL_PUBLIC_URL + reverse("home")
    context = {
        "subject": subject,
        "items": items,
        "total": total,
        "more": total - len(items),
        "inbox": inbox,
        "reminder": notification.kind == Notification.Kind.REMINDER,
        "link_days": max(1, settings.HITL_NOTIFY_LINK_MAX_AGE // 86400),
    }
    text = render_to_string("hitl/notifications/message.txt", context)
    if notification.channel == Notification.Channel.SLACK:
        return subject, text, _slack_body(subject, items, total, inbox)
    html = render_to_string("hitl/notifications/message.html", context)
    return subject, text, {"html": html}
