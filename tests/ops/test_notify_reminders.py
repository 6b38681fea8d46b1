"""Reminders before an item expires, escalation notifying the new group, the sweep, admin."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hitl.core.models import GroupNotificationSettings, InterruptReminder, Notification
from hitl.ops.maintenance import expire_due_interrupts
from hitl.ops.notifications import notification_attempt, notify_sweep
from tests.ops.notify_helpers import (  # noqa: F401
    notify_fixture,
    smtp_fixture,
    start,
    text_of,
    with_email,
)

pytestmark = pytest.mark.usefixtures("ops_graphs")


def test_a_reminder_goes_out_once_before_the_item_expires(
    notify, smtp, manual_runs, django_capture_on_commit_callbacks, requester, reviewer
):
    with_email(reviewer, "rita@example.com")
    row = start(manual_runs, django_capture_on_commit_callbacks, requester, expires_in=1800)
    Notification.objects.all().delete()  # the "new item" message is not what this is about

    assert notify_sweep(now=timezone.now())["reminded"] == 0  # 30 minutes left: not yet
    soon = row.expires_at - timedelta(minutes=5)
    with django_capture_on_commit_callbacks(execute=True):
        assert notify_sweep(now=soon)["reminded"] == 1
        assert notify_sweep(now=soon + timedelta(seconds=30))["reminded"] == 0

    (reminder,) = Notification.objects.all()
    assert reminder.kind == "reminder" and reminder.send_after == soon  # no batching delay
    notification_attempt(notification_id=reminder.pk, now=soon)
    (message,) = smtp.messages()
    assert message["Subject"] == "[HITL] Reminder: publish expires soon"
    assert "expires" in text_of(message)
    assert InterruptReminder.objects.filter(interrupt=row).count() == 1


def test_escalation_notifies_the_new_group_the_same_way(
    notify,
    smtp,
    manual_runs,
    django_capture_on_commit_callbacks,
    requester,
    reviewer,
    finance_reviewer,
    finance_group,
):
    with_email(reviewer, "rita@example.com")
    GroupNotificationSettings.objects.create(group=finance_group, email_addresses="fin@example.com")
    row = start(
        manual_runs,
        django_capture_on_commit_callbacks,
        requester,
        expires_in=1,
        expiry_policy="escalate",
        escalate_to="finance",
    )
    later = timezone.now() + timedelta(seconds=5)
    with django_capture_on_commit_callbacks(execute=True):
        assert expire_due_interrupts(now=later) == 1

    escalated = Notification.objects.get(address="fin@example.com")
    assert escalated.interrupt_ids == [str(row.pk)]
    for notification in Notification.objects.all():
        notification_attempt(notification_id=notification.pk, now=later + timedelta(hours=1))
    subjects = sorted(m["Subject"] for m in smtp.messages())
    assert "[HITL] Escalated to you: publish" in subjects
    # rita's message was for the item while it was hers; it is still pending (with finance).
    assert len(subjects) == 2


def test_a_lost_message_is_sent_by_the_sweep(
    notify, manual_runs, django_capture_on_commit_callbacks, requester, reviewer, monkeypatch
):
    with_email(reviewer, "rita@example.com")
    start(manual_runs, django_capture_on_commit_callbacks, requester)
    sent_later = []
    monkeypatch.setattr(
        "hitl.ops.notifications._send_later", lambda pk, countdown=0: sent_later.append(pk)
    )
    assert notify_sweep(now=timezone.now())["resent"] == 0  # not due yet
    result = notify_sweep(now=timezone.now() + timedelta(minutes=5))
    assert result["resent"] == 1 and sent_later == [Notification.objects.get().pk]


def test_admins_see_every_attempt(admin_client, requester):
    notification = Notification.objects.create(
        channel="email",
        address="rita@example.com",
        status="failed",
        send_after=timezone.now(),
        subject="[HITL] Waiting for review: deploy",
        attempts=2,
        attempt_log=[
            {"at": "2026-01-01T10:00:00", "ok": False, "error": "ConnectionRefusedError: boom"},
            {"at": "2026-01-01T10:01:00", "ok": False, "error": "SMTPServerDisconnected: <x>"},
        ],
    )
    listing = admin_client.get("/admin/hitl/notification/?status__exact=failed")
    assert listing.status_code == 200
    assert b"rita@example.com" in listing.content
    page = admin_client.get(f"/admin/hitl/notification/{notification.pk}/change/")
    assert page.status_code == 200
    assert b"ConnectionRefusedError: boom" in page.content
    assert b"SMTPServerDisconnected: &lt;x&gt;" in page.content


def test_a_group_slack_url_off_the_allow_list_is_refused_in_admin(
    admin_client, settings, finance_group
):
    settings.HITL_WEBHOOK_HOSTS = ["hooks.slack.com"]
    response = admin_client.post(
        "/admin/hitl/groupnotificationsettings/add/",
        {
            "group": finance_group.pk,
            "slack_webhook_url": "http://169.254.169.254/latest",
            "digest_minutes": 0,
            "email_addresses": "",
        },
    )
    assert response.status_code == 200
    assert b"HITL_WEBHOOK_HOSTS" in response.content
    assert not GroupNotificationSettings.objects.exists()
