"""A decision from Slack reaches open browsers live, like one made in the browser."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from hitl.core.models import Notification, NotificationPreference, SlackUserLink
from hitl.ops.notifications import notification_attempt
from tests.integrations.slack.conftest import (
    TEAM,
    button,
    post_signed,
    press,
    run_message_updates,
)
from tests.review.conftest import human_interrupt, open_interrupts
from tests.review.test_consumers import connect, fresh_layer, next_of  # noqa: F401

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _notify_rita(slack, requester, reviewer):
    SlackUserLink.objects.create(slack_user_id="U0RITA", team_id=TEAM, user=reviewer)
    NotificationPreference.objects.create(
        user=reviewer, email=False, slack_webhook_url=slack.webhook
    )
    thread, (row,) = open_interrupts(user=requester, values=[human_interrupt()])
    (note,) = Notification.objects.filter(channel="slack")
    notification_attempt(notification_id=note.pk, now=note.send_after)
    return thread, row, slack.to("/services/")[0]["body"]


def test_a_slack_approval_reaches_inboxes_and_the_thread_page_live(
    slack, requester, reviewer, second_reviewer
):
    async def scenario():
        thread, row, message = await sync_to_async(_notify_rita)(slack, requester, reviewer)
        sam = await connect("/ws/inbox/", second_reviewer)
        watcher = await connect(f"/ws/threads/{thread.pk}/", requester)
        payload = press(slack, message, button(message, "hitl_accept", row.pk), "U0RITA")
        response, _ = await sync_to_async(post_signed)(Client(), payload)
        assert response.status_code == 200
        for ws in (sam, watcher):
            changed = await next_of(ws, "interrupt.changed")
            assert (changed["interrupt_id"], changed["status"], changed["responded_by"]) == (
                str(row.pk),
                "resolved",
                "rita",
            )
            await ws.disconnect()
        # And Slack shows it: the message was replaced through the press's response_url.
        await sync_to_async(run_message_updates)()
        (update,) = slack.to("/actions/")
        assert "Approved by *rita* via Slack" in json.dumps(update["body"], ensure_ascii=False)

    asyncio.run(scenario())
