"""What a notification says: the action, a short escaped summary of its args, a deep link.

Only the interrupt's own action and args are shown (never the graph's state), values are
cut short, and arguments whose names look like credentials are masked.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.template.loader import render_to_string
from django.urls import reverse

from hitl.core.access.links import link_token
from hitl.core.decisions import email_links
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
    thread: str = ""
    # One-click decisions (e-mail to one user): [(label, url)].
    actions: list[tuple[str, str]] = field(default_factory=list)


def short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def args_summary(args: Any) -> list[tuple[str, str]]:
    """Up to MAX_ARGS (name, short value) pairs; credentials masked."""
    if not isinstance(args, dict):
        return [("value", short(args))] if args not in (None, "", {}) else []
    pairs = []
    for name, value in list(args.items())[:MAX_ARGS]:
        shown = "[hidden]" if SECRET_NAME.search(str(name)) else short(value)
        pairs.append((short(str(name)), shown))
    if len(args) > MAX_ARGS:
        pairs.append(("…", f"{len(args) - MAX_ARGS} more"))
    return pairs


def deep_link(interrupt_id: Any) -> str:
    return settings.HITL_PUBLIC_URL + reverse("notify-open", args=[link_token(interrupt_id)])


def action_label(row: HumanInterrupt) -> str:
    action = row.action or (row.description.splitlines()[0] if row.description else "") or row.kind
    return short(action)


def _item(row: HumanInterrupt, actions_for=None) -> Item:
    actions = []
    if actions_for is not None and row.status == HumanInterrupt.Status.PENDING:
        for kind, token in email_links.email_links_create(row=row, user=actions_for):
            url = settings.HITL_PUBLIC_URL + reverse("email-action", args=[token])
            actions.append((email_links.LABELS[kind], url))
    return Item(
        action=action_label(row),
        group=row.reviewer_group.name if row.reviewer_group else "",
        summary=args_summary(row.args if row.action else row.raw_value),
        link=deep_link(row.pk),
        expires_at=row.expires_at,
        escalated=row.escalation_count > 0,
        thread=short(row.thread.title) if row.thread_id else "",
        actions=actions,
    )


def _subject(kind: str, items: list[Item], total: int) -> str:
    if kind == Notification.Kind.REMINDER:
        first = items[0]
        on = f' on "{first.thread}"' if first.thread else ""
        return f"[HITL] Reminder: {first.action}{on} expires soon" + (
            f" (+{total - 1} more)" if total > 1 else ""
        )
    if total == 1:
        prefix = "Escalated to you" if items[0].escalated else "Waiting for review"
        on = f' on "{items[0].thread}"' if items[0].thread else ""
        return f"[HITL] {prefix}: {items[0].action}{on}"
    threads = {item.thread for item in items}
    on = f' on "{items[0].thread}"' if len(threads) == 1 and items[0].thread else ""
    return f"[HITL] {total} items waiting for review{on}"


def render(
    notification: Notification, rows: list[HumanInterrupt]
) -> tuple[str, str, dict[str, Any]]:
    """(subject, plain text, payload) for the still-pending rows it lists (e-mail's HTML;
    a Slack message's blocks come from hitl/ops/slack/blocks.py)."""
    one_click = (
        notification.channel == Notification.Channel.EMAIL
        and notification.user_id is not None
        and settings.HITL_EMAIL_ACTIONS
    )
    actions_for = notification.user if one_click else None
    items = [_item(row, actions_for) for row in rows[:MAX_LISTED]]
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
        "action_hours": max(1, settings.HITL_EMAIL_LINK_MAX_AGE // 3600),
    }
    text = render_to_string("hitl/notifications/message.txt", context)
    if notification.channel == Notification.Channel.SLACK:
        return subject, text, {}  # Block Kit: hitl/ops/slack/blocks.py
    html = render_to_string("hitl/notifications/message.html", context)
    return subject, text, {"html": html}
