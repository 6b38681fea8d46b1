"""The signed deep link of a notification, and a user's notification preferences page."""

from __future__ import annotations

import pytest
from django.core import signing
from django.test import Client

from hitl.core.access.links import SALT, link_token
from hitl.core.models import HumanInterrupt, NotificationPreference, Run, Thread


@pytest.fixture
def row(requester, reviewers_group) -> HumanInterrupt:
    thread = Thread.objects.create(graph="approval", requester=requester)
    run = Run.objects.create(thread=thread, kind="start", status="interrupted")
    return HumanInterrupt.objects.create(
        thread=thread,
        run=run,
        interrupt_id="i1",
        kind="human_interrupt",
        action="deploy",
        allow_accept=True,
        reviewer_group=reviewers_group,
    )


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_deep_link_needs_a_login_then_opens_the_item(client, row, reviewer):
    url = f"/n/{link_token(row.pk)}/"
    anonymous = client.get(url)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/?next=/n/")

    opened = logged_in(reviewer).get(url)
    assert opened.status_code == 302
    assert opened["Location"] == f"/threads/{row.thread_id}/#interrupt-{row.pk}"


def test_the_thread_page_still_decides_who_may_see_the_item(row, outsider):
    opened = logged_in(outsider).get(f"/n/{link_token(row.pk)}/", follow=True)
    assert opened.status_code == 404


def test_an_expired_link_says_so_and_an_altered_one_is_a_404(row, reviewer, settings):
    client = logged_in(reviewer)
    old = signing.TimestampSigner(salt=SALT)
    token = old.sign_object({"i": str(row.pk)})
    settings.HITL_NOTIFY_LINK_MAX_AGE = -1  # every link is past its age
    expired = client.get(f"/n/{token}/")
    assert expired.status_code == 410
    assert b"This link has expired" in expired.content

    settings.HITL_NOTIFY_LINK_MAX_AGE = 3600
    assert client.get(f"/n/{token}/").status_code == 302
    assert client.get(f"/n/{token[:-2]}xx/").status_code == 404
    assert client.get("/n/not-a-token/").status_code == 404
    forged = signing.TimestampSigner(salt="other").sign_object({"i": str(row.pk)})
    assert client.get(f"/n/{forged}/").status_code == 404


def test_preferences_are_saved_for_me_only(reviewer, second_reviewer):
    client = logged_in(reviewer)
    assert client.get("/settings/notifications/").status_code == 200
    response = client.post(
        "/settings/notifications/",
        {
            "email": "on",
            "digest_minutes": "15",
            "quiet_start": "22:00",
            "quiet_end": "07:00",
            "timezone": "Europe/Berlin",
        },
    )
    assert response.status_code == 302
    pref = NotificationPreference.objects.get(user=reviewer)
    assert (pref.email, pref.digest_minutes, pref.timezone) == (True, 15, "Europe/Berlin")
    assert str(pref.quiet_start) == "22:00:00"
    assert not NotificationPreference.objects.filter(user=second_reviewer).exists()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "slack_webhook_url",
            "http://169.254.169.254/hook",
            b"is not allowed (settings.HITL_WEBHOOK_HOSTS)",
        ),
        ("slack_webhook_url", "javascript:alert(1)", b"Enter a valid URL"),
        ("timezone", "Mars/Olympus", b"not a known time zone"),
        ("digest_minutes", "-3", b"greater than or equal to 0"),
        ("digest_minutes", "99999", b"At most one day"),
        ("quiet_start", "25:00", b"Enter a valid time"),
        ("quiet_end", "", b"Quiet hours need both"),
    ],
)
def test_bad_preferences_are_a_400_that_changes_nothing(reviewer, settings, field, value, message):
    settings.HITL_WEBHOOK_HOSTS = ["hooks.slack.com"]
    data = {"email": "on", "digest_minutes": "0", "timezone": "UTC", "quiet_start": "22:00"}
    data["quiet_end"] = "07:00"
    data[field] = value
    response = logged_in(reviewer).post("/settings/notifications/", data)
    assert response.status_code == 400
    assert message in response.content
    assert not NotificationPreference.objects.exists()


def test_only_review_all_users_see_and_save_the_every_group_preference(
    client_for, reviewer, review_all_user
):
    page = client_for(reviewer).get("/settings/notifications/").content.decode()
    assert "Notify me of items in every group" not in page
    # A forged field from someone without review_all is ignored.
    client_for(reviewer).post(
        "/settings/notifications/",
        {"email": "on", "digest_minutes": "0", "timezone": "UTC", "all_groups": "on"},
    )
    assert NotificationPreference.objects.get(user=reviewer).all_groups is False

    vera = client_for(review_all_user)
    assert (
        "Notify me of items in every group" in vera.get("/settings/notifications/").content.decode()
    )
    response = vera.post(
        "/settings/notifications/",
        {"email": "on", "digest_minutes": "0", "timezone": "UTC", "all_groups": "on"},
    )
    assert response.status_code == 302
    assert NotificationPreference.objects.get(user=review_all_user).all_groups is True


def test_my_slack_webhook_url_is_write_only_on_my_preferences_page(reviewer, settings):
    settings.HITL_WEBHOOK_HOSTS = ["hooks.slack.com"]
    secret = "https://hooks.slack.com/services/T1/B2/myS3cr3tW3bh00k"
    NotificationPreference.objects.create(user=reviewer, slack_webhook_url=secret)
    client = logged_in(reviewer)
    page = client.get("/settings/notifications/").content.decode()
    assert 'name="slack_webhook_url"' in page and secret not in page
    data = {"email": "on", "digest_minutes": "0", "timezone": "UTC"}
    assert client.post("/settings/notifications/", data).status_code == 302
    assert NotificationPreference.objects.get(user=reviewer).slack_webhook_url == secret
    cleared = {**data, "clear_slack_webhook_url": "on"}
    assert client.post("/settings/notifications/", cleared).status_code == 302
    assert NotificationPreference.objects.get(user=reviewer).slack_webhook_url == ""
