"""Notifications against real receivers: an aiosmtpd SMTP process and an HTTP receiver
on 127.0.0.1 standing in for Slack. Runs are executed in this process (`manual_runs`),
messages are sent with `notification_attempt`; test_notify_worker.py covers the worker.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, time, timedelta

import pytest
from django.utils import timezone

from hitl.core import decisions, runs
from hitl.core.models import (
    GroupNotificationSettings,
    HumanInterrupt,
    Notification,
    NotificationPreference,
)
from hitl.ops import notifications
from hitl.ops.notifications import Destination, notification_attempt, quiet_until
from tests.ops.notify_helpers import SmtpServer, html_of, smtp_fixture, text_of  # noqa: F401
from tests.ops.test_webhook_delivery import Receiver


@pytest.fixture
def slack(settings):
    receiver = Receiver()
    settings.HITL_WEBHOOK_ALLOW_PRIVATE = True
    settings.HITL_WEBHOOK_HOSTS = [f"127.0.0.1:{receiver.port}"]
    yield receiver
    receiver.stop()


@pytest.fixture
def notify(settings, manual_runs):
    settings.HITL_NOTIFY_BATCH_SECONDS = 5
    settings.HITL_NOTIFY_MAX_ATTEMPTS = 3
    settings.HITL_NOTIFY_BACKOFF_SECONDS = 1
    settings.HITL_PUBLIC_URL = "https://hitl.example.com"
    return settings


def pause(manual_runs, capture, user, files, graph="parallel_approval") -> list[HumanInterrupt]:
    """Start a real run that pauses on one interrupt per file; run its after-commit work."""
    with capture(execute=True):
        run = runs.run_start(graph=graph, input={"files": files}, user=user)
    with capture(execute=True):
        assert manual_runs(run) == "interrupted"
    return list(HumanInterrupt.objects.filter(thread=run.thread).order_by("created_at"))


def send_due(now=None) -> list[Notification]:
    """Attempt every open message as if its time had come."""
    now = now or timezone.now() + timedelta(hours=1)
    for pk in Notification.objects.values_list("pk", flat=True):
        notification_attempt(notification_id=pk, now=now)
    return list(Notification.objects.order_by("created_at"))


def test_an_email_reaches_a_real_smtp_server_with_a_signed_link(
    notify, smtp, manual_runs, django_capture_on_commit_callbacks, requester, reviewer
):
    reviewer.email = "rita@example.com"
    reviewer.save()
    GroupNotificationSettings.objects.create(group=reviewer.groups.get(), email_members=True)

    (row,) = pause(manual_runs, django_capture_on_commit_callbacks, requester, ["<b>q3</b>.csv"])

    (sent,) = send_due()
    assert (sent.status, sent.channel, sent.address, sent.attempts) == (
        "sent",
        "email",
        "rita@example.com",
        1,
    )
    (message,) = smtp.messages()
    assert message["To"] == "rita@example.com"
    assert message["Subject"] == "[HITL] Waiting for review: delete_file"
    text, html = text_of(message), html_of(message)
    assert "path: <b>q3</b>.csv" in text  # plain text as is
    assert "&lt;b&gt;q3&lt;/b&gt;.csv" in html and "<b>q3</b>" not in html  # escaped
    link = next(word for word in text.split() if word.startswith("https://hitl.example.com/n/"))
    assert link in html
    assert sent.interrupt_ids == [str(row.pk)]
    assert sent.attempt_log[0]["ok"] is True


def test_secrets_in_the_args_are_masked_and_values_cut_short():
    from hitl.ops.notify_messages import args_summary

    summary = dict(
        args_summary({"to": "a@b.c", "api_key": "sk-123", "password": "hunter2", "body": "x" * 500})
    )
    assert summary["api_key"] == summary["password"] == "[hidden]"
    assert summary["to"] == "a@b.c"
    assert len(summary["body"]) == 80 and summary["body"].endswith("…")
    assert "sk-123" not in json.dumps(summary) and "hunter2" not in json.dumps(summary)


def test_a_slack_message_reaches_a_local_receiver_escaped(
    notify, slack, manual_runs, django_capture_on_commit_callbacks, requester, reviewer
):
    NotificationPreference.objects.create(user=reviewer, email=False, slack_webhook_url=slack.url)

    pause(manual_runs, django_capture_on_commit_callbacks, requester, ["<!channel> & co.txt"])

    (sent,) = send_due()
    assert sent.status == "sent" and sent.channel == "slack"
    (hit,) = slack.requests
    body = json.loads(hit["body"])
    assert body["text"] == "[HITL] Waiting for review: delete_file"
    block = body["blocks"][0]["text"]["text"]
    assert "&lt;!channel&gt; &amp; co.txt" in block and "<!channel>" not in block
    assert "<https://hitl.example.com/n/" in block


def test_a_fan_out_of_fifty_interrupts_sends_one_digest_per_destination(
    notify, smtp, slack, manual_runs, django_capture_on_commit_callbacks, requester, reviewer
):
    reviewer.email = "rita@example.com"
    reviewer.save()
    group = reviewer.groups.get()
    GroupNotificationSettings.objects.create(group=group, slack_webhook_url=slack.url)
    NotificationPreference.objects.create(user=reviewer, email=True)
    files = [f"f{i:02}.txt" for i in range(50)]

    rows = pause(manual_runs, django_capture_on_commit_callbacks, requester, files)

    assert len(rows) == 50
    sent = send_due()
    assert [(n.channel, n.status) for n in sent] == [("email", "sent"), ("slack", "sent")]
    assert all(len(n.interrupt_ids) == 50 for n in sent)
    (message,) = smtp.messages()
    assert message["Subject"] == "[HITL] 50 items waiting for review"
    assert text_of(message).count("https://hitl.example.com/n/") == 50
    (hit,) = slack.requests
    assert json.loads(hit["body"])["text"] == "[HITL] 50 items waiting for review"


def test_items_answered_before_the_message_goes_out_are_left_out(
    notify, smtp, manual_runs, django_capture_on_commit_callbacks, requester, reviewer
):
    reviewer.email = "rita@example.com"
    reviewer.save()
    NotificationPreference.objects.create(user=reviewer)
    first, second = pause(manual_runs, django_capture_on_commit_callbacks, requester, ["a", "b"])
    decisions.interrupt_resolve(interrupt_id=first.pk, user=reviewer, response_type="accept")

    (sent,) = send_due()
    assert sent.interrupt_ids == [str(second.pk)]
    assert smtp.messages()[0]["Subject"] == "[HITL] Waiting for review: delete_file"
    decisions.interrupt_resolve(interrupt_id=second.pk, user=reviewer, response_type="ignore")
    assert len(smtp.messages()) == 1


def test_a_dead_smtp_server_is_retried_then_recorded_as_failed(
    notify, tmp_path, manual_runs, django_capture_on_commit_callbacks, requester, reviewer
):
    dead = SmtpServer(tmp_path)  # a port nobody listens on (yet)
    notify.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    notify.EMAIL_HOST, notify.EMAIL_PORT, notify.EMAIL_TIMEOUT = "127.0.0.1", dead.port, 2
    reviewer.email = "rita@example.com"
    reviewer.save()
    NotificationPreference.objects.create(user=reviewer)
    pause(manual_runs, django_capture_on_commit_callbacks, requester, ["a"])
    (notification,) = Notification.objects.all()
    later = timezone.now() + timedelta(hours=1)

    assert notification_attempt(notification_id=notification.pk, now=later) == 1.0
    assert notification_attempt(notification_id=notification.pk, now=later) == 2.0
    assert notification_attempt(notification_id=notification.pk, now=later) is None

    notification.refresh_from_db()
    assert (notification.status, notification.attempts) == ("failed", 3)
    assert [entry["ok"] for entry in notification.attempt_log] == [False, False, False]
    assert "ConnectionRefusedError" in notification.last_error
    # Nothing is lost: the text that would have gone out is on the row (and in admin).
    assert "delete_file" in notification.body


def test_a_server_back_within_the_retries_gets_the_message(
    notify, tmp_path, manual_runs, django_capture_on_commit_callbacks, requester, reviewer
):
    server = SmtpServer(tmp_path)
    notify.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    notify.EMAIL_HOST, notify.EMAIL_PORT, notify.EMAIL_TIMEOUT = "127.0.0.1", server.port, 2
    reviewer.email = "rita@example.com"
    reviewer.save()
    NotificationPreference.objects.create(user=reviewer)
    pause(manual_runs, django_capture_on_commit_callbacks, requester, ["a"])
    (notification,) = Notification.objects.all()
    later = timezone.now() + timedelta(hours=1)
    assert notification_attempt(notification_id=notification.pk, now=later) == 1.0

    server.start()
    try:
        assert notification_attempt(notification_id=notification.pk, now=later) is None
        assert len(server.messages()) == 1
    finally:
        server.stop()
    notification.refresh_from_db()
    assert notification.status == "sent"
    assert [entry["ok"] for entry in notification.attempt_log] == [False, True]


def test_a_slack_receiver_that_fails_is_retried_and_recorded(
    notify, manual_runs, django_capture_on_commit_callbacks, requester, reviewer
):
    failing = Receiver(status=503)
    notify.HITL_WEBHOOK_ALLOW_PRIVATE = True
    notify.HITL_WEBHOOK_HOSTS = [f"127.0.0.1:{failing.port}"]
    try:
        NotificationPreference.objects.create(
            user=reviewer, email=False, slack_webhook_url=failing.url
        )
        pause(manual_runs, django_capture_on_commit_callbacks, requester, ["a"])
        (sent,) = send_due()
        assert sent.status == "pending" and sent.last_error == "HTTPException: HTTP 503"
        send_due()
        (failed,) = send_due()
    finally:
        failing.stop()
    assert (failed.status, failed.attempts, len(failing.requests)) == ("failed", 3, 3)


def test_a_slack_url_off_the_allow_list_fails_at_once_without_a_request(
    notify, slack, manual_runs, django_capture_on_commit_callbacks, requester, reviewer
):
    NotificationPreference.objects.create(user=reviewer, email=False, slack_webhook_url=slack.url)
    pause(manual_runs, django_capture_on_commit_callbacks, requester, ["a"])
    notify.HITL_WEBHOOK_HOSTS = ["hooks.slack.com"]

    (failed,) = send_due()

    assert (failed.status, failed.attempts) == ("failed", 3)
    assert slack.requests == []
    assert "is not allowed (settings.HITL_WEBHOOK_HOSTS)" in failed.last_error


def test_quiet_hours_hold_messages_until_they_end():
    quiet = (time(22, 0), time(7, 0), "Europe/Berlin")
    night = datetime(2026, 1, 10, 23, 30, tzinfo=UTC)  # 00:30 in Berlin
    assert quiet_until(night, quiet) == datetime(2026, 1, 11, 6, 0, tzinfo=UTC)  # 07:00 there
    evening = datetime(2026, 1, 10, 20, 0, tzinfo=UTC)  # 21:00 in Berlin: not quiet yet
    assert quiet_until(evening, quiet) == evening
    late = datetime(2026, 1, 10, 21, 30, tzinfo=UTC)  # 22:30 in Berlin
    assert quiet_until(late, quiet) == datetime(2026, 1, 11, 6, 0, tzinfo=UTC)
    day = (time(12, 0), time(13, 0), "UTC")
    lunch = datetime(2026, 1, 10, 12, 15, tzinfo=UTC)
    assert quiet_until(lunch, day) == datetime(2026, 1, 10, 13, 0, tzinfo=UTC)


def test_a_digest_waits_for_the_window_and_lists_what_arrived_meanwhile(
    notify, smtp, manual_runs, django_capture_on_commit_callbacks, requester, reviewer
):
    reviewer.email = "rita@example.com"
    reviewer.save()
    NotificationPreference.objects.create(user=reviewer, digest_minutes=30)
    pause(manual_runs, django_capture_on_commit_callbacks, requester, ["a"])
    (first,) = send_due()
    assert first.status == "sent"

    pause(manual_runs, django_capture_on_commit_callbacks, requester, ["b"])
    pause(manual_runs, django_capture_on_commit_callbacks, requester, ["c"])
    digest = Notification.objects.get(status="collecting")
    assert len(digest.interrupt_ids) == 2
    assert digest.send_after >= first.sent_at + timedelta(minutes=30)
    # Not yet: the window is still open.
    assert notification_attempt(notification_id=digest.pk, now=first.sent_at) > 29 * 60
    assert len(smtp.messages()) == 1
    notification_attempt(notification_id=digest.pk, now=digest.send_after)
    digest.refresh_from_db()
    assert digest.status == "sent"
    assert sorted(m["Subject"] for m in smtp.messages()) == [
        "[HITL] 2 items waiting for review",
        "[HITL] Waiting for review: delete_file",
    ]


def test_quiet_hours_set_the_send_time_of_new_items(notify, reviewer):
    now = datetime(2026, 1, 10, 23, 0, tzinfo=UTC)
    dest = Destination("email", "rita@example.com", reviewer.pk, quiet=(time(22), time(6), "UTC"))
    row_id = "00000000-0000-0000-0000-000000000001"
    notification = notifications.notification_collect(dest=dest, interrupt_id=row_id, now=now)
    assert notification.send_after == datetime(2026, 1, 11, 6, 0, tzinfo=UTC)


def test_members_without_preferences_follow_the_group_and_addresses_are_not_repeated(
    reviewer, second_reviewer
):
    group = reviewer.groups.get()
    reviewer.email, second_reviewer.email = "rita@example.com", "sam@example.com"
    reviewer.save()
    second_reviewer.save()
    NotificationPreference.objects.create(user=second_reviewer, email=False)
    GroupNotificationSettings.objects.create(
        group=group, email_members=True, email_addresses="team@example.com, rita@example.com"
    )
    found = [(d.channel, d.address) for d in notifications.destinations_for(group)]
    assert found == [("email", "rita@example.com"), ("email", "team@example.com")]


def test_who_hears_of_a_group_follows_changes_to_preferences_and_members(
    notify, django_capture_on_commit_callbacks, manual_runs, reviewer, second_reviewer
):
    group = reviewer.groups.get()
    reviewer.email, second_reviewer.email = "rita@example.com", "sam@example.com"
    reviewer.save()
    second_reviewer.save()
    capture = django_capture_on_commit_callbacks

    def addresses_for_next_item() -> set[str]:
        Notification.objects.all().delete()
        pause(manual_runs, capture, reviewer, ["a.txt"])
        return set(Notification.objects.values_list("address", flat=True))

    assert addresses_for_next_item() == set()  # nobody asked for e-mail: none, and cached
    NotificationPreference.objects.create(user=reviewer, email=True)
    assert addresses_for_next_item() == {"rita@example.com"}
    second_reviewer.groups.remove(group)
    NotificationPreference.objects.create(user=second_reviewer, email=True)
    assert addresses_for_next_item() == {"rita@example.com"}  # no longer a member
    second_reviewer.groups.add(group)
    assert addresses_for_next_item() == {"rita@example.com", "sam@example.com"}
