"""What a notification says: the action, a short escaped summary of its args, a deep link.

Only the interrupt's own action and args are shown (never the graph's state), values are
cut short, and arguments whose names look like credentials are masked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.template.loader import render_to_string
from django.urls import reverse

from hitl.core.access.links import link_token
from hitl.core.access.summary import (  # noqa: F401 (args_summary: kept importable here)
    action_label,
    args_summary,
    item_summary,
    short,
)
from hitl.core.decisions.quorum import approve_refusal
from hitl.core.models import HumanInterrupt, Notification

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
    # Why Approve is not among them (four-eyes: the recipient's approval would be refused).
    no_approve: str = ""


# A channel's one-click decisions for a pending row: [(label, url)].
Actions = Callable[[HumanInterrupt], list[tuple[str, str]]]


def deep_link(interrupt_id: Any) -> str:
    return settings.HITL_PUBLIC_URL + reverse("notify-open", args=[link_token(interrupt_id)])


HIDDEN = "hidden"  # stands for a one-click token in the stored copy of a message


def hide_tokens(value: Any, tokens: list[str]) -> Any:
    """The stored copy of a message: each one-click token replaced (it is a credential)."""
    if isinstance(value, str):
        for token in tokens:
            value = value.replace(token, HIDDEN)
        return value
    if isinstance(value, dict):
        return {key: hide_tokens(item, tokens) for key, item in value.items()}
    return value


def _item(row: HumanInterrupt, actions: Actions | None = None, user=None) -> Item:
    offered = []
    no_approve = ""
    if actions is not None and row.status == HumanInterrupt.Status.PENDING:
        offered = actions(row)
        no_approve = approve_refusal(row, user) if row.allow_accept else ""
    return Item(
        action=action_label(row),
        group=row.reviewer_group.name if row.reviewer_group else "",
        summary=item_summary(row),
        link=deep_link(row.pk),
        expires_at=row.expires_at,
        escalated=row.escalation_count > 0,
        thread=short(row.thread.title) if row.thread_id else "",
        actions=offered,
        no_approve=no_approve,
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
    notification: Notification, rows: list[HumanInterrupt], actions: Actions | None = None
) -> tuple[str, str, dict[str, Any]]:
    """(subject, plain text, template context) for the still-pending rows it lists.

    Each channel's package builds its message from these (e-mail's HTML in
    hitl/integrations/email/messages.py, Slack's blocks in hitl/integrations/slack/messages.py);
    `actions` gives a row's one-click decisions, where the channel offers them."""
    items = [_item(row, actions, notification.user) for row in rows[:MAX_LISTED]]
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
    return subject, text, context
