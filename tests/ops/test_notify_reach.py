"""Reminders wait for quiet hours to end; "notify me of every group" for review-all users."""

from __future__ import annotations

from datetime import time, timedelta

import pytest
from django.contrib.auth.models import Permission

from hitl.core.models import Notification
from hitl.ops.notifications import destinations_for, notification_attempt, notify_sweep
from tests.ops.notify_helpers import (  # noqa: F401
    notify_fixture,
    smtp_fixture,
    start,
    text_of,
    with_email,
)

pytestmark = pytest.mark.usefixtures("ops_graphs")


def review_all(user) -> None:
    user.user_permissions.add(
        Permission.objects.get(codename="review_all", content_type__app_label="hitl")
    )


@pytest.fixture
def review_all_user(db, django_user_model):
    """vera: may review every group, member of none."""
    user = django_user_model.objects.create_user(username="vera", password="pw-vera")
    review_all(user)
    return user


# --- (a) reminders respect quiet hours ---------------------------------------------------


def test_a_reminder_in_quiet_hours_waits_until_they_end_and_is_then_sent(
    notify, smtp, manual_runs, django_capture_on_commit_callbacks, requester, reviewer
):
    row = start(manual_runs, django_capture_on_commit_callbacks, requester, expires_in=1800)
    soon = row.expires_at - timedelta(minutes=5)
    quiet_end = (soon + timedelta(hours=2)).replace(second=0, microsecond=0)
    with_email(
        reviewer,
        "rita@example.com",
        quiet_start=(soon - timedelta(hours=1)).time().replace(second=0, microsecond=0),
        quiet_end=quiet_end.time(),
        timezone="UTC",
    )
    Notification.objects.all().delete()

    with django_capture_on_commit_callbacks(execute=True):
        assert notify_sweep(now=soon)["reminded"] == 1
    (reminder,) = Notification.objects.filter(kind="reminder")
    assert reminder.send_after == quiet_end  # deferred, not dropped
    # Due only when the quiet hours end: nothing goes out before.
    assert notification_attempt(notification_id=reminder.pk, now=soon) > 0
    assert smtp.messages() == []
    reminder.refresh_from_db()
    assert reminder.status == "collecting"

    notification_attempt(notification_id=reminder.pk, now=quiet_end)
    (message,) = smtp.messages()
    assert message["To"] == "rita@example.com"
    assert message["Subject"].startswith("[HITL] Reminder:")
    assert "expires" in text_of(message)


def test_a_reminder_outside_quiet_hours_goes_at_once(
    notify, manual_runs, django_capture_on_commit_callbacks, requester, reviewer
):
    row = start(manual_runs, django_capture_on_commit_callbacks, requester, expires_in=1800)
    soon = row.expires_at - timedelta(minutes=5)
    after = (soon + timedelta(hours=1)).time().replace(second=0, microsecond=0)
    until = (soon + timedelta(hours=2)).time().replace(second=0, microsecond=0)
    with_email(reviewer, "rita@example.com", quiet_start=after, quiet_end=until)
    Notification.objects.all().delete()
    with django_capture_on_commit_callbacks(execute=True):
        notify_sweep(now=soon)
    assert Notification.objects.get(kind="reminder").send_after == soon


# --- (b) review_all users who asked for every group ----------------------------------------


def test_a_review_all_user_who_opted_in_hears_of_items_in_every_group(
    notify, smtp, manual_runs, django_capture_on_commit_callbacks, requester, review_all_user
):
    review_all(review_all_user)
    with_email(review_all_user, "vera@example.com", all_groups=True)
    with django_capture_on_commit_callbacks(execute=True):
        row = start(manual_runs, django_capture_on_commit_callbacks, requester)
    assert not review_all_user.groups.exists()
    (note,) = Notification.objects.filter(address="vera@example.com")
    assert note.user == review_all_user and str(row.pk) in note.interrupt_ids
    notification_attempt(notification_id=note.pk, now=note.send_after)
    (message,) = smtp.messages()
    assert message["To"] == "vera@example.com" and "publish" in message["Subject"]


@pytest.mark.parametrize(("opted_in", "has_perm"), [(False, True), (True, False)])
def test_without_both_the_preference_and_review_all_nothing_is_sent(
    notify, reviewers_group, review_all_user, opted_in, has_perm
):
    review_all_user.user_permissions.clear()
    if has_perm:
        review_all(review_all_user)
    with_email(review_all_user, "vera@example.com", all_groups=opted_in)
    assert "vera@example.com" not in [d.address for d in destinations_for(reviewers_group)]


def test_a_member_who_also_opted_in_is_messaged_once(notify, reviewer, reviewers_group):
    review_all(reviewer)
    with_email(reviewer, "rita@example.com", all_groups=True)
    addresses = [d.address for d in destinations_for(reviewers_group)]
    assert addresses.count("rita@example.com") == 1


def test_quiet_hours_of_the_preference_page_are_kept_for_reminders(notify, reviewer):
    """The preference's quiet hours are what a reminder destination carries."""
    with_email(reviewer, "rita@example.com", quiet_start=time(22), quiet_end=time(6))
    (dest,) = destinations_for(reviewer.groups.get())
    assert dest.quiet == (time(22), time(6), "UTC")
