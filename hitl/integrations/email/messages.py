"""What a notification mail says: the shared text, its HTML part, and one-click decision links
for a mail to one user (when HITL_EMAIL_ACTIONS is on)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.template.loader import render_to_string
from django.urls import reverse

from hitl.core.decisions import email_links
from hitl.core.models import HumanInterrupt, Notification
from hitl.ops import notify_messages


def render(
    notification: Notification, rows: list[HumanInterrupt], tokens: list[str] | None = None
) -> tuple[str, str, dict[str, Any]]:
    """(subject, plain text, {"html": ...}) for the still-pending rows it lists.

    The one-click tokens it mints are appended to `tokens`, for `hide_tokens`."""
    actions = None
    if notification.user_id is not None and settings.HITL_EMAIL_ACTIONS:
        user = notification.user

        def actions(row: HumanInterrupt) -> list[tuple[str, str]]:
            offered = []
            for kind, token in email_links.email_links_create(row=row, user=user):
                url = settings.HITL_PUBLIC_URL + reverse("email-action", args=[token])
                offered.append((email_links.LABELS[kind], url))
                if tokens is not None:
                    tokens.append(token)
            return offered

    subject, text, context = notify_messages.render(notification, rows, actions)
    html = render_to_string("hitl/notifications/message.html", context)
    return subject, text, {"html": html}
