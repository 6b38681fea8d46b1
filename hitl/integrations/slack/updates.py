"""Keep Slack messages current: once an item they list changes, show who decided what.

Whoever decides (a button in Slack, the browser, the API, a rule, expiry), core announces
the change after commit (events.INTERRUPT_CHANGED); each Slack message listing the item is
re-rendered and replaced: with chat.update when a bot token is set and the message's
channel and ts are known, else through the response_url of the last button press on it
(Slack accepts those for 30 minutes).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone
from slack_sdk.errors import SlackApiError

from hitl.core.later import later
from hitl.core.models import HumanInterrupt, Notification, SlackMessage
from hitl.integrations.slack import messages
from hitl.integrations.slack.transport import post_response_url, web_client

log = logging.getLogger(__name__)

RESPONSE_URL_LIFETIME = timedelta(minutes=30)


def slack_message_track(notification: Notification, rows: list[HumanInterrupt]) -> None:
    """Remember which items a Slack message lists (when buttons are on), to update it later."""
    if not messages.interactive():
        return
    message, _ = SlackMessage.objects.get_or_create(notification=notification)
    message.interrupts.set(rows)


def slack_message_learn(
    *, notification_id: Any, interrupt_id: Any, channel_id: str, ts: str, response_url: str
) -> SlackMessage | None:
    """Store where a pressed message lives (its channel, ts, fresh response_url)."""
    message = SlackMessage.objects.filter(
        notification_id=notification_id, interrupts=interrupt_id
    ).first()
    if message is None:
        return None
    message.channel_id = str(channel_id or message.channel_id)[:32]
    message.ts = str(ts or message.ts)[:32]
    if response_url:
        message.response_url = response_url[:500]
        message.response_url_at = timezone.now()
    message.save()
    return message


def message_body(message: SlackMessage) -> dict[str, Any]:
    notification = message.notification
    order = {pk: i for i, pk in enumerate(notification.interrupt_ids)}
    rows = sorted(
        HumanInterrupt.objects.filter(pk__in=notification.interrupt_ids).select_related(
            "thread", "reviewer_group", "responded_by"
        ),
        key=lambda row: order.get(str(row.pk), 0),
    )
    return messages.message_payload(notification, rows, notification.subject)


def slack_message_refresh(*, message_id: Any) -> str:
    """Replace a Slack message with its items' current state; says how ("update", ...)."""
    message = SlackMessage.objects.select_related("notification").filter(pk=message_id).first()
    if message is None:
        return "gone"
    body = message_body(message)
    if settings.HITL_SLACK_BOT_TOKEN and message.channel_id and message.ts:
        try:
            web_client().chat_update(
                channel=message.channel_id, ts=message.ts, text=body["text"], blocks=body["blocks"]
            )
            return "chat.update"
        except (SlackApiError, OSError, ValueError) as exc:
            log.warning("slack chat.update of %s failed: %s", message.pk, exc)
    fresh = message.response_url_at and message.response_url_at > (
        timezone.now() - RESPONSE_URL_LIFETIME
    )
    replace = {"replace_original": True, **body}
    if message.response_url and fresh and post_response_url(message.response_url, replace):
        return "response_url"
    return "unreachable"


def on_interrupt_changed(message: dict[str, Any]) -> None:
    """Core's interrupt.changed handler (after commit): refresh the Slack messages listing it."""
    if not messages.interactive():
        return
    ids = list(
        SlackMessage.objects.filter(interrupts=message["interrupt_id"])
        .exclude(ts="", response_url="")
        .values_list("pk", flat=True)
    )
    for pk in ids:
        _refresh_later(pk)


REFRESH_TASK = "hitl.slack.refresh"


def _refresh_later(message_id: Any) -> None:
    # A failed send leaves the message stale; the decision is recorded all the same.
    later(REFRESH_TASK, message_id, local=_refresh_here)


def _refresh_here(message_id: Any) -> None:
    slack_message_refresh(message_id=message_id)


@shared_task(name=REFRESH_TASK, ignore_result=True, time_limit=60, soft_time_limit=45)
def slack_message_refresh_task(message_id: int) -> str:
    """Re-render one Slack message (ids only, JSON)."""
    close_old_connections()
    return slack_message_refresh(message_id=message_id)
