"""Slack with real concurrency: message updates through a real Celery worker (production's
path), and two identical requests racing on the replay cache."""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.db import connection
from django.test import Client

from hitl.core.models import (
    AuditEvent,
    Notification,
    NotificationPreference,
    SlackRequestSeen,
    SlackUserLink,
)
from hitl.ops.notifications import notification_attempt
from tests.conftest import wait_for
from tests.integrations.slack.conftest import (
    TEAM,
    button,
    form_body,
    post_signed,
    press,
    send,
    sign,
)
from tests.review.conftest import human_interrupt, open_interrupts

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_worker_updates_the_slack_message_with_chat_update(
    slack, settings, worker_factory, requester, reviewer
):
    """Production's path: the change handler enqueues hitl.slack.refresh; a real worker
    re-renders the message and calls chat.update on the (stand-in) Slack API."""
    worker_factory(
        "w1",
        HITL_SLACK_SIGNING_SECRET=settings.HITL_SLACK_SIGNING_SECRET,
        HITL_SLACK_BOT_TOKEN="xoxb-worker",
        HITL_SLACK_API_URL=settings.HITL_SLACK_API_URL,
        HITL_WEBHOOK_ALLOW_PRIVATE="1",
        HITL_WEBHOOK_HOSTS=f"127.0.0.1:{slack.port}",
        HITL_PUBLIC_URL=settings.HITL_PUBLIC_URL,
    )
    SlackUserLink.objects.create(slack_user_id="U0RITA", team_id=TEAM, user=reviewer)
    NotificationPreference.objects.create(
        user=reviewer, email=False, slack_webhook_url=slack.webhook
    )
    # Two items, one decided: the thread does not resume, so the worker runs no graph.
    _, (first, _second) = open_interrupts(
        user=requester, values=[human_interrupt(), human_interrupt("delete_file")]
    )
    (note,) = Notification.objects.filter(channel="slack")
    notification_attempt(notification_id=note.pk, now=note.send_after)
    message = slack.to("/services/")[0]["body"]
    settings.HITL_EXECUTOR = "celery"
    settings.HITL_SLACK_BOT_TOKEN = "xoxb-worker"
    payload = press(slack, message, button(message, "hitl_accept", first.pk), "U0RITA")
    assert post_signed(Client(), payload)[0].status_code == 200
    wait_for(lambda: slack.to("/api/chat.update"), 30, 0.1, "the worker's chat.update")
    (update,) = slack.to("/api/chat.update")
    assert update["auth"] == "Bearer xoxb-worker"
    assert (update["body"]["channel"], update["body"]["ts"]) == ("C0REVIEW", "1700000000.000100")
    assert "Approved by *rita* via Slack" in json.dumps(update["body"], ensure_ascii=False)


def test_the_same_request_sent_twice_at_once_is_taken_once(slack, requester, reviewer):
    """The replay cache's unique key: of two identical requests racing, one gets in."""
    SlackUserLink.objects.create(slack_user_id="U0RITA", team_id=TEAM, user=reviewer)
    NotificationPreference.objects.create(
        user=reviewer, email=False, slack_webhook_url=slack.webhook
    )
    _, (row,) = open_interrupts(user=requester, values=[human_interrupt(approvals=2)])
    (note,) = Notification.objects.filter(channel="slack")
    notification_attempt(notification_id=note.pk, now=note.send_after)
    message = slack.to("/services/")[0]["body"]
    body = form_body(press(slack, message, button(message, "hitl_accept", row.pk), "U0RITA"))
    timestamp = str(int(time.time()))
    headers = {
        "HTTP_X_SLACK_REQUEST_TIMESTAMP": timestamp,
        "HTTP_X_SLACK_SIGNATURE": sign(body, timestamp),
    }
    start, statuses = threading.Barrier(2), []

    def race():
        start.wait()
        try:
            statuses.append(send(Client(), body, headers).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=race) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(statuses) == [200, 401]
    assert SlackRequestSeen.objects.count() == 1
    approvals = AuditEvent.objects.filter(interrupt_id=row.pk, kind="interrupt.approved")
    assert approvals.count() == 1
